package awsconfig

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// isolate hides the machine's AWS settings from a test.
func isolate(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_MAX_ATTEMPTS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestLoadWithoutRegionFails(t *testing.T) {
	isolate(t)
	_, err := Load(context.Background(), Options{})
	if !errors.Is(err, ErrNoRegion) {
		t.Fatalf("err = %v, want ErrNoRegion", err)
	}
}

func TestLoadRegionFromEnvironmentAndProfile(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_REGION", "eu-west-1")
	cfg, err := Load(context.Background(), Options{})
	if err != nil || cfg.Region != "eu-west-1" {
		t.Fatalf("region %q, err %v; want eu-west-1 from AWS_REGION", cfg.Region, err)
	}
	// The argument wins over the environment.
	if cfg, _ = Load(context.Background(), Options{Region: "us-west-2"}); cfg.Region != "us-west-2" {
		t.Fatalf("region %q, want the argument's us-west-2", cfg.Region)
	}

	isolate(t)
	conf := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(conf, []byte("[profile ci]\nregion = ap-south-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(context.Background(), Options{Profile: "ci", SharedConfigFiles: []string{conf}})
	if err != nil || cfg.Region != "ap-south-1" {
		t.Fatalf("region %q, err %v; want ap-south-1 from the profile", cfg.Region, err)
	}
}

func TestStaticCredentials(t *testing.T) {
	isolate(t)
	cfg, err := Load(context.Background(), Options{Region: "us-east-1", AccessKey: "AKID", SecretKey: "SECRET", Token: "TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AKID" || creds.SecretAccessKey != "SECRET" || creds.SessionToken != "TOKEN" {
		t.Fatalf("credentials %+v, err %v", creds, err)
	}
	if _, err := Load(context.Background(), Options{Region: "us-east-1", AccessKey: "AKID"}); err == nil {
		t.Fatal("an access key without a secret key was accepted")
	}
}

func TestSharedCredentialsFile(t *testing.T) {
	isolate(t)
	file := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(file, []byte("[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = S\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(context.Background(), Options{Region: "us-east-1", SharedCredentialsFiles: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	if creds, err := cfg.Credentials.Retrieve(context.Background()); err != nil || creds.AccessKeyID != "FROMFILE" {
		t.Fatalf("credentials %+v, err %v; want the file's", creds, err)
	}
}

func TestMaxRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setting int
		env     string
		want    int
	}{
		{"setting", 7, "3", 7},
		{"environment", 0, "4", 4},
		{"default", 0, "", DefaultMaxAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("AWS_MAX_ATTEMPTS", tc.env)
			cfg, err := Load(context.Background(), Options{Region: "us-east-1", MaxRetries: tc.setting})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Retryer()
			if got := r.MaxAttempts(); got != tc.want {
				t.Fatalf("MaxAttempts = %d, want %d", got, tc.want)
			}
			// Throttling is retried; a failed condition is not.
			if !r.IsErrorRetryable(&smithy.GenericAPIError{Code: "ThrottlingException"}) {
				t.Error("throttling is not retried")
			}
			if r.IsErrorRetryable(&ddbtypes.ConditionalCheckFailedException{}) {
				t.Error("a conditional-check failure is retried")
			}
		})
	}
}

func TestAssumeRoleWrapsCredentials(t *testing.T) {
	isolate(t)
	cfg, err := Load(context.Background(), Options{
		Region: "us-east-1", AccessKey: "AKID", SecretKey: "SECRET",
		AssumeRole: &AssumeRole{RoleARN: "arn:aws:iam::123456789012:role/ci", SessionName: "tf", Duration: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Credentials.(*aws.CredentialsCache); !ok {
		t.Fatalf("credentials are %T, want the assumed role's cache", cfg.Credentials)
	}
}

func TestEndpoints(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://from-env:4566")
	c, err := New(context.Background(), Options{Region: "us-east-1", AccessKey: "a", SecretKey: "b", Endpoints: Endpoints{SQS: "http://sqs-only:1", STS: "http://sts-only:2", Lambda: "http://lambda-only:3"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(c.SQS.Options().BaseEndpoint); got != "http://sqs-only:1" {
		t.Errorf("SQS endpoint %q, want the endpoints block's", got)
	}
	if got := aws.ToString(c.DynamoDB.Options().BaseEndpoint); got != "http://from-env:4566" {
		t.Errorf("DynamoDB endpoint %q, want AWS_ENDPOINT_URL's", got)
	}
	if got := aws.ToString(c.EC2.Options().BaseEndpoint); got != "http://from-env:4566" {
		t.Errorf("EC2 endpoint %q, want AWS_ENDPOINT_URL's", got)
	}
	if got := aws.ToString(c.STS.Options().BaseEndpoint); got != "http://sts-only:2" {
		t.Errorf("STS endpoint %q, want the endpoints block's", got)
	}
	if got := aws.ToString(c.Lambda.Options().BaseEndpoint); got != "http://lambda-only:3" {
		t.Errorf("Lambda endpoint %q, want the endpoints block's", got)
	}
}

// Every client's requests name the provider and its version in the
// User-Agent, after the SDK's own tokens.
func TestUserAgentCarriesProviderVersion(t *testing.T) {
	isolate(t)
	var mu sync.Mutex
	var agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.Header.Get("User-Agent"))
		mu.Unlock()
		w.WriteHeader(http.StatusBadRequest) // no body: nothing for the SDK to checksum
	}))
	defer srv.Close()
	c, err := New(context.Background(), Options{
		Region: "us-east-1", AccessKey: "a", SecretKey: "b", MaxRetries: 1, ProviderVersion: "1.2.3",
		Endpoints: Endpoints{SQS: srv.URL, DynamoDB: srv.URL, EC2: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.SQS.ListQueues(ctx, &sqs.ListQueuesInput{})
	_, _ = c.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{})
	_, _ = c.EC2.DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	mu.Lock()
	defer mu.Unlock()
	if len(agents) != 3 {
		t.Fatalf("%d requests, want one per client", len(agents))
	}
	for _, ua := range agents {
		if !strings.Contains(ua, " terraform-provider-ec2runners/1.2.3") || !strings.Contains(ua, "app/terraform-provider-ec2runners") {
			t.Errorf("User-Agent %q lacks terraform-provider-ec2runners/1.2.3 or the app id", ua)
		}
	}
}
