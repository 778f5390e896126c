package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// world is what the agent learns and reaches through AWS: its identity from
// instance metadata (IMDSv2), and DynamoDB, EC2 and the pool's broker (a
// Lambda function) with the instance role's credentials.
type world struct {
	identity agent.Identity
	dynamoDB *dynamodb.Client
	ec2      *ec2.Client
	broker   agent.Broker // nil: the pool has none
}

var (
	accountPattern   = regexp.MustCompile(`^[0-9]{12}$`)
	partitionPattern = regexp.MustCompile(`^aws(-[a-z]+)*$`)
)

// connect waits for the instance metadata service, reads the instance's
// identity, and makes the clients.
func connect(ctx context.Context, cfg agent.Config) (world, error) {
	md := imds.New(imds.Options{Endpoint: cfg.Endpoints.IMDS})
	var w world
	err := retry.Do(ctx, retry.Policy{Backoff: retry.Constant(2 * time.Second)}, func() (err error) {
		if w.identity, err = identify(ctx, md, cfg.Region); err != nil {
			logf("waiting for the instance metadata service: %v", err)
		}
		return err
	})
	if err != nil {
		return world{}, err
	}
	creds := aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = md }))
	retryer := func() aws.Retryer {
		return awsretry.NewStandard(func(o *awsretry.StandardOptions) { o.MaxAttempts = 5 })
	}
	appID := "ec2runners-agent/" + version
	w.dynamoDB = dynamodb.New(dynamodb.Options{Region: cfg.Region, Credentials: creds, Retryer: retryer(), AppID: appID,
		BaseEndpoint: endpoint(cfg.Endpoints.AWS)})
	w.ec2 = ec2.New(ec2.Options{Region: cfg.Region, Credentials: creds, Retryer: retryer(), AppID: appID,
		BaseEndpoint: endpoint(cfg.Endpoints.AWS)})
	if cfg.BrokerFunction != "" {
		w.broker = agent.LambdaBroker{Function: cfg.BrokerFunction, Lambda: lambda.New(lambda.Options{Region: cfg.Region, Credentials: creds,
			Retryer: retryer(), AppID: appID, BaseEndpoint: endpoint(cfg.Endpoints.Lambda)})}
	}
	return w, nil
}

func endpoint(url string) *string {
	if url == "" {
		return nil
	}
	return aws.String(url)
}

// identify reads the instance id, its ARN (as IAM's ec2:SourceInstanceARN
// names it) and its InitialRunId tag from instance metadata.
func identify(ctx context.Context, md *imds.Client, region string) (agent.Identity, error) {
	doc, err := md.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return agent.Identity{}, err
	}
	partition, err := metadata(ctx, md, "services/partition")
	if err != nil {
		return agent.Identity{}, err
	}
	if !accountPattern.MatchString(doc.AccountID) || !partitionPattern.MatchString(partition) || !strings.HasPrefix(doc.InstanceID, "i-") {
		return agent.Identity{}, fmt.Errorf("unexpected instance identity: account %q, partition %q, instance %q", doc.AccountID, partition, doc.InstanceID)
	}
	id := agent.Identity{
		InstanceID:  doc.InstanceID,
		InstanceARN: protocol.InstanceARN(protocol.InstanceARNPrefix(partition, region, doc.AccountID), doc.InstanceID),
	}
	tag, err := metadata(ctx, md, "tags/instance/"+protocol.TagInitialRunID)
	switch {
	case err == nil && protocol.ValidateRunID(tag) == nil:
		id.InitialRunID = tag
	case err == nil:
		logf("ignoring the %s tag %q: not a run id", protocol.TagInitialRunID, tag)
	case !notFound(err):
		return agent.Identity{}, fmt.Errorf("the %s tag: %w", protocol.TagInitialRunID, err)
	}
	return id, nil
}

// metadata reads one metadata path below /latest/meta-data/.
func metadata(ctx context.Context, md *imds.Client, path string) (string, error) {
	out, err := md.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, 1<<16))
	return strings.TrimSpace(string(b)), err
}

// notFound: the metadata service has no such path (an instance without
// the tag, or without tags in its metadata).
func notFound(err error) bool {
	var resp *smithyhttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == 404
}
