package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"text/tabwriter"
	"time"
)

// totals count what the run did.
type totals struct {
	Enqueued        int64 `json:"enqueued"`
	EnqueuedLibrary int64 `json:"enqueued_library"`
	EnqueuedAPI     int64 `json:"enqueued_api"`
	EnqueueErrors   int64 `json:"enqueue_errors"`
	DeliveredOK     int64 `json:"delivered_ok"`
	DeliveredFailed int64 `json:"delivered_failed_once"`
	DeliveredPoison int64 `json:"delivered_poison"`
	SampleErrors    int   `json:"sample_errors"`
}

// report is the run's outcome: --json prints it as it is.
type report struct {
	Store           string    `json:"store"`
	Schema          string    `json:"schema"`
	Server          string    `json:"server,omitempty"`
	Commit          string    `json:"commit"`
	Started         time.Time `json:"started_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	SampleSeconds   float64   `json:"sample_seconds"`
	Rate            int       `json:"rate"`
	Workers         int       `json:"workers"`
	Samples         int       `json:"samples"`
	Totals          totals    `json:"totals"`
	Series          []summary `json:"series"`
	Grew            []string  `json:"grew"`
	Flat            bool      `json:"flat"`
	CSV             string    `json:"csv"`
}

// judge summarises every series of rec and names those that grew.
func (r *report) judge(rec *recorder) {
	r.Samples = len(rec.rows)
	r.Grew = []string{}
	for i, m := range rec.metas {
		s := judge(m.name, m.unit, m.rule, rec.column(i), m.slack)
		r.Series = append(r.Series, s)
		if s.Verdict != "flat" && s.Verdict != "info" {
			r.Grew = append(r.Grew, s.Name)
		}
	}
	r.Flat = len(r.Grew) == 0
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

func (r *report) writeText(w io.Writer) error {
	verdict := "flat"
	if !r.Flat {
		verdict = fmt.Sprintf("GREW: %v", r.Grew)
	}
	t := r.Totals
	store := r.Store
	if r.Schema != "" {
		store += " (schema " + r.Schema + ")"
	}
	if r.Server != "" {
		store += " on " + r.Server
	}
	fmt.Fprintf(w, "errand soak: %s, commit %s, started %s, %s at %d jobs/s, %d workers + serve, %d samples every %s: %s\n",
		store, r.Commit, r.Started.Format(time.RFC3339), time.Duration(r.DurationSeconds*float64(time.Second)),
		r.Rate, r.Workers, r.Samples, time.Duration(r.SampleSeconds*float64(time.Second)), verdict)
	fmt.Fprintf(w, "enqueued %d (library %d, api %d, errors %d); delivered ok %d, failed once %d, poison %d; sample errors %d\n",
		t.Enqueued, t.EnqueuedLibrary, t.EnqueuedAPI, t.EnqueueErrors, t.DeliveredOK, t.DeliveredFailed, t.DeliveredPoison, t.SampleErrors)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tfirst\tmin\tmax\tq2 mean\tq4 mean\tq2 max\tq4 max\tlimit\tverdict\t")
	for _, s := range r.Series {
		f := func(v float64) string { return formatValue(v, s.Unit) }
		limit := "-"
		if s.Verdict == "flat" || s.Verdict == "grew" {
			limit = f(s.Limit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, f(s.First), f(s.Min), f(s.Max),
			f(s.Q2Mean), f(s.Q4Mean), f(s.Q2Max), f(s.Q4Max), limit, s.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "tolerances (after a quarter's warm-up, last quarter against the second): memory q4 mean <= 1.25 x q2 mean;",
		"goroutines q4 mean <= q2 mean + max(10%, 20); fds and connections q4 mean <= q2 mean + max(10%, 5);",
		"table sizes and finished rows q4 max <= 1.5 x q2 max; waiting rows q4 max <= 1.5 x q2 max + one second of load")
	if r.CSV != "" {
		fmt.Fprintln(w, "samples:", r.CSV)
	}
	return nil
}

// formatValue prints bytes in MiB, other units as counts.
func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case unit == "bytes":
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + "M"
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// writeCSV writes the samples: a row a sample, a column a series.
func writeCSV(path string, rec *recorder) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	head := []string{"time", "elapsed_seconds"}
	for _, m := range rec.metas {
		head = append(head, m.name)
	}
	_ = w.Write(head)
	for k, t := range rec.times {
		row := []string{t.UTC().Format(time.RFC3339), strconv.FormatFloat(t.Sub(rec.times[0]).Seconds()+0, 'f', 0, 64)}
		for i := range rec.metas {
			v := rec.column(i)[k]
			cell := ""
			if !math.IsNaN(v) {
				cell = strconv.FormatFloat(v, 'f', -1, 64)
			}
			row = append(row, cell)
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
