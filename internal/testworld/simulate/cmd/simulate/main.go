// Command simulate replays CI traffic through the pool's policies with the
// real claim code on in-memory AWS fakes and a virtual clock
// (internal/testworld/simulate), and writes the guide's tables and chart. `make
// simulate` runs it with its defaults, then `make docs`.
//
// To replay your own traces (JSON lines, see internal/testworld/simulate/trace.go):
//
//	go run ./internal/testworld/simulate/cmd/simulate -guide '' -chart my.png -trace mon.jsonl -trace sat.jsonl
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/simulate"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var traceFiles files
	guide := flag.String("guide", "templates/guides/simulate.md.tmpl", "guide template whose generated parts to rewrite ('' for none)")
	chart := flag.String("chart", "templates/guides/simulate.png", "PNG chart to write ('' for none)")
	writeTraces := flag.String("write-traces", "", "directory to write the generated traces to, as trace files")
	coldBoot := flag.Duration("cold-boot", simulate.ColdBoot, "a fleet runner's time to runner")
	stoppedStart := flag.Duration("stopped-start", simulate.StoppedStart, "a stopped runner's time to runner")
	seed := flag.Uint64("seed", simulate.Seed, "seed of the generated traces")
	flag.Var(&traceFiles, "trace", "trace file to replay instead of the generated traces (repeatable)")
	flag.Parse()
	if err := run(*guide, *chart, *writeTraces, simulate.LatencyBySource(*coldBoot, *stoppedStart), *seed, traceFiles); err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(1)
	}
}

func run(guide, chart, writeTraces string, latency map[string]time.Duration, seed uint64, traceFiles []string) error {
	traces, err := loadTraces(traceFiles, seed)
	if err != nil {
		return err
	}
	if writeTraces != "" {
		for _, t := range traces {
			var buf bytes.Buffer
			if err := t.Write(&buf); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(writeTraces, t.Name+".jsonl"), buf.Bytes(), 0o644); err != nil {
				return err
			}
		}
	}
	ctx := context.Background()
	var names []string
	for _, t := range traces {
		names = append(names, t.Name)
	}
	results, err := simulate.ReplayAll(ctx, traces, simulate.Policies(), latency)
	if err != nil {
		return err
	}
	table := simulate.Table(names, results)
	fmt.Print(table)
	if chart != "" {
		sweep, err := simulate.ReplayAll(ctx, traces, simulate.SweepPolicies(), latency)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := simulate.Chart(&buf, names, results, sweep, latency); err != nil {
			return err
		}
		if err := os.WriteFile(chart, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if guide == "" {
		return nil
	}
	tmpl, err := os.ReadFile(guide)
	if err != nil {
		return err
	}
	out, err := simulate.FillGuide(string(tmpl), map[string]string{
		"results": table, "model": simulate.ModelTable(latency), "traces": simulate.TraceTable(traces),
	})
	if err != nil {
		return fmt.Errorf("%s: %w", guide, err)
	}
	return os.WriteFile(guide, []byte(out), 0o644)
}

func loadTraces(paths []string, seed uint64) ([]simulate.Trace, error) {
	if len(paths) == 0 {
		var out []simulate.Trace
		for _, p := range simulate.Profiles() {
			out = append(out, simulate.Generate(p, seed))
		}
		return out, nil
	}
	var out []simulate.Trace
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		t, err := simulate.ReadTrace(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
