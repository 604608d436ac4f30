package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Graphile Worker (Node.js, PostgreSQL only) runs in a node subprocess per
// measure: bench/graphile/runner.mjs, on a fresh schema that compare
// creates and drops, as it does for errand and River. The runner migrates
// the schema first, untimed, and prints its result as JSON; its settings
// and why are in the runner. `npm ci` in bench/graphile installs it.

// graphileRequest is what the runner is asked to measure.
type graphileRequest struct {
	Measure     string `json:"measure"` // work, bulk or latency
	URL         string `json:"url"`
	Schema      string `json:"schema"`
	Jobs        int    `json:"jobs,omitempty"`
	Batch       int    `json:"batch,omitempty"` // jobs per addJobs call
	Concurrency int    `json:"concurrency,omitempty"`
	Warmup      int    `json:"warmup,omitempty"`
	Samples     int    `json:"samples,omitempty"`
	Analyze     bool   `json:"analyze,omitempty"` // work: analyze the schema's tables after the enqueue
}

// graphileResponse is the runner's result.
type graphileResponse struct {
	Version     string          `json:"version"`
	Settings    json.RawMessage `json:"settings"`
	Seconds     float64         `json:"seconds"`
	PerSec      float64         `json:"perSec"`
	FirstMs     float64         `json:"firstMs"`
	LatenciesMs []float64       `json:"latenciesMs"`
}

// defaultGraphileDir is bench/graphile beside this source file, which is
// where `go run` and `go test` in this module find it.
func defaultGraphileDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("graphile")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "graphile")
}

// errNoNode is why Graphile Worker cannot run at all here.
var errNoNode = errors.New("node is not installed")

// graphileReady reports whether the runner in dir can run: node on the
// PATH, and the packages installed.
func graphileReady(dir string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return errNoNode
	}
	if _, err := os.Stat(filepath.Join(dir, "runner.mjs")); err != nil {
		return fmt.Errorf("its runner: %w (set -graphile-dir to bench/graphile)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphile-worker", "package.json")); err != nil {
		return fmt.Errorf("its packages are not installed: run `npm ci` in %s once (or leave it out: -systems errand,river)", dir)
	}
	return nil
}

// runGraphile runs one measure of the runner on a fresh schema of e.
func runGraphile(ctx context.Context, e *env, req graphileRequest) (graphileResponse, error) {
	schema, drop, err := e.freshSchema(ctx, "graphile")
	if err != nil {
		return graphileResponse{}, err
	}
	defer drop()
	req.URL, req.Schema = e.url, schema
	arg, err := json.Marshal(req)
	if err != nil {
		return graphileResponse{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, workTimeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "runner.mjs", string(arg))
	cmd.Dir = e.graphileDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return graphileResponse{}, fmt.Errorf("graphile worker runner: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var resp graphileResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return graphileResponse{}, fmt.Errorf("graphile worker runner: reading its result %q: %w", stdout.String(), err)
	}
	if e.graphileSeen != nil {
		e.graphileSeen(resp)
	}
	return resp, nil
}

// graphileThroughput is a throughput measure of the runner.
func graphileThroughput(req graphileRequest) func(ctx context.Context, e *env) (result, error) {
	return func(ctx context.Context, e *env) (result, error) {
		req.Concurrency = e.concurrency()
		resp, err := runGraphile(ctx, e, req)
		if err != nil {
			return result{}, err
		}
		if resp.PerSec <= 0 {
			return result{}, fmt.Errorf("graphile worker runner: no throughput in its result")
		}
		return result{perSec: resp.PerSec}, nil
	}
}

// graphileLatency is the latency measure of the runner.
func graphileLatency(samples sampling) func(ctx context.Context, e *env) (result, error) {
	return func(ctx context.Context, e *env) (result, error) {
		resp, err := runGraphile(ctx, e, graphileRequest{Measure: "latency", Concurrency: e.concurrency(),
			Warmup: samples.warmup, Samples: samples.samples})
		if err != nil {
			return result{}, err
		}
		if len(resp.LatenciesMs) != samples.samples {
			return result{}, fmt.Errorf("graphile worker runner: %d latencies, want %d", len(resp.LatenciesMs), samples.samples)
		}
		r := result{first: msDuration(resp.FirstMs)}
		for _, l := range resp.LatenciesMs {
			r.latencies = append(r.latencies, msDuration(l))
		}
		return r, nil
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
