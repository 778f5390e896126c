package agentscript

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var released = Release{Version: "1.2.3", SHA256: map[string]string{
	"amd64": strings.Repeat("ab", 32), "arm64": strings.Repeat("cd", 32),
}}

func validOptions() Options {
	return Options{
		Pool: "ci-runners", Region: "eu-west-1", GitHubURL: "https://github.com", GitHubOwner: "octo",
		GitHubRepository: "app", RunnerUser: "runner", HeartbeatInterval: DefaultHeartbeatInterval, Agent: released,
	}
}

func TestValidate_namesTheSetting(t *testing.T) {
	cases := map[string]func(*Options){
		"pool":                func(o *Options) { o.Pool = "bad name" },
		"region":              func(o *Options) { o.Region = "" },
		"github_url":          func(o *Options) { o.GitHubURL = "github.com" },
		"github_owner":        func(o *Options) { o.GitHubOwner = "-octo" },
		"github_repository":   func(o *Options) { o.GitHubRepository = "a/b" },
		"runner_version":      func(o *Options) { o.RunnerVersion = "latest" },
		"runner_download_url": func(o *Options) { o.RunnerVersion, o.RunnerDownloadURL = "2.331.0", "ftp://mirror/runner.tgz" },
		"runner_user":         func(o *Options) { o.RunnerUser = "Runner User" },
		"heartbeat_interval":  func(o *Options) { o.HeartbeatInterval = 30 * time.Second },
		"runner_sha256":       func(o *Options) { o.RunnerVersion, o.RunnerSHA256 = "2.331.0", "abc123" },
		"agent_download_url":  func(o *Options) { o.AgentDownloadURL = "http://mirror.internal/agent" },
		"broker_function":     func(o *Options) { o.BrokerFunction = "arn:aws:s3:::ci-runners-broker" },
	}
	for setting, breakIt := range cases {
		t.Run(setting, func(t *testing.T) {
			o := validOptions()
			breakIt(&o)
			_, err := Render(o)
			if err == nil || !strings.HasPrefix(err.Error(), setting+":") {
				t.Fatalf("Render error = %v, want one about %s", err, setting)
			}
		})
	}
	if _, err := Render(validOptions()); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// A pinned runner older than GitHub lets register, and a mirror or digest
// without the version they are of, are refused.
func TestValidate_pinnedRunner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"tooOld", func(o *Options) { o.RunnerVersion = "2.328.0" }, "runner_version: 2.328.0 is older than " + protocol.MinimumRunnerVersion},
		{"mirrorWithoutVersion", func(o *Options) { o.RunnerDownloadURL = "https://mirror.example.com/runner.tar.gz" }, "runner_download_url: needs runner_version"},
		{"digestWithoutVersion", func(o *Options) { o.RunnerSHA256 = strings.Repeat("ab", 32) }, "runner_sha256: needs runner_version"},
		{"pinned", func(o *Options) {
			o.RunnerVersion, o.RunnerDownloadURL, o.RunnerSHA256 = protocol.MinimumRunnerVersion, "https://mirror.example.com/r.tar.gz", strings.Repeat("AB", 32)
		}, ""},
	} {
		o := validOptions()
		tc.change(&o)
		err := o.Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// configOf is the agent configuration the user data writes.
func configOf(t *testing.T, userData string) agent.Config {
	t.Helper()
	_, rest, _ := strings.Cut(userData, "<<'EC2RUNNERS_AGENT_CONFIG'\n")
	body, _, found := strings.Cut(rest, "\nEC2RUNNERS_AGENT_CONFIG\n")
	if !found {
		t.Fatalf("no agent configuration in the user data:\n%s", userData)
	}
	cfg, err := agent.ParseConfig([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every setting reaches the agent as given, whatever it holds: the
// configuration is JSON in a quoted here-document.
func TestRender_settingsReachTheAgent(t *testing.T) {
	o := validOptions()
	o.PreRunnerScript = "#!/bin/sh\necho 'it''s' \"$HOME\" $(id -u) `date` \\\nEC2RUNNERS_AGENT_CONFIG\n\x01done\n"
	o.GitHubURL = "https://ghe.example.com/"
	o.RunnerVersion = "2.331.0"
	o.RunnerDownloadURL = "https://mirror.example.com/runner.tar.gz?a=1&b='2'"
	o.RunnerSHA256 = strings.Repeat("AB", 32)
	o.BrokerFunction = "arn:aws:lambda:eu-west-1:123456789012:function:ci-runners-broker:live"
	userData, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	got := configOf(t, userData)
	if got.Pool != "ci-runners" || got.GitHubURL != "https://ghe.example.com" || got.GitHubTarget != "octo/app" || got.BrokerFunction != o.BrokerFunction ||
		got.Runner.DownloadURL != o.RunnerDownloadURL || got.Runner.SHA256 != strings.Repeat("ab", 32) ||
		got.PreRunnerScript != o.PreRunnerScript || time.Duration(got.Intervals.Heartbeat) != 5*time.Second {
		t.Errorf("the agent's configuration = %+v", got)
	}
	o.GitHubRepository = ""
	userData, err = Render(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := configOf(t, userData).GitHubTarget; got != "octo" {
		t.Errorf("organization runners: target %q, want octo", got)
	}
}

// The bootstrap stays under 4 KB whatever the settings: every one at its
// longest, with a pre-runner script of a line.
func TestRender_bootstrapUnder4KB(t *testing.T) {
	long := func(prefix string) string { return prefix + strings.Repeat("a", MaxURLLength-len(prefix)) }
	o := validOptions()
	o.Pool = strings.Repeat("p", protocol.MaxPoolNameLength)
	o.Region = "ap-southeast-4"
	o.GitHubURL = long("https://ghe.example.com/")
	o.GitHubOwner, o.GitHubRepository = strings.Repeat("o", 39), strings.Repeat("r", 100)
	o.RunnerVersion, o.RunnerSHA256 = "2.331.0", strings.Repeat("ab", 32)
	o.RunnerDownloadURL = long("https://mirror.example.com/")
	o.AgentDownloadURL = long("https://mirror.example.com/")
	o.RunnerUser = strings.Repeat("u", 32)
	o.JobsMetadataAccess = true
	o.BrokerFunction = "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:" + strings.Repeat("f", 64) + ":" + strings.Repeat("v", 128)
	userData, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(userData) > MaxBootstrapBytes {
		t.Errorf("the bootstrap is %d bytes with every setting at its longest, want at most %d", len(userData), MaxBootstrapBytes)
	}
	if o.Validate() == nil {
		o.GitHubURL += "a"
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "github_url: 513 characters long") {
			t.Errorf("a URL past %d characters: %v", MaxURLLength, err)
		}
	}
}

// EC2 refuses user data over 16 KB: a pre-runner script that takes it
// there fails the data source, naming pre_runner_script; one that fits
// passes.
func TestRender_userDataLimit(t *testing.T) {
	o := validOptions()
	o.PreRunnerScript = strings.Repeat("echo fits\n", 1200)
	userData, err := Render(o)
	if err != nil || len(userData) > MaxUserDataBytes {
		t.Fatalf("a 12 KB pre-runner script: %d bytes, %v", len(userData), err)
	}
	o.PreRunnerScript = strings.Repeat("echo too long\n", 1200)
	_, err = Render(o)
	if err == nil || !strings.HasPrefix(err.Error(), "pre_runner_script: the user data would be") || !strings.Contains(err.Error(), "16384") {
		t.Fatalf("a 16 KB pre-runner script: %v, want an error naming pre_runner_script and EC2's limit", err)
	}
}

// The data source's largest user data, to the byte: a pre-runner script
// that brings it to exactly 16384 bytes renders; one byte more fails, naming
// pre_runner_script and both sizes.
func TestRender_userDataBoundary(t *testing.T) {
	o := validOptions()
	o.PreRunnerScript = "x"
	short, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	// Each further x is one more byte (the configuration's JSON keeps it).
	o.PreRunnerScript = strings.Repeat("x", 1+16384-len(short))
	userData, err := Render(o)
	if err != nil || len(userData) != 16384 {
		t.Fatalf("a pre-runner script of %d bytes: user data of %d bytes, %v; want exactly 16384, rendered", len(o.PreRunnerScript), len(userData), err)
	}
	o.PreRunnerScript += "x"
	_, err = Render(o)
	if err == nil || !strings.HasPrefix(err.Error(), "pre_runner_script: the user data would be 16385 bytes") || !strings.Contains(err.Error(), "at most 16384") {
		t.Fatalf("one byte more: %v, want an error naming pre_runner_script, 16385 bytes and the limit", err)
	}
}

// shellcheck is installed by .ci/run; a machine without it fails here.
func TestRender_passesShellcheck(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Fatal("shellcheck is not installed (apt-get install shellcheck)")
	}
	o := validOptions()
	o.PreRunnerScript = "dnf install -y git"
	userData, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user-data.sh")
	if err := os.WriteFile(path, []byte(userData), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("shellcheck", "--severity=style", "--shell=bash", path).CombinedOutput()
	if err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}

// The registration token, the runner and the agent travel over github_url,
// runner_download_url and agent_download_url: https, or plain http only to
// this machine.
func TestValidate_urlsNeedHTTPS(t *testing.T) {
	for _, tc := range []struct {
		setting, url, wantErr string // wantErr "": accepted
	}{
		{"github_url", "https://ghe.example.com", ""},
		{"github_url", "http://127.0.0.1:8080", ""},
		{"github_url", "http://localhost:8080", ""},
		{"github_url", "http://[::1]:8080", ""},
		{"github_url", "http://ghe.example.com", `github_url: "http://ghe.example.com" uses plain http://`},
		{"runner_download_url", "https://mirror.example.com/runner.tar.gz", ""},
		{"runner_download_url", "http://127.0.0.1:9000/runner.tar.gz", ""},
		{"runner_download_url", "http://mirror.internal/runner.tar.gz", `runner_download_url: "http://mirror.internal/runner.tar.gz" uses plain http://`},
		{"runner_download_url", "ftp://mirror/runner.tgz", "runner_download_url: \"ftp://mirror/runner.tgz\" is not an https:// URL"},
		{"agent_download_url", "https://mirror.example.com/ec2runners/v1.2.3", ""},
		{"agent_download_url", "http://mirror.internal/ec2runners", `agent_download_url: "http://mirror.internal/ec2runners" uses plain http://`},
	} {
		o := validOptions()
		switch tc.setting {
		case "github_url":
			o.GitHubURL = tc.url
		case "runner_download_url":
			o.RunnerVersion, o.RunnerDownloadURL = "2.331.0", tc.url
		default:
			o.AgentDownloadURL = tc.url
		}
		err := o.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s = %q: %v, want it accepted", tc.setting, tc.url, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s = %q: error %v, want one containing %q", tc.setting, tc.url, err, tc.wantErr)
		}
	}
}

// bootstrapWorld runs the rendered user data here, as an ordinary user:
// the agent's path and configuration below a temporary directory, and
// instead of the agent, a script that records how it was run.
type bootstrapWorld struct {
	dir, agentPath, configPath string
	fakeAgent                  []byte
	served                     int // downloads of the agent
	url                        string
}

func newBootstrapWorld(t *testing.T) *bootstrapWorld {
	w := &bootstrapWorld{dir: t.TempDir()}
	w.agentPath = filepath.Join(w.dir, "sbin", "ec2runners-agent")
	w.configPath = filepath.Join(w.dir, "etc", "ec2runners", "agent.json")
	w.fakeAgent = []byte("#!/bin/sh\nif [ \"$1\" = version ]; then echo 1.2.3; exit 0; fi\necho \"$@\" >" + filepath.Join(w.dir, "ran") + "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1.2.3/"+AssetName("1.2.3", runtime.GOARCH) {
			http.NotFound(rw, r)
			return
		}
		w.served++
		_, _ = rw.Write(w.fakeAgent)
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL + "/v1.2.3"
	return w
}

// run renders the user data with release and runs it with bash.
func (w *bootstrapWorld) run(t *testing.T, release Release) (string, error) {
	o := validOptions()
	o.Agent, o.AgentDownloadURL, o.AgentPath, o.ConfigPath = release, w.url, w.agentPath, w.configPath
	userData, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", userData).CombinedOutput()
	return string(out), err
}

func (w *bootstrapWorld) digest() string {
	sum := sha256.Sum256(w.fakeAgent)
	return hex.EncodeToString(sum[:])
}

// The bootstrap downloads the agent of its version, checks its digest,
// installs it root's alone, writes the configuration and runs "install";
// an agent of that version in the image is used as it is; a download that
// is not the release is refused and nothing runs.
func TestBootstrap_installsTheReleasedAgent(t *testing.T) {
	t.Run("download", func(t *testing.T) {
		w := newBootstrapWorld(t)
		out, err := w.run(t, Release{Version: "1.2.3", SHA256: map[string]string{runtime.GOARCH: w.digest()}})
		if err != nil {
			t.Fatalf("bootstrap: %v\n%s", err, out)
		}
		ran, _ := os.ReadFile(filepath.Join(w.dir, "ran"))
		if w.served != 1 || string(ran) != "install -config "+w.configPath+"\n" {
			t.Errorf("downloads %d, the agent ran with %q", w.served, ran)
		}
		if info, err := os.Stat(w.agentPath); err != nil || info.Mode().Perm() != 0o711 {
			t.Errorf("the agent: %v, %v; want mode 0711 (anyone may run it, as the agent runs it as the runner user to clear its keyrings; only root may read it)", info, err)
		}
		if info, err := os.Stat(w.configPath); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("the configuration: %v, %v; want mode 0600", info, err)
		}
	})
	t.Run("preinstalled", func(t *testing.T) {
		w := newBootstrapWorld(t)
		if err := os.MkdirAll(filepath.Dir(w.agentPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(w.agentPath, w.fakeAgent, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := w.run(t, Release{Version: "1.2.3"}) // a development build: no digest to download with
		ran, _ := os.ReadFile(filepath.Join(w.dir, "ran"))
		if err != nil || w.served != 0 || len(ran) == 0 {
			t.Errorf("bootstrap with the agent in the image: %v, %d downloads, ran %q\n%s", err, w.served, ran, out)
		}
	})
	t.Run("digestMismatch", func(t *testing.T) {
		w := newBootstrapWorld(t)
		out, err := w.run(t, Release{Version: "1.2.3", SHA256: map[string]string{runtime.GOARCH: strings.Repeat("0", 64)}})
		if err == nil || !strings.Contains(out, "is not the agent released as 1.2.3 (SHA-256 mismatch)") {
			t.Errorf("a download that is not the release: %v\n%s", err, out)
		}
		if _, err := os.Stat(w.agentPath); err == nil {
			t.Error("the agent was installed")
		}
		if _, err := os.Stat(filepath.Join(w.dir, "ran")); err == nil {
			t.Error("the agent ran")
		}
	})
	t.Run("developmentBuild", func(t *testing.T) {
		w := newBootstrapWorld(t)
		out, err := w.run(t, Release{Version: "dev"})
		if err == nil || !strings.Contains(out, "bake ec2runners-agent dev into the image") {
			t.Errorf("a development build without an agent in the image: %v\n%s", err, out)
		}
	})
}
