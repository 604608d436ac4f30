package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// weightRun runs a worker with the shared capacity maxWorkers and weights
// over queues that each hold backlog jobs (0: none), every queue with more
// slots of its own than the whole capacity. Each handler reports its start
// and blocks until released. Once the first maxWorkers jobs run, it
// releases one job at a time, only while every queue with a backlog waits
// for capacity, and counts which queue the next start is from: so each
// freed slot goes where the worker's share decides, whatever the machine's
// speed. It returns the starts by queue after the first maxWorkers.
func weightRun(t *testing.T, s errandstore.TxStore[*sql.Tx], maxWorkers int, weights map[string]int, backlog map[string]int, samples int) map[string]int {
	t.Helper()
	started := make(chan string, 16)
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
		started <- j.Queue
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	c := handlerClient(t, s, h)
	queues := map[string]int{}
	busy := 0
	for q, n := range backlog {
		queues[q] = maxWorkers + 1 // never full: every busy queue wants capacity
		if n > 0 {
			busy++
		}
		var ps []errand.EnqueueParams
		for range n {
			ps = append(ps, errand.EnqueueParams{Args: errand.RawArgs{KindName: "task"}, Opts: &errand.EnqueueOpts{Queue: q}})
		}
		for len(ps) > 0 {
			k := min(len(ps), 500)
			if _, err := c.EnqueueMany(ctx, ps[:k]); err != nil {
				t.Fatal(err)
			}
			ps = ps[k:]
		}
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: queues, MaxWorkers: maxWorkers, QueueWeights: weights,
		PollInterval: time.Hour, PollOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-w.Done()
	})
	next := func() string {
		t.Helper()
		select {
		case q := <-started:
			return q
		case <-time.After(clockWait):
			t.Fatal("no job started")
			return ""
		}
	}
	waitAll := func() {
		t.Helper()
		deadline := time.Now().Add(clockWait)
		for errand.WaitingForCapacity(w) < busy {
			if time.Now().After(deadline) {
				t.Fatalf("%d queues wait for capacity, want at least %d", errand.WaitingForCapacity(w), busy)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for range maxWorkers {
		next()
	}
	got := map[string]int{}
	for range samples {
		waitAll()
		release <- struct{}{}
		got[next()]++
	}
	return got
}

// wantShares checks that each queue's share of starts is its weight's share
// of the busy queues' weights, within 10% of it.
func wantShares(t *testing.T, got map[string]int, weights map[string]int, samples int) {
	t.Helper()
	total := 0
	for _, wt := range weights {
		total += wt
	}
	for q, wt := range weights {
		want := float64(samples) * float64(wt) / float64(total)
		if math.Abs(float64(got[q])-want) > 0.1*want {
			t.Errorf("queue %s (weight %d): %d of %d starts, want %.0f within 10%%; all: %v", q, wt, got[q], samples, want, got)
		}
	}
}

// TestQueueWeights: under saturation, starts follow the weights 6:3:1.
func TestQueueWeights(t *testing.T) {
	t.Parallel()
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], _ *errandtest.Clock) {
		weights := map[string]int{"critical": 6, "default": 3, "low": 1}
		const samples = 300
		got := weightRun(t, s, 4, weights, map[string]int{"critical": 320, "default": 320, "low": 320}, samples)
		wantShares(t, got, weights, samples)
	})
}

// TestQueueWeightsNoStarvation: a queue of weight 1 beside one of 100 still
// gets its one start in 101: at least two in 303, whichever queue took the
// first slots.
func TestQueueWeightsNoStarvation(t *testing.T) {
	t.Parallel()
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], _ *errandtest.Clock) {
		got := weightRun(t, s, 2, map[string]int{"bulk": 100, "rare": 1},
			map[string]int{"bulk": 330, "rare": 20}, 303)
		if got["rare"] < 2 {
			t.Fatalf("the queue of weight 1 got %d of 303 starts beside weight 100, want at least 2: %v", got["rare"], got)
		}
	})
}

// TestQueueWeightsIdleShare: a queue with nothing to do leaves its share to
// the others, which split the capacity by their own weights.
func TestQueueWeightsIdleShare(t *testing.T) {
	t.Parallel()
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], _ *errandtest.Clock) {
		const samples = 240
		got := weightRun(t, s, 3, map[string]int{"critical": 6, "default": 3, "low": 1},
			map[string]int{"critical": 250, "default": 250, "low": 0}, samples)
		wantShares(t, got, map[string]int{"critical": 6, "default": 3}, samples)
	})
}

// TestQueueWeightsConfig: weights need the shared capacity and name the
// worker's queues.
func TestQueueWeightsConfig(t *testing.T) {
	c := handlerClient(t, openStore(t, nil), func(context.Context, *errandtype.Job) error { return nil })
	for _, cfg := range []*errand.WorkerConfig{
		{Queues: map[string]int{"a": 1}, QueueWeights: map[string]int{"a": 2}},
		{Queues: map[string]int{"a": 1}, MaxWorkers: 2, QueueWeights: map[string]int{"b": 2}},
		{Queues: map[string]int{"a": 1}, MaxWorkers: 2, QueueWeights: map[string]int{"a": 0}},
		{Queues: map[string]int{"a": 1}, MaxWorkers: -1},
	} {
		_, err := c.NewWorker(cfg)
		var in *errandtype.InputError
		if !errors.As(err, &in) {
			t.Errorf("NewWorker(%+v): %v, want an *errandtype.InputError", cfg, err)
		}
	}
	if _, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"a": 1, "b": 2}, MaxWorkers: 2,
		QueueWeights: map[string]int{"a": 3}}); err != nil {
		t.Fatalf("NewWorker with a weight for one queue of two: %v", err)
	}
}

// TestWorkerFairness: a worker claiming one job at a time takes another
// tenant's job by its third claim however long the earlier tenant's
// backlog, then alternates, on both stores.
func TestWorkerFairness(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		order := make(chan string, 512)
		c := handlerClient(t, s, func(ctx context.Context, j *errandtype.Job) error {
			order <- *j.FairnessKey
			return nil
		})
		ctx := t.Context()
		var ps []errand.EnqueueParams
		for range 300 {
			ps = append(ps, errand.EnqueueParams{Args: errand.RawArgs{KindName: "task"}, Opts: &errand.EnqueueOpts{FairnessKey: "tenant-a"}})
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		for i := range 3 {
			enqueue(t, c, "task", &errand.EnqueueOpts{FairnessKey: "tenant-b", ID: fmt.Sprintf("b%d", i)})
		}
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1},
			PollInterval: time.Hour, PollOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop(context.Background())
		var got []string
		for range 7 {
			select {
			case k := <-order:
				got = append(got, k)
			case <-time.After(clockWait):
				t.Fatalf("only %d jobs ran: %v", len(got), got)
			}
		}
		// The first claim is a plain one (the worker does not yet know the
		// queue has keys) and takes tenant-a's first job; the second, fair,
		// sees two keys never served by a fair claim and takes the earlier
		// job, tenant-a's; from then on the keys take turns.
		want := []string{"tenant-a", "tenant-a", "tenant-b", "tenant-a", "tenant-b", "tenant-a", "tenant-b"}
		if !slices.Equal(got, want) {
			t.Fatalf("jobs ran for %v, want %v", got, want)
		}
	})
}
