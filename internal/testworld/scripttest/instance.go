package scripttest

import (
	"cmp"
	_ "embed"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/sys/unix"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent/linux"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// Instance is a stand-in for one EC2 instance that runs the rendered user
// data the way EC2 does: as root, with bash and no argument, as cloud-init
// would, so that the script installs itself and starts its systemd unit
// (through the stand-in's own systemctl, a minimal systemd). It runs in
// namespaces of its own: a PID namespace (its init is PID 1, and ps, pkill
// and /proc show only its processes), a mount namespace (a /proc of its own,
// and a private /tmp and /dev/shm) and a network namespace in which
// 169.254.169.254 (and fd00:ec2::254) serve the instance metadata, IMDSv2
// only, and the stub GitHub and the SigV4 proxy are at their host URLs. What
// the agent does as root (users, pkill, remounting /proc, iptables) stays
// inside, but for the runner user: /etc/passwd and the rest of the file
// system are the host's, so the user gets a name of its own per instance,
// and the harness deletes it afterwards.
//
// It stops and starts as an EC2 instance does (power.go): once the
// emulator has stopped it at its agent's request, every process ends, and
// so do its network namespace (the firewall rules with it) and mounts; its
// disk stays (Root, the runner user and its home). When the emulator says
// it runs again (StartInstances, from a test or a claim), it boots again:
// init starts the enabled units, and does not run the user data again.
type Instance struct {
	ID         string
	RunnerUser string              // unique to the instance: the script creates it, the harness deletes it
	Root       string              // the instance's own files on the host; the paths of Options are below it
	Options    agentscript.Options // as rendered into the user data
	Metadata   Metadata

	ec2     *ec2.Client // the emulator's, whose state of the instance the stand-in follows
	reach   []string    // the test's own URLs the instance reaches
	bootLog *syncBuffer
	events  *os.File
	ended   chan struct{} // the test is over: the instance never boots again

	mu       sync.Mutex
	up       *boot // nil while stopped
	boots    int
	userData *int // the user data's exit status, once it exited
	endOnce  sync.Once
}

// AgentUnit is the systemd unit the user data installs.
const AgentUnit = "ec2runners-agent.service"

// InstanceConfig is what EC2 knows of an instance, and what its image holds.
type InstanceConfig struct {
	InstanceID       string            // required: the instance in the emulator
	Tags             map[string]string // instance metadata tags, such as InitialRunId
	AccountID        string            // "": the emulator's, from STS GetCallerIdentity, as the pool records it
	AvailabilityZone string            // "": the region's first
	// PreinstalledAgent is an agent binary baked into the image at the
	// agent's path (nil: the image has none).
	PreinstalledAgent []byte
	// RunnerDir moves the runner installations ("": below the instance's
	// /opt), e.g. to another file system than the runner user's home.
	RunnerDir string
	// Reach are more URLs on this machine's loopback the instance reaches
	// (a test's own servers), beside the emulator's and the stub GitHub's.
	Reach []string
	// Overlay makes a world-writable directory of the instance's own
	// (/tmp, /dev/shm or /run/lock; "": none) an overlay without xino whose
	// layers are on two file systems, a tmpfs below the instance's disk, out
	// of sight as a live image's are: its files report their layer's
	// st_dev, not the overlay's.
	Overlay string
}

var (
	//go:embed instance/init.sh
	initSh string
	//go:embed instance/systemctl
	systemctlSh string
)

// The tools the harness runs, and their Debian packages (.ci/run installs them).
var instanceTools = [][2]string{
	{"ip", "iproute2"}, {"unshare", "util-linux"}, {"nsenter", "util-linux"}, {"runuser", "util-linux"},
	{"useradd", "passwd"}, {"userdel", "passwd"}, {"pkill", "procps"},
}

// StartInstance boots an instance stand-in for c.InstanceID whose user data
// is the script rendered with o, but for what the instance decides: its
// runner user, its file layout (below Root, laid out as on an EC2 image)
// and the metadata service at EC2's address. It fails the test at once when
// not run as root. Everything it made goes at the test's end, even when the
// test failed.
func (e *Env) StartInstance(t testing.TB, o agentscript.Options, c InstanceConfig) *Instance {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal(errNotRoot)
	}
	for _, tool := range instanceTools {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Fatalf("the instance stand-in needs %s (Debian package %s; .ci/run installs it)", tool[0], tool[1])
		}
	}
	if c.InstanceID == "" {
		t.Fatal("StartInstance: no InstanceID")
	}
	md, err := e.metadata(c)
	if err != nil {
		t.Fatal(err)
	}
	i := &Instance{ID: c.InstanceID, RunnerUser: "rn" + randomHex(5), Metadata: md, ec2: e.emulatorEC2(),
		bootLog: &syncBuffer{}, ended: make(chan struct{})}
	t.Cleanup(func() { i.cleanup(t) })
	e.Proxy.attach(i)
	if err := i.start(t, o, c); err != nil {
		t.Fatalf("starting the instance stand-in: %v\nits boot log:\n%s", err, i.BootLog())
	}
	return i
}

func (i *Instance) start(t testing.TB, o agentscript.Options, c InstanceConfig) error {
	// Not below /tmp: the instance has a /tmp of its own.
	root, err := os.MkdirTemp("/var/tmp", "ec2runners-instance-")
	if err != nil {
		return err
	}
	i.Root = root
	if err := i.layout(c.Overlay); err != nil {
		return err
	}
	o.RunnerUser = i.RunnerUser
	o.Paths = agent.Paths{RunnerDir: cmp.Or(c.RunnerDir, i.path("opt/ec2runners/runner")), StateDir: i.path("var/lib/ec2runners")}
	o.AgentPath = i.path("usr/local/sbin/ec2runners-agent")
	o.ConfigPath = i.path("etc/ec2runners/agent.json")
	o.SystemdDir = i.path("etc/systemd/system")
	o.Endpoints.IMDS = "" // EC2's own
	i.Options = o
	i.reach = c.Reach
	if err := os.WriteFile(i.path(JobToolPath), buildBinary(t, "internal/testworld/scripttest/jobtool"), 0o755); err != nil {
		return err
	}
	if c.PreinstalledAgent != nil {
		if err := os.WriteFile(o.AgentPath, c.PreinstalledAgent, 0o755); err != nil {
			return err
		}
	}
	userData, err := agentscript.Render(o)
	if err != nil {
		return err
	}
	// cloud-init keeps the user data root's alone.
	if err := os.WriteFile(i.path("var/lib/cloud/user-data"), []byte(userData), 0o700); err != nil {
		return err
	}
	// Read-write: opening never waits for a writer, and reading never ends
	// in EOF while the instance's processes come and go, over all its boots.
	if i.events, err = os.OpenFile(i.path("run/events"), os.O_RDWR, 0); err != nil {
		return err
	}
	go i.readEvents()
	return i.powerOn()
}

// layout makes Root look like the file system of an EC2 image where the
// agent puts its files: these directories exist, root's and world-readable,
// the agent's own ones do not yet; init mounts overlay (InstanceConfig) at
// every boot.
func (i *Instance) layout(overlay string) error {
	if err := os.Chmod(i.Root, 0o755); err != nil {
		return err
	}
	for _, dir := range []string{"bin", "opt", "run", "usr/local/sbin", "etc/systemd/system", "var/lib/cloud", "var/log/journal"} {
		if err := os.MkdirAll(i.path(dir), 0o755); err != nil {
			return err
		}
	}
	// The harness's scripts learn the instance's directory from a line
	// after their #!.
	withRoot := func(script string) []byte {
		return []byte(strings.Replace(script, "\n", "\nROOT='"+i.Root+"'\n", 1))
	}
	if err := os.WriteFile(i.path("bin/systemctl"), withRoot(systemctlSh), 0o755); err != nil {
		return err
	}
	initWithOverlay := strings.Replace(initSh, "\n", "\nOVERLAY='"+overlay+"'\n", 1)
	if err := os.WriteFile(i.path("run/init"), withRoot(initWithOverlay), 0o700); err != nil {
		return err
	}
	return unix.Mkfifo(i.path("run/events"), 0o600)
}

func (i *Instance) path(rel string) string { return filepath.Join(i.Root, rel) }

// loopbackAddrs are the host:port of the URLs on this machine's loopback,
// which the instance reaches through forwarders; it reaches no other.
func loopbackAddrs(urls ...string) []string {
	var out []string
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Port() == "" {
			continue
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback() || ip.To4() == nil) {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", u.Port())
		if !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// cgroupDir is the instance's cgroup on this machine: the root of the
// instance's cgroup namespace, whose subtree its systemctl and agent make.
func (i *Instance) cgroupDir() (string, error) {
	mount, err := linux.Cgroup2Mount()
	if err != nil {
		return "", err
	}
	return filepath.Join(mount, "ec2runners-stand-in", i.ID+"-"+filepath.Base(i.Root)), nil
}

// cgroup makes the instance's cgroup and opens it, to start its init in.
func (i *Instance) cgroup() (*os.File, error) {
	dir, err := i.cgroupDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.Open(dir)
}

// removeCgroup removes the instance's cgroup and those below it, once
// their processes are gone.
func (i *Instance) removeCgroup() error {
	dir, err := i.cgroupDir()
	if err != nil {
		return err
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	slices.Reverse(dirs) // the deepest first
	return await.Poll(await.Patience, func() error {
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}
