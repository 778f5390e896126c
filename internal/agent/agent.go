// Package agent is the instance half of the pool protocol
// (docs/guides/protocol.md, "The agent"): the program that keeps one EC2
// instance in a pool. It heartbeats into its agent partition, follows its
// instance record (a GitHub runner registered for each run the pool hands
// it, deregistered and its jobs' traces wiped at release; for a run claimed
// through the pool's broker, a just-in-time runner for each job, the runner
// user wiped between them), keeps the runner
// within GitHub's version policy while it waits, and stops or terminates
// its instance when its record says so.
//
// The core talks to the world only through small interfaces: the DynamoDB
// and EC2 calls it makes (Table, Instances), a Clock, the Host (the wall
// between jobs and the pool: the runner user, the metadata firewall, the
// jobs' processes and files) and the Runner (the GitHub runner: install,
// register, run, remove), and the pool's Broker, which mints each job's
// just-in-time registration. The binary (cmd/ec2runners-agent) plugs in Linux
// (package linux) and the broker's Lambda function (LambdaBroker); the
// simulations of the tests, the demo and the simulator plug in fakes
// (package agenttest), so every simulated agent runs this code.
//
// Run is one boot of the instance: it raises the walls, prepares the
// instance, and runs the heartbeat, the self-check and the serving loops
// until the agent stops or terminates its instance. The steps it is made
// of (Boot, Heartbeat, Poll, SelfCheck) are exported for simulations that
// drive agents one step at a time on a virtual clock.
package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// Table is the part of DynamoDB the agent uses.
type Table interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Instances is the part of EC2 the agent uses, on its own instance only.
type Instances interface {
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	StopInstances(context.Context, *ec2.StopInstancesInput, ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error)
}

// Clock is the agent's time: the machine's, or a simulation's.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends (its error then).
	Sleep(ctx context.Context, d time.Duration) error
}

// Host is the machine the agent keeps: the wall between jobs (untrusted
// code, run as the runner user) and the pool.
type Host interface {
	// RaiseWalls sets up what a boot does not keep (the runner user, /proc
	// hiding other users' processes, the firewall rule that keeps the
	// runner user from the instance metadata service) and ends any process
	// of the runner user.
	RaiseWalls(ctx context.Context) error
	// Prepare runs the user's pre-runner script, once per instance.
	Prepare(ctx context.Context) error
	// EndJobs kills every process of the runner user, as one unit none can
	// leave, and fails unless it proved none is left.
	EndJobs(ctx context.Context) error
	// Wipe removes everything the runner user can have left for the next
	// run: its files, IPC objects, keys, scheduled jobs and containers.
	Wipe(ctx context.Context) error
}

// Runner is the GitHub Actions runner on the instance.
type Runner interface {
	// Installed is the version registrations use now, "" before any.
	Installed() string
	// Install downloads the archive, checks its digest, and makes it the
	// installation the next registration uses.
	Install(ctx context.Context, a Archive) error
	// Check fails unless the installation is exactly what was installed.
	Check(ctx context.Context) error
	// Register configures a runner for one run (as root: the token never
	// reaches a process of the runner user) and starts it as the runner
	// user.
	Register(ctx context.Context, r Registration) error
	// StartJIT starts the run's runner for one job, as the runner user,
	// from a fresh copy of the installation registrations use now, with a
	// just-in-time configuration (run.sh --jitconfig): a registration
	// GitHub sends one job and then removes.
	StartJIT(ctx context.Context, encodedConfig string) error
	// Running tells whether the run's runner is running (true when no run
	// is registered). It is what the kernel says of the runner's process,
	// never what the runner prints or writes: that is the jobs' to forge.
	Running() bool
	// Exited is closed once the run's runner, as started last, exits (nil
	// when none was started), so that the next job's runner starts at once.
	Exited() <-chan struct{}
	// Restart ends every process of the run (its jobs included: none may
	// outlive its runner) and starts the run's runner again, from a fresh
	// copy of the installation registrations use now, with the run's
	// registration.
	Restart(ctx context.Context) error
	// Stop stops the run's runner.
	Stop(ctx context.Context) error
	// Remove deregisters the run's runner from GitHub with a removal token,
	// from the agent's own copy of the registration.
	Remove(ctx context.Context, token string) error
}

// Archive is a runner release archive for this machine.
type Archive struct {
	Version string
	URL     string
	SHA256  string // "": not checked (a pinned version without runner_sha256)
}

// Registration is what a runner registers with.
type Registration struct {
	URL  string // GitHub's web URL of the target: https://github.com/owner[/repository]
	Name string // the instance id
	// Label is the runner's only label: the claim's, the run id and a
	// secret (the run id alone for a claim made before labels had one).
	Label string
	// RunnerGroup is the organization's runner group to join ("": the
	// default group).
	RunnerGroup string
	Token       string
}

// Broker is the pool's broker, as a runner claimed through it reaches it:
// with the registration grant its claim handed it, which proves the
// request is this instance's.
type Broker interface {
	// Register asks for a just-in-time runner for the next job of the
	// grant's run.
	Register(ctx context.Context, g protocol.RegistrationGrant) (protocol.JITRunner, error)
	// Deregister asks for the run's runner runnerID to be deleted (one
	// whose job is done is gone already).
	Deregister(ctx context.Context, g protocol.RegistrationGrant, runnerID int64) error
}

// Releases tells the newest runner release: asked only when the pool told
// the agent of none.
type Releases interface {
	Newest(ctx context.Context) (protocol.RunnerRelease, error)
}

// Identity is what the agent knows of its instance from instance metadata.
type Identity struct {
	InstanceID  string
	InstanceARN string
	// InitialRunID is the InitialRunId tag, when it is a run id (a claim's
	// run, or the fill id of a runner launched to fill a warm tier).
	InitialRunID string
}

// Deps are the agent's ties to the world.
type Deps struct {
	Table    Table
	EC2      Instances
	Clock    Clock
	Host     Host
	Runner   Runner
	Releases Releases // nil: none to ask
	// Broker is the pool's broker (Config.BrokerFunction); nil: none, and
	// registration grants are not used.
	Broker Broker
	// Background runs work that must not hold up a step (a runner update);
	// nil runs it in a goroutine of its own.
	Background func(func())
	// Logf receives the agent's log lines; nil drops them.
	Logf func(format string, args ...any)
	// OnEvent, if set, hears what the agent did.
	OnEvent func(Event)
}

// EventKind names what an agent did.
type EventKind string

// Agent events.
const (
	EventPrepared           EventKind = "prepared"            // UD_OK for RunID, the InitialRunId
	EventPrepareFailed      EventKind = "prepare-failed"      // UD_FAILED for RunID
	EventRegistered         EventKind = "registered"          // UD_REG_OK for RunID
	EventRegistrationFailed EventKind = "registration-failed" // UD_REG_FAILED for RunID
	EventReleased           EventKind = "released"            // UD_REMOVE_REG_REMOVE_RUN_OK for RunID
	EventReleaseFailed      EventKind = "release-failed"      // UD_REMOVE_REG_FAILED for RunID
	EventRunnerUpdated      EventKind = "runner-updated"      // Detail: the version installed (while idle, or because GitHub refused the runner)
	EventSelfTerminated     EventKind = "self-terminated"     // TerminateInstances on itself
	EventSelfStopped        EventKind = "self-stopped"        // StopInstances on itself (the stopped tier)
)

// Event is one thing the agent did.
type Event struct {
	Kind   EventKind
	RunID  string
	Detail string
}

// End is how a boot of the agent ended.
type End int

// Ends of Run and SelfCheck.
const (
	EndNone       End = iota // still serving (SelfCheck), or cancelled (Run)
	EndStopped               // it stopped its instance
	EndTerminated            // it terminated its instance
)

// Agent is the agent of one instance, for one boot.
type Agent struct {
	cfg Config
	id  Identity
	d   Deps

	bootAt time.Time // on the agent's clock

	beat        sync.Mutex // held while a heartbeat is written: none lands after UD_FAILED
	mu          sync.Mutex
	failed      bool // UD_FAILED: no heartbeat any more
	ready       bool // prepared and told so at this boot
	serving     string
	registered  bool // the run's runner is configured
	nextCheck   time.Time
	updating    bool
	restarting  bool      // the run's runner is being started again, in the background
	nextRestart time.Time // not before: a runner that keeps stopping starts again once per runner check

	// jit is the run's just-in-time registrations, nil for a run whose
	// runner has a registration of its own; the serving loop alone
	// (Poll) uses it.
	jit *jitRun
}

// New is the agent of one boot of an instance with cfg (defaults filled in
// by New).
func New(cfg Config, id Identity, d Deps) *Agent {
	if d.Background == nil {
		d.Background = func(f func()) { go f() }
	}
	if d.Logf == nil {
		d.Logf = func(string, ...any) {}
	}
	if d.OnEvent == nil {
		d.OnEvent = func(Event) {}
	}
	return &Agent{cfg: cfg.WithDefaults(), id: id, d: d, bootAt: d.Clock.Now()}
}

func (a *Agent) emit(kind EventKind, runID, detail string) {
	a.d.OnEvent(Event{Kind: kind, RunID: runID, Detail: detail})
}

func (a *Agent) logf(format string, args ...any) { a.d.Logf(format, args...) }

func (a *Agent) table() *string { return aws.String(protocol.TableName(a.cfg.Pool)) }

func (a *Agent) interval(d protocol.Duration) time.Duration { return time.Duration(d) }

// Heartbeat writes the heartbeat, with the version of the runner the
// agent registers with; it writes nothing once the agent gave up
// (UD_FAILED).
func (a *Agent) Heartbeat(ctx context.Context) error {
	a.beat.Lock()
	defer a.beat.Unlock()
	a.mu.Lock()
	failed := a.failed
	a.mu.Unlock()
	if failed {
		return nil
	}
	item := protocol.HeartbeatItem(a.id.InstanceARN, protocol.FormatTime(a.d.Clock.Now()))
	if v := a.d.Runner.Installed(); v != "" {
		item[protocol.AttrRunnerVersion] = &ddbtypes.AttributeValueMemberS{Value: v}
	}
	_, err := a.d.Table.PutItem(ctx, &dynamodb.PutItemInput{TableName: a.table(), Item: item})
	if err != nil {
		return fmt.Errorf("writing the heartbeat: %w", err)
	}
	return nil
}

// signal writes a worker signal, again and again until it is written: the
// claim or release waiting for it has no other way to learn it.
func (a *Agent) signal(ctx context.Context, state, runID string) error {
	return a.signalLabel(ctx, state, runID, "")
}

// signalLabel is signal with the label the runner registered with (for
// UD_REG_OK: the claim checks it).
func (a *Agent) signalLabel(ctx context.Context, state, runID, label string) error {
	a.logf("signal %s for run %s", state, runID)
	untilWritten := retry.Policy{Backoff: retry.Constant(time.Second), Sleep: a.d.Clock.Sleep}
	return retry.Do(ctx, untilWritten, func() error {
		_, err := a.d.Table.PutItem(ctx, &dynamodb.PutItemInput{TableName: a.table(), Item: protocol.Signal{
			InstanceARN: a.id.InstanceARN, State: state, RunID: runID, Label: label, UpdatedAt: protocol.FormatTime(a.d.Clock.Now()),
		}.Item()})
		if err != nil {
			a.logf("writing signal %s for run %s: %v", state, runID, err)
		}
		return err
	})
}

// record reads the instance's record; found is false while there is none
// (a fleet instance before its claim writes it).
func (a *Agent) record(ctx context.Context) (rec protocol.Instance, found bool, err error) {
	out, err := a.d.Table.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: a.table(), Key: protocol.Key(protocol.TypeInstance, a.id.InstanceID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return protocol.Instance{}, false, fmt.Errorf("reading its instance record: %w", err)
	}
	if len(out.Item) == 0 {
		return protocol.Instance{}, false, nil
	}
	rec, err = protocol.InstanceFromItem(out.Item)
	if err != nil {
		return protocol.Instance{}, false, fmt.Errorf("reading its instance record: %w", err)
	}
	return rec, true, nil
}

// agentItem reads item sk of its agent partition; nil when there is none.
func (a *Agent) agentItem(ctx context.Context, sk string) (map[string]ddbtypes.AttributeValue, error) {
	out, err := a.d.Table.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: a.table(), Key: protocol.AgentKey(a.id.InstanceARN, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("reading its %s item: %w", sk, err)
	}
	return out.Item, nil
}

// errNoToken: no usable token arrived in time.
var errNoToken = errors.New("no usable token")

// token returns the token sk for runID and the agent's GitHub target, valid
// for another minute, waiting for it up to the token wait: a token for
// another run or target, planted or stale, is none. It gives up early, with
// errRunChanged, when still reports that the run is no longer the one to
// wait for. Without a GitHub target there is no token to wait for (the
// zero token: no label, the run id's).
func (a *Agent) token(ctx context.Context, sk, runID string, still func(context.Context) bool) (protocol.RunnerToken, error) {
	if a.cfg.GitHubTarget == "" {
		return protocol.RunnerToken{RunID: runID}, nil // a pool without a GitHub target hands out no token
	}
	var tok protocol.RunnerToken
	err := a.await(ctx, fmt.Sprintf("%s token for run %s and %s", sk, runID, a.cfg.GitHubTarget), still, func(ctx context.Context) (found bool) {
		tok, found = a.usableToken(ctx, sk, runID)
		return found
	})
	return tok, err
}

// registration is what the runner of runID registers with: its
// registration grant, when the agent has a broker to present it to, else
// its registration token (see token), whichever arrives first.
func (a *Agent) registration(ctx context.Context, runID string, still func(context.Context) bool) (protocol.RunnerToken, *protocol.RegistrationGrant, error) {
	if a.d.Broker == nil || a.cfg.GitHubTarget == "" {
		tok, err := a.token(ctx, protocol.SortKeyRegistrationToken, runID, still)
		return tok, nil, err
	}
	var (
		tok   protocol.RunnerToken
		grant protocol.RegistrationGrant
	)
	what := fmt.Sprintf("%s token or %s grant for run %s and %s", protocol.SortKeyRegistrationToken, protocol.SortKeyRegistrationGrant, runID, a.cfg.GitHubTarget)
	granted := false
	err := a.await(ctx, what, still, func(ctx context.Context) (found bool) {
		if grant, granted = a.usableGrant(ctx, runID); granted {
			return true
		}
		tok, found = a.usableToken(ctx, protocol.SortKeyRegistrationToken, runID)
		return found
	})
	if err != nil || !granted {
		return tok, nil, err
	}
	return protocol.RunnerToken{}, &grant, nil
}

// await calls look once a second until it finds what it waits for, up to
// the token wait; what names that in the error. It gives up early, with
// errRunChanged, when still reports that the run is no longer the one to
// wait for.
func (a *Agent) await(ctx context.Context, what string, still func(context.Context) bool, look func(context.Context) bool) error {
	deadline := a.d.Clock.Now().Add(a.interval(a.cfg.Intervals.TokenWait))
	for {
		if look(ctx) {
			return nil
		}
		if !a.d.Clock.Now().Before(deadline) {
			return fmt.Errorf("%w: no %s within %s: configure the provider's github block",
				errNoToken, what, protocol.FormatDuration(a.interval(a.cfg.Intervals.TokenWait)))
		}
		if still != nil && !still(ctx) {
			return errRunChanged
		}
		if err := a.d.Clock.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// usableToken is the token sk for runID and the agent's GitHub target,
// valid for another minute, if its partition holds one.
func (a *Agent) usableToken(ctx context.Context, sk, runID string) (protocol.RunnerToken, bool) {
	item, err := a.agentItem(ctx, sk)
	if err != nil {
		a.logf("%v", err)
		return protocol.RunnerToken{}, false
	}
	tok, err := protocol.RunnerTokenFromItem(item)
	if err != nil || tok.RunID != runID || !a.registersAt(tok.Target) {
		return protocol.RunnerToken{}, false
	}
	if !tok.ExpiresAt.After(a.d.Clock.Now().Add(time.Minute)) {
		a.logf("the %s token for run %s expired at %s", sk, runID, protocol.FormatTime(tok.ExpiresAt))
		return protocol.RunnerToken{}, false
	}
	return tok, true
}

// usableGrant is the registration grant for runID and a repository the
// agent registers at, valid for another minute, if its partition holds
// one: a grant for another run or target, planted or stale, is none.
func (a *Agent) usableGrant(ctx context.Context, runID string) (protocol.RegistrationGrant, bool) {
	item, err := a.agentItem(ctx, protocol.SortKeyRegistrationGrant)
	if err != nil {
		a.logf("%v", err)
		return protocol.RegistrationGrant{}, false
	}
	grant, err := protocol.RegistrationGrantFromItem(item)
	if err != nil || grant.RunID != runID || !a.registersAt(grant.Target) {
		return protocol.RegistrationGrant{}, false
	}
	if !grant.ExpiresAt.After(a.d.Clock.Now().Add(time.Minute)) {
		a.logf("the registration grant for run %s expired at %s", runID, protocol.FormatTime(grant.ExpiresAt))
		return protocol.RegistrationGrant{}, false
	}
	return grant, true
}

// registersAt tells whether a token's target is one the agent registers
// at: its own, or, when its own is an organization, one repository of it
// (a claim made through the pool's broker registers its runners with its
// repository alone, so that no other repository's jobs reach them).
func (a *Agent) registersAt(target string) bool {
	if target == a.cfg.GitHubTarget {
		return true
	}
	owner, _, isRepository := strings.Cut(target, "/")
	return isRepository && !strings.Contains(a.cfg.GitHubTarget, "/") && owner == a.cfg.GitHubTarget
}

// platform is the runner's name for this machine's architecture.
func platform() string { return protocol.RunnerPlatforms[runtime.GOARCH] }
