package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/simulate"
)

// A user's trace file replays into a chart, and the generated traces can
// be written out as such files.
func TestRunReplaysTraceFiles(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "mine.jsonl")
	lines := `{"at":"2026-06-01T08:00:00Z","class":"large","job_seconds":[300]}
{"at":"2026-06-01T08:07:00Z","class":"xlarge","job_seconds":[60,120]}
`
	if err := os.WriteFile(trace, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "mine.png")
	if err := run("", chart, dir, simulate.LatencyBySource(simulate.ColdBoot, simulate.StoppedStart), simulate.Seed, []string{trace}); err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(f)); err != nil {
		t.Errorf("the chart is no PNG: %v", err)
	}
	written, err := os.ReadFile(filepath.Join(dir, "mine.jsonl"))
	if err != nil || !strings.Contains(string(written), `"job_seconds":[60,120]`) {
		t.Errorf("trace written back: %q, %v", written, err)
	}
}

// make simulate reproduces the guide: replaying the generated traces under
// the guide's policies fills the template's generated parts with what is
// committed. After changing the model, the policies, the traces or the
// claim code, run `make simulate` and commit the guide it writes.
func TestGuideIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every trace under every policy (about 30 s)")
	}
	const template = "../../../../../templates/guides/simulate.md.tmpl"
	committed, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	guide := filepath.Join(t.TempDir(), "simulate.md.tmpl")
	if err := os.WriteFile(guide, committed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(guide, "", "", simulate.LatencyBySource(simulate.ColdBoot, simulate.StoppedStart), simulate.Seed, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(committed) {
		t.Errorf("%s is not what make simulate writes now; run make simulate and commit the result", template)
	}
}
