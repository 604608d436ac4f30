package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestPauseStopsClaims: a queue paused by another client (another
// process) stops this worker's claims once its view of the pauses is
// older than half a second, and a remote worker's; the running job
// finishes; resumed there, the queue's waiting job runs at the worker's
// next look, a second later. A kind paused by this client stops its jobs
// at once, in the worker, in an eager enqueue and in Stats, and its resume
// wakes the worker. The injected clock drives every wait.
func TestPauseStopsClaims(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		ran, release := make(chan string, 8), make(chan struct{})
		record := errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error { ran <- j.ID; return nil })
		kinds := []testKind{{Name: "a", Handler: record}, {Name: "b", Handler: record},
			{Name: "slow", Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error { ran <- j.ID; <-release; return nil })}}
		c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf(kinds)})
		other := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf(kinds)})
		idleWorker(t, c, clock, errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 4}})
		var releaseOnce sync.Once
		free := func() { releaseOnce.Do(func() { close(release) }) }
		t.Cleanup(free) // before the worker's Stop, should the test fail first

		slow := enqueue(t, c, "slow", nil)
		waitRan(t, ran, slow.ID, clockWait)
		if p, changed, err := other.Pause(ctx, errand.PauseTarget{Queue: errand.DefaultQueue}, "ana", "maintenance"); err != nil || !changed || p.Operator != "ana" {
			t.Fatalf("pause: %+v, %v, %v", p, changed, err)
		}
		clock.Advance(time.Second) // this client's view of the pauses is stale now
		j := enqueue(t, c, "a", nil)
		blockUntilAt(t, clock, clock.Now().Add(time.Second), 1) // the queue sleeps paused
		if got := getJob(t, c, j.ID); got.State != errandtype.StateQueued {
			t.Fatalf("a job of a paused queue: %s, want queued", got.State)
		}
		if js, err := other.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"a"}, Owner: "remote"}); err != nil || len(js) != 0 {
			t.Fatalf("a remote claim of a paused queue: %d jobs, %v; want none", len(js), err)
		}
		stats := queueStats(t, c, errand.DefaultQueue)
		if stats.Paused == nil || stats.Paused.Reason != "maintenance" || stats.OldestReadyAgeSeconds != 0 {
			t.Fatalf("stats of a paused queue: paused %+v, oldest ready %v", stats.Paused, stats.OldestReadyAgeSeconds)
		}
		free() // the running job finishes
		if r, err := c.Result(ctx, slow.ID, clockWait); err != nil || r.State != errandtype.StateSucceeded {
			t.Fatalf("the job running when its queue was paused: %+v, %v", r, err)
		}

		if changed, err := other.Resume(ctx, errand.PauseTarget{Queue: errand.DefaultQueue}, "ana", "done"); err != nil || !changed {
			t.Fatalf("resume: %v, %v", changed, err)
		}
		clock.Advance(time.Second) // the paused queue's next look
		waitRan(t, ran, j.ID, clockWait)

		if _, _, err := c.Pause(ctx, errand.PauseTarget{Kind: "a"}, "bo", "bad deploy"); err != nil {
			t.Fatal(err)
		}
		ja, jb := enqueue(t, c, "a", nil), enqueue(t, c, "b", nil)
		waitRan(t, ran, jb.ID, clockWait)
		eager := enqueue(t, c, "a", &errand.EnqueueOpts{Eager: true})
		if eager.State != errandtype.StateQueued {
			t.Fatalf("an eager job of a paused kind: %s, want queued", eager.State)
		}
		blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1) // idle again, a's jobs left
		if got := getJob(t, c, ja.ID); got.State != errandtype.StateQueued {
			t.Fatalf("a job of a paused kind: %s, want queued", got.State)
		}
		stats = queueStats(t, c, errand.DefaultQueue)
		if stats.Paused != nil || len(stats.PausedKinds) != 1 || stats.PausedKinds[0] != (errandtype.KindCount{Kind: "a", Waiting: 2}) {
			t.Fatalf("stats with kind a paused: paused %+v, paused kinds %+v", stats.Paused, stats.PausedKinds)
		}
		ins, err := c.Insights(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ins.Kinds {
			if k.Kind == "a" && (k.Paused != 2 || k.Ready != 0) {
				t.Fatalf("insights of paused kind a: paused %d, ready %d; want 2 and 0", k.Paused, k.Ready)
			}
		}
		if _, err := c.Resume(ctx, errand.PauseTarget{Kind: "a"}, "bo", ""); err != nil {
			t.Fatal(err)
		}
		waitRanAll(t, ran, clockWait, ja.ID, eager.ID)
	})
}

// TestPauseRefused: a pause names one queue or one kind, by a valid name.
func TestPauseRefused(t *testing.T) {
	c := newClient(t, openStore(t, nil), &errand.Config{})
	for _, target := range []errand.PauseTarget{{}, {Queue: "q", Kind: "k"}, {Queue: "bad name\x00"}} {
		var ie *errandtype.InputError
		if _, _, err := c.Pause(context.Background(), target, "ana", ""); !errors.As(err, &ie) {
			t.Errorf("Pause(%+v): %v, want an input error", target, err)
		}
	}
	if ps, err := c.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Fatalf("pauses after refusals: %+v, %v", ps, err)
	}
}

func queueStats(t *testing.T, c *errand.Client[*sql.Tx], queue string) errandtype.QueueStats {
	t.Helper()
	qs, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Queue == queue {
			return q
		}
	}
	t.Fatalf("no stats of queue %s", queue)
	return errandtype.QueueStats{}
}

// waitRanAll waits until every job of ids has run, in any order.
func waitRanAll(t *testing.T, ran <-chan string, limit time.Duration, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(limit)
	for len(want) > 0 {
		select {
		case id := <-ran:
			delete(want, id)
		case <-deadline:
			t.Fatalf("jobs %v did not run", want)
		}
	}
}
