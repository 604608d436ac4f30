package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
)

// soakArgs are a job's args: its number and how the sink answers it.
type soakArgs struct {
	N    int64  `json:"n"`
	Mode string `json:"mode"` // ok, fail_once (500 on attempt 1), poison (422)
}

func (soakArgs) Kind() string { return "soak" }

// modeOf spreads the modes evenly: 5% of jobs fail once, 2% are poison.
func modeOf(n int64) string {
	switch n % 100 {
	case 0, 20, 40, 60, 80:
		return "fail_once"
	case 50, 99:
		return "poison"
	}
	return "ok"
}

// sink is the webhook the workers deliver to. It counts deliveries by
// answer.
type sink struct {
	srv                 *http.Server
	url                 string
	ok, failed, poisond atomic.Int64
}

func startSink() (*sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + l.Addr().String() + "/"}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var env struct {
		Attempt int      `json:"attempt"`
		Args    soakArgs `json:"args"`
	}
	if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case env.Args.Mode == "poison":
		s.poisond.Add(1)
		w.WriteHeader(http.StatusUnprocessableEntity)
	case env.Args.Mode == "fail_once" && env.Attempt == 1:
		s.failed.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	default:
		s.ok.Add(1)
		w.WriteHeader(http.StatusOK)
	}
}

// load enqueues at a steady rate: most jobs through the library in
// batches, a fifth one at a time through errand serve's API.
type load struct {
	client   *errand.Client[*sql.Tx]
	apiURL   string
	token    string
	rate     int
	logger   *slog.Logger
	seq      atomic.Int64
	enqueued atomic.Int64
	lib, api atomic.Int64 // jobs enqueued by each path
	errs     atomic.Int64
	wg       sync.WaitGroup
}

// start runs the enqueuers until ctx ends.
func (l *load) start(ctx context.Context) {
	apiRate := l.rate / 5
	libRate := l.rate - apiRate
	batch := min(10, libRate)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.every(ctx, time.Duration(batch)*time.Second/time.Duration(libRate), func() { l.enqueueMany(ctx, batch) })
	}()
	if apiRate > 0 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			httpc := &http.Client{Timeout: 10 * time.Second}
			l.every(ctx, time.Second/time.Duration(apiRate), func() { l.post(ctx, httpc) })
		}()
	}
}

func (l *load) wait() { l.wg.Wait() }

// every calls f on each tick of d until ctx ends; a slow f makes the
// ticker drop ticks, which shows as a lower enqueue rate.
func (l *load) every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

func (l *load) next() soakArgs {
	n := l.seq.Add(1)
	return soakArgs{N: n, Mode: modeOf(n)}
}

func (l *load) enqueueMany(ctx context.Context, n int) {
	ps := make([]errand.EnqueueParams, n)
	for i := range ps {
		ps[i] = errand.EnqueueParams{Args: l.next()}
	}
	if _, err := l.client.EnqueueMany(ctx, ps); err != nil {
		l.fail(ctx, "enqueue", err)
		return
	}
	l.lib.Add(int64(n))
	l.enqueued.Add(int64(n))
}

func (l *load) post(ctx context.Context, httpc *http.Client) {
	body, _ := json.Marshal(map[string]any{"kind": "soak", "args": l.next()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.apiURL, bytes.NewReader(body))
	if err != nil {
		l.fail(ctx, "api enqueue", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := httpc.Do(req)
	if err != nil {
		l.fail(ctx, "api enqueue", err)
		return
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		l.fail(ctx, "api enqueue", fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg)))
		return
	}
	l.api.Add(1)
	l.enqueued.Add(1)
}

// fail counts an enqueue error and logs the first few: a run that ends
// because the soak stops is no error.
func (l *load) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	if n := l.errs.Add(1); n <= 10 {
		l.logger.Warn(what+" failed", "err", err, "errors", n)
	}
}
