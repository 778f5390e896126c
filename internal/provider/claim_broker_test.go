package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/actionsoidc"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/lambdaworld"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/scripttest"
)

// TestAccClaim_broker: claims made through the pool's broker (the real
// ec2runners-broker, run as Lambda runs it) serve the repository of the
// job's OIDC token alone, within the pool's access list: octo/app with
// max_runners = 1, and octo/web. The provider is a GitHub Actions job
// whose token and variables each step sets (actAs), with the CI role's key:
// it only invokes the broker, whose own AWS calls are the broker role's.
// The simulated agents reach the broker as the agent binary does, with
// their instances' role.
//
// A job of octo/app claims: no registration token is minted, its runner
// holds a registration grant for octo/app with the claim's label, and its
// agent has the broker mint a just-in-time registration for each job, with
// the repository octo/app (never the organization), so no job of another
// repository reaches it, by any runs-on (checkTenancy), while the same
// claim registered with the organization is reached (the check with the
// protection removed); two jobs of the run, one after the other, run on
// two registrations. Another job of octo/app imports it: what the import
// reads is what the apply wrote, and the plan after the apply is empty. A
// second claim of octo/app while the first holds its runner is over
// max_runners, and a claim of the first's run by another claimant is
// refused as without a broker. octo/lib, not in the access list, is
// refused, naming itself and the pool. octo/web, listed, imports octo/app's
// claim and finds nothing; claims for itself when its job says it is
// octo/app; and its destroy of a resource pointed at octo/app's run
// releases its own claim alone, octo/app's untouched in the table and at
// GitHub. Then octo/app's destroy releases its claim, and the broker
// deletes its runner's registration at GitHub, without a removal token.
//
// Terraform never refreshes (NoRefresh): a refresh would read every claim
// in the state as the step's job, and the steps of octo/lib and octo/web
// reach the broker only with what they try to take; the import reads the
// claim back in full instead. Not parallel: it sets the job's environment.
func TestAccClaim_broker(t *testing.T) {
	skipOnRealAWS(t, "the broker's GitHub, OIDC issuer and Lambda are on this machine")
	w := newBrokerWorld(t)
	pool := w.poolConfig()
	app := w.claim("app", "run-app", "build")
	imported := w.claim("imported", "run-app", "build")
	var seeded, appIDs, webIDs []string
	// The runner tokens GitHub minted from step 2 on: those of the claim
	// registered with the organization, made directly (the tenancy check
	// with the protection removed). Claims through the broker mint none.
	organizationTokens := []string{"registration-token octo", "remove-token octo"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		AdditionalCLIOptions:     &resource.AdditionalCLIOptions{Plan: resource.PlanOptions{NoRefresh: true}},
		Steps: []resource.TestStep{
			{
				PreConfig: func() { w.actAs("octo/app", 101) },
				Config:    pool,
				Check:     w.seed(2, agentsim.SeedSpec{}, &seeded),
			},
			{
				// octo/app's claim, its runner registered with the
				// repository, a registration per job.
				Config: pool + app,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("ec2runners_claim.app", "repository", "octo/app"),
					resource.TestCheckResourceAttr("ec2runners_claim.app", "instance_ids.#", "1"),
					resource.TestCheckResourceAttr("ec2runners_claim.app", "reused_count", "1"),
					captureIDs("ec2runners_claim.app", &appIDs),
					w.checkRecord("run-app", "octo/app"),
					w.checkGrants("ec2runners_claim.app", "octo/app"),
					w.checkJITRunners("ec2runners_claim.app", "octo/app"),
					tokenCalls(w.gh),
					w.checkTenancy("ec2runners_claim.app"),
					w.checkJobsOnFreshRegistrations("ec2runners_claim.app"),
					w.checkOrganizationRunnerReached,
				),
			},
			{
				// Imported by another job of octo/app, under a second address
				// octo/web's destroy will point at.
				PreConfig:               func() { w.actAs("octo/app", 102) },
				Config:                  pool + app + imported,
				ResourceName:            "ec2runners_claim.imported",
				ImportState:             true,
				ImportStateId:           w.pool + "/run-app",
				ImportStatePersist:      true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				Config: pool + app + imported + w.claim("app2", "run-app-2", "build") + w.claim("other", "run-app", "deploy"),
				ExpectError: bothErrors(
					fmt.Sprintf(`repository octo/app may hold at most 1 runners of pool %s at once (access max_runners = 1); it holds 1 and asks for 1`, w.pool),
					`Run run-app is claimed by another claimant`),
			},
			{
				PreConfig:   func() { w.actAs("octo/lib", 301) },
				Config:      pool + app + imported + w.claim("lib", "run-lib", "build"),
				ExpectError: regexp.MustCompile(wrapped(regexp.QuoteMeta(fmt.Sprintf(`repository octo/lib may not claim runners of pool %s: the pool's access has no entry with repository = "octo/lib"`, w.pool)))),
			},
			{
				PreConfig:     func() { w.actAs("octo/web", 201) },
				Config:        pool + app + imported,
				ResourceName:  "ec2runners_claim.imported",
				ImportState:   true,
				ImportStateId: w.pool + "/run-app",
				ExpectError:   regexp.MustCompile(wrapped(`Cannot import non-existent remote object`)),
			},
			{
				// A job of octo/web that says it is octo/app's, as any step of
				// its workflow may.
				PreConfig: func() {
					w.actAs("octo/web", 201)
					t.Setenv("GITHUB_REPOSITORY", "octo/app")
				},
				Config: pool + app + imported + w.claim("web", "run-web", "build"),
				Check: resource.ComposeTestCheckFunc(
					captureIDs("ec2runners_claim.web", &webIDs),
					// The state records the repository claimed for, the token's.
					resource.TestCheckResourceAttr("ec2runners_claim.web", "repository", "octo/web"),
					w.checkRecord("run-web", "octo/web"),
					w.checkGrants("ec2runners_claim.web", "octo/web"),
					w.checkJITRunners("ec2runners_claim.web", "octo/web"),
					tokenCalls(w.gh, organizationTokens...),
				),
			},
			{
				// octo/web destroys its claim and the one pointed at octo/app's.
				PreConfig: func() { w.actAs("octo/web", 201) },
				Config:    pool + app,
				Check: resource.ComposeTestCheckFunc(
					w.checkRecord("run-app", "octo/app"),
					w.checkRecords(protocol.StateRunning, "run-app", &appIDs),
					w.checkRecords(protocol.StateIdle, "", &webIDs),
					w.checkJITRunners("ec2runners_claim.app", "octo/app"),
					w.checkRegistrationsDeleted("octo/web", &webIDs),
					tokenCalls(w.gh, organizationTokens...),
				),
			},
			{
				PreConfig: func() { w.actAs("octo/app", 102) },
				Config:    pool,
				Check: resource.ComposeTestCheckFunc(
					w.checkNoClaim("run-app"),
					w.checkRecords(protocol.StateIdle, "", &appIDs),
					w.checkRegistrationsDeleted("octo/app", &appIDs),
					tokenCalls(w.gh, organizationTokens...),
					w.checkRecordedRoles,
				),
			},
		},
	})
}

// brokerWorld is a broker test's world: an organization pool (owner octo)
// whose GitHub credential, in SSM, is the stub GitHub's, the broker of
// the pool running in lambdaworld, and GitHub Actions' OIDC issuer.
type brokerWorld struct {
	*claimEnv
	gh       *scripttest.GitHub
	issuer   *actionsoidc.Issuer
	function string // the broker function's name
	lambda   string // the Lambda endpoint the broker is invoked at
}

// brokerOtherRepositories are the organization's repositories besides octo/app:
// one in the pool's access list, one not, and a public one.
var brokerOtherRepositories = []string{"octo/web", "octo/lib", "octo/site"}

// brokerRunnerGroups are the organization's runner groups: its default group
// (every private repository), one of selected repositories and one that
// admits public repositories.
var brokerRunnerGroups = []string{protocol.DefaultRunnerGroup, "Trusted builds", "Open"}

// newBrokerWorld starts the stub GitHub, the OIDC issuer and the broker,
// configures the claims' provider as a GitHub Actions job with the CI
// role's key, claiming through the broker, and gives the pool's agents the
// broker (agentBroker).
//
// The broker runs in lambdaworld whatever the emulator, which keeps the
// test as runnable against LocalStack as against moto: lambdaworld is the
// test's own process, no service of the emulator's (moto's and
// LocalStack's Lambda run functions in Docker). The provider and the
// agents invoke the function there, through a recorder of its own that
// records the invocations as the CI role's and the agent role's; the
// function reaches the emulator, either one, at AWS_ENDPOINT_URL (the
// package's recorder when calls are recorded) with the claims' key, its
// calls the broker role's.
func newBrokerWorld(t *testing.T) *brokerWorld {
	gh := scripttest.NewGitHub(t)
	gh.AddRepository("octo/site", true)
	gh.AddRunnerGroup("octo", "Trusted builds", scripttest.GroupAccess{SelectedRepositories: []string{"octo/app", "octo/lib"}})
	gh.AddRunnerGroup("octo", "Open", scripttest.GroupAccess{AllowPublicRepositories: true})
	// The provider has no GitHub credentials: the broker's are the pool's
	// (and a destroy of the pool that releases claims reads them too).
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("GITHUB_APP_ID", "")
	t.Setenv("GITHUB_REPOSITORY_OWNER", "")
	t.Setenv("GITHUB_API_URL", gh.URL)
	w := &brokerWorld{gh: gh, issuer: actionsoidc.New(t)}
	w.claimEnv = newClaimEnv(t, "acc-broker", func(o *agentsim.Options) { o.Broker = w.agentBroker })
	w.function = w.pool + "-broker"
	credential := "/ec2runners/" + w.pool + "/github"
	value, err := json.Marshal(map[string]string{"owner": "octo", "token": gh.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	putParameter(t, credential, string(value))
	w.poolSettings = fmt.Sprintf(`github_owner      = "octo"
  github_credential = { ssm_parameter = %q }
  access = [
    { repository = "octo/app", max_runners = 1 },
    { repository = "octo/web" },
  ]`, credential)

	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bootstrap, scripttest.BuildBroker(t), 0o755); err != nil {
		t.Fatal(err)
	}
	world, err := lambdaworld.Start(lambdaworld.Function{
		Name: w.function, Executable: bootstrap, Timeout: lambdaworld.MaxTimeout, Output: testLog{t},
		Env: map[string]string{
			"EC2RUNNERS_POOL": w.pool, "EC2RUNNERS_OIDC_ISSUER": w.issuer.URL, "GITHUB_API_URL": gh.URL,
			"AWS_ENDPOINT_URL": os.Getenv("AWS_ENDPOINT_URL"), "AWS_REGION": testClients.Region,
			"AWS_ACCESS_KEY_ID": awsrecord.ClaimsKey, "AWS_SECRET_ACCESS_KEY": awsrecord.TestSecret,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(world.Close)
	lambdaEndpoint, stop, err := awsrecord.StartFor(context.Background(), world.Endpoint(), os.Getenv("AWS_ENDPOINT_URL"), "lambda")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	w.lambda = lambdaEndpoint

	w.issuer.Setenv(t)
	t.Setenv("GITHUB_ACTIONS", "true")
	w.claimsKey = awsrecord.CIKey
	w.claimsSettings = fmt.Sprintf(`endpoints {
    lambda = %q
  }
  broker {
    function_name = %q
  }`, lambdaEndpoint, w.function)
	return w
}

// agentBroker is the pool's broker as the agent of instance id reaches it,
// as the agent binary does: the function invoked with the AWS SDK's Lambda
// client and the instance role's credentials, each instance its own
// (awsrecord.AgentKey: the recorder records its calls as the agent
// role's, from the instance).
func (w *brokerWorld) agentBroker(id string) agent.LambdaBroker {
	return agent.LambdaBroker{Function: w.function, Lambda: lambda.New(lambda.Options{
		Region: testClients.Region, BaseEndpoint: aws.String(w.lambda),
		Credentials: credentials.NewStaticCredentialsProvider(awsrecord.AgentKey(id), awsrecord.TestSecret, ""),
	})}
}

// actAs makes the provider a job of attempt 1 of workflow run run of
// repository: the OIDC token the job gets, and the variables GitHub sets.
// The run is under way, as GitHub tells the pool's maintenance.
func (w *brokerWorld) actAs(repository string, run int64) {
	w.issuer.SetJob(w.issuer.Job(repository, run, broker.DefaultAudience))
	w.gh.StartRunAttempt(repository, run, 1)
	w.t.Setenv("GITHUB_REPOSITORY", repository)
	w.t.Setenv("GITHUB_RUN_ID", strconv.FormatInt(run, 10))
	w.t.Setenv("GITHUB_RUN_ATTEMPT", "1")
}

// claim is a claim of one warm runner of the test pool.
func (w *brokerWorld) claim(name, runID, claimant string) string {
	return w.claimConfig(name, fmt.Sprintf(`
  run_id         = %q
  claimant       = %q
  instance_count = 1
  fleet_fallback = false`, runID, claimant))
}

// direct makes and reads claims of the pool as the provider does without
// a broker, with the tests' own (unrecorded) clients and the pool's GitHub
// credential.
func (w *brokerWorld) direct() *claim.Claimer {
	return &claim.Claimer{DynamoDB: testClients.DynamoDB, SQS: testClients.SQS, EC2: testClients.EC2,
		StoredGitHub: &claim.StoredGitHub{SSM: testClients.SSM, SecretsManager: testClients.SecretsManager, Client: github.Config{BaseURL: w.gh.URL}}}
}

// checkRecord checks that the claim of runID is recorded for repository,
// its runners registered with it.
func (w *brokerWorld) checkRecord(runID, repository string) func(*terraform.State) error {
	return func(*terraform.State) error {
		rec, _, ok, err := w.direct().Read(context.Background(), w.pool, runID)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("no claim of run %s", runID)
		case rec.Request.Repository != repository || !rec.Request.RegisterWithRepository:
			return fmt.Errorf("claim of run %s made for %q (registered with it: %v), want for %s, registered with it", runID, rec.Request.Repository, rec.Request.RegisterWithRepository, repository)
		}
		return nil
	}
}

// checkNoClaim checks that the claim of runID is gone.
func (w *brokerWorld) checkNoClaim(runID string) func(*terraform.State) error {
	return func(*terraform.State) error {
		if _, _, ok, err := w.direct().Read(context.Background(), w.pool, runID); err != nil || ok {
			return fmt.Errorf("the claim of run %s is still recorded (%v)", runID, err)
		}
		return nil
	}
}

// claimAttributes are the attributes of the claim at address in the
// state.
func claimAttributes(s *terraform.State, address string) (map[string]string, error) {
	rs, ok := s.RootModule().Resources[address]
	if !ok {
		return nil, fmt.Errorf("%s not in state", address)
	}
	return rs.Primary.Attributes, nil
}

// checkGrants checks that each runner of the claim at address holds its
// registration grant: for its run, registering with repository (the OIDC
// token's, whatever the job says), with its label.
func (w *brokerWorld) checkGrants(address, repository string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		attrs, err := claimAttributes(s, address)
		if err != nil {
			return err
		}
		ids, err := stateIDs(s, address)
		if err != nil {
			return err
		}
		ctx := context.Background()
		cfg, err := pool.ReadConfig(ctx, testClients.DynamoDB, w.pool)
		if err != nil {
			return err
		}
		for _, id := range ids {
			out, err := testClients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.pool),
				Key: protocol.AgentKey(protocol.InstanceARN(cfg.InstanceARNPrefix, id), protocol.SortKeyRegistrationGrant)})
			if err != nil {
				return err
			}
			grant, err := protocol.RegistrationGrantFromItem(out.Item)
			switch {
			case err != nil:
				return fmt.Errorf("%s's registration grant: %w", id, err)
			case grant.RunID != attrs["run_id"] || grant.Target != repository || grant.Label != attrs["label"]:
				return fmt.Errorf("%s holds a grant for run %s, registering with %s (the claim's label: %t), want run %s's, with %s and the claim's label",
					id, grant.RunID, grant.Target, grant.Label == attrs["label"], attrs["run_id"], repository)
			}
		}
		return nil
	}
}

// checkJITRunners checks that each runner of the claim at address runs on
// a just-in-time registration of repository, with the claim's label alone,
// as the stub GitHub made it: the one the broker minted when the runner's
// agent asked, which the agent started last. The broker minted none with
// the organization.
func (w *brokerWorld) checkJITRunners(address, repository string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		attrs, err := claimAttributes(s, address)
		if err != nil {
			return err
		}
		ids, err := stateIDs(s, address)
		if err != nil {
			return err
		}
		registered := w.gh.Runners()
		for _, id := range ids {
			name, err := w.jitRunner(id)
			if err != nil {
				return err
			}
			r, ok := registered[name]
			switch {
			case !ok:
				return fmt.Errorf("GitHub has no runner %s, which the agent of %s started", name, id)
			case r.Target != repository || r.Labels != attrs["label"] || !r.Ephemeral:
				return fmt.Errorf("runner %s of %s is registered with %s (ephemeral: %t; the claim's label alone: %t), want a just-in-time runner of %s with the claim's label alone",
					name, id, r.Target, r.Ephemeral, r.Labels == attrs["label"], repository)
			}
		}
		if slices.Contains(w.gh.APICalls(), "generate-jitconfig octo") {
			return errors.New("the broker minted a just-in-time runner of the organization octo")
		}
		return nil
	}
}

// jitRunner is the just-in-time runner instance id's agent started last.
func (w *brokerWorld) jitRunner(id string) (string, error) {
	started := w.sim.JITRunners(id)
	if len(started) == 0 {
		return "", fmt.Errorf("the agent of %s started no just-in-time runner", id)
	}
	return started[len(started)-1], nil
}

// checkTenancy checks that no job of another repository of the
// organization reaches the just-in-time runner of the claim at address, as
// the stub GitHub registered it, by any runs-on, where a job of the
// claim's repository does with the claim's label.
func (w *brokerWorld) checkTenancy(address string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		attrs, err := claimAttributes(s, address)
		if err != nil {
			return err
		}
		runner, err := w.jitRunner(attrs["instance_ids.0"])
		if err != nil {
			return err
		}
		leaks, err := w.tenancyLeaks(runner, attrs["repository"], attrs["label"])
		if err != nil {
			return err
		}
		if len(leaks) > 0 {
			return fmt.Errorf("jobs of other repositories reach the runner of %s: %s", address, strings.Join(leaks, "; "))
		}
		return nil
	}
}

// checkJobsOnFreshRegistrations checks that two jobs of the run of the
// claim at address, one after the other, run on two registrations of its
// runner: GitHub sends the first to the runner's just-in-time registration
// and removes it after that one job, the runner exits, and its agent
// starts the next job's runner on a registration the broker mints anew.
func (w *brokerWorld) checkJobsOnFreshRegistrations(address string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		attrs, err := claimAttributes(s, address)
		if err != nil {
			return err
		}
		id, repository, label := attrs["instance_ids.0"], attrs["repository"], attrs["label"]
		first, err := w.runJob(id, repository, label)
		if err != nil {
			return fmt.Errorf("the run's first job: %w", err)
		}
		second, err := w.runJob(id, repository, label)
		if err != nil {
			return fmt.Errorf("the run's second job, after the first ran on %s: %w", first, err)
		}
		if first == second {
			return fmt.Errorf("both jobs of the run ran on registration %s", first)
		}
		return nil
	}
}

// runJob queues a job of repository with runs-on: label, and runs it at
// the stub GitHub on the runner instance id's agent started last, once
// GitHub sends it there; its job done, the runner exits, as an ephemeral
// runner does. It returns the runner the job ran on.
func (w *brokerWorld) runJob(id, repository, label string) (string, error) {
	queued := w.gh.QueueJobFor(repository, scripttest.RunsOn{Labels: []string{label}}, "true")
	var ran scripttest.Job
	err := await.Poll(await.Patience, func() error {
		runner, err := w.jitRunner(id)
		if err != nil {
			return err
		}
		job, ok := w.gh.RunJob(runner)
		if !ok {
			return fmt.Errorf("GitHub sends no job to %s, the runner the agent of %s started last", runner, id)
		}
		ran = job
		return nil
	})
	switch {
	case err != nil:
		return "", err
	case ran.ID != queued:
		return "", fmt.Errorf("runner %s ran job %s, not the one queued, %s", ran.Runner, ran.ID, queued)
	}
	w.sim.EndJob(id)
	return ran.Runner, nil
}

// checkOrganizationRunnerReached is checkTenancy with the protection
// removed: the broker's claim of octo/app made again directly, as the
// broker makes it but RegisterWithRepository, so that its runner registers
// with the pool's organization, with a registration token. The check must
// find it reached by jobs of other repositories, or it shows nothing.
func (w *brokerWorld) checkOrganizationRunnerReached(*terraform.State) error {
	ctx := context.Background()
	c := w.direct()
	rec, _, ok, err := c.Read(ctx, w.pool, "run-app")
	if err != nil || !ok {
		return fmt.Errorf("reading the broker's claim to make it again: %v", err)
	}
	req := rec.Request
	req.RunID, req.Label, req.RegisterWithRepository = "run-org", "", false
	res, err := c.Create(ctx, req)
	if err != nil {
		return err
	}
	runner, err := w.registerAgentRunner(res.Instances[0].ID)
	var leaks []string
	if err == nil {
		leaks, err = w.tenancyLeaks(runner, req.Repository, res.Label)
	}
	if _, relErr := c.Release(ctx, w.pool, req.RunID); relErr != nil {
		return relErr
	}
	if err != nil {
		return err
	}
	w.t.Logf("registered with the organization, the claim's runner is reached by %s", strings.Join(leaks, "; "))
	if !slices.Contains(leaks, "octo/lib with runs-on: {group: Default}") {
		return fmt.Errorf("the runner of a claim registered with the organization is reached by %q, want octo/lib's jobs in the default group among them: the tenancy check would not see the protection removed", leaks)
	}
	return nil
}

// registerAgentRunner registers the runner of instance id at the stub
// GitHub as its agent registered it with its registration token (its
// machine registers nowhere), and returns its name.
func (w *brokerWorld) registerAgentRunner(id string) (string, error) {
	reg, ok := w.sim.Registration(id)
	if !ok {
		return "", fmt.Errorf("runner %s holds no registration", id)
	}
	if err := w.gh.RegisterAgent(reg); err != nil {
		return "", fmt.Errorf("registering runner %s at %s as its agent did: %w", id, reg.URL, err)
	}
	return reg.Name, nil
}

// tenancyLeaks checks that a job of repository reaches the runner the
// stub GitHub has registered as runner with runs-on: label (the claim's),
// and lists the jobs of the organization's other repositories that GitHub
// would send it: by the label, with self-hosted, and by each runner group,
// alone and with the label.
func (w *brokerWorld) tenancyLeaks(runner, repository, label string) ([]string, error) {
	if own := (scripttest.RunsOn{Labels: []string{label}}); !w.gh.Routes(repository, own, runner) {
		_, registered := w.gh.Runners()[runner]
		return nil, fmt.Errorf("a job of %s with runs-on: %s does not reach runner %s (registered: %t): it is not the claim's runner", repository, label, runner, registered)
	}
	forms := []scripttest.RunsOn{{Labels: []string{label}}, {Labels: []string{"self-hosted", label}}}
	for _, group := range brokerRunnerGroups {
		forms = append(forms, scripttest.RunsOn{Group: group}, scripttest.RunsOn{Group: group, Labels: []string{label}})
	}
	var leaks []string
	for _, other := range brokerOtherRepositories {
		for _, runsOn := range forms {
			if w.gh.Routes(other, runsOn, runner) {
				leaks = append(leaks, fmt.Sprintf("%s with runs-on: %s", other, describeRunsOn(runsOn, label)))
			}
		}
	}
	return leaks, nil
}

// checkRegistrationsDeleted checks that the release of the claim of
// repository whose runners were ids had the broker delete their
// registrations at GitHub: none is left.
func (w *brokerWorld) checkRegistrationsDeleted(repository string, ids *[]string) func(*terraform.State) error {
	return func(*terraform.State) error {
		for name, r := range w.gh.Runners() {
			for _, id := range *ids {
				if protocol.RunnerOfInstance(name, id) && strings.EqualFold(r.Target, repository) {
					return fmt.Errorf("GitHub still has runner %s of %s, the released runner %s's", name, repository, id)
				}
			}
		}
		if !slices.Contains(w.gh.APICalls(), "delete-runner "+repository) {
			return fmt.Errorf("the broker deleted no runner of %s: %q", repository, w.gh.APICalls())
		}
		return nil
	}
}

// describeRunsOn writes runs-on as a workflow does, the claim's label as
// <label>.
func describeRunsOn(r scripttest.RunsOn, label string) string {
	labels := strings.ReplaceAll(strings.Join(r.Labels, ", "), label, "<label>")
	switch {
	case r.Group == "":
		return "[" + labels + "]"
	case len(r.Labels) == 0:
		return "{group: " + r.Group + "}"
	}
	return "{group: " + r.Group + ", labels: [" + labels + "]}"
}

// checkRecordedRoles checks, when the calls are recorded, that the broker
// made its calls as the broker role (its table's, the runners' grants
// among them, its GitHub credential's), the provider invoked it as the CI
// role, which called nothing else, and the agents as the agent role, from
// their instances.
func (w *brokerWorld) checkRecordedRoles(*terraform.State) error {
	dir := os.Getenv(awsrecord.EnvDir)
	if dir == "" {
		w.t.Logf("the calls are not recorded (%s unset): the roles are not checked", awsrecord.EnvDir)
		return nil
	}
	calls, err := awsrecord.Read(dir)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, c := range calls {
		switch {
		case c.Role == awsrecord.RoleBroker && c.Action == "dynamodb:GetItem" && strings.HasSuffix(c.Resource, ":table/"+w.pool) &&
			slices.ContainsFunc(c.Context[awsrecord.KeyLeadingKeys], func(k string) bool { return strings.HasPrefix(k, "AGENT#") }):
			seen["the broker's reads of the runners' grants"] = true
		case c.Role == awsrecord.RoleBroker && strings.HasSuffix(c.Resource, ":table/"+w.pool):
			seen["the broker's table calls"] = true
		case c.Role == awsrecord.RoleBroker && strings.HasSuffix(c.Resource, ":parameter/ec2runners/"+w.pool+"/github"):
			seen["the broker's read of the GitHub credential"] = true
		case c.Role == awsrecord.RoleCI && c.Action == "lambda:InvokeFunction" && strings.HasSuffix(c.Resource, ":function:"+w.function):
			seen["the CI role's invocations"] = true
		case c.Role == awsrecord.RoleCI && c.Action != "lambda:InvokeFunction":
			return fmt.Errorf("the CI role called %s", c)
		case c.Role == awsrecord.RoleAgent && c.Action == "lambda:InvokeFunction" && strings.HasSuffix(c.Resource, ":function:"+w.function) &&
			len(c.Context[awsrecord.KeySourceInstance]) == 1:
			seen["the agents' invocations"] = true
		}
	}
	for _, want := range []string{"the broker's table calls", "the broker's reads of the runners' grants", "the broker's read of the GitHub credential",
		"the CI role's invocations", "the agents' invocations"} {
		if !seen[want] {
			return fmt.Errorf("%s are not recorded in %s", want, dir)
		}
	}
	return nil
}

// tokenCalls checks the runner tokens the stub GitHub minted, in any order:
// with whom each direct claim registered its runners, and each release
// removed them.
func tokenCalls(g *scripttest.GitHub, want ...string) func(*terraform.State) error {
	return func(*terraform.State) error {
		var got []string
		for _, c := range g.APICalls() {
			if strings.HasPrefix(c, "registration-token ") || strings.HasPrefix(c, "remove-token ") {
				got = append(got, c)
			}
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			return fmt.Errorf("GitHub minted %q, want %q", got, want)
		}
		return nil
	}
}

// bothErrors matches an apply's output holding both errors, in either
// order.
func bothErrors(a, b string) *regexp.Regexp {
	a, b = wrapped(regexp.QuoteMeta(a)), wrapped(regexp.QuoteMeta(b))
	return regexp.MustCompile(`(?s)` + a + `.*` + b + `|` + b + `.*` + a)
}

// testLog writes a process's output to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
