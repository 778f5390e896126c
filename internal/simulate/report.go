package simulate

import (
	"context"
	"fmt"
	"image/png"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Table renders results as the guide's markdown table.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| trace | policy | jobs | time to runner p50 / p95 / p99 | runners from pool / fleet | idle instance-hours (in the pool) | instance-hours (busy) | cost per 1000 jobs |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %d | %s / %s / %s | %.0f%% / %.0f%% | %.1f | %.1f (%.1f) | $%.2f |\n",
			r.Trace, r.Policy, r.Jobs, seconds1(r.P50), seconds1(r.P95), seconds1(r.P99),
			100*r.Share(SourcePool), 100*r.Share(SourceFleet), r.IdleHours, r.InstanceHours, r.BusyHours, r.CostPer1000Jobs)
	}
	return b.String()
}

func seconds1(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

// SweepTimeouts are the idle timeouts the chart covers.
var SweepTimeouts = []time.Duration{
	time.Minute, 2 * time.Minute, 3 * time.Minute, 5 * time.Minute, 7 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	20 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour, 90 * time.Minute, 2 * time.Hour,
}

// Sweep replays each trace under the hot policy of each idle timeout.
func Sweep(ctx context.Context, traces []Trace, timeouts []time.Duration, latency map[string]time.Duration) (map[string][]Result, error) {
	out := map[string][]Result{}
	for _, tr := range traces {
		for _, idle := range timeouts {
			r, err := Replay(ctx, tr, HotPolicy(idle), latency)
			if err != nil {
				return nil, err
			}
			out[tr.Name] = append(out[tr.Name], r)
		}
	}
	return out, nil
}

// Chart draws the sweep, one line per trace against idle_timeout: above,
// the share of jobs that wait a cold boot; below, the cost per 1000 jobs.
func Chart(w io.Writer, order []string, sweep map[string][]Result, timeouts []time.Duration) error {
	cold, cost := plot.New(), plot.New()
	cold.Title.Text = "Jobs that wait a cold boot"
	cold.Y.Label.Text = "% of jobs"
	cost.Title.Text = "Cost per 1000 jobs (EC2 on-demand and EBS, us-east-1)"
	cost.Y.Label.Text = "USD"
	var ticks []plot.Tick
	for _, m := range []float64{0, 15, 30, 45, 60, 75, 90, 105, 120} {
		ticks = append(ticks, plot.Tick{Value: m, Label: fmt.Sprint(m)})
	}
	for _, p := range []*plot.Plot{cold, cost} {
		p.X.Label.Text = "idle_timeout (minutes)"
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.Y.Min = 0, 0
		p.Add(plotter.NewGrid())
	}
	// Where the lines are not: right of the start of the cold shares,
	// left of the costs' rise.
	cold.Legend.Top, cold.Legend.YOffs = true, -vg.Centimeter
	cost.Legend.Top, cost.Legend.Left = true, true
	cold.Y.Max = 100
	var coldLines, costLines []any
	for _, name := range order {
		var c, d plotter.XYs
		for i, r := range sweep[name] {
			x := timeouts[i].Minutes()
			c = append(c, plotter.XY{X: x, Y: 100 * r.Share(SourceFleet)})
			d = append(d, plotter.XY{X: x, Y: r.CostPer1000Jobs})
		}
		coldLines = append(coldLines, name, c)
		costLines = append(costLines, name, d)
	}
	if err := plotutil.AddLinePoints(cold, coldLines...); err != nil {
		return err
	}
	// Below 5% of jobs waiting a cold boot, the p95 is a hot claim.
	p95, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 5}, {X: timeouts[len(timeouts)-1].Minutes(), Y: 5}})
	if err != nil {
		return err
	}
	p95.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	cold.Add(p95)
	cold.Legend.Add("5%: p95 hot below", p95)
	if err := plotutil.AddLinePoints(cost, costLines...); err != nil {
		return err
	}
	img := vgimg.New(16*vg.Centimeter, 20*vg.Centimeter)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: 6 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	plots := [][]*plot.Plot{{cold}, {cost}}
	canvases := plot.Align(plots, tiles, dc)
	cold.Draw(canvases[0][0])
	cost.Draw(canvases[1][0])
	return png.Encode(w, img.Image())
}
