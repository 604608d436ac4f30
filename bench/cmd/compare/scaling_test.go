package main

import (
	"encoding/xml"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseConcurrency(t *testing.T) {
	got, err := parseConcurrency("1, 10,1000")
	if err != nil || !slices.Equal(got, []int{1, 10, 1000}) {
		t.Fatalf("parseConcurrency: %v, %v; want [1 10 1000]", got, err)
	}
	for _, bad := range []string{"", "0", "1,,2", "ten", "-5"} {
		if _, err := parseConcurrency(bad); err == nil {
			t.Errorf("parseConcurrency(%q): no error", bad)
		}
	}
}

// TestScalingSVG checks the plot is well-formed XML with its labels, a line
// per system and store, and the points placed in order along the log axis.
func TestScalingSVG(t *testing.T) {
	series := []scalingSeries{
		{store: "sqlite", points: []scalingPoint{
			{workers: 1, errand: []float64{100, 120}, river: []float64{50, 60}},
			{workers: 100, errand: []float64{5000, 5200}, river: []float64{900, 1000}},
		}},
		{store: "postgres", points: []scalingPoint{
			{workers: 1, errand: []float64{30, 40}, river: []float64{90, 100}},
			{workers: 100, errand: []float64{2000, 2100}, river: []float64{1500, 1600}},
		}},
	}
	var b strings.Builder
	if err := writeScalingSVG(&b, series, 2000, 2, []string{"a <note> & more"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	dec := xml.NewDecoder(strings.NewReader(out))
	var polylines []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, out)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			for _, a := range se.Attr {
				if a.Name.Local == "points" {
					polylines = append(polylines, a.Value)
				}
			}
		}
	}
	for _, want := range []string{"SQLite: work throughput", "PostgreSQL: work throughput",
		"worker concurrency (jobs at once, log scale)", "jobs/s", "River v0.51.2", ">errand<", "a &lt;note&gt; &amp; more"} {
		if !strings.Contains(out, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	if len(polylines) != 4 {
		t.Fatalf("%d lines, want 4 (two systems on two stores)", len(polylines))
	}
	for _, pl := range polylines {
		pts := strings.Fields(pl)
		if len(pts) != 2 {
			t.Fatalf("line %q: %d points, want 2", pl, len(pts))
		}
		x0, y0 := point(t, pts[0])
		x1, y1 := point(t, pts[1])
		if x1 <= x0 {
			t.Errorf("line %q: concurrency 100 is not right of concurrency 1", pl)
		}
		if y1 >= y0 { // SVG's y grows downwards; every series is faster at 100
			t.Errorf("line %q: the faster point is not higher", pl)
		}
	}
}

func point(t *testing.T, s string) (x, y float64) {
	t.Helper()
	xs, ys, _ := strings.Cut(s, ",")
	x, err1 := strconv.ParseFloat(xs, 64)
	y, err2 := strconv.ParseFloat(ys, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("point %q: %v %v", s, err1, err2)
	}
	return x, y
}
