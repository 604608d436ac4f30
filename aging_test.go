package errand_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestPriorityAgingAged holds the documented formula:
// max(Floor, priority - floor(wait / Step)).
func TestPriorityAgingAged(t *testing.T) {
	a := errand.PriorityAging{Step: time.Minute, Floor: -1}
	for _, tt := range []struct {
		base int
		wait time.Duration
		want int
	}{
		{5, 0, 5},
		{5, time.Minute - 1, 5},
		{5, time.Minute, 4},
		{5, 150 * time.Second, 3},
		{5, 6 * time.Minute, -1},
		{5, 1000 * time.Hour, -1},
		{-1, time.Hour, -1},
		{-5, time.Hour, -5}, // below the floor: never aged
	} {
		if got := a.Aged(tt.base, tt.wait); got != tt.want {
			t.Errorf("Aged(%d, %s) = %d, want %d", tt.base, tt.wait, got, tt.want)
		}
	}
}

// TestLeaderAppliesPriorityAging checks that the leader ages the waiting
// jobs of the queues in its worker's PriorityAging, and that a bad policy
// is refused.
func TestLeaderAppliesPriorityAging(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	var ie *errandtype.InputError
	if _, err := c.NewWorker(&errand.WorkerConfig{PriorityAging: map[string]errand.PriorityAging{"bulk": {Step: time.Millisecond}}}); !errors.As(err, &ie) || ie.Field != "PriorityAging.bulk.step" {
		t.Errorf("a step of 1ms: %v, want an *InputError on PriorityAging.bulk.step", err)
	}
	j := enqueue(t, c, "task", &errand.EnqueueOpts{Queue: "bulk", Priority: 5})
	other := enqueue(t, c, "task", &errand.EnqueueOpts{Queue: "other", Priority: 5})
	clock.Advance(3 * time.Minute)
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour, SweepInterval: time.Hour, HeartbeatInterval: time.Hour,
		LeaderTTL: 24 * time.Hour, PriorityAging: map[string]errand.PriorityAging{"bulk": {Step: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	workerWaitFor(t, clockWait, func() bool { return getJob(t, c, j.ID).Priority == 2 })
	if got := getJob(t, c, other.ID); got.Priority != 5 || got.BasePriority != nil {
		t.Errorf("a queue without aging aged: priority %d", got.Priority)
	}
}

// TestAgedJobSameID checks that a job enqueued again under its id is
// compared by its enqueued priority: aging is not a difference.
func TestAgedJobSameID(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, AllowUnknownKinds: true})
	enqueue(t, c, "task", &errand.EnqueueOpts{ID: "pay_1", Priority: 5})
	clock.Advance(3 * time.Minute)
	if _, err := st.JobAgePriorities(context.Background(), &errandstore.JobAgePrioritiesParams{Queue: errand.DefaultQueue,
		Aging: errand.PriorityAging{Step: time.Minute}, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "task"}, &errand.EnqueueOpts{ID: "pay_1", Priority: 5})
	if err != nil || !r.Duplicate || r.Job.Priority != 2 {
		t.Fatalf("enqueue of an aged job's id = %+v, %v; want the duplicate, at priority 2", r, err)
	}
}
