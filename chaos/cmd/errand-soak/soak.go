package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// soak runs the fleet under load for cfg.duration, sampling every
// cfg.sample, and judges the series.
func soak(ctx context.Context, cfg *config, logw io.Writer) (*report, error) {
	logger := slog.New(slog.NewTextHandler(logw, nil))
	dir := cfg.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "errand-soak-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else {
		if _, err := os.Stat(filepath.Join(dir, "soak.db")); err == nil {
			return nil, usagef("-dir %s already holds a run (soak.db): give a new or empty directory", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, usagef("-dir %s: %v; give a directory you can write", dir, err)
		}
	}
	bin := cfg.errand
	if bin == "" {
		var err error
		if bin, err = buildErrand(ctx, dir); err != nil {
			return nil, err
		}
	}
	tg, err := openTarget(ctx, cfg, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := tg.shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Error("shut the store down", "err", err)
		}
	}()
	sk, err := startSink()
	if err != nil {
		return nil, err
	}
	defer sk.srv.Close()
	workers, serve, err := startFleet(ctx, cfg, bin, dir, sk.url, tg.env)
	if err != nil {
		return nil, err
	}
	procs := append(workers, serve)
	defer stopAll(procs)

	rep := &report{Store: cfg.store, Commit: commit(), Started: time.Now().UTC(), Rate: cfg.rate, Workers: cfg.workers,
		DurationSeconds: cfg.duration.Seconds(), SampleSeconds: cfg.sample.Seconds(), Schema: tg.schema, Server: tg.server}
	loadCtx, stopLoad := context.WithCancel(ctx)
	ld := &load{client: tg.client, apiURL: strings.TrimSuffix(serve.metrics, "/metrics") + "/api/v1/jobs",
		token: serve.token, rate: cfg.rate, logger: logger}
	ld.start(loadCtx)
	sm := &sampler{target: tg, procs: procs, sink: sk, load: ld, rec: newRecorder(), slack: float64(cfg.rate),
		logger: logger, httpc: &http.Client{Timeout: 10 * time.Second}}
	csvPath := ""
	if cfg.dir != "" {
		csvPath = filepath.Join(dir, "samples.csv")
	}
	runErr := sampleLoop(ctx, cfg, procs, sm, csvPath)
	stopLoad()
	ld.wait()
	if runErr != nil && len(sm.rec.rows) == 0 {
		return nil, runErr
	}
	rep.Totals = totals{Enqueued: ld.enqueued.Load(), EnqueuedLibrary: ld.lib.Load(), EnqueuedAPI: ld.api.Load(),
		EnqueueErrors: ld.errs.Load(), DeliveredOK: sk.ok.Load(), DeliveredFailed: sk.failed.Load(), DeliveredPoison: sk.poisond.Load(),
		SampleErrors: sm.warned}
	rep.judge(sm.rec)
	rep.CSV = csvPath
	// A run cut short still reports the samples it took, and fails.
	return rep, runErr
}

// sampleLoop samples on a fixed schedule until the run's samples are
// taken, and fails when the run is interrupted or a process dies.
// The samples so far are written to csvPath after each, when it is set, so
// that an hour's run leaves its figures even if this process dies.
func sampleLoop(ctx context.Context, cfg *config, procs []*proc, sm *sampler, csvPath string) error {
	exits := make(chan *proc, len(procs))
	for _, p := range procs {
		go func() { <-p.done; exits <- p }()
	}
	start := time.Now()
	n := int(cfg.duration / cfg.sample)
	for i := 1; i <= n; i++ {
		timer := time.NewTimer(time.Until(start.Add(time.Duration(i) * cfg.sample)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("interrupted after %d of %d samples", i-1, n)
		case p := <-exits:
			timer.Stop()
			return p.exited()
		case now := <-timer.C:
			sm.sample(ctx, now)
			if csvPath != "" {
				if err := writeCSV(csvPath, sm.rec); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stopAll drains every process at once.
func stopAll(procs []*proc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
}

// commit names the checkout the run soaked, best effort.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "-dirty"
	}
	return c
}
