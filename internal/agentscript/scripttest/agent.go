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

var built struct {
	once   sync.Once
	binary []byte
	digest string
	err    error
}

// BuildAgent builds the agent for this machine once per test process, as a
// release builds it (CGO_ENABLED=0, -trimpath, its version stamped), and
// returns the binary and its SHA-256.
func BuildAgent(t testing.TB) (binary []byte, digest string) {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "ec2runners-agent-build-")
		if err != nil {
			built.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "ec2runners-agent")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+AgentVersion, "-o", out,
			"github.com/ec2runners/terraform-provider-ec2runners/internal/agent/cmd/ec2runners-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			built.err = fmt.Errorf("building the agent: %v\n%s", err, stderr.String())
			return
		}
		if built.binary, built.err = os.ReadFile(out); built.err == nil {
			sum := sha256.Sum256(built.binary)
			built.digest = hex.EncodeToString(sum[:])
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.binary, built.digest
}

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
