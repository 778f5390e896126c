package simulate

import (
	"context"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"strings"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ReplayAll replays each trace under each policy: the results by trace
// name, in the policies' order.
func ReplayAll(ctx context.Context, traces []Trace, policies []Policy, latency map[string]time.Duration) (map[string][]Result, error) {
	out := map[string][]Result{}
	for _, tr := range traces {
		for _, p := range policies {
			r, err := Replay(ctx, tr, p, latency)
			if err != nil {
				return nil, err
			}
			out[tr.Name] = append(out[tr.Name], r)
		}
	}
	return out, nil
}

// Table renders results as the guide's markdown table, the traces in
// order; policies are numbered as in the chart.
func Table(order []string, results map[string][]Result) string {
	var b strings.Builder
	b.WriteString("| trace | # | policy | time to runner p50 / p95 / p99 | p95 in its window (jobs) | runners from pool / stopped / fleet | hot idle hours | stopped hours | cost per 1000 jobs |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range order {
		for i, r := range results[name] {
			inWindow := "–"
			if r.InWindowJobs > 0 {
				inWindow = fmt.Sprintf("%s (%d)", seconds1(r.InWindowP95), r.InWindowJobs)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s / %s / %s | %s | %.0f%% / %.0f%% / %.0f%% | %.1f | %.1f | $%.2f |\n",
				r.Trace, i+1, r.Policy, seconds1(r.P50), seconds1(r.P95), seconds1(r.P99), inWindow,
				100*r.Share(SourcePool), 100*r.Share(SourceStopped), 100*r.Share(SourceFleet), r.IdleHours, r.StoppedHours, r.CostPer1000Jobs)
		}
	}
	return b.String()
}

func seconds1(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

// SweepTimeouts are the idle timeouts of the chart's hot-only line.
var SweepTimeouts = []time.Duration{time.Minute, 3 * time.Minute, 7 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// SweepPolicies are the hot-only policies of SweepTimeouts.
func SweepPolicies() []Policy {
	var out []Policy
	for _, idle := range SweepTimeouts {
		out = append(out, HotPolicy(idle))
	}
	return out
}

// Chart draws a row per trace of each policy's cost per 1000 jobs
// against, left, its p95 time to runner (the latency of one source, the
// axis's ticks) and, right, the share of its jobs that wait a cold boot
// (continuous: how near it is to the 5% under which the p95 leaves a cold
// boot). Policies are points numbered as in the table, over the line of
// the hot tier alone (sweep: SweepPolicies' results). The first row has
// the legends, where its points are not.
func Chart(w io.Writer, order []string, results, sweep map[string][]Result, latency map[string]time.Duration) error {
	var rows [][]*plot.Plot
	for i, name := range order {
		p95 := panel(name+": p95 time to runner", results[name], sweep[name], func(r Result) float64 { return r.P95.Seconds() })
		p95.Y.Scale = plot.LogScale{}
		p95.Y.Min, p95.Y.Max = 0.2, 200
		var ticks []plot.Tick
		for _, source := range Sources {
			ticks = append(ticks, plot.Tick{Value: latency[source].Seconds(), Label: fmt.Sprintf("%s (%s)", seconds1(latency[source]), source)})
		}
		p95.Y.Tick.Marker = plot.ConstantTicks(ticks)
		cold := panel(name+": jobs waiting a cold boot (%)", results[name], sweep[name], func(r Result) float64 { return 100 * r.Share(SourceFleet) })
		cold.Y.Min, cold.Y.Max = 0, 100
		fivePercent, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 5}, {X: cold.X.Max, Y: 5}})
		if err != nil {
			return err
		}
		fivePercent.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		cold.Add(fivePercent)
		if i == 0 {
			p95.Legend.Top = false
			cold.Legend.Top = true
			cold.Legend.Add("5%: the p95 is no cold boot below", fivePercent)
		} else {
			p95.Legend, cold.Legend = plot.NewLegend(), plot.NewLegend()
		}
		rows = append(rows, []*plot.Plot{p95, cold})
	}
	img := vgimg.New(26*vg.Centimeter, vg.Length(7*len(rows))*vg.Centimeter)
	tiles := draw.Tiles{Rows: len(rows), Cols: 2, PadX: 6 * vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i, row := range rows {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	return png.Encode(w, img.Image())
}

// panel plots y against the cost per 1000 jobs: the sweep's hot-only line,
// and the results as points numbered in order, their numbers alternating
// above and below (points of the same p95 often sit side by side).
func panel(title string, results, sweep []Result, y func(Result) float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "cost per 1000 jobs (USD)"
	p.X.Tick.Marker = wholeTicks{}
	p.X.Min = 0
	p.Add(plotter.NewGrid())
	var hot, points plotter.XYs
	for _, r := range sweep {
		hot = append(hot, plotter.XY{X: r.CostPer1000Jobs, Y: y(r)})
	}
	line, marks, _ := plotter.NewLinePoints(hot) // costs and times: finite values, the only error
	line.Color, marks.Color = color.Gray{Y: 140}, color.Gray{Y: 140}
	line.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
	p.Add(line, marks)
	labels := plotter.XYLabels{}
	for i, r := range results {
		points = append(points, plotter.XY{X: r.CostPer1000Jobs, Y: y(r)})
		labels.Labels = append(labels.Labels, fmt.Sprint(i+1))
	}
	labels.XYs = points
	scatter, _ := plotter.NewScatter(points)
	numbers, _ := plotter.NewLabels(labels)
	for i := range numbers.TextStyle {
		numbers.TextStyle[i].XAlign, numbers.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
		if i%2 == 1 {
			numbers.TextStyle[i].YAlign = draw.YTop
		}
	}
	p.Add(scatter, numbers)
	p.Legend.Add(fmt.Sprintf("hot only, idle %s to %s", protocol.FormatDuration(SweepTimeouts[0]), protocol.FormatDuration(SweepTimeouts[len(SweepTimeouts)-1])), line, marks)
	p.Legend.Add("policies, numbered as in the table", scatter)
	return p
}

// wholeTicks are plot's default ticks, labelled in whole numbers.
type wholeTicks struct{}

func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = fmt.Sprintf("%.0f", ticks[i].Value)
		}
	}
	return ticks
}
