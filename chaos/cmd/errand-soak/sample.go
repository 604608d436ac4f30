package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// meta describes one series.
type meta struct {
	name  string
	unit  string
	rule  rule
	slack float64
}

// recorder holds the samples: one row of values a sample, a column a
// series, NaN where a reading failed.
type recorder struct {
	metas []meta
	index map[string]int
	times []time.Time
	rows  [][]float64
}

func newRecorder() *recorder { return &recorder{index: map[string]int{}} }

// begin starts the sample taken at t.
func (r *recorder) begin(t time.Time) {
	r.times = append(r.times, t)
	r.rows = append(r.rows, nil)
}

func (r *recorder) add(name, unit string, ru rule, v float64) { r.addSlack(name, unit, ru, v, 0) }

func (r *recorder) addSlack(name, unit string, ru rule, v, slack float64) {
	i, ok := r.index[name]
	if !ok {
		i = len(r.metas)
		r.index[name] = i
		r.metas = append(r.metas, meta{name: name, unit: unit, rule: ru, slack: slack})
	}
	row := r.rows[len(r.rows)-1]
	for len(row) <= i {
		row = append(row, math.NaN())
	}
	row[i] = v
	r.rows[len(r.rows)-1] = row
}

// column returns series i over every sample.
func (r *recorder) column(i int) []float64 {
	vs := make([]float64, len(r.rows))
	for k, row := range r.rows {
		vs[k] = math.NaN()
		if i < len(row) {
			vs[k] = row[i]
		}
	}
	return vs
}

// sampler reads every series once a sample.
type sampler struct {
	target  *target
	procs   []*proc // the workers, then errand serve
	sink    *sink
	load    *load
	rec     *recorder
	slack   float64 // the backlog rule's allowance
	logger  *slog.Logger
	httpc   *http.Client
	prevOK  int64
	prevEnq int64
	warned  int
}

func (s *sampler) sample(ctx context.Context, now time.Time) {
	s.rec.begin(now)
	var pids []int
	for _, p := range s.procs {
		pids = append(pids, p.pid())
		rss, err := vmRSS(p.pid())
		s.put(p.name+"_rss_bytes", "bytes", ruleMemory, rss, err)
		fds, err := fdCount(p.pid())
		s.put(p.name+"_fds", "fds", ruleHandles, fds, err)
		g, err := s.goroutines(ctx, p)
		s.put(p.name+"_goroutines", "goroutines", ruleGoroutines, g, err)
	}
	conns, err := s.target.conns(ctx, pids)
	s.put("db_conns", "conns", ruleHandles, conns, err)
	s.warn("store size", s.target.sizes(ctx, s.rec))
	s.warn("job counts", s.target.rows(ctx, s.rec, s.slack))
	ok, enq := s.sink.ok.Load(), s.load.enqueued.Load()
	s.rec.add("delivered_ok_per_sample", "jobs", ruleInfo, float64(ok-s.prevOK))
	s.rec.add("enqueued_per_sample", "jobs", ruleInfo, float64(enq-s.prevEnq))
	s.prevOK, s.prevEnq = ok, enq
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.rec.add("soak_heap_bytes", "bytes", ruleMemory, float64(ms.HeapAlloc))
	s.rec.add("soak_goroutines", "goroutines", ruleGoroutines, float64(runtime.NumGoroutine()))
}

// put records a reading, or NaN and a warning when it failed.
func (s *sampler) put(name, unit string, ru rule, v float64, err error) {
	if err != nil {
		s.warn(name, err)
		v = math.NaN()
	}
	s.rec.add(name, unit, ru, v)
}

// warn logs the first few failed readings: one miss on a loaded machine
// is a gap in a series, not the end of an hour's run.
func (s *sampler) warn(what string, err error) {
	if err == nil {
		return
	}
	if s.warned++; s.warned <= 20 {
		s.logger.Warn("sample failed", "series", what, "err", err)
	}
}

// vmRSS reads a process's resident memory from /proc/PID/status.
func vmRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func fdCount(pid int) (float64, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return float64(len(fds)), err
}

// goroutines reads go_goroutines from the process's /metrics.
func (s *sampler) goroutines(ctx context.Context, p *proc) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	if err != nil {
		return 0, err
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", p.metrics, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("%s has no go_goroutines", p.metrics)
}
