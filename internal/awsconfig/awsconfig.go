// Package awsconfig turns the provider's settings into AWS SDK clients, with
// the SDK's default chain for anything not set.
package awsconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
)

// AssumeRole is a role to assume after loading the base credentials.
type AssumeRole struct {
	RoleARN     string
	SessionName string
	ExternalID  string
	Duration    time.Duration
}

// Endpoints override the SDK's endpoint per service ("" keeps the default,
// which honours AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>).
type Endpoints struct {
	SQS            string
	DynamoDB       string
	EC2            string
	STS            string
	Logs           string
	SSM            string
	SecretsManager string
	Lambda         string
}

// Options are the provider's AWS settings; zero values mean "SDK default".
type Options struct {
	Region                 string
	Profile                string
	SharedConfigFiles      []string
	SharedCredentialsFiles []string
	AccessKey              string
	SecretKey              string
	Token                  string
	AssumeRole             *AssumeRole
	Endpoints              Endpoints
	MaxRetries             int
	// ProviderVersion is the provider's version (main.version, stamped by
	// the release build), reported in the User-Agent of every request as
	// terraform-provider-ec2runners/<version>; "" reports none.
	ProviderVersion string
}

// Product names the provider in the User-Agent: the SDK's app id
// (app/terraform-provider-ec2runners), followed by
// terraform-provider-ec2runners/<version> when the version is known, as
// terraform-provider-aws reports its own.
const Product = "terraform-provider-ec2runners"

// Clients are the AWS clients the provider uses.
type Clients struct {
	Region   string
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	EC2      *ec2.Client
	STS      *sts.Client // the caller's account, for the runners' ARNs
	// Logs publishes the pools' metrics (CloudWatch Logs, embedded metric
	// format).
	Logs *cloudwatchlogs.Client
	// SSM and SecretsManager read the GitHub credential a pool keeps in
	// its account.
	SSM            *ssm.Client
	SecretsManager *secretsmanager.Client
	// Lambda invokes a pool's broker.
	Lambda *lambda.Client
}

// DefaultMaxAttempts: enough to ride out throttling and 5xx bursts; the
// resource's timeout bounds the whole operation anyway.
const DefaultMaxAttempts = 10

// newRetryer retries throttling, 5xx and connection errors with jittered
// exponential backoff (at most 5 s between attempts), and DynamoDB's
// TransactionConflictException (a single write to an item a transaction is
// changing: retryable, AWS says, but not in the SDK's defaults); never
// conditional-check failures. The client-side retry quota is off: under a
// burst of faults it would fail calls that time would heal.
func newRetryer(attempts int) aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = attempts
		so.MaxBackoff = 5 * time.Second
		so.RateLimiter = ratelimit.None
		so.Retryables = append(so.Retryables, retry.RetryableErrorCode{Codes: map[string]struct{}{"TransactionConflictException": {}}})
	})
}

// ErrNoRegion is returned when no setting names a region.
var ErrNoRegion = errors.New("no AWS region is set: set the provider's region argument, the AWS_REGION environment variable, or a region in the selected profile")

// New loads the configuration and builds the clients.
func New(ctx context.Context, o Options) (*Clients, error) {
	cfg, err := Load(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Clients{
		Region: cfg.Region,
		DynamoDB: dynamodb.NewFromConfig(cfg, func(opt *dynamodb.Options) {
			setEndpoint(&opt.BaseEndpoint, o.Endpoints.DynamoDB)
		}),
		SQS:  sqs.NewFromConfig(cfg, func(opt *sqs.Options) { setEndpoint(&opt.BaseEndpoint, o.Endpoints.SQS) }),
		EC2:  ec2.NewFromConfig(cfg, func(opt *ec2.Options) { setEndpoint(&opt.BaseEndpoint, o.Endpoints.EC2) }),
		STS:  sts.NewFromConfig(cfg, func(opt *sts.Options) { setEndpoint(&opt.BaseEndpoint, o.Endpoints.STS) }),
		Logs: cloudwatchlogs.NewFromConfig(cfg, func(opt *cloudwatchlogs.Options) { setEndpoint(&opt.BaseEndpoint, o.Endpoints.Logs) }),
		SSM:  ssm.NewFromConfig(cfg, func(opt *ssm.Options) { setEndpoint(&opt.BaseEndpoint, o.Endpoints.SSM) }),
		SecretsManager: secretsmanager.NewFromConfig(cfg, func(opt *secretsmanager.Options) {
			setEndpoint(&opt.BaseEndpoint, o.Endpoints.SecretsManager)
		}),
		Lambda: lambda.NewFromConfig(cfg, func(opt *lambda.Options) { setEndpoint(&opt.BaseEndpoint, o.Endpoints.Lambda) }),
	}, nil
}

func setEndpoint(dst **string, url string) {
	if url != "" {
		*dst = aws.String(url)
	}
}

// Load resolves region and credentials: explicit settings first, then the
// SDK's default chain (environment, shared files, SSO, web identity, IMDS).
func Load(ctx context.Context, o Options) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithAppID(Product)}
	if o.ProviderVersion != "" {
		opts = append(opts, config.WithAPIOptions([]func(*middleware.Stack) error{
			awsmiddleware.AddUserAgentKeyValue(Product, o.ProviderVersion),
		}))
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(o.Profile))
	}
	if len(o.SharedConfigFiles) > 0 {
		opts = append(opts, config.WithSharedConfigFiles(o.SharedConfigFiles))
	}
	if len(o.SharedCredentialsFiles) > 0 {
		opts = append(opts, config.WithSharedCredentialsFiles(o.SharedCredentialsFiles))
	}
	if o.AccessKey != "" || o.SecretKey != "" {
		if o.AccessKey == "" || o.SecretKey == "" {
			return aws.Config{}, errors.New("access_key and secret_key must be set together")
		}
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, o.Token)))
	}
	attempts := o.MaxRetries
	if attempts == 0 {
		attempts = DefaultMaxAttempts
		if v, err := strconv.Atoi(os.Getenv("AWS_MAX_ATTEMPTS")); err == nil && v > 0 {
			attempts = v
		}
	}
	opts = append(opts, config.WithRetryer(func() aws.Retryer { return newRetryer(attempts) }))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, ErrNoRegion
	}
	if o.AssumeRole != nil && o.AssumeRole.RoleARN != "" {
		ar := *o.AssumeRole
		provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), ar.RoleARN, func(p *stscreds.AssumeRoleOptions) {
			if ar.SessionName != "" {
				p.RoleSessionName = ar.SessionName
			}
			if ar.ExternalID != "" {
				p.ExternalID = aws.String(ar.ExternalID)
			}
			if ar.Duration > 0 {
				p.Duration = ar.Duration
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	return cfg, nil
}
