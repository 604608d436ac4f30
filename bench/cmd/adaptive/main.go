// Command adaptive measures errand's adaptive rate limit in real time
// against a simulated provider: an HTTP server whose hidden capacity
// changes every -phase (-caps, requests a second) and answers 429 with
// Retry-After: 1 past it. A Worker of concurrency -concurrency works a
// backlog of jobs that each call it once, with the kind's limit adaptive
// (starting at -start, between -floor and -ceiling), then, on a fresh
// database, fixed at -fixed. Samples every 250 ms go to stdout as CSV;
// the adaptive leg's limit, what it served and the capacity are drawn in
// -svg.
//
//	cd bench && go run ./cmd/adaptive [-store sqlite|postgres] [-svg adaptive.svg]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
)

type options struct {
	store       string
	pgURL       string
	phase       time.Duration
	caps        []float64
	start       int
	floor       int
	ceiling     int
	fixed       int
	concurrency int
	svg         string
}

func main() {
	var o options
	var caps string
	flag.StringVar(&o.store, "store", "sqlite", "sqlite or postgres")
	flag.StringVar(&o.pgURL, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (-store postgres)")
	flag.DurationVar(&o.phase, "phase", 20*time.Second, "how long each capacity lasts")
	flag.StringVar(&caps, "caps", "200,80,300", "the provider's capacities, requests a second, one per phase")
	flag.IntVar(&o.start, "start", 20, "the adaptive limit's first rate, a second")
	flag.IntVar(&o.floor, "floor", 5, "the adaptive limit's floor, a second")
	flag.IntVar(&o.ceiling, "ceiling", 1000, "the adaptive limit's ceiling, a second")
	flag.IntVar(&o.fixed, "fixed", 300, "the fixed limit to compare with, a second")
	flag.IntVar(&o.concurrency, "concurrency", 100, "the worker's concurrency")
	flag.StringVar(&o.svg, "svg", "", "write the adaptive leg's figure here")
	flag.Parse()
	for _, s := range strings.Split(caps, ",") {
		c, err := strconv.ParseFloat(s, 64)
		if err != nil || c <= 0 {
			fmt.Fprintf(os.Stderr, "adaptive: -caps %q: give positive numbers separated by commas, e.g. 200,80,300\n", caps)
			os.Exit(2)
		}
		o.caps = append(o.caps, c)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "adaptive:", err)
		os.Exit(1)
	}
}

// sample is one 250 ms sample of a leg.
type sample struct {
	at               time.Duration
	capacity, limit  float64
	served, turnedAw float64 // a second, over the sample
}

func run(ctx context.Context, o options) error {
	fmt.Println("leg,seconds,capacity,limit,served_per_s,turned_away_per_s,why_it_last_moved")
	var adaptive []sample
	for _, leg := range []string{"adaptive", "fixed"} {
		rl := errand.RateLimit{Kind: "call", Limit: o.fixed, Per: time.Second}
		if leg == "adaptive" {
			rl = errand.RateLimit{Kind: "call", Limit: o.start, Per: time.Second, Floor: o.floor, Ceiling: o.ceiling}
		}
		samples, ok, shed, err := runLeg(ctx, o, leg, rl)
		if err != nil {
			return fmt.Errorf("%s: %w", leg, err)
		}
		fmt.Fprintf(os.Stderr, "%s (%s): %d served, %d turned away\n", leg, rl, ok, shed)
		if leg == "adaptive" {
			adaptive = samples
			summarize(o, samples)
		}
	}
	if o.svg != "" {
		return os.WriteFile(o.svg, []byte(figure(o, adaptive)), 0o644)
	}
	return nil
}

// runLeg works a backlog against a fresh provider and a fresh database
// with the limit rl, sampling until the last phase ends.
func runLeg(ctx context.Context, o options, leg string, rl errand.RateLimit) ([]sample, int, int, error) {
	if o.store == "postgres" {
		schema := fmt.Sprintf("errand_adaptive_%s_%d", leg, time.Now().UnixNano())
		st, err := postgres.Open(ctx, o.pgURL, &postgres.Options{Schema: schema, MaxConns: 20})
		if err != nil {
			return nil, 0, 0, err
		}
		defer st.Close()
		return runWith(ctx, o, leg, rl, st)
	}
	dir, err := os.MkdirTemp("", "errand-adaptive-")
	if err != nil {
		return nil, 0, 0, err
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "errand.db"), nil)
	if err != nil {
		return nil, 0, 0, err
	}
	defer st.Close()
	return runWith(ctx, o, leg, rl, st)
}

func runWith[TTx any](ctx context.Context, o options, leg string, rl errand.RateLimit, store errandstore.TxStore[TTx]) ([]sample, int, int, error) {
	p := &provider.Provider{Capacity: provider.Steps(time.Now(), o.phase, o.caps...), Now: time.Now, RetryAfter: 1}
	srv := httptest.NewServer(p)
	defer srv.Close()
	kinds := errand.NewKinds()
	kinds.HandleRaw("call", errand.HandlerFunc(func(ctx context.Context, _ *errandtype.Job) error {
		return call(ctx, srv.URL)
	}), &errand.KindOpts{MaxAttempts: 1000})
	c, err := errand.NewClient(store, &errand.Config{Kinds: kinds, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, 0, 0, err
	}
	total := 0.0
	for _, cp := range o.caps {
		total += cp * o.phase.Seconds()
	}
	if err := enqueue(ctx, c, int(total*1.2)); err != nil {
		return nil, 0, 0, err
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: o.concurrency}, RateLimits: []errand.RateLimit{rl}})
	if err != nil {
		return nil, 0, 0, err
	}
	begin := time.Now()
	p.Capacity = provider.Steps(begin, o.phase, o.caps...)
	if err := w.Start(ctx); err != nil {
		return nil, 0, 0, err
	}
	defer w.Stop(context.Background())
	var out []sample
	lastOK, lastShed := 0, 0
	for tick := time.NewTicker(250 * time.Millisecond); time.Since(begin) < time.Duration(len(o.caps))*o.phase; {
		<-tick.C
		ok, shed := p.Counts()
		limit, why := limitOf(ctx, c, rl.Name())
		s := sample{at: time.Since(begin), capacity: p.Capacity(time.Now()), limit: limit,
			served: float64(ok-lastOK) * 4, turnedAw: float64(shed-lastShed) * 4}
		lastOK, lastShed = ok, shed
		fmt.Printf("%s,%.2f,%g,%.1f,%g,%g,%q\n", leg, s.at.Seconds(), s.capacity, s.limit, s.served, s.turnedAw, why)
		out = append(out, s)
	}
	ok, shed := p.Counts()
	return out, ok, shed, nil
}

// call calls the provider once: a 429 is a throttle with its reset time.
func call(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return errand.RetryAfter(time.Duration(max(secs, 1))*time.Second, errand.WithClass("http_429", errors.New("429 Too Many Requests")))
}

func enqueue[T any](ctx context.Context, c *errand.Client[T], n int) error {
	for n > 0 {
		batch := make([]errand.EnqueueParams, min(n, 5000))
		for i := range batch {
			batch[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "call", JSON: []byte(`{}`)}}
		}
		if _, err := c.EnqueueMany(ctx, batch); err != nil {
			return err
		}
		n -= len(batch)
	}
	return nil
}

func limitOf[T any](ctx context.Context, c *errand.Client[T], name string) (float64, string) {
	rs, err := c.Limits(ctx)
	if err != nil {
		return math.NaN(), err.Error()
	}
	for _, r := range rs {
		if r.Name == name {
			if r.Adaptive != nil {
				return r.Spec.Rate, r.Adaptive.Reason
			}
			return r.Spec.Rate, ""
		}
	}
	return math.NaN(), ""
}

// summarize prints, per phase, the limit's mean over the phase's second
// half against the capacity, and when it first came within 10% of it.
func summarize(o options, ss []sample) {
	for ph, c := range o.caps {
		from, mid, to := time.Duration(ph)*o.phase, time.Duration(ph)*o.phase+o.phase/2, time.Duration(ph+1)*o.phase
		sum, n := 0.0, 0
		settled := time.Duration(-1)
		for _, s := range ss {
			if s.at >= mid && s.at < to {
				sum, n = sum+s.limit, n+1
			}
			if s.at >= from && s.at < to && settled < 0 && math.Abs(s.limit-c) <= 0.1*c {
				settled = s.at - from
			}
		}
		fmt.Fprintf(os.Stderr, "capacity %g/s: limit's mean over the second half %.1f/s (%.2f×); within 10%% after %s\n",
			c, sum/float64(n), sum/float64(n)/c, settled.Round(250*time.Millisecond))
	}
}
