package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// scalingPoint is the work measure of both systems at one concurrency,
// every repetition's figure.
type scalingPoint struct {
	workers       int
	errand, river []float64 // jobs/s
}

// parseConcurrency reads -concurrency: a comma-separated list of positive
// worker counts.
func parseConcurrency(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-concurrency %q: give positive worker counts separated by commas, e.g. 1,10,100", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// measureScaling runs the work measure of both systems at every
// concurrency: in each repetition, every point in turn, the two systems
// back to back on fresh databases, alternating which goes first.
func measureScaling(ctx context.Context, e *env, jobs, reps int, concurrency []int) ([]scalingPoint, error) {
	points := make([]scalingPoint, len(concurrency))
	for i, n := range concurrency {
		points[i].workers = n
	}
	for rep := range reps {
		for i, n := range concurrency {
			e.workers = n
			order := []string{"errand", "river"}
			if (rep+i)%2 == 1 {
				order = []string{"river", "errand"}
			}
			for _, sys := range order {
				f := workErrand
				if sys == "river" {
					f = workRiver
				}
				r, err := f(ctx, e, jobs)
				if err != nil {
					return nil, fmt.Errorf("work at concurrency %d, %s: %w", n, sys, err)
				}
				if sys == "errand" {
					points[i].errand = append(points[i].errand, r.perSec)
				} else {
					points[i].river = append(points[i].river, r.perSec)
				}
				fmt.Fprintf(os.Stderr, "  rep %d  concurrency %-5d %-6s %s\n", rep+1, n, sys, r)
			}
		}
	}
	return points, nil
}

// workErrand is the work measure of the main table for errand: jobs
// queued, then timed from starting the worker until all are done.
func workErrand(ctx context.Context, e *env, jobs int) (result, error) {
	return withErrand(ctx, e, nil, func(c errandClient) (result, error) {
		if err := c.enqueueMany(ctx, jobs); err != nil {
			return result{}, err
		}
		d, err := c.work(ctx, jobs)
		return result{perSec: float64(jobs) / d.Seconds()}, err
	})
}

// workRiver is workErrand for River.
func workRiver(ctx context.Context, e *env, jobs int) (result, error) {
	return withRiver(ctx, e, nil, func(c riverClient) (result, error) {
		if err := c.insertMany(ctx, jobs); err != nil {
			return result{}, err
		}
		d, err := c.work(ctx, jobs)
		return result{perSec: float64(jobs) / d.Seconds()}, err
	})
}

// scalingSeries is one store's points, for the table and the plot.
type scalingSeries struct {
	store  string
	points []scalingPoint
}

func printScaling(out io.Writer, series []scalingSeries) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "store\tconcurrency\terrand (jobs/s)\tRiver (jobs/s)\terrand ÷ River")
	for _, s := range series {
		for _, p := range s.points {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.2f×\n", s.store, p.workers, median(p.errand), median(p.river), pointRatio(p))
		}
	}
	tw.Flush()
}

func writeScalingMarkdown(b *strings.Builder, series []scalingSeries) {
	b.WriteString("| store | concurrency | errand (jobs/s) | River (jobs/s) | errand ÷ River |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: |\n")
	for _, s := range series {
		for _, p := range s.points {
			fmt.Fprintf(b, "| %s | %d | %.0f | %.0f | %.2f× |\n", s.store, p.workers, median(p.errand), median(p.river), pointRatio(p))
		}
	}
}

// pointRatio is the median of the per-repetition ratios, as in the main
// table.
func pointRatio(p scalingPoint) float64 {
	ratios := make([]float64, len(p.errand))
	for j := range ratios {
		ratios[j] = p.errand[j] / p.river[j]
	}
	return median(ratios)
}

// Plot geometry, in SVG user units.
const (
	panelW, panelH = 440.0, 340.0
	marginL        = 70.0
	marginR        = 20.0
	marginT        = 60.0
	marginB        = 60.0
	plotW          = panelW - marginL - marginR
	plotH          = panelH - marginT - marginB
)

var seriesColor = map[string]string{"errand": "#1f77b4", "River": "#d95f02"}

var storeTitle = map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}

// writeScalingSVG draws one panel per store: work throughput against
// concurrency (log scale), the median of the repetitions as a line, and
// the range of the repetitions as a bar at each point. notes are printed
// beneath, a line each.
func writeScalingSVG(w io.Writer, series []scalingSeries, jobs, reps int, notes []string) error {
	width := panelW * float64(len(series))
	height := panelH + 22 + 18*float64(len(notes))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, s := range series {
		writePanel(&b, s, float64(i)*panelW)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#444">%s</text>`+"\n", width/2, panelH+10,
		xmlEscape(fmt.Sprintf("%d no-op jobs per point, median of %d interleaved repetition(s) (bars: their range), fresh database per run", jobs, reps)))
	for i, note := range notes {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#444">%s</text>`+"\n", width/2, panelH+28+18*float64(i), xmlEscape(note))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writePanel(b *strings.Builder, s scalingSeries, x0 float64) {
	pts := s.points
	lo, hi := float64(pts[0].workers), float64(pts[0].workers)
	top := 0.0
	for _, p := range pts {
		lo, hi = math.Min(lo, float64(p.workers)), math.Max(hi, float64(p.workers))
		for _, v := range append(append([]float64(nil), p.errand...), p.river...) {
			top = math.Max(top, v)
		}
	}
	if hi == lo {
		lo, hi = lo/2, hi*2
	}
	// Pad the log axis by a fraction of a decade on each side.
	llo, lhi := math.Log10(lo)-0.1, math.Log10(hi)+0.1
	step := niceStep(top / 5)
	yMax := math.Ceil(top/step) * step
	if yMax == 0 {
		yMax, step = 1, 1
	}
	px := func(n float64) float64 { return x0 + marginL + (math.Log10(n)-llo)/(lhi-llo)*plotW }
	py := func(v float64) float64 { return marginT + plotH - v/yMax*plotH }

	title := storeTitle[s.store]
	if title == "" {
		title = s.store
	}
	fmt.Fprintf(b, `<text x="%.1f" y="22" text-anchor="middle" font-size="15" font-weight="bold">%s: work throughput (claim, run, ack)</text>`+"\n", x0+marginL+plotW/2, xmlEscape(title))
	// Grid and y ticks.
	for v := 0.0; v <= yMax+step/2; v += step {
		y := py(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0+marginL, y, x0+marginL+plotW, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0+marginL-6, y, thousands(v))
	}
	// x ticks at the measured concurrencies.
	for _, p := range pts {
		x := px(float64(p.workers))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, marginT, x, marginT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, marginT+plotH+16, p.workers)
	}
	// Axes.
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0+marginL, marginT+plotH, x0+marginL+plotW, marginT+plotH)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0+marginL, marginT, x0+marginL, marginT+plotH)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">worker concurrency (jobs at once, log scale)</text>`+"\n", x0+marginL+plotW/2, marginT+plotH+38)
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">jobs/s</text>`+"\n", x0+18, marginT+plotH/2)
	// Series.
	for i, name := range []string{"errand", "River"} {
		color := seriesColor[name]
		vals := func(p scalingPoint) []float64 {
			if name == "errand" {
				return p.errand
			}
			return p.river
		}
		var line []string
		for _, p := range pts {
			v := vals(p)
			x := px(float64(p.workers))
			line = append(line, fmt.Sprintf("%.1f,%.1f", x, py(median(v))))
			mn, mx := v[0], v[0]
			for _, f := range v {
				mn, mx = math.Min(mn, f), math.Max(mx, f)
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", x, py(mn), x, py(mx), color)
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x, py(median(v)), color)
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(line, " "), color)
		// Legend, top left inside the plot.
		lx, ly := x0+marginL+12, marginT-22+float64(i)*16
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", lx, ly, lx+22, ly, color)
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", lx+11, ly, color)
		label := "errand"
		if name == "River" {
			label = "River v0.51.2"
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+28, ly, label)
	}
}

// niceStep rounds a raw grid step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// thousands writes v as 12k, 2.5k or 800.
func thousands(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// defaultScalingJobs is -jobs with -scaling unless given: smaller than the
// table's, since the low concurrencies are slow.
const defaultScalingJobs = 10000

// runScaling is compare -scaling.
func runScaling(ctx context.Context, out io.Writer, stores []string, pgURL string, jobs, reps int, concurrencyFlag, svgPath, markdownPath string) error {
	concurrency, err := parseConcurrency(concurrencyFlag)
	if err != nil {
		return err
	}
	loadBefore := loadAverage()
	var series []scalingSeries
	for _, s := range stores {
		e := &env{store: s, url: pgURL}
		fmt.Fprintf(os.Stderr, "%s: work at concurrency %v, %d jobs, %d repetitions\n", s, concurrency, jobs, reps)
		points, err := measureScaling(ctx, e, jobs, reps, concurrency)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		series = append(series, scalingSeries{store: s, points: points})
	}
	printScaling(out, series)
	if markdownPath != "" {
		var b strings.Builder
		writeScalingMarkdown(&b, series)
		if err := os.WriteFile(markdownPath, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if svgPath != "" {
		notes := []string{
			fmt.Sprintf("measured %s, %d CPUs, %s, one-minute load average %s before the run and %s after",
				time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), loadBefore, loadAverage()),
			"errand: one queue of that concurrency; River: MaxWorkers of that, 2 ms fetch cooldown, 20 ms poll",
		}
		var b strings.Builder
		if err := writeScalingSVG(&b, series, jobs, reps, notes); err != nil {
			return err
		}
		if err := os.WriteFile(svgPath, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loadAverage is the machine's one-minute load average, from /proc/loadavg,
// or "unknown": the plot states it, since other work on the machine lowers
// every point.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
