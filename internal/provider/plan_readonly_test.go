package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/sigv4"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

// TestAccPool_planUnderReadOnlyRole: `terraform plan` (and its refresh) of
// a pool, a claim and both data sources, and `terraform query` of the
// pool's claims (Terraform 1.14+), under a role without write actions
// (awsrecord.ReadOnlyKey, whose writes a checking proxy denies as IAM
// would, and counts) succeed, plan nothing, and change nothing, although
// the pool is due for reaping: a runner past its deadline whose agent is
// hung (its instance running, its record idle) and no reaper lease. The
// pool has a stopped target, which its apply fills: the plan reads the
// tier's slots. The pool's next apply reaps the hung runner's record.
func TestAccPool_planUnderReadOnlyRole(t *testing.T) {
	skipOnRealAWS(t, "the read-only role is a test key of the recorder, behind a checking proxy")
	e := newClaimEnv(t, "acc-plan", tierTimings)
	e.poolSettings = `warm = { large = { stopped = 1 } }`
	ro := newReadOnlyRole(t)
	// Should a step fail, the destroy after it runs with its read-only
	// providers and fails: delete the pool and its runners here then.
	t.Cleanup(func() { _ = poolManager(testClients).Delete(context.Background(), e.pool, true) })
	var seeded, claimed, hung []string
	resources := `
resource "ec2runners_claim" "run" {
  provider       = ec2runnersclaims
  pool           = ec2runners_pool.test.name
  run_id         = "run-readonly"
  fleet_fallback = false
}

data "ec2runners_pool" "test" {
  name = ec2runners_pool.test.name
}

data "ec2runners_runners" "test" {
  pool = ec2runners_pool.test.name
}
`
	// The same stack, planned by whoever may only read.
	readOnly := func(cfg string) string {
		return strings.Replace(cfg, e.claimsProvider(), ro.providers(), 1)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				PreConfig:         func() { _ = e.watchFleet(agentsim.Healthy)(nil) },
				Config:            e.poolConfig(),
				ConfigStateChecks: []statecheck.StateCheck{warmStatus("ec2runners_pool.test", "large", 0, 0, 1, 1)},
				Check:             e.seed(2, agentsim.SeedSpec{}, &seeded),
			},
			{Config: e.poolConfig() + resources, Check: captureIDs("ec2runners_claim.run", &claimed)},
			{
				PreConfig: func() {
					hung = []string{e.seedHungRunner()}
					e.dropReaperLease()
				},
				Config:   readOnly(e.poolConfig() + resources),
				PlanOnly: true, // a plan without, then with, a refresh: both empty
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
					checkState(func() error {
						return ro.check("plan", "DescribeTable", "GetItem", "BatchGetItem", "Query", "GetQueueAttributes")
					}),
					checkState(func() error { return e.checkRecords(protocol.StateIdle, "", &hung)(nil) }),
					checkState(func() error { return e.checkRecords(protocol.StateRunning, "run-readonly", &claimed)(nil) }),
					checkState(func() error { return checkEC2Running(hung) }),
					checkState(e.checkNoReaperLease),
				}},
			},
			{
				// terraform query runs under the read-only providers of the
				// step before.
				SkipFunc: terraformBelow(tfversion.Version1_14_0),
				Query:    true,
				Config: fmt.Sprintf(`
list "ec2runners_claim" "all" {
  provider = ec2runnersclaims
  config {
    pool = %q
  }
}
`, e.pool),
				QueryResultChecks: []querycheck.QueryResultCheck{querycheck.ExpectLength("ec2runners_claim.all", 1)},
			},
			{
				// Maintenance runs in applies: the pool's reaps.
				PreConfig: func() {
					if err := ro.check("query"); err != nil {
						t.Error(err)
					}
					if err := checkEC2Running(hung); err != nil {
						t.Error(err)
					}
				},
				Config: strings.Replace(e.poolConfig(), "force_destroy", `idle_timeout     = "8m"
  force_destroy`, 1) + resources,
				// The hung runner's record is terminated: the apply reaped.
				// Its instance is not checked: the reap's termination call
				// comes last within its bounded time, and on a busy
				// emulator may be left to the next reap (as an orphan).
				Check: resource.ComposeTestCheckFunc(
					e.checkRecords(protocol.StateTerminated, "", &hung),
					e.checkRecords(protocol.StateRunning, "run-readonly", &claimed),
				),
			},
		},
	})
}

// seedHungRunner launches an instance for the pool and records it idle past
// its deadline, with no agent to end it: what the reaper is for. Its id.
func (e *claimEnv) seedHungRunner() string {
	e.t.Helper()
	ctx := context.Background()
	run, err := testClients.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: aws.String(testImage(e.t)), InstanceType: ec2types.InstanceType(agentsim.DefaultSeedInstanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(e.pool)},
			{Key: aws.String(protocol.TagAllowSelfTermination), Value: aws.String("true")},
			{Key: aws.String(agentsim.TagSeeded), Value: aws.String("hung")},
		}}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	id := aws.ToString(run.Instances[0].InstanceId)
	now := time.Now()
	rec := protocol.Instance{
		ID: id, State: protocol.StateIdle, Threshold: protocol.FormatTime(now.Add(-10 * time.Minute)),
		ResourceClass: "large", InstanceType: agentsim.DefaultSeedInstanceType, UsageClass: protocol.UsageOnDemand,
		UpdatedAt: protocol.FormatTime(now), LaunchedAt: protocol.FormatTime(now),
	}
	if _, err := testClients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(protocol.TableName(e.pool)), Item: rec.Item()}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// dropReaperLease makes the pool due for reaping: no reap ran within the
// interval.
func (e *claimEnv) dropReaperLease() {
	e.t.Helper()
	if _, err := testClients.DynamoDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
		TableName: aws.String(protocol.TableName(e.pool)), Key: protocol.Key(protocol.TypeLease, protocol.ReaperLeaseID),
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *claimEnv) checkNoReaperLease() error {
	out, err := testClients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(protocol.TableName(e.pool)), Key: protocol.Key(protocol.TypeLease, protocol.ReaperLeaseID), ConsistentRead: aws.Bool(true),
	})
	if err == nil && out.Item != nil {
		err = fmt.Errorf("the reaper's lease was taken: %v", out.Item)
	}
	return err
}

func checkEC2Running(ids []string) error {
	states, err := instanceStates(ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if st := states[id]; st != ec2types.InstanceStateNameRunning {
			return fmt.Errorf("instance %s is %q, want running", id, st)
		}
	}
	return nil
}

// checkState is a plan check that checks the world, not the plan.
type checkState func() error

func (f checkState) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = f()
}

// terraformBelow skips a step under a Terraform older than v (the tests'
// Terraform: TF_ACC_TERRAFORM_PATH, else terraform on PATH).
func terraformBelow(v *version.Version) func() (bool, error) {
	return func() (bool, error) {
		bin, err := tfcli.Path()
		if err != nil {
			return false, err
		}
		out, err := exec.Command(bin, "version", "-json").Output()
		if err != nil {
			return false, err
		}
		var tf struct {
			Version string `json:"terraform_version"`
		}
		if err := json.Unmarshal(out, &tf); err != nil {
			return false, err
		}
		got, err := version.NewVersion(tf.Version)
		if err != nil {
			return false, err
		}
		return got.Core().LessThan(v), nil
	}
}

// readOnlyRole stands for an IAM role whose policy grants no write: the
// provider configurations of providers() sign with awsrecord.ReadOnlyKey
// (the recorder attributes their calls to the read-only role) and reach the
// tests' endpoint through a proxy that forwards that key's reads and
// answers its writes AccessDenied, as AWS would, counting both. Requests
// signed with any other key pass.
type readOnlyRole struct {
	url string

	mu            sync.Mutex
	reads, writes map[string]int // by "service:Action"
}

func newReadOnlyRole(t *testing.T) *readOnlyRole {
	t.Helper()
	target, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL"))
	if err != nil || target.Host == "" {
		t.Fatalf("no endpoint to put the read-only role's proxy in front of: %q", os.Getenv("AWS_ENDPOINT_URL"))
	}
	ro := &readOnlyRole{reads: map[string]int{}, writes: map[string]int{}}
	forward := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host // signed by the client
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		scope, _ := sigv4.ParseScope(r.Header.Get("Authorization"))
		if scope.AccessKeyID == awsrecord.ReadOnlyKey {
			service, action := faultproxy.Identify(r, body)
			if !ro.count(service, action) {
				deny(w, service, action)
				return
			}
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ro.url = srv.URL
	return ro
}

// count counts a request of the read-only key, and tells whether it is a
// read.
func (ro *readOnlyRole) count(service, action string) bool {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	op := service + ":" + action
	if readAPI(action) {
		ro.reads[op]++
		return true
	}
	ro.writes[op]++
	return false
}

// check fails on any write the role attempted, and when it did not make the
// reads named (what shows that its configurations reached AWS through the
// proxy); then it starts counting afresh.
func (ro *readOnlyRole) check(what string, reads ...string) error {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	defer func() { ro.reads, ro.writes = map[string]int{}, map[string]int{} }()
	if len(ro.writes) > 0 {
		return fmt.Errorf("the %s under the read-only role attempted writes (denied): %v", what, ro.writes)
	}
	var seen []string
	for op := range ro.reads {
		_, action, _ := strings.Cut(op, ":")
		seen = append(seen, action)
	}
	for _, r := range reads {
		if !slices.Contains(seen, r) {
			return fmt.Errorf("the %s under the read-only role made no %s: its reads were %v", what, r, slices.Sorted(maps.Keys(ro.reads)))
		}
	}
	return nil
}

// providers are the provider configurations of the read-only role, for the
// pool's provider and the claims'.
func (ro *readOnlyRole) providers() string {
	var b strings.Builder
	for _, name := range []string{"ec2runners", "ec2runnersclaims"} {
		fmt.Fprintf(&b, `
provider %q {
  access_key = %q
  secret_key = %q
  endpoints {
    dynamodb = %q
    sqs      = %q
    ec2      = %q
    sts      = %q
  }
}
`, name, awsrecord.ReadOnlyKey, awsrecord.TestSecret, ro.url, ro.url, ro.url, ro.url)
	}
	return b.String()
}

// deny answers as the service does when IAM denies the action.
func deny(w http.ResponseWriter, service, action string) {
	msg := fmt.Sprintf("User: arn:aws:sts::000000000000:assumed-role/read-only/test is not authorized to perform: %s:%s", service, action)
	switch service {
	case "dynamodb", "sqs":
		body := fmt.Appendf(nil, `{"__type":"com.amazon.coral.service#AccessDeniedException","message":%q}`, msg)
		status := http.StatusBadRequest
		if service == "sqs" {
			w.Header().Set("X-Amzn-Query-Error", "AccessDenied;Sender")
			status = http.StatusForbidden
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
		w.WriteHeader(status)
		_, _ = w.Write(body)
	default: // EC2's query protocol
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>%s</Message></Error></Errors><RequestID>read-only</RequestID></Response>`, msg)
	}
}
