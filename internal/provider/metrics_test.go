package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

// metricsNamespace is the tests' CloudWatch namespace.
const metricsNamespace = "EC2RunnersAcc"

// metricsGroup makes the log group of the test pool's metrics,
// /ec2runners/<pool> as examples/complete names it (and the policy check
// binds it), and deletes it at the end.
func (e *claimEnv) metricsGroup() string {
	e.t.Helper()
	group := "/ec2runners/" + e.pool
	if _, err := testClients.Logs.CreateLogGroup(context.Background(), &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
		e.t.Fatalf("creating the log group: %v", err)
	}
	e.t.Cleanup(func() {
		_, _ = testClients.Logs.DeleteLogGroup(context.Background(), &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(group)})
	})
	return group
}

// emfEvent is a published metrics event as CloudWatch reads it.
type emfEvent struct {
	dims   map[string]string
	values map[string]float64
	doc    map[string]any
}

// publishedEvents reads the pool's log stream back from the emulator's
// CloudWatch Logs: every event must be an EMF document CloudWatch extracts
// metrics from, in the tests' namespace.
func (e *claimEnv) publishedEvents(group string) ([]emfEvent, error) {
	ctx := context.Background()
	var out []emfEvent
	var token *string
	for {
		page, err := testClients.Logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{
			LogGroupName: aws.String(group), LogStreamName: aws.String(e.pool), StartFromHead: aws.Bool(true), NextToken: token,
		})
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			msg := aws.ToString(ev.Message)
			if problem := awslimits.EMFProblem(msg); problem != "" {
				return nil, fmt.Errorf("an event CloudWatch would extract no metrics from (%s): %s", problem, msg)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(msg), &doc); err != nil {
				return nil, err
			}
			dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
			if dir["Namespace"] != metricsNamespace {
				return nil, fmt.Errorf("an event in namespace %v: %s", dir["Namespace"], msg)
			}
			ev := emfEvent{dims: map[string]string{}, values: map[string]float64{}, doc: doc}
			for _, k := range dir["Dimensions"].([]any)[0].([]any) {
				ev.dims[k.(string)] = doc[k.(string)].(string)
			}
			for _, m := range dir["Metrics"].([]any) {
				name := m.(map[string]any)["Name"].(string)
				ev.values[name] = doc[name].(float64)
			}
			if ev.dims[metrics.DimPool] != e.pool {
				return nil, fmt.Errorf("an event of pool %q in pool %s's stream: %s", ev.dims[metrics.DimPool], e.pool, msg)
			}
			out = append(out, ev)
		}
		if len(page.Events) == 0 || aws.ToString(page.NextForwardToken) == aws.ToString(token) {
			return out, nil
		}
		token = page.NextForwardToken
	}
}

// sum adds up metric over the events whose dimensions include dims.
func sum(events []emfEvent, metric string, dims map[string]string) (total float64, n int) {
	for _, ev := range events {
		v, ok := ev.values[metric]
		if !ok {
			continue
		}
		match := true
		for k, want := range dims {
			match = match && ev.dims[k] == want
		}
		if match && len(ev.dims) == len(dims)+1 { // and the pool
			total += v
			n++
		}
	}
	return total, n
}

// The pool's metrics, read back from the emulator's CloudWatch Logs: the
// claim took a hot runner and launched one for another that failed its
// checks (no heartbeat), which counts by reason; the release gave both
// back to the pool; scans counted the runners by state. Publishing fails
// nothing: with the log group gone, a claim still succeeds.
func TestAccClaim_metrics(t *testing.T) {
	e := newClaimEnv(t, "acc-metrics")
	group := e.metricsGroup()
	e.poolSettings = fmt.Sprintf(`metrics = {
    log_group = %q
    namespace = %q
  }`, group, metricsNamespace)
	var healthy, sick, claimed []string
	check := func(f func(events []emfEvent) error) func(*terraform.State) error {
		return func(*terraform.State) error {
			events, err := e.publishedEvents(group)
			if err != nil {
				return err
			}
			return f(events)
		}
	}
	want := func(events []emfEvent, metric string, dims map[string]string, value float64) error {
		if got, n := sum(events, metric, dims); got != value || n == 0 {
			return fmt.Errorf("%s %v: %g in %d events, want %g", metric, dims, got, n, value)
		}
		return nil
	}
	class := func(more ...string) map[string]string {
		d := map[string]string{metrics.DimClass: "large"}
		for i := 0; i+1 < len(more); i += 2 {
			d[more[i]] = more[i+1]
		}
		return d
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				// A stack that only claims (or draws a dashboard) reads the
				// settings with the pool data source.
				Config: e.poolConfig() + `
data "ec2runners_pool" "test" {
  name = ec2runners_pool.test.name
}`,
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("ec2runners_pool.test", "metrics.log_group", group),
					resource.TestCheckResourceAttr("ec2runners_pool.test", "metrics.namespace", metricsNamespace),
					resource.TestCheckResourceAttr("data.ec2runners_pool.test", "metrics.log_group", group),
					resource.TestCheckResourceAttr("data.ec2runners_pool.test", "metrics.namespace", metricsNamespace),
					func(*terraform.State) error {
						// The pool's apply made its log stream, named after it.
						out, err := testClients.Logs.DescribeLogStreams(context.Background(), &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: aws.String(group)})
						if err != nil {
							return err
						}
						var names []string
						for _, s := range out.LogStreams {
							names = append(names, aws.ToString(s.LogStreamName))
						}
						if !slices.Equal(names, []string{e.pool}) {
							return fmt.Errorf("log streams %v, want the pool's %s", names, e.pool)
						}
						return nil
					},
					e.seed(1, agentsim.SeedSpec{}, &healthy),
					e.seed(1, agentsim.SeedSpec{Behavior: agentsim.NoHeartbeat}, &sick),
					e.watchFleet(agentsim.Healthy),
				),
			},
			{
				Config:            e.poolConfig() + e.claimConfig("test", `instance_count = 2`),
				ConfigStateChecks: counts("ec2runners_claim.test", 1, 1),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.test", &claimed),
					check(func(events []emfEvent) error {
						var errs []string
						for _, err := range []error{
							want(events, metrics.Claims, class(), 1),
							want(events, metrics.WarmHitRate, class(), 50),
							want(events, metrics.RunnersClaimed, class(metrics.DimSource, "hot"), 1),
							want(events, metrics.RunnersClaimed, class(metrics.DimSource, "fleet"), 1),
							want(events, metrics.FailedChecks, class(metrics.DimReason, "no-heartbeat"), 1),
						} {
							if err != nil {
								errs = append(errs, err.Error())
							}
						}
						if ttr, n := sum(events, metrics.TimeToRunner, class()); n != 1 || ttr <= 0 {
							errs = append(errs, fmt.Sprintf("TimeToRunner %g in %d events, want one above 0", ttr, n))
						}
						for _, ev := range events {
							if _, ok := ev.values[metrics.FailedChecks]; ok && fmt.Sprint(ev.doc["Instances"]) != fmt.Sprint([]any{sick[0]}) {
								errs = append(errs, fmt.Sprintf("failed checks name %v, want %s", ev.doc["Instances"], sick[0]))
							}
							if _, ok := ev.values[metrics.Claims]; ok && ev.doc["RunId"] == "" {
								errs = append(errs, "the claim's event names no run id")
							}
						}
						if len(errs) > 0 {
							return fmt.Errorf("published metrics:\n%s\ngot %s", strings.Join(errs, "\n"), describe(events))
						}
						return nil
					}),
				),
			},
			{
				// Destroying the claim releases both runners to the pool
				// (no warm targets: idle until the idle timeout), and its
				// reap, due, scans the pool.
				PreConfig: e.dropReaperLease,
				Config:    e.poolConfig(),
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateIdle, "", &claimed),
					check(func(events []emfEvent) error {
						if err := want(events, metrics.RunnersReleased, class(metrics.DimOutcome, "idle"), 2); err != nil {
							return fmt.Errorf("%v; got %s", err, describe(events))
						}
						// A scan (the release's reap) counted every state of
						// the class.
						for _, st := range metrics.States {
							if _, n := sum(events, metrics.Runners, class(metrics.DimState, string(st))); n == 0 {
								return fmt.Errorf("no Runners of state %s; got %s", st, describe(events))
							}
						}
						return nil
					}),
				),
			},
			{
				// Publishing fails nothing: with the log group gone, a claim
				// still succeeds (its warning says the metrics were lost).
				PreConfig: func() {
					if _, err := testClients.Logs.DeleteLogGroup(context.Background(), &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
						t.Fatal(err)
					}
				},
				Config:            e.poolConfig() + e.claimConfig("again", `fleet_fallback = false`),
				ConfigStateChecks: counts("ec2runners_claim.again", 1, 0),
			},
		},
	})
}

// describe lists events for a failure message.
func describe(events []emfEvent) string {
	var lines []string
	for _, ev := range events {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(ev.dims)) {
			if k != metrics.DimPool {
				parts = append(parts, k+"="+ev.dims[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(ev.values)) {
			parts = append(parts, fmt.Sprintf("%s:%g", k, ev.values[k]))
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	sort.Strings(lines)
	return "\n  " + strings.Join(lines, "\n  ")
}
