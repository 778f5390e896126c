package actions

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"gopkg.in/yaml.v3"
)

// TestActions_cli runs the claim action's prepare and cli steps on a runner
// without Terraform, against a local server that stands in for
// releases.hashicorp.com (EC2RUNNERS_TERRAFORM_RELEASES_URL) and serves a
// stand-in terraform, its SHA256SUMS and their signature by a key of the
// test's, which replaces HashiCorp's in a copy of the actions' lib
// directory. It shows: a cold cache (the release downloaded, checked and
// kept in the cache directory, the CLI on PATH for the next steps); a warm
// one (no request to the server); a runner with that version on PATH (no
// install, no cache); a cache entry whose zip was replaced (refused, then
// downloaded anew); a tampered zip and a SHA256SUMS not signed by the key
// (refused, saying why, and nothing left to cache); an unknown version
// (refused, naming cli-version); and OpenTofu from its GitHub releases
// (no signature).
func TestActions_cli(t *testing.T) {
	key := newSigningKey(t)
	lib := libWithKey(t, key.armoredPublic)
	const version = "1.15.9"
	rel := newReleaseFiles(t, "terraform", version, standInCLI("Terraform", version), &key)
	srv := newReleasesServer(t, noDelay)
	srv.serve("/terraform/"+version+"/", rel)
	noCLI := noCLIPath(t)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	cliDir := cacheDir + "-cli/terraform_" + version + "_linux_amd64"

	// setup runs the claim action's prepare step and, when it asks for
	// the CLI, its cli step, as a job on a fresh runner; it returns the
	// job, prepare's outputs and what the cli step said (and its error).
	setup := func(t *testing.T, more map[string]string) (*job, map[string]string, string, error) {
		t.Helper()
		j := newJob(t, map[string]string{
			"PATH": noCLI, "EC2RUNNERS_POOL": "ci-runners", "EC2RUNNERS_PROVIDER_VERSION": "1.2.3",
			"EC2RUNNERS_CACHE_DIR":              cacheDir,
			"EC2RUNNERS_TERRAFORM_RELEASES_URL": srv.URL,
		})
		j.script = filepath.Join(lib, "ec2runners.sh")
		for k, v := range more {
			j.env[k] = v
		}
		j.must("prepare", "claim")
		out := j.outputs()
		if out["cli-cache-key"] == "" {
			return j, out, "", nil
		}
		j.env["EC2RUNNERS_CLI_VERSION"] = out["cli-version"]
		j.env["EC2RUNNERS_CLI_DIR"] = out["cli-dir"]
		said, err := j.run("cli")
		return j, out, said, err
	}
	// installed runs terraform version as a later step of the job would.
	installed := func(t *testing.T, j *job) string {
		t.Helper()
		out, err := j.nextStep("terraform", "version").CombinedOutput()
		if err != nil {
			t.Fatalf("terraform on the next step's PATH: %v\n%s", err, out)
		}
		return string(out)
	}

	t.Run("cold cache: downloaded, checked, cached", func(t *testing.T) {
		srv.reset()
		j, out, said, err := setup(t, nil)
		if err != nil {
			t.Fatalf("cli step: %v\n%s", err, said)
		}
		if out["cli-version"] != version || out["cli-dir"] != cliDir || out["cli-cache-key"] != "ec2runners-cli-terraform_"+version+"_linux_amd64" {
			t.Errorf("prepare outputs %v, want the default Terraform %s, its cache directory %s and key", out, version, cliDir)
		}
		if got := srv.requests(); len(got) != 3 {
			t.Errorf("requests %v, want SHA256SUMS, its signature and the zip", got)
		}
		for _, f := range []string{rel.zipName, rel.sumsName, rel.sigName} {
			if _, err := os.Stat(filepath.Join(cliDir, f)); err != nil {
				t.Errorf("the cache directory lacks %s: %v", f, err)
			}
		}
		if v := installed(t, j); !strings.Contains(v, "Terraform v"+version) {
			t.Errorf("terraform version says %q", v)
		}
	})

	t.Run("warm cache: no request", func(t *testing.T) {
		srv.reset()
		j, _, said, err := setup(t, nil)
		if err != nil {
			t.Fatalf("cli step: %v\n%s", err, said)
		}
		if got := srv.requests(); len(got) != 0 {
			t.Errorf("a warm cache made requests %v, want none", got)
		}
		if !strings.Contains(said, "from the cache") {
			t.Errorf("the cli step did not say it used the cache:\n%s", said)
		}
		installed(t, j)
	})

	t.Run("the version on PATH: no install", func(t *testing.T) {
		bin := t.TempDir()
		writeExecutable(t, filepath.Join(bin, "terraform"), standInCLI("Terraform", version))
		_, out, _, _ := setup(t, map[string]string{"PATH": bin + string(os.PathListSeparator) + noCLI, "EC2RUNNERS_CLI_VERSION": version})
		if out["cli-cache-key"] != "" {
			t.Errorf("with terraform %s on PATH prepare asks for it: %v", version, out)
		}
		_, out, _, _ = setup(t, map[string]string{"PATH": bin + string(os.PathListSeparator) + noCLI, "EC2RUNNERS_CLI_VERSION": "1.11.4"})
		if out["cli-cache-key"] != "ec2runners-cli-terraform_1.11.4_linux_amd64" {
			t.Errorf("cli-version 1.11.4 with %s on PATH: outputs %v, want the 1.11.4 cache key", version, out)
		}
	})

	t.Run("a cache entry with another zip: refused, downloaded anew", func(t *testing.T) {
		writeFile(t, filepath.Join(cliDir, rel.zipName), "not the release")
		srv.reset()
		j, _, said, err := setup(t, nil)
		if err != nil {
			t.Fatalf("cli step: %v\n%s", err, said)
		}
		if !strings.Contains(said, "the cached terraform "+version+" failed its check") || len(srv.requests()) != 3 {
			t.Errorf("the cli step made requests %v and said:\n%s\nwant the cached zip refused and the release downloaded", srv.requests(), said)
		}
		installed(t, j)
	})

	for _, c := range []struct {
		name    string
		tamper  func(f releaseFiles) releaseFiles
		refused string
	}{
		{"a tampered zip", func(f releaseFiles) releaseFiles {
			f.zip = append(bytes.Clone(f.zip), 0)
			return f
		}, "has SHA-256 "},
		{"a SHA256SUMS not signed by the key", func(f releaseFiles) releaseFiles {
			evil := standInCLI("Terraform", "6.6.6")
			f.zip = evil
			f.sums = []byte(fmt.Sprintf("%x  %s\n", sha256.Sum256(evil), f.zipName))
			return f
		}, "is not signed by HashiCorp's key"},
	} {
		t.Run(c.name+": refused", func(t *testing.T) {
			if err := os.RemoveAll(cacheDir + "-cli"); err != nil {
				t.Fatal(err)
			}
			srv.serve("/terraform/"+version+"/", c.tamper(rel))
			defer srv.serve("/terraform/"+version+"/", rel)
			_, _, said, err := setup(t, nil)
			if err == nil || !strings.Contains(said, "terraform "+version+" from "+srv.URL+"/terraform/"+version+" refused: ") || !strings.Contains(said, c.refused) {
				t.Fatalf("cli step: %v, want it refused saying %q:\n%s", err, c.refused, said)
			}
			if entries, _ := os.ReadDir(cliDir); len(entries) != 0 {
				t.Errorf("the refused release stays in the cache directory, for actions/cache to save: %v", entries)
			}
		})
	}

	t.Run("an unknown version: refused", func(t *testing.T) {
		_, _, said, err := setup(t, map[string]string{"EC2RUNNERS_CLI_VERSION": "1.99.0"})
		if err == nil || !strings.Contains(said, "is 1.99.0 a release of terraform? (cli-version)") {
			t.Fatalf("cli-version 1.99.0: %v, want a failure naming cli-version:\n%s", err, said)
		}
	})

	t.Run("a version that is not exact: refused", func(t *testing.T) {
		for _, v := range []string{"latest", "~> 1.15", "1.15"} {
			j := newJob(t, map[string]string{"PATH": noCLI, "EC2RUNNERS_POOL": "ci-runners", "EC2RUNNERS_CLI_VERSION": v})
			if out, err := j.run("prepare", "claim"); err == nil || !strings.Contains(out, "give an exact version, such as "+version) {
				t.Errorf("cli-version %q: %v, want a failure asking for an exact version:\n%s", v, err, out)
			}
		}
	})

	t.Run("OpenTofu: from its GitHub releases", func(t *testing.T) {
		const tofuVersion = "1.10.6"
		srv.serve("/v"+tofuVersion+"/", newReleaseFiles(t, "tofu", tofuVersion, standInCLI("OpenTofu", tofuVersion), nil))
		srv.reset()
		j, out, said, err := setup(t, map[string]string{"EC2RUNNERS_CLI": "tofu", "EC2RUNNERS_TOFU_RELEASES_URL": srv.URL})
		if err != nil {
			t.Fatalf("cli step: %v\n%s", err, said)
		}
		if out["cli-version"] != tofuVersion || len(srv.requests()) != 2 {
			t.Errorf("prepare outputs %v, requests %v: want OpenTofu %s, its SHA256SUMS and zip", out, srv.requests(), tofuVersion)
		}
		if v, err := j.nextStep("tofu", "version").CombinedOutput(); err != nil || !strings.Contains(string(v), "OpenTofu v"+tofuVersion) {
			t.Errorf("tofu version: %v %s", err, v)
		}
	})
}

// TestActions_cliDefaultIsTested checks that the Terraform the actions
// install by default is one the repository's CI runs the tests with, and
// the one their cli-version inputs name.
func TestActions_cliDefaultIsTested(t *testing.T) {
	j := newJob(t, map[string]string{"PATH": noCLIPath(t), "EC2RUNNERS_POOL": "ci-runners"})
	j.must("prepare", "claim")
	def := j.outputs()["cli-version"]
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "workflows", "test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if def == "" || !strings.Contains(string(data), fmt.Sprintf("terraform_version: %q", def)) {
		t.Errorf("the actions install Terraform %q by default, which .github/workflows/test.yml does not test with", def)
	}
	for _, action := range []string{"claim", "release"} {
		var meta struct {
			Inputs map[string]struct {
				Description string `yaml:"description"`
			} `yaml:"inputs"`
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "actions", action, "action.yml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &meta); err != nil {
			t.Fatal(err)
		}
		if desc := meta.Inputs["cli-version"].Description; !strings.Contains(desc, "Terraform "+def) {
			t.Errorf("the %s action's cli-version input does not name the default, Terraform %s: %q", action, def, desc)
		}
	}
}

// nextStep is a command of a later step of the job: its PATH begins with
// what the job's steps appended to GITHUB_PATH, the last first, as the
// runner prepends them.
func (j *job) nextStep(name string, args ...string) *exec.Cmd {
	j.t.Helper()
	data, err := os.ReadFile(j.env["GITHUB_PATH"])
	if err != nil {
		j.t.Fatalf("no step added to GITHUB_PATH: %v", err)
	}
	path := j.env["PATH"]
	for _, dir := range strings.Fields(string(data)) {
		path = dir + string(os.PathListSeparator) + path
	}
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, name); isExecutable(p) {
			cmd := exec.Command(p, args...)
			cmd.Env = []string{"PATH=" + path}
			return cmd
		}
	}
	j.t.Fatalf("no %s on the next step's PATH %s", name, path)
	return nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// noCLIPath is a PATH with the tools the script uses (bash, curl, unzip,
// GnuPG, coreutils) and neither terraform nor tofu: a hosted runner's.
func noCLIPath(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range []string{"bash", "curl", "unzip", "gpg", "gpgv", "awk", "grep", "sha256sum", "cut", "mkdir", "mktemp", "rm", "dirname", "date", "tr", "uname", "cat", "cp", "head"} {
		path := toolPath(t, tool, "the actions' script uses it")
		if err := os.Symlink(path, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// standInCLI is a script that answers `version` as the CLI of name and
// version does, in place of its binary.
func standInCLI(name, version string) []byte {
	return []byte(fmt.Sprintf("#!/bin/sh\necho '%s v%s'\necho 'on linux_amd64'\n", name, version))
}

func writeExecutable(t testing.TB, path string, content []byte) {
	t.Helper()
	writeFile(t, path, string(content))
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// signingKey stands in for HashiCorp's release key.
type signingKey struct {
	entity        *openpgp.Entity
	armoredPublic string
}

func newSigningKey(t testing.TB) signingKey {
	t.Helper()
	e, err := openpgp.NewEntity("ec2runners test releases", "", "releases@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return signingKey{entity: e, armoredPublic: buf.String()}
}

// libWithKey copies the actions' lib directory with armoredKey in place of
// HashiCorp's key, and returns the copy's directory.
func libWithKey(t testing.TB, armoredKey string) string {
	t.Helper()
	dir := t.TempDir()
	copyDir(t, filepath.Join(repoRoot, ".github", "actions", "lib"), dir)
	writeFile(t, filepath.Join(dir, "hashicorp.asc"), armoredKey)
	return dir
}

// releaseFiles are a CLI release's files for linux_amd64, named as
// releases.hashicorp.com and OpenTofu's GitHub releases name them.
type releaseFiles struct {
	zipName, sumsName, sigName string
	zip, sums, sig             []byte
}

// newReleaseFiles packs binary as cli's release of version, lists its
// SHA-256 in SHA256SUMS and, with a key, signs that as HashiCorp does.
func newReleaseFiles(t testing.TB, cli, version string, binary []byte, key *signingKey) releaseFiles {
	t.Helper()
	f := releaseFiles{
		zipName:  fmt.Sprintf("%s_%s_linux_amd64.zip", cli, version),
		sumsName: fmt.Sprintf("%s_%s_SHA256SUMS", cli, version),
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	h := &zip.FileHeader{Name: cli, Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(binary); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.zip = zbuf.Bytes()
	f.sums = []byte(fmt.Sprintf("%x  %s\n%x  %s_%s_darwin_arm64.zip\n", sha256.Sum256(f.zip), f.zipName, sha256.Sum256([]byte("other")), cli, version))
	if key != nil {
		f.sigName = f.sumsName + ".72D7468F.sig"
		var sig bytes.Buffer
		if err := openpgp.DetachSign(&sig, key.entity, bytes.NewReader(f.sums), nil); err != nil {
			t.Fatal(err)
		}
		f.sig = sig.Bytes()
	}
	return f
}

// netModel is a download's cost: a delay before each response's first
// byte, and a bandwidth (bytes per second, 0 for unlimited).
type netModel struct {
	latency   time.Duration
	bandwidth float64
}

var noDelay = netModel{}

// releasesServer serves release files under their directories' paths and
// records the requests and the bytes it sent.
type releasesServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	log   []string
	sent  int64
}

func newReleasesServer(t testing.TB, model netModel) *releasesServer {
	t.Helper()
	s := &releasesServer{files: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		data, ok := s.files[r.URL.Path]
		s.log = append(s.log, r.URL.Path)
		s.mu.Unlock()
		time.Sleep(model.latency)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		n, _ := throttledCopy(w, bytes.NewReader(data), model.bandwidth)
		s.mu.Lock()
		s.sent += n
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

// serve puts a release's files under dir (such as /terraform/1.15.9/).
func (s *releasesServer) serve(dir string, f releaseFiles) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, data := range map[string][]byte{f.zipName: f.zip, f.sumsName: f.sums, f.sigName: f.sig} {
		if name != "" {
			s.files[dir+name] = data
		}
	}
}

func (s *releasesServer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.sent = nil, 0
}

func (s *releasesServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *releasesServer) bytesSent() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// throttledCopy copies at most bandwidth bytes per second (unlimited at
// 0), in chunks.
func throttledCopy(w io.Writer, r io.Reader, bandwidth float64) (int64, error) {
	if bandwidth <= 0 {
		return io.Copy(w, r)
	}
	start := time.Now()
	var n int64
	buf := make([]byte, 64<<10)
	for {
		m, err := r.Read(buf)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
			if ahead := time.Duration(float64(n)/bandwidth*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
