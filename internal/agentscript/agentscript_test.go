package agentscript

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func validOptions() Options {
	return Options{
		Pool: "ci-runners", Region: "eu-west-1", GitHubURL: "https://github.com", GitHubOwner: "octo",
		GitHubRepository: "app", RunnerVersion: DefaultRunnerVersion, RunnerUser: "runner",
		HeartbeatInterval: DefaultHeartbeatInterval,
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
		"runner_download_url": func(o *Options) { o.RunnerDownloadURL = "ftp://mirror/runner.tgz" },
		"runner_user":         func(o *Options) { o.RunnerUser = "Runner User" },
		"heartbeat_interval":  func(o *Options) { o.HeartbeatInterval = 30 * time.Second },
		"runner_sha256":       func(o *Options) { o.RunnerSHA256 = "abc123" },
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

// settingsOf runs the rendered script's settings in bash and prints the named
// variables, the pre-runner script decoded.
func settingsOf(t *testing.T, script string, names ...string) map[string]string {
	t.Helper()
	header, _, _ := strings.Cut(script, "\n# The agent:")
	var print strings.Builder
	print.WriteString(header)
	for _, n := range names {
		print.WriteString("printf '%s=%s\\0' " + n + " \"$" + n + "\"\n")
	}
	print.WriteString("printf PRE_RUNNER=; printf %s \"$PRE_RUNNER_SCRIPT\" | base64 -d; printf '\\0'\n")
	out, err := exec.Command("bash", "-c", print.String()).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	return got
}

func TestRender_settingsSurviveQuoting(t *testing.T) {
	o := validOptions()
	o.PreRunnerScript = "#!/bin/sh\necho 'it''s' \"$HOME\" $(id -u) `date` \\\n\x01done\n"
	o.GitHubURL = "https://ghe.example.com/"
	o.RunnerDownloadURL = "https://mirror.example.com/runner.tar.gz?a=1&b='2'"
	script, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	got := settingsOf(t, script, "POOL", "GITHUB_URL", "GITHUB_TARGET", "RUNNER_DOWNLOAD_URL", "DYNAMODB_URL", "EC2_URL", "HEARTBEAT_INTERVAL", "CLAIM_POLL_INTERVAL")
	want := map[string]string{
		"POOL": "ci-runners", "GITHUB_URL": "https://ghe.example.com", "GITHUB_TARGET": "octo/app",
		"RUNNER_DOWNLOAD_URL": o.RunnerDownloadURL, "DYNAMODB_URL": "https://dynamodb.eu-west-1.amazonaws.com",
		"EC2_URL": "https://ec2.eu-west-1.amazonaws.com", "HEARTBEAT_INTERVAL": "5", "CLAIM_POLL_INTERVAL": "0.25",
		"PRE_RUNNER": o.PreRunnerScript,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestRender_organizationTarget(t *testing.T) {
	o := validOptions()
	o.GitHubRepository = ""
	script, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := settingsOf(t, script, "GITHUB_TARGET")["GITHUB_TARGET"]; got != "octo" {
		t.Fatalf("GITHUB_TARGET = %q, want octo", got)
	}
}

// shellcheck is installed by .ci/run; a machine without it fails here.
func TestRender_passesShellcheck(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Fatal("shellcheck is not installed (apt-get install shellcheck)")
	}
	o := validOptions()
	o.PreRunnerScript = "dnf install -y git"
	o.RunnerSHA256 = strings.Repeat("ab", 32)
	script, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user-data.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("shellcheck", "--severity=style", "--shell=bash", path).CombinedOutput()
	if err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}

// The registration token and the runner travel over github_url and
// runner_download_url: https, or plain http only to this machine.
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
	} {
		o := validOptions()
		if tc.setting == "github_url" {
			o.GitHubURL = tc.url
		} else {
			o.RunnerDownloadURL = tc.url
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

// RUNNER_SHA256 is what the agent checks the runner tarball against: the
// digest in lower case as sha256sum prints it, or "" for no check.
func TestRender_runnerSHA256(t *testing.T) {
	const digest = "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789ABCDEF"
	for _, tc := range []struct{ given, want string }{
		{"", ""},
		{digest, strings.ToLower(digest)},
	} {
		o := validOptions()
		o.RunnerSHA256 = tc.given
		script, err := Render(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := settingsOf(t, script, "RUNNER_SHA256")["RUNNER_SHA256"]; got != tc.want {
			t.Errorf("RunnerSHA256 %q: RUNNER_SHA256 = %q, want %q", tc.given, got, tc.want)
		}
	}
	for _, bad := range []string{"abc", digest + "0", digest[:63] + "g", " " + digest[1:], "sha256:" + digest[7:]} {
		o := validOptions()
		o.RunnerSHA256 = bad
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "runner_sha256:") || !strings.Contains(err.Error(), "64 hexadecimal digits") {
			t.Errorf("RunnerSHA256 %q: Validate = %v, want an error about runner_sha256", bad, err)
		}
	}
}
