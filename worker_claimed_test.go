package errand_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestClaimedJobsStartWhateverTheOthersDo: a handler that waits never
// holds up the jobs claimed with it. In a claim of 300, either every job
// waits until all 300 have started, or the first waits until the other 299
// have ended: a worker that ran a claim's jobs one after another, or on
// fewer goroutines than they need, would finish none of them.
func TestClaimedJobsStartWhateverTheOthersDo(t *testing.T) {
	const n = 300
	const bound = 30 * time.Second // for a loaded machine, not a speed check
	for _, everyWaits := range []bool{true, false} {
		name := "the first waits for the others to end"
		if everyWaits {
			name = "every job waits for all to start"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := newTestClock()
			s := openStore(t, clock)
			var started, ended atomic.Int64
			all := make(chan struct{})
			handler := func(ctx context.Context, j *errandtype.Job) error {
				i := started.Add(1)
				defer ended.Add(1)
				if i == n {
					close(all)
				}
				switch {
				case everyWaits:
					select {
					case <-all:
					case <-time.After(bound):
						return errand.Permanent(fmt.Errorf("%d of %d jobs started", started.Load(), n))
					}
				case i == 1:
					for deadline := time.Now().Add(bound); ended.Load() < n-1; time.Sleep(time.Millisecond) {
						if time.Now().After(deadline) {
							return errand.Permanent(fmt.Errorf("%d of %d other jobs ended", ended.Load(), n-1))
						}
					}
				}
				return nil
			}
			c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
				Name: "gather", Handler: errand.HandlerFunc(handler),
			}})})
			if err != nil {
				t.Fatal(err)
			}
			enqueueN(t, c, "gather", n)
			w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: n}, PollInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			workerWaitFor(t, time.Minute, func() bool { return w.Stats().JobsCompleted >= n })
			if err := w.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			js, err := c.List(ctx, &errand.ListOpts{Limit: n})
			if err != nil {
				t.Fatal(err)
			}
			if len(js) != n {
				t.Fatalf("listed %d jobs, want %d", len(js), n)
			}
			for _, j := range js {
				if j.State != errandtype.StateSucceeded {
					t.Fatalf("job %s: %s (%+v), want succeeded", j.ID, j.State, j.LastError)
				}
			}
		})
	}
}

// TestBusyQueueClaimsBesideWaitingHandlers: a busy queue waits for more
// slots to free before it claims only when outcome writes hold them, never
// for handlers still running. Here seven of a queue's eight slots hold
// handlers that wait until the test ends; the eighth job's slot frees and
// the ninth job must run in it.
func TestBusyQueueClaimsBesideWaitingHandlers(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	var started atomic.Int64
	ninth := make(chan struct{})
	end := make(chan struct{})
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "wait",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			switch started.Add(1) {
			case 8:
				return nil
			case 9:
				close(ninth)
				return nil
			}
			select {
			case <-end:
			case <-ctx.Done():
			}
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, "wait", 9)
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 8}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(end)
		if err := w.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-ninth:
	case <-time.After(30 * time.Second): // a bound for a loaded machine
		t.Fatalf("the ninth job did not run beside seven waiting handlers: %d jobs started", started.Load())
	}
}
