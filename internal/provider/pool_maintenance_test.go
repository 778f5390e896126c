package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/lambdaworld"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// TestAccPool_brokerMaintenance: the pool's schedule asks its broker (the
// real ec2runners-broker, run as Lambda runs it) for the pool's
// maintenance with the schedule role's key, which only invokes the
// function, as examples/complete's schedule does: the broker terminates
// the runner past its deadline and fills the stopped tier's target with
// its own role, and answers with counts. Asked again at once, it does
// nothing. The pool is made outside Terraform: its apply would reap and
// fill itself.
func TestAccPool_brokerMaintenance(t *testing.T) {
	skipOnRealAWS(t, "the broker's Lambda is on this machine")
	e := newClaimEnv(t, "acc-maint", tierTimings)
	ctx := context.Background()
	e.createPool(map[string]protocol.WarmTarget{"large": {Stopped: 1}})
	e.sim.WatchFleet(ctx, func(string, int) agentsim.Behavior { return agentsim.Healthy })
	// Past the deadline, but not by the minute after which its agent
	// terminates its instance itself.
	expired, err := e.sim.SeedIdle(ctx, 1, agentsim.SeedSpec{ResourceClass: "large", IdleTimeout: -time.Second})
	if err != nil {
		t.Fatal(err)
	}

	function := e.pool + "-broker"
	maintain := startBrokerFor(t, e.pool, function)
	first := maintain()
	want := broker.MaintainResponse{Ran: true, Reaped: &broker.ReapCounts{Expired: 1}, Launched: 1,
		Warm: map[string]broker.WarmCounts{"large": {Stopped: 1, StoppedTarget: 1}}}
	if got := mustJSON(t, first); got != mustJSON(t, want) {
		t.Errorf("the broker's maintenance answered %s, want %s", got, mustJSON(t, want))
	}
	for _, check := range []func() error{
		func() error { return e.checkRecords(protocol.StateTerminated, "", &expired)(nil) },
		func() error { return checkEC2Terminated(&expired)(nil) },
		func() error { return e.awaitStopped(1)(nil) },
	} {
		if err := check(); err != nil {
			t.Error(err)
		}
	}
	if again := maintain(); again.Ran || again.Error != nil {
		t.Errorf("a maintenance right after another answered %+v, want that it did nothing", again)
	}
	if err := checkScheduleRole(function); err != nil {
		t.Error(err)
	}
}

// startBrokerFor starts the broker of pool as function in lambdaworld, its
// calls the broker role's, and returns how the pool's schedule asks it for
// the maintenance: with the schedule role's key, through a recorder of its
// own.
func startBrokerFor(t *testing.T, pool, function string) func() broker.MaintainResponse {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bootstrap, scripttest.BuildBroker(t), 0o755); err != nil {
		t.Fatal(err)
	}
	world, err := lambdaworld.Start(lambdaworld.Function{
		Name: function, Executable: bootstrap, Timeout: lambdaworld.MaxTimeout, Output: testLog{t},
		Env: map[string]string{
			"EC2RUNNERS_POOL": pool, "AWS_ENDPOINT_URL": os.Getenv("AWS_ENDPOINT_URL"), "AWS_REGION": testClients.Region,
			"AWS_ACCESS_KEY_ID": awsrecord.ClaimsKey, "AWS_SECRET_ACCESS_KEY": awsrecord.TestSecret,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(world.Close)
	endpoint, stop, err := awsrecord.StartFor(context.Background(), world.Endpoint(), os.Getenv("AWS_ENDPOINT_URL"), "schedule-lambda")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	client := lambda.New(lambda.Options{Region: testClients.Region, BaseEndpoint: aws.String(endpoint), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(awsrecord.SchedulerKey, awsrecord.TestSecret, "")})
	return func() broker.MaintainResponse {
		t.Helper()
		out, err := client.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(function), Payload: []byte(`{"operation":"maintain"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if out.FunctionError != nil {
			t.Fatalf("the broker failed: %s: %s", *out.FunctionError, out.Payload)
		}
		var resp broker.MaintainResponse
		if err := json.Unmarshal(out.Payload, &resp); err != nil {
			t.Fatalf("the broker's answer %s: %v", out.Payload, err)
		}
		return resp
	}
}

// checkScheduleRole checks, when the calls are recorded, that the
// schedule's role invoked function and called nothing but invocations.
func checkScheduleRole(function string) error {
	dir := os.Getenv(awsrecord.EnvDir)
	if dir == "" {
		return nil
	}
	calls, err := awsrecord.Read(dir)
	if err != nil {
		return err
	}
	// The directory gathers the calls of every run of the suite (make test
	// runs it with two Terraform versions): earlier runs invoked brokers
	// of their own pools.
	invoked := false
	for _, c := range calls {
		switch {
		case c.Role != awsrecord.RoleScheduler:
		case c.Action != "lambda:InvokeFunction":
			return fmt.Errorf("the schedule's role called %s", c)
		case strings.HasSuffix(c.Resource, ":function:"+function):
			invoked = true
		}
	}
	if !invoked {
		return fmt.Errorf("the schedule's invocations of %s are not recorded in %s", function, dir)
	}
	return nil
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
