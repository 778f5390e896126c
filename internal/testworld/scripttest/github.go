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
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// GitHub is a stub of GitHub: the REST API that issues registration and
// removal tokens (for the provider), makes just-in-time runners, reads
// and deletes a repository's runners (jit.go), and lists the runner's releases with their digests, tells whether a
// workflow run attempt has completed and lists its jobs (runs.go), lists
// an organization's runner groups and whom they admit (groups.go), the
// release archives of the runner and of the agent, and the service the
// stub runner's config.sh registers with and its run.sh takes jobs from (jobs.go), for
// the test's assertions. It enforces GitHub's rules (internal/github's
// limits.go): registration checks the token as GitHub would (issued here,
// for that repository or organization, of the right kind, not past its
// hour) and the runner's name (at most 64 characters) and labels (not
// empty) and the runner group (one the organization has, see
// AddRunnerGroup, matched case-insensitively; a repository has only the
// default group); a job goes only to a runner GitHub would send it to: one
// of its repository, or of its organization in a runner group its
// repository may use (GroupAccess, AddRepository), of the group runs-on
// names, with all of runs-on's labels, matched case-insensitively
// (jobs.go); an ephemeral runner (config.sh --ephemeral, or just in time)
// takes one job and is then removed; a job no runner takes within 24
// hours fails (jobs.go), and a run attempt's job that runs for more than 5
// days ends (runs.go); the REST API counts each credential's requests
// against its hourly rate limit and answers as GitHub does once it is
// spent. It enforces GitHub's runner version policy
// (protocol.RunnerPolicyAt): a runner older than
// protocol.MinimumRunnerVersion cannot register, and one older than the
// policy accepts at the moment it asks for a job is refused, as GitHub
// refuses its listener, so a test fails whenever an outdated runner would
// be handed out.
type GitHub struct {
	URL    string
	APIKey string // the credential the REST API accepts as Bearer token

	mu        sync.Mutex
	issued    map[string]issuedToken
	runners   map[string]*Runner // by name
	events    []string
	apiCalls  []string
	refuse    bool
	jobs      jobQueue
	releases  []*runnerRelease
	agents    map[string][]byte // agent release assets, by path below /ec2runners/releases/download/
	tamper    bool              // serve runner archives that are not what their digest says
	required  string            // the oldest runner accepted whatever the releases' dates ("": none)
	rateLimit int               // REST requests per credential and hour
	rate      map[string]*rateWindow
	groups    map[string][]*runnerGroup // runner groups by organization, besides the default group
	public    map[string]bool           // the repositories it knows (AddRepository, or a run's), public or not, by lower-case "owner/name"
	runs      map[runAttempt]string     // workflow run attempts' status (runs.go)
	runJobs   map[runAttempt][]*runJob  // the jobs of workflow run attempts (runs.go)
	jobIDs    int64                     // the last job id handed out
	// denyGroupReads: the credential lacks the organization permission
	// "Self-hosted runners" (groups.go).
	denyGroupReads bool
	runnerIDs      int64         // the last runner id handed out
	pollWait       time.Duration // how long a runner's poll waits for a job (jobPollWait)
	now            func() time.Time
}

// GroupAccess is which repositories of its organization may send jobs to
// the runners of a runner group, as the organization's settings say: "All
// repositories" or "Selected repositories", and "Allow public
// repositories", off by default ("By default, only private repositories
// can access runners in a runner group", GitHub's "Managing access to
// self-hosted runners using groups",
// https://docs.github.com/en/actions/how-tos/manage-runners/self-hosted-runners/manage-access).
// The zero GroupAccess is GitHub's default: all the organization's
// private repositories.
type GroupAccess struct {
	SelectedRepositories    []string // "owner/name"; empty: all repositories
	AllowPublicRepositories bool
}

// runnerGroup is a runner group an organization made (AddRunnerGroup).
type runnerGroup struct {
	id     int64
	name   string
	access GroupAccess
}

// defaultRunnerGroupID is the id of every organization's default group, as
// GitHub numbers it (the REST API's examples; runner_group_id 1 for a
// repository's just-in-time runners).
const defaultRunnerGroupID = 1

// rateWindow counts one credential's REST requests in the current hour.
type rateWindow struct {
	used  int
	reset time.Time
}

// runnerRelease is one release of the stub runner.
type runnerRelease struct {
	version   string
	published time.Time
	archive   []byte
	digest    string
}

type issuedToken struct {
	kind, target string
	expires      time.Time
}

// Runner is a runner registered with the stub.
type Runner struct {
	ID                   int64 // as the REST API numbers runners
	Name, Target, Labels string
	Group                string // the runner group it joined
	Version              string // the runner's, as it registered ("" for a just-in-time runner: the REST API registers it)
	Running              bool   // its run.sh is running
	// Ephemeral: it takes one job, then GitHub removes it (config.sh
	// --ephemeral, and every just-in-time runner).
	Ephemeral bool
	tookJob   bool // an ephemeral runner's one job is assigned
}

// Releases the stub starts with: one published 40 days ago and its
// successor 5 days ago, so that both are within GitHub's policy.
var (
	OlderRunnerVersion = "2.330.0"
	RunnerVersion      = "2.331.0"
)

// NewGitHub starts the stub.
func NewGitHub(t testing.TB) *GitHub {
	g := &GitHub{APIKey: "ghp_stub" + randomHex(8), issued: map[string]issuedToken{}, runners: map[string]*Runner{}, jobs: newJobQueue(),
		agents: map[string][]byte{}, rateLimit: github.TokenRateLimit, rate: map[string]*rateWindow{},
		groups: map[string][]*runnerGroup{}, public: map[string]bool{}, runs: map[runAttempt]string{}, runJobs: map[runAttempt][]*runJob{}, pollWait: jobPollWait, now: time.Now}
	g.PublishRunner(OlderRunnerVersion, time.Now().Add(-40*24*time.Hour))
	g.PublishRunner(RunnerVersion, time.Now().Add(-5*24*time.Hour))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /repos/{owner}/{repo}/actions/runners/{kind}", func(w http.ResponseWriter, r *http.Request) {
		g.issue(w, r, r.PathValue("owner")+"/"+r.PathValue("repo"), r.PathValue("kind"))
	})
	mux.HandleFunc("POST /orgs/{org}/actions/runners/{kind}", func(w http.ResponseWriter, r *http.Request) {
		g.issue(w, r, r.PathValue("org"), r.PathValue("kind"))
	})
	mux.HandleFunc("POST /repos/{owner}/{repo}/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		g.generateJITConfig(w, r, r.PathValue("owner")+"/"+r.PathValue("repo"))
	})
	mux.HandleFunc("POST /orgs/{org}/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		g.generateJITConfig(w, r, r.PathValue("org"))
	})
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		g.getRunner(w, r, r.PathValue("owner")+"/"+r.PathValue("repo"))
	})
	mux.HandleFunc("DELETE /repos/{owner}/{repo}/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		g.deleteRunner(w, r, r.PathValue("owner")+"/"+r.PathValue("repo"))
	})
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs", g.listRuns)
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs/{run}/attempts/{attempt}", g.getRunAttempt)
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs/{run}/attempts/{attempt}/jobs", g.listRunAttemptJobs)
	mux.HandleFunc("GET /repos/{owner}/{repo}", g.getRepository)
	mux.HandleFunc("GET /orgs/{org}/actions/runner-groups", g.listRunnerGroups)
	mux.HandleFunc("GET /orgs/{org}/actions/runner-groups/{id}/repositories", g.listRunnerGroupRepositories)
	mux.HandleFunc("POST /_stub/register", g.register)
	mux.HandleFunc("POST /_stub/remove", g.remove)
	mux.HandleFunc("POST /_stub/run", func(w http.ResponseWriter, r *http.Request) { g.setRunning(w, r, true) })
	mux.HandleFunc("POST /_stub/stop", func(w http.ResponseWriter, r *http.Request) { g.setRunning(w, r, false) })
	mux.HandleFunc("GET /_stub/job", g.nextJob)
	mux.HandleFunc("POST /_stub/job/result", g.jobResult)
	mux.HandleFunc("GET /repos/actions/runner/releases", g.listReleases)
	mux.HandleFunc("GET /repos/actions/runner/releases/latest", g.latestRelease)
	mux.HandleFunc("GET /actions/runner/releases/download/{tag}/{asset}", g.runnerArchive)
	mux.HandleFunc("GET /ec2runners/releases/download/{tag}/{asset}", g.agentAsset)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// RefuseRegistrations makes config.sh fail, as with a GitHub outage.
func (g *GitHub) RefuseRegistrations(refuse bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = refuse
}

// AddRunnerGroup makes a runner group of the organization, which runners
// may then join and which the repositories access lets send jobs to them;
// every organization has the default group, open to all its private
// repositories. It returns the group's id (runner_group_id).
func (g *GitHub) AddRunnerGroup(org, name string, access GroupAccess) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := defaultRunnerGroupID + 1 + int64(len(g.groups[org]))
	g.groups[org] = append(g.groups[org], &runnerGroup{id: id, name: name, access: access})
	return id
}

// AddRepository makes a repository ("owner/name") public or private; one
// a test never added is private.
func (g *GitHub) AddRepository(fullName string, public bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.public[strings.ToLower(fullName)] = public
}

// groupAccess is the access of org's runner group name (the default group
// for a name no group of org has); the caller holds g.mu.
func (g *GitHub) groupAccess(org, name string) GroupAccess {
	for _, group := range g.groups[org] {
		if protocol.SameRunnerGroup(group.name, name) {
			return group.access
		}
	}
	return GroupAccess{}
}

// runnerGroup is the name of target's runner group that name (config.sh's
// --runnergroup, "" for the default group) names, as config.sh looks it
// up: case-insensitively, among the organization's groups; a repository's
// runners have the default group alone.
func (g *GitHub) runnerGroup(target, name string) (string, error) {
	if name == "" || protocol.SameRunnerGroup(name, protocol.DefaultRunnerGroup) {
		return protocol.DefaultRunnerGroup, nil
	}
	if !strings.Contains(target, "/") {
		for _, group := range g.groups[target] {
			if protocol.SameRunnerGroup(group.name, name) {
				return group.name, nil
			}
		}
	}
	return "", fmt.Errorf("could not find any self-hosted runner group named %q", name)
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

// SetRateLimit sets how many REST requests a credential may make per hour
// (GitHub's primary rate limit; github.TokenRateLimit by default).
func (g *GitHub) SetRateLimit(perHour int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rateLimit = perHour
}

// rateLimited counts a REST request of the credential in authorization
// and, as GitHub does, tells the client where it stands in x-ratelimit-*
// headers; once the hour's requests are spent it answers 403 with
// x-ratelimit-remaining 0 and GitHub's message, and reports true.
func (g *GitHub) rateLimited(w http.ResponseWriter, authorization string) bool {
	g.mu.Lock()
	now := g.now()
	win := g.rate[authorization]
	if win == nil || !now.Before(win.reset) {
		win = &rateWindow{reset: now.Add(time.Hour).Truncate(time.Second)}
		g.rate[authorization] = win
	}
	spent := win.used >= g.rateLimit
	if !spent {
		win.used++
	}
	limit, used, reset := g.rateLimit, win.used, win.reset
	g.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(limit-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	if spent {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded for user ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
	}
	return spent
}

// authorized checks a REST request's credential and counts it against
// the rate limit, answering as GitHub does when either fails.
func (g *GitHub) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+g.APIKey {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return false
	}
	return !g.rateLimited(w, r.Header.Get("Authorization"))
}

func (g *GitHub) issue(w http.ResponseWriter, r *http.Request, target, kind string) {
	if !g.authorized(w, r) {
		return
	}
	if kind != "registration-token" && kind != "remove-token" {
		http.NotFound(w, r)
		return
	}
	prefix := map[string]string{"registration-token": "AREG", "remove-token": "AREM"}[kind]
	tok := issuedToken{kind: kind, target: target, expires: g.now().Add(github.TokenLifetime).Truncate(time.Second)}
	value := prefix + strings.ToUpper(randomHex(12))
	g.mu.Lock()
	g.issued[value] = tok
	g.apiCalls = append(g.apiCalls, kind+" "+target)
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]string{"token": value, "expires_at": tok.expires.Format(time.RFC3339)})
}

// register is what the stub config.sh calls: url, token, name, labels,
// runnergroup, ephemeral, version.
func (g *GitHub) register(w http.ResponseWriter, r *http.Request) {
	target := strings.Trim(strings.TrimPrefix(r.FormValue("url"), g.URL), "/")
	if err := g.registerRunner(target, r.FormValue("token"), r.FormValue("name"), r.FormValue("labels"), r.FormValue("runnergroup"),
		r.FormValue("version"), r.FormValue("ephemeral") == "1"); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
	}
}

// RegisterAgent registers the runner of reg as its config.sh would, with
// GitHub's checks: for agents whose machine registers nowhere (agentsim's),
// so that the stub knows their runners as the agent registered them. The
// target is the path of reg.URL, whatever its host.
func (g *GitHub) RegisterAgent(reg agent.Registration) error {
	u, err := url.Parse(reg.URL)
	if err != nil {
		return err
	}
	return g.registerRunner(strings.Trim(u.Path, "/"), reg.Token, reg.Name, reg.Label, reg.RunnerGroup, RunnerVersion, false)
}

// registerRunner registers a runner with target, or says why GitHub
// refuses it.
func (g *GitHub) registerRunner(target, token, name, labels, runnerGroup, version string, ephemeral bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.checkToken(token, "registration-token", target)
	var group string
	switch {
	case err != nil:
	case g.refuse:
		err = fmt.Errorf("registrations refused by the test")
	case protocol.CompareRunnerVersions(version, protocol.MinimumRunnerVersion) < 0:
		err = fmt.Errorf("runner version %q is older than %s, the oldest that may register", version, protocol.MinimumRunnerVersion)
	case name == "" || utf8.RuneCountInString(name) > github.MaxRunnerNameLength:
		err = fmt.Errorf("runner name %q must be 1 to %d characters", name, github.MaxRunnerNameLength)
	case slices.ContainsFunc(strings.Split(labels, ","), func(l string) bool { return strings.TrimSpace(l) == "" }):
		err = fmt.Errorf("labels %q hold an empty label", labels)
	default:
		group, err = g.runnerGroup(target, runnerGroup)
	}
	if err != nil {
		g.events = append(g.events, "refused register "+name+": "+err.Error())
		return err
	}
	g.runnerIDs++
	g.runners[name] = &Runner{ID: g.runnerIDs, Name: name, Target: target, Labels: labels, Group: group, Version: version, Ephemeral: ephemeral}
	g.events = append(g.events, "register "+name+" "+labels)
	return nil
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
	case g.now().After(tok.expires):
		return fmt.Errorf("token expired")
	}
	return nil
}

// IssueToken hands out a token directly, for tests that hand an instance
// its tokens themselves instead of through the provider.
func (g *GitHub) IssueToken(kind, target string) (string, time.Time) {
	value := "ATEST" + strings.ToUpper(randomHex(12))
	g.mu.Lock()
	defer g.mu.Unlock()
	expires := g.now().Add(github.TokenLifetime).Truncate(time.Second)
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

// The stub runner: config.sh and run.sh with the real ones' arguments
// (runnerArchive sets VERSION in each).
var (
	//go:embed stubrunner/config.sh
	configSh string
	//go:embed stubrunner/run.sh
	runSh string
)

// runnerArchive is the stub runner of version, as a release archive.
func runnerArchive(version string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, text string }{{"config.sh", configSh}, {"run.sh", runSh}} {
		text := strings.Replace(f.text, "\n", "\nVERSION='"+version+"'\n", 1)
		hdr := &tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(text)), ModTime: time.Unix(0, 0)}
		if tw.WriteHeader(hdr) != nil {
			panic("writing the stub runner's archive")
		}
		_, _ = tw.Write([]byte(text))
	}
	if tw.Close() != nil || gz.Close() != nil {
		panic("writing the stub runner's archive")
	}
	return buf.Bytes()
}
