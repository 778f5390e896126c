package actions

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/providermirror"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/tfcli"
)

// timingWrapper stands for terraform on PATH: it runs the real CLI and
// appends "<subcommand> <start> <end>" (seconds) to a log, so a benchmark
// can split a step into its Terraform invocations. It costs a bash start,
// a few milliseconds, per invocation.
const timingWrapper = `#!/usr/bin/env bash
start=$EPOCHREALTIME
"$BENCH_TERRAFORM" "$@"
status=$?
echo "$1 $start $EPOCHREALTIME" >>"$BENCH_TIMES"
exit $status
`

// BenchmarkClaimStep times the claim step's own work, init from a warm
// provider cache and apply, side by side: the claim action's script
// (.github/actions/lib/ec2runners.sh, as its claim step runs it) and the
// claim job of the workflow that applied examples/complete/claim with
// plain Terraform (init, apply, output), with the plugin cache warm
// ("example") and without one, as that workflow ran ("example-uncached":
// init unpacks the provider from a local mirror; a registry download
// would add its own time). Each claims two warm runners of a pool on the
// emulator, whose simulated agents answer at their next poll (every
// 250 ms); the release after each claim is not timed. Per claim of each
// variant it reports the seconds of each Terraform subcommand (init, apply,
// output; summed over its calls) and of the whole step (step), script and
// CLI starts included. ns/op is a round of all three variants' claims.
//
//	TF_ACC=1 go test ./internal/testworld/actions/ -run '^$' -bench ClaimStep -benchtime 5x
func BenchmarkClaimStep(b *testing.B) {
	requireAcceptance(b)
	tf := tfcli.Must(b)
	ctx := context.Background()
	endpoint, stop, err := emulator.Ensure(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		b.Setenv(k, v)
	}
	clients, err := awsconfig.New(ctx, awsconfig.Options{Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint}})
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	lt, subnets := poolLaunchTemplate(b, clients.EC2, name)
	sim := agentsim.New(agentsim.Clients{DynamoDB: clients.DynamoDB, EC2: clients.EC2, SQS: clients.SQS}, name, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond,
	})
	defer sim.Stop()
	sim.WatchFleet(ctx, nil)
	b.Cleanup(func() {
		_ = (&pool.Manager{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2}).Delete(context.Background(), name, true)
	})

	bin := b.TempDir()
	writeFile(b, filepath.Join(bin, "terraform"), timingWrapper)
	if err := os.Chmod(filepath.Join(bin, "terraform"), 0o755); err != nil {
		b.Fatal(err)
	}
	mirror, _ := providermirror.Build(b)
	times := filepath.Join(b.TempDir(), "times")
	env := map[string]string{
		"PATH":                  bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"BENCH_TERRAFORM":       tf,
		"BENCH_TIMES":           times,
		"AWS_ENDPOINT_URL":      endpoint,
		"AWS_REGION":            "us-east-1",
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
		"TF_CLI_CONFIG_FILE":    providermirror.CLIConfig(b, mirror),
		"CHECKPOINT_DISABLE":    "1",
		// What actions/cache restores in every claim job.
		"EC2RUNNERS_CACHE_DIR":        filepath.Join(b.TempDir(), "cache"),
		"EC2RUNNERS_POOL":             name,
		"EC2RUNNERS_PROVIDER_VERSION": providermirror.Version(b),
		"EC2RUNNERS_INSTANCE_COUNT":   "2",
		"EC2RUNNERS_MAX_RUNTIME":      "30m",
	}
	applyPool(b, tf, env, name, lt, subnets)

	runs := 0
	runID := func() string {
		runs++
		return strconv.Itoa(runs)
	}
	release := func(b *testing.B, run string) {
		j := newJob(b, env)
		j.env["GITHUB_RUN_ID"] = run
		j.env["EC2RUNNERS_RUN_ID"] = run + "-1"
		j.must("prepare", "release")
		j.must("release")
	}
	exampleCache := filepath.Join(b.TempDir(), "plugins")
	variants := []claimVariant{
		{"action", func(b *testing.B, run string) {
			j := newJob(b, env)
			j.env["GITHUB_RUN_ID"] = run
			j.must("prepare", "claim")
			j.must("claim")
		}},
		{"example", func(b *testing.B, run string) { claimAsExample(b, env, run, exampleCache) }},
		{"example-uncached", func(b *testing.B, run string) { claimAsExample(b, env, run, "") }},
	}
	// Untimed: the first claim launches the pool's two runners, and its
	// release leaves them warm; the first two fill the action's and the
	// example's provider caches.
	for _, v := range variants[:2] {
		run := runID()
		v.claim(b, run)
		release(b, run)
	}

	// Each round claims with every variant in turn, so that all see the
	// same load (the emulator may serve other tests too); in a
	// sub-benchmark, so that the setup above runs once (Go runs it with
	// b.N=1 first, then with the -benchtime count).
	b.Run("rounds", func(b *testing.B) { claimRounds(b, variants, runID, release, times) })
}

// claimRounds claims with each variant in turn, b.N rounds, releasing
// each claim untimed, and reports the seconds per claim of each variant's
// Terraform subcommands and whole step.
func claimRounds(b *testing.B, variants []claimVariant, runID func() string, release func(*testing.B, string), times string) {
	step := map[string]time.Duration{}
	sums := map[string]float64{}
	for i := 0; i < b.N; i++ {
		for _, v := range variants {
			run := runID()
			if err := os.Remove(times); err != nil && !os.IsNotExist(err) {
				b.Fatal(err)
			}
			start := time.Now()
			v.claim(b, run)
			step[v.name] += time.Since(start)
			for cmd, s := range invocationSeconds(b, times) {
				sums[v.name+"-"+cmd] += s
			}
			b.StopTimer()
			release(b, run)
			b.StartTimer()
		}
	}
	for _, v := range variants {
		for _, cmd := range []string{"init", "apply", "output"} {
			b.ReportMetric(sums[v.name+"-"+cmd]/float64(b.N), v.name+"-"+cmd+"-s/op")
		}
		b.ReportMetric(step[v.name].Seconds()/float64(b.N), v.name+"-step-s/op")
	}
}

// claimVariant is one way of running the claim step, for a run id.
type claimVariant struct {
	name  string
	claim func(b *testing.B, run string)
}

// claimAsExample runs the claim job's step of the workflow that applied
// examples/complete/claim (its checkout a fresh copy): init, apply, output,
// as it ran them, with TF_PLUGIN_CACHE_DIR set to cache when cache is not
// empty.
func claimAsExample(b *testing.B, env map[string]string, run, cache string) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "claim")
	copyDir(b, filepath.Join(repoRoot, "examples", "complete", "claim"), dir)
	vars := map[string]string{
		"TF_IN_AUTOMATION": "1", "TF_INPUT": "0",
		"TF_VAR_pool": env["EC2RUNNERS_POOL"], "TF_VAR_run_id": run + "-1", "TF_VAR_instance_count": "2", "TF_VAR_resource_class": "large",
	}
	if cache != "" {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			b.Fatal(err)
		}
		vars["TF_PLUGIN_CACHE_DIR"] = cache
	}
	script := `set -e
terraform init
terraform apply -auto-approve
echo "label=$(terraform output -raw runs_on)"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for _, m := range []map[string]string{env, vars} {
		for k, v := range m {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("the example's claim step: %v\n%s", err, out)
	}
	b.Logf("the example's claim step:\n%s", indent(string(out)))
}

// invocationSeconds reads the timing wrapper's log: seconds per subcommand.
func invocationSeconds(b *testing.B, path string) map[string]float64 {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sums := map[string]float64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) != 3 {
			b.Fatalf("timing line %q: want subcommand, start and end", s.Text())
		}
		start, err1 := strconv.ParseFloat(fields[1], 64)
		end, err2 := strconv.ParseFloat(fields[2], 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("timing line %q: %v %v", s.Text(), err1, err2)
		}
		sums[fields[0]] += end - start
	}
	return sums
}

// Assumed download models for BenchmarkCLISetup (no measured figure is
// published for either): releases.hashicorp.com from a hosted runner,
// 100 ms before each file's first byte (a TLS connection to the CDN) and
// 40 MB/s; actions/cache's restore of an entry, 300 ms (the cache
// service's lookup, then the entry's storage) and 100 MB/s (the storage is
// in GitHub's own cloud).
var (
	releasesDownload = netModel{latency: 100 * time.Millisecond, bandwidth: 40e6}
	cacheRestore     = netModel{latency: 300 * time.Millisecond, bandwidth: 100e6}
)

// BenchmarkCLISetup times the claim action's setup of the CLI on a runner
// without one: its prepare step, then its cli step, with the Terraform on
// PATH zipped and served as its release by a local server standing in for
// releases.hashicorp.com (SHA256SUMS signed by the test's key), under the
// assumed download models above. Two variants:
//
//   - download: the cache empty, so every run downloads the release, as
//     setup-terraform does in every job (and as the first run on a branch
//     with no cache, nor one on the default branch, does);
//   - cache-hit: actions/cache restores the cache entry (a tar of the
//     release's files, fetched from the local server under the cache
//     model), then the steps check the files and unpack the CLI.
//
// Per run of each it reports the seconds of the whole setup (setup-s),
// of the cache restore alone (restore-s) and the MB downloaded from the
// releases (release-MB) and from the cache (cache-MB).
//
//	go test ./internal/testworld/actions/ -run '^$' -bench CLISetup -benchtime 5x
func BenchmarkCLISetup(b *testing.B) {
	tf := tfcli.Must(b)
	out, err := exec.Command(tf, "version").Output()
	if err != nil {
		b.Fatal(err)
	}
	version := strings.TrimPrefix(strings.Fields(string(out))[1], "v")
	binary, err := os.ReadFile(tf)
	if err != nil {
		b.Fatal(err)
	}
	key := newSigningKey(b)
	lib := libWithKey(b, key.armoredPublic)
	rel := newReleaseFiles(b, "terraform", version, binary, &key)
	releases := newReleasesServer(b, releasesDownload)
	releases.serve("/terraform/"+version+"/", rel)
	b.Logf("terraform %s: its zip is %.1f MB", version, float64(len(rel.zip))/1e6)

	cacheDir := filepath.Join(b.TempDir(), "cache")
	env := map[string]string{
		"PATH": noCLIPath(b), "EC2RUNNERS_POOL": "ci-runners", "EC2RUNNERS_PROVIDER_VERSION": "1.2.3",
		"EC2RUNNERS_CACHE_DIR": cacheDir, "EC2RUNNERS_CLI_VERSION": version,
		"EC2RUNNERS_TERRAFORM_RELEASES_URL": releases.URL,
	}
	setup := func(b *testing.B) {
		j := newJob(b, env)
		j.script = filepath.Join(lib, "ec2runners.sh")
		j.must("prepare", "claim")
		outs := j.outputs()
		j.env["EC2RUNNERS_CLI_VERSION"] = outs["cli-version"]
		j.env["EC2RUNNERS_CLI_DIR"] = outs["cli-dir"]
		j.must("cli")
	}
	emptyCache := func(b *testing.B) {
		if err := os.RemoveAll(cacheDir + "-cli"); err != nil {
			b.Fatal(err)
		}
	}

	// The cache entry the first run saves, as actions/cache would.
	emptyCache(b)
	setup(b)
	entry := tarDir(b, cacheDir+"-cli")
	cache := newReleasesServer(b, cacheRestore)
	cache.serve("/", releaseFiles{zipName: "entry.tar", zip: entry})
	b.Logf("the cache entry is %.1f MB", float64(len(entry))/1e6)

	b.Run("download", func(b *testing.B) {
		releases.reset()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			emptyCache(b)
			b.StartTimer()
			setup(b)
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "setup-s/op")
		b.ReportMetric(float64(releases.bytesSent())/1e6/float64(b.N), "release-MB/op")
		b.ReportMetric(0, "cache-MB/op")
	})
	b.Run("cache-hit", func(b *testing.B) {
		releases.reset()
		cache.reset()
		var restore time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			emptyCache(b)
			b.StartTimer()
			start := time.Now()
			restoreEntry(b, cache.URL+"/entry.tar", cacheDir+"-cli")
			restore += time.Since(start)
			setup(b)
		}
		if len(releases.requests()) != 0 {
			b.Fatalf("a cache hit asked the releases for %v", releases.requests())
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "setup-s/op")
		b.ReportMetric(restore.Seconds()/float64(b.N), "restore-s/op")
		b.ReportMetric(float64(releases.bytesSent())/1e6/float64(b.N), "release-MB/op")
		b.ReportMetric(float64(cache.bytesSent())/1e6/float64(b.N), "cache-MB/op")
	})
}

// tarDir packs a directory's regular files, as a cache entry.
func tarDir(b *testing.B, dir string) []byte {
	b.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// restoreEntry downloads a cache entry and unpacks it into dir, as
// actions/cache restores one.
func restoreEntry(b *testing.B, url, dir string) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	tr := tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
