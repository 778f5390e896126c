package scripttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// GitHub is a stub of GitHub: the REST API that issues registration and
// removal tokens (for the provider), the runner tarball (for the agent), and
// the service the stub runner's config.sh registers with and its run.sh
// takes jobs from (jobs.go), for the test's assertions. Registration checks
// the token as GitHub would: issued here, for that repository or
// organization, of the right kind, not expired.
type GitHub struct {
	URL    string
	APIKey string // the credential the REST API accepts as Bearer token

	mu       sync.Mutex
	issued   map[string]issuedToken
	runners  map[string]*Runner // by name
	events   []string
	apiCalls []string
	refuse   bool
	jobs     jobQueue
}

type issuedToken struct {
	kind, target string
	expires      time.Time
}

// Runner is a runner registered with the stub.
type Runner struct {
	Name, Target, Labels string
	Running              bool // its run.sh is running
}

// NewGitHub starts the stub.
func NewGitHub(t testing.TB) *GitHub {
	g := &GitHub{APIKey: "ghp_stub" + randomHex(8), issued: map[string]issuedToken{}, runners: map[string]*Runner{}, jobs: newJobQueue()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /repos/{owner}/{repo}/actions/runners/{kind}", func(w http.ResponseWriter, r *http.Request) {
		g.issue(w, r, r.PathValue("owner")+"/"+r.PathValue("repo"), r.PathValue("kind"))
	})
	mux.HandleFunc("POST /orgs/{org}/actions/runners/{kind}", func(w http.ResponseWriter, r *http.Request) {
		g.issue(w, r, r.PathValue("org"), r.PathValue("kind"))
	})
	mux.HandleFunc("POST /_stub/register", g.register)
	mux.HandleFunc("POST /_stub/remove", g.remove)
	mux.HandleFunc("POST /_stub/run", func(w http.ResponseWriter, r *http.Request) { g.setRunning(w, r, true) })
	mux.HandleFunc("POST /_stub/stop", func(w http.ResponseWriter, r *http.Request) { g.setRunning(w, r, false) })
	mux.HandleFunc("GET /_stub/job", g.nextJob)
	mux.HandleFunc("POST /_stub/job/result", g.jobResult)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	tarball := runnerTarball(t, srv.URL)
	mux.HandleFunc("GET /runner.tar.gz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tarball) })
	return g
}

// RunnerDownloadURL is where the agent downloads the stub runner from.
func (g *GitHub) RunnerDownloadURL() string { return g.URL + "/runner.tar.gz" }

// RefuseRegistrations makes config.sh fail, as with a GitHub outage.
func (g *GitHub) RefuseRegistrations(refuse bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = refuse
}

// Runners are the registered runners.
func (g *GitHub) Runners() map[string]Runner {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]Runner{}
	for k, r := range g.runners {
		out[k] = *r
	}
	return out
}

// Events lists what happened, in order: "register <name> <labels>",
// "run <name>", "stop <name>", "remove <name>", "refused ...".
func (g *GitHub) Events() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.events...)
}

// APICalls lists the REST API calls, as "<kind> <target>".
func (g *GitHub) APICalls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.apiCalls...)
}

// IssuedTokens lists every token value the API handed out.
func (g *GitHub) IssuedTokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for v := range g.issued {
		out = append(out, v)
	}
	return out
}

func (g *GitHub) issue(w http.ResponseWriter, r *http.Request, target, kind string) {
	if r.Header.Get("Authorization") != "Bearer "+g.APIKey {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	if kind != "registration-token" && kind != "remove-token" {
		http.NotFound(w, r)
		return
	}
	prefix := map[string]string{"registration-token": "AREG", "remove-token": "AREM"}[kind]
	tok := issuedToken{kind: kind, target: target, expires: time.Now().Add(time.Hour).Truncate(time.Second)}
	value := prefix + strings.ToUpper(randomHex(12))
	g.mu.Lock()
	g.issued[value] = tok
	g.apiCalls = append(g.apiCalls, kind+" "+target)
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]string{"token": value, "expires_at": tok.expires.Format(time.RFC3339)})
}

// register is what the stub config.sh calls: url, token, name, labels.
func (g *GitHub) register(w http.ResponseWriter, r *http.Request) {
	target := strings.Trim(strings.TrimPrefix(r.FormValue("url"), g.URL), "/")
	name, labels := r.FormValue("name"), r.FormValue("labels")
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.checkToken(r.FormValue("token"), "registration-token", target); err != nil || g.refuse {
		if err == nil {
			err = fmt.Errorf("registrations refused by the test")
		}
		g.events = append(g.events, "refused register "+name+": "+err.Error())
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	g.runners[name] = &Runner{Name: name, Target: target, Labels: labels}
	g.events = append(g.events, "register "+name+" "+labels)
}

func (g *GitHub) remove(w http.ResponseWriter, r *http.Request) {
	name := r.FormValue("name")
	g.mu.Lock()
	defer g.mu.Unlock()
	runner, ok := g.runners[name]
	if !ok {
		http.Error(w, "no runner "+name, http.StatusNotFound)
		return
	}
	if err := g.checkToken(r.FormValue("token"), "remove-token", runner.Target); err != nil {
		g.events = append(g.events, "refused remove "+name+": "+err.Error())
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	delete(g.runners, name)
	g.events = append(g.events, "remove "+name)
}

func (g *GitHub) setRunning(w http.ResponseWriter, r *http.Request, running bool) {
	name := r.FormValue("name")
	g.mu.Lock()
	defer g.mu.Unlock()
	if runner, ok := g.runners[name]; ok {
		runner.Running = running
	}
	g.events = append(g.events, map[bool]string{true: "run ", false: "stop "}[running]+name)
}

func (g *GitHub) checkToken(value, kind, target string) error {
	tok, ok := g.issued[value]
	switch {
	case !ok:
		return fmt.Errorf("unknown token")
	case tok.kind != kind:
		return fmt.Errorf("a %s where a %s is needed", tok.kind, kind)
	case tok.target != target:
		return fmt.Errorf("token issued for %s, not %s", tok.target, target)
	case time.Now().After(tok.expires):
		return fmt.Errorf("token expired")
	}
	return nil
}

// IssueToken hands out a token directly, for tests that hand an instance
// its tokens themselves instead of through the provider.
func (g *GitHub) IssueToken(kind, target string) (string, time.Time) {
	value := "ATEST" + strings.ToUpper(randomHex(12))
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.issued[value] = issuedToken{kind: kind, target: target, expires: expires}
	return value, expires
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The stub runner: config.sh and run.sh with the real ones' arguments,
// reporting to the stub GitHub (runnerTarball sets STUB in each).
var (
	//go:embed stubrunner/config.sh
	configSh string
	//go:embed stubrunner/run.sh
	runSh string
)

func runnerTarball(t testing.TB, stubURL string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, text := range map[string]string{"config.sh": configSh, "run.sh": runSh} {
		text = strings.Replace(text, "\n", "\nSTUB='"+stubURL+"'\n", 1)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(text)), ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
