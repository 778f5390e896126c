package scripttest

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
)

// Env is what the agents of one test talk to.
type Env struct {
	Endpoint string // the emulator's
	Region   string
	Proxy    *SigV4Proxy
	GitHub   *GitHub
}

// NewEnv starts the stub GitHub and the signature-checking proxy in front of
// the emulator at endpoint.
func NewEnv(t testing.TB, endpoint, region string) *Env {
	return &Env{Endpoint: endpoint, Region: region, Proxy: NewSigV4Proxy(t, endpoint), GitHub: NewGitHub(t)}
}

// Options renders the script for this machine: the stub GitHub, short
// intervals, the test's own directories, the signature-checking proxy, and
// the current user as the runner user.
func (e *Env) Options(t testing.TB, pool, owner, repository string) agentscript.Options {
	dir := t.TempDir()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return agentscript.Options{
		Pool:                pool,
		Region:              e.Region,
		GitHubURL:           e.GitHub.URL,
		GitHubOwner:         owner,
		GitHubRepository:    repository,
		RunnerVersion:       agentscript.DefaultRunnerVersion,
		RunnerDownloadURL:   e.GitHub.RunnerDownloadURL(),
		RunnerUser:          u.Username,
		HeartbeatInterval:   time.Second,
		SelfCheckInterval:   time.Second,
		ClaimPollInterval:   250 * time.Millisecond,
		ReleasePollInterval: 500 * time.Millisecond,
		AWSEndpointURL:      e.Proxy.URL,
		RunnerDir:           filepath.Join(dir, "runner"),
		StateDir:            filepath.Join(dir, "state"),
		AgentPath:           filepath.Join(dir, "bin", "ec2runners-agent"),
		SystemdDir:          filepath.Join(dir, "systemd"),
	}
}

// Agent is the agent script running for one instance.
type Agent struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	dir  string // the runner directory
}

// StartAgent renders the script with o, points it at imds and runs "agent
// run" until the test ends (or it exits by itself).
func StartAgent(t testing.TB, o agentscript.Options, imds *IMDS) *Agent {
	o.IMDSURL = imds.URL
	script, err := agentscript.Render(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user-data.sh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	a := &Agent{out: &syncBuffer{}, done: make(chan struct{}), dir: o.RunnerDir}
	a.cmd = exec.Command("bash", path, "run")
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("agent output:\n%s", a.Output())
		}
	})
	return a
}

// Output is what the agent logged so far.
func (a *Agent) Output() string { return a.out.String() }

// Done is closed when the agent process has exited.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Stop ends the agent (SIGTERM, as systemd would) and its runner.
func (a *Agent) Stop() {
	select {
	case <-a.done:
	default:
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
			<-a.done
		}
	}
	// The runner has a session of its own: make sure nothing outlives the test.
	if b, err := os.ReadFile(filepath.Join(a.dir, "run.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
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

// Command runs a rendered script file with bash, as cloud-init would.
func Command(path string, args ...string) *exec.Cmd {
	return exec.Command("bash", append([]string{path}, args...)...)
}
