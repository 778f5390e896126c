package scripttest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Env is what the agents of one test talk to.
type Env struct {
	Endpoint string // the emulator's
	Region   string
	Proxy    *SigV4Proxy
	GitHub   *GitHub
	// Agent is the agent the user data installs: this repository's, built
	// for this machine as a release would build it, and served by the stub
	// GitHub as its release asset (AgentDownloadURL).
	Agent            agentscript.Release
	AgentDownloadURL string
}

// AgentVersion is the version of the agent the tests build.
const AgentVersion = "0.0.0-test"

// NewEnv starts the stub GitHub and the signature-checking proxy in front of
// the emulator at endpoint, and serves the agent.
func NewEnv(t testing.TB, endpoint, region string) *Env {
	binary, digest := BuildAgent(t)
	e := &Env{Endpoint: endpoint, Region: region, Proxy: NewSigV4Proxy(t, endpoint), GitHub: NewGitHub(t),
		Agent: agentscript.Release{Version: AgentVersion, SHA256: map[string]string{runtime.GOARCH: digest}}}
	e.AgentDownloadURL = e.GitHub.ServeAgent(AgentVersion, runtime.GOARCH, binary)
	return e
}

// Options renders the user data for this machine: the stub GitHub (its
// runner releases too), the agent it serves, short intervals and the
// signature-checking proxy. StartInstance chooses the runner user and the
// paths.
func (e *Env) Options(pool, owner, repository string) agentscript.Options {
	return agentscript.Options{
		Pool:              pool,
		Region:            e.Region,
		GitHubURL:         e.GitHub.URL,
		GitHubOwner:       owner,
		GitHubRepository:  repository,
		RunnerUser:        agentscript.DefaultRunnerUser,
		HeartbeatInterval: time.Second,
		Agent:             e.Agent,
		AgentDownloadURL:  e.AgentDownloadURL,
		Intervals: agent.Intervals{
			SelfCheck:            duration(time.Second),
			SelfTerminationGrace: duration(2 * time.Second),
			ClaimPoll:            duration(250 * time.Millisecond),
			ReleasePoll:          duration(500 * time.Millisecond),
			RunnerCheck:          duration(time.Second),
		},
		Endpoints:          agent.Endpoints{AWS: e.Proxy.URL},
		RunnerReleasesURL:  e.GitHub.RunnerReleasesURL(),
		RunnerDownloadBase: e.GitHub.RunnerDownloadBase(),
	}
}

func duration(d time.Duration) protocol.Duration { return protocol.Duration(d) }

var builds = struct {
	sync.Mutex
	done map[string]*build
}{done: map[string]*build{}}

type build struct {
	once   sync.Once
	binary []byte
	err    error
}

// buildBinary builds the command pkg of this module for this machine once
// per test process, as a release builds the agent (CGO_ENABLED=0,
// -trimpath, -s -w and the given -X settings), and returns it.
func buildBinary(t testing.TB, pkg string, xflags ...string) []byte {
	t.Helper()
	builds.Lock()
	b := builds.done[pkg]
	if b == nil {
		b = &build{}
		builds.done[pkg] = b
	}
	builds.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "ec2runners-build-")
		if err != nil {
			b.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "binary")
		ldflags := "-s -w"
		for _, x := range xflags {
			ldflags += " -X " + x
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "github.com/ec2runners/terraform-provider-ec2runners/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", pkg, err, stderr.String())
			return
		}
		b.binary, b.err = os.ReadFile(out)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.binary
}

// BuildAgent builds the agent as a release does, its version AgentVersion,
// and returns the binary and its SHA-256.
func BuildAgent(t testing.TB) (binary []byte, digest string) {
	binary = buildBinary(t, "internal/agent/cmd/ec2runners-agent", "main.version="+AgentVersion)
	sum := sha256.Sum256(binary)
	return binary, hex.EncodeToString(sum[:])
}

// BuildBroker builds the broker (ec2runners-broker) as a release does, for
// this machine, its version AgentVersion (a release's agent and broker are
// of one version), and returns the binary: the function lambdaworld runs.
func BuildBroker(t testing.TB) []byte {
	return buildBinary(t, "internal/broker/cmd/ec2runners-broker", "main.version="+AgentVersion)
}

// JobToolPath is where every instance stand-in has the hostile jobs' tool
// (package jobtool), for jobs to run.
const JobToolPath = "bin/jobtool"

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// emulatorEC2 reaches the emulator's EC2 with the tests' own credentials,
// whose calls awsrecord does not record.
func (e *Env) emulatorEC2() *ec2.Client {
	return ec2.New(ec2.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}
