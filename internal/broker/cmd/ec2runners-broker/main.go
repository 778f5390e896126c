// Command ec2runners-broker is the broker of one ec2runners pool, run as
// an AWS Lambda function (package broker): it serves the claims workflows
// make with their GitHub Actions OIDC token, within the pool's access
// policy, the registrations of the runners it claimed, and the pool's
// scheduled maintenance.
//
// Environment: EC2RUNNERS_POOL (the pool it serves), EC2RUNNERS_AUDIENCE
// (of the tokens it takes; default ec2runners), EC2RUNNERS_OIDC_ISSUER
// (tests only; default GitHub Actions'), GITHUB_API_URL (GitHub Enterprise
// only), and the AWS SDK's (AWS_REGION, AWS_ENDPOINT_URL, ...).
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
)

// version is the release's, set by the linker (-X main.version=...).
var version = "dev"

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	settings, err := broker.SettingsFromEnv(version)
	if err != nil {
		logger.Error("ec2runners-broker: " + err.Error())
		os.Exit(1)
	}
	svc, err := broker.NewService(context.Background(), settings, logger.Info)
	if err != nil {
		logger.Error("ec2runners-broker: " + err.Error())
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context, payload json.RawMessage) (any, error) {
		return svc.Serve(ctx, payload), nil
	})
}
