package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// doneArgs are the callback's args in these tests.
type doneArgs struct {
	Import int                     `json:"import"`
	Batch  errandstore.BatchResult `json:"batch"`
}

func (doneArgs) Kind() string { return "import_done" }

// memberArgs are a member's args: every tenth dies.
type memberArgs struct {
	N int `json:"n"`
}

func (memberArgs) Kind() string { return "import_row" }

func memberParams(n int) []errand.EnqueueParams {
	ps := make([]errand.EnqueueParams, n)
	for i := range ps {
		ps[i] = errand.EnqueueParams{Args: memberArgs{N: i}}
	}
	return ps
}

// sharedStores opens n stores on one fresh database of each kind, for
// workers that play separate processes: one SQLite file (SQLite has one
// writer per file whatever the number of handles, so one store serves its
// workers), or n PostgreSQL pools on one schema.
func sharedStores(t *testing.T, body func(t *testing.T, stores []errandstore.TxStore[*sql.Tx])) {
	t.Run("sqlite", func(t *testing.T) {
		st := openStoreAt(t, filepath.Join(t.TempDir(), "errand.db"), nil)
		body(t, []errandstore.TxStore[*sql.Tx]{st})
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		schema := pgschemas.Take(t, url)
		var stores []errandstore.TxStore[*sql.Tx]
		for range 8 {
			s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			v := s.SQL(nil)
			t.Cleanup(func() { v.Close() })
			stores = append(stores, v)
		}
		body(t, stores)
	})
}

// TestBatchCallbackOnceUnderConcurrentWorkers: a batch of 1,000 jobs worked
// by 8 concurrent workers fires its callback exactly once, with the right
// counts, however the last members' outcomes race.
func TestBatchCallbackOnceUnderConcurrentWorkers(t *testing.T) {
	t.Parallel()
	sharedStores(t, func(t *testing.T, stores []errandstore.TxStore[*sql.Tx]) {
		ctx := t.Context()
		var calls atomic.Int32
		var got atomic.Pointer[doneArgs]
		newWorkerClient := func(st errandstore.TxStore[*sql.Tx]) *errand.Client[*sql.Tx] {
			ks := errand.NewKinds()
			errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a memberArgs) error {
				if a.N%10 == 0 {
					return errand.Permanent(errors.New("bad row"))
				}
				return nil
			}, nil)
			errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a doneArgs) error {
				calls.Add(1)
				got.Store(&a)
				return nil
			}, nil)
			return newClient(t, st, &errand.Config{Kinds: ks})
		}
		var workers []*errand.Worker
		for i := range 8 {
			c := newWorkerClient(stores[i%len(stores)])
			w, err := c.NewWorker(&errand.WorkerConfig{
				// One queue, polled every 200ms: on SQLite every claim is a
				// write transaction, and idle polls of eight workers would
				// crowd the single writer on a loaded machine.
				Queues:       map[string]int{errand.DefaultQueue: 4},
				PollInterval: 200 * time.Millisecond,
				Owner:        fmt.Sprintf("worker-%d", i),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			workers = append(workers, w)
		}
		defer func() {
			for _, w := range workers {
				sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := w.Stop(sctx); err != nil {
					t.Errorf("stop worker: %v", err)
				}
				cancel()
			}
		}()

		producer := newWorkerClient(stores[0])
		res, err := producer.EnqueueBatch(ctx, memberParams(1000), &errand.BatchOpts{
			ID: "import-42", Callback: doneArgs{Import: 42}, CallbackOpts: &errand.EnqueueOpts{Priority: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Duplicate || len(res.Jobs) != 1000 {
			t.Fatalf("EnqueueBatch = duplicate %v, %d jobs", res.Duplicate, len(res.Jobs))
		}

		deadline := time.Now().Add(15 * time.Minute) // generous: a shared, loaded machine under -race
		var cb *errandtype.Job
		for {
			j, err := producer.Get(ctx, errandstore.BatchCallbackJobID("import-42"))
			if err == nil && j.State == errandtype.StateSucceeded {
				cb = j
				break
			}
			if time.Now().After(deadline) {
				b, _ := producer.Batch(ctx, "import-42")
				t.Fatalf("the callback did not run; batch %+v", b)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Give a duplicate completion every chance to show up: one more
		// leader pass and every worker's outcomes are in.
		if n, err := errand.CompleteOpenBatches(ctx, producer); err != nil || n != 0 {
			t.Fatalf("leader pass after completion completed %d (%v), want 0", n, err)
		}
		if n := calls.Load(); n != 1 || cb.Attempt != 1 {
			t.Fatalf("callback ran %d times (job attempt %d), want once", n, cb.Attempt)
		}
		want := errandstore.BatchResult{ID: "import-42", Total: 1000, Succeeded: 900, Dead: 100}
		a := got.Load()
		want.CompletedAt = a.Batch.CompletedAt
		if a.Import != 42 || a.Batch != want || a.Batch.CompletedAt.IsZero() {
			t.Fatalf("callback args = %+v, want import 42 and %+v", *a, want)
		}
		b, err := producer.Batch(ctx, "import-42")
		if err != nil {
			t.Fatal(err)
		}
		if b.Pending() != 0 || b.Final == nil || *b.Final != want || b.CallbackJobID == nil {
			t.Fatalf("batch = %+v", b)
		}
	})
}

// hookClient returns a client whose kind "charge" fails as its args say
// and dead-letters into a "refund" hook job in queue compensations.
func hookClient(t *testing.T, st errandstore.TxStore[*sql.Tx], clock errand.TimeSource) *errand.Client[*sql.Tx] {
	ks := errand.NewKinds()
	ks.HandleRaw("charge", errand.HandlerFunc(func(ctx context.Context, job *errandtype.Job) error {
		var a struct{ Mode string }
		_ = json.Unmarshal(job.Args, &a)
		if a.Mode == "permanent" {
			return errand.Permanent(errors.New("card declined"))
		}
		return errors.New("gateway down")
	}), &errand.KindOpts{OnDead: func(job *errandtype.Job) (errand.JobArgs, *errand.EnqueueOpts) {
		if job.ID == "no-hook" {
			return nil, nil
		}
		return errand.RawArgs{KindName: "refund", JSON: json.RawMessage(fmt.Sprintf(`{"charge":%q}`, job.ID))},
			&errand.EnqueueOpts{Queue: "compensations", ID: "ignored"}
	}})
	ks.HandleRaw("refund", nil, nil)
	return newClient(t, st, &errand.Config{Kinds: ks, Clock: clock})
}

// wantHook requires the hook job of job id's death in cycle replays, and
// returns it.
func wantHook(t *testing.T, c *errand.Client[*sql.Tx], id string, replays int) *errandtype.Job {
	t.Helper()
	h, err := c.Get(t.Context(), errand.DeadHookJobID(id, replays))
	if err != nil {
		t.Fatalf("hook of %s (replay %d): %v", id, replays, err)
	}
	var a struct{ Charge string }
	if err := json.Unmarshal(h.Args, &a); err != nil || h.Kind != "refund" || h.Queue != "compensations" || a.Charge != id {
		t.Fatalf("hook job = %s %s %s", h.Kind, h.Queue, h.Args)
	}
	return h
}

func noHook(t *testing.T, c *errand.Client[*sql.Tx], id string, replays int) {
	t.Helper()
	if _, err := c.Get(t.Context(), errand.DeadHookJobID(id, replays)); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("hook of %s (replay %d) = %v, want none yet", id, replays, err)
	}
}

// TestOnDeadHookEveryPath: every path to dead enqueues the kind's hook job
// once: a permanent error and used-up attempts at once, by the worker that
// recorded them; a lease swept on the final attempt, a passed deadline and
// a death the worker did not follow up (a crash) by the scanner; a replayed
// job that dies again gets a hook of its own.
func TestOnDeadHookEveryPath(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		c := hookClient(t, st, clock)
		enq := func(id, mode string, o errand.EnqueueOpts) {
			t.Helper()
			o.ID = id
			if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "charge", JSON: json.RawMessage(`{"Mode":"` + mode + `"}`)}, &o); err != nil {
				t.Fatal(err)
			}
		}
		work := func(id string) {
			t.Helper()
			r := workOne(t, c, nil)
			if r.JobID == nil || *r.JobID != id || r.Result != errand.ResultDead {
				t.Fatalf("work one = %+v, want %s dead", r, id)
			}
		}

		// A permanent error, then attempts used up: the worker enqueues
		// the hook as it records the death.
		enq("perm", "permanent", errand.EnqueueOpts{})
		work("perm")
		wantHook(t, c, "perm", 0)
		enq("exhausted", "fail", errand.EnqueueOpts{MaxAttempts: 1})
		work("exhausted")
		wantHook(t, c, "exhausted", 0)

		// A lease expired on the final attempt, swept to dead.
		enq("swept", "fail", errand.EnqueueOpts{MaxAttempts: 1})
		js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 30 * time.Second, Owner: "crashed"})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v %v", js, err)
		}
		clock.Advance(31 * time.Second)
		// A deadline passed while the job waited.
		enq("expired", "fail", errand.EnqueueOpts{MaxAge: time.Minute})
		clock.Advance(2 * time.Minute)
		// A worker that crashed between the outcome and the hook: the
		// outcome alone is written.
		enq("crash", "permanent", errand.EnqueueOpts{})
		js, err = st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 30 * time.Second, Owner: "w", Kinds: []string{"charge"}})
		if err != nil || len(js) != 1 || js[0].ID != "crash" {
			t.Fatalf("claim crash: %v %v", js, err)
		}
		if _, err := st.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{
			JobLease: errandstore.JobLease{ID: "crash", LeaseToken: *js[0].LeaseToken}, Kind: errandstore.OutcomeDead,
			Error: &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "declined"}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"swept", "expired", "crash"} {
			if j := getJob(t, c, id); j.State != errandtype.StateDead {
				t.Fatalf("%s is %s, want dead", id, j.State)
			}
			noHook(t, c, id, 0)
		}
		n, err := errand.ScanDeadHooks(ctx, c)
		if err != nil || n != 3 {
			t.Fatalf("scan found %d (%v), want the 3 dead jobs without hooks", n, err)
		}
		for _, id := range []string{"swept", "expired", "crash"} {
			wantHook(t, c, id, 0)
		}
		if n, err := errand.ScanDeadHooks(ctx, c); err != nil || n != 0 {
			t.Fatalf("a second scan found %d (%v), want none", n, err)
		}

		// A replayed job that dies again fires again; its first hook stays
		// the only one of its first death.
		if _, err := c.Replay(ctx, "perm", &errand.ReplayOpts{Operator: "ops", Reason: "retry the card"}); err != nil {
			t.Fatal(err)
		}
		work("perm")
		wantHook(t, c, "perm", 1)

		// A hook that returns no args enqueues nothing, and the scanner
		// does not count that as a failure.
		enq("no-hook", "permanent", errand.EnqueueOpts{})
		work("no-hook")
		noHook(t, c, "no-hook", 0)
		refunds, err := c.List(ctx, &errand.ListOpts{Kind: "refund", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(refunds) != 6 {
			t.Fatalf("%d hook jobs, want 6 (one per death)", len(refunds))
		}
	})
}

// TestBatchCompletionPaths: the worker that records the last member's
// outcome completes the batch at once; a member swept to dead is caught by
// the leader's pass; a cancel through the client completes at once.
func TestBatchCompletionPaths(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		ks := errand.NewKinds()
		errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a memberArgs) error { return nil }, &errand.KindOpts{MaxAttempts: 1})
		errand.Declare[doneArgs](ks, nil)
		c := newClient(t, st, &errand.Config{Kinds: ks, Clock: clock})
		cbOf := func(id string) *errandtype.Job {
			t.Helper()
			return getJob(t, c, errandstore.BatchCallbackJobID(id))
		}

		// Worker path.
		if _, err := c.EnqueueBatch(ctx, memberParams(2), &errand.BatchOpts{ID: "w", Callback: doneArgs{Import: 1}}); err != nil {
			t.Fatal(err)
		}
		workOne(t, c, nil)
		if _, err := c.Get(ctx, errandstore.BatchCallbackJobID("w")); !errors.Is(err, errandtype.ErrNotFound) {
			t.Fatalf("callback before the last member: %v", err)
		}
		workOne(t, c, nil)
		var a doneArgs
		if err := json.Unmarshal(cbOf("w").Args, &a); err != nil || a.Batch.Succeeded != 2 || a.Import != 1 {
			t.Fatalf("callback args %+v (%v)", a, err)
		}

		// Sweep path: the last member's worker dies on its only attempt.
		if _, err := c.EnqueueBatch(ctx, memberParams(2), &errand.BatchOpts{ID: "s", Callback: doneArgs{Import: 2}}); err != nil {
			t.Fatal(err)
		}
		workOne(t, c, nil)
		if _, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 30 * time.Second, Owner: "crashed", Kinds: []string{"import_row"}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(31 * time.Second)
		if _, err := st.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, errandstore.BatchCallbackJobID("s")); !errors.Is(err, errandtype.ErrNotFound) {
			t.Fatalf("callback before the leader's pass: %v", err)
		}
		if n, err := errand.CompleteOpenBatches(ctx, c); err != nil || n != 1 {
			t.Fatalf("leader pass completed %d (%v), want 1", n, err)
		}
		if err := json.Unmarshal(cbOf("s").Args, &a); err != nil || a.Batch.Succeeded != 1 || a.Batch.Dead != 1 {
			t.Fatalf("callback args %+v (%v)", a, err)
		}
		if n, err := errand.CompleteOpenBatches(ctx, c); err != nil || n != 0 {
			t.Fatalf("second leader pass completed %d (%v), want 0", n, err)
		}

		// Cancel path, in the caller's transaction.
		err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := c.EnqueueBatchTx(ctx, tx, memberParams(1), &errand.BatchOpts{ID: "c", Callback: doneArgs{Import: 3}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Batch(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		// memberParams' single job has a generated id: find it.
		js, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateQueued}, Kind: "import_row"})
		if err != nil || len(js) != 1 || js[0].BatchID == nil || *js[0].BatchID != "c" || b.Pending() != 1 {
			t.Fatalf("queued member: %v %v, batch %+v", js, err, b)
		}
		if _, err := c.Cancel(ctx, js[0].ID, &errand.CancelOpts{Operator: "ops", Reason: "not needed"}); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(cbOf("c").Args, &a); err != nil || a.Batch.Cancelled != 1 {
			t.Fatalf("callback args %+v (%v)", a, err)
		}
	})
}

// TestEnqueueBatchRefusals: what a batch refuses, before anything is
// written.
func TestEnqueueBatchRefusals(t *testing.T) {
	st := openStore(t, nil)
	c := newClient(t, st, nil)
	ctx := t.Context()
	var ie *errandtype.InputError
	for name, opts := range map[string]*errand.BatchOpts{
		"callback id":       {Callback: doneArgs{}, CallbackOpts: &errand.EnqueueOpts{ID: "x"}},
		"callback run at":   {Callback: doneArgs{}, CallbackOpts: &errand.EnqueueOpts{RunAt: time.Now()}},
		"callback key":      {Callback: doneArgs{}, CallbackOpts: &errand.EnqueueOpts{UniqueKey: "k"}},
		"callback start by": {Callback: doneArgs{}, CallbackOpts: &errand.EnqueueOpts{StartBy: time.Now().Add(time.Hour)}},
		"callback array":    {Callback: errand.RawArgs{KindName: "k", JSON: json.RawMessage(`[1]`)}},
		"long id":           {ID: string(make([]byte, errandstore.MaxBatchIDBytes+1))},
	} {
		if _, err := c.EnqueueBatch(ctx, memberParams(1), opts); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an *InputError", name, err)
		}
	}
	if _, err := c.EnqueueBatch(ctx, nil, nil); !errors.As(err, &ie) {
		t.Errorf("empty batch: %v, want an *InputError", err)
	}
	if js, err := c.List(ctx, &errand.ListOpts{}); err != nil || len(js) != 0 {
		t.Fatalf("refused batches wrote %d jobs (%v)", len(js), err)
	}
}

// TestOnDeadHookOncePerDeathUnderConcurrentScans: several processes that
// notice the same deaths at once enqueue one hook job per death.
func TestOnDeadHookOncePerDeathUnderConcurrentScans(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		var clients []*errand.Client[*sql.Tx]
		for range 4 {
			clients = append(clients, hookClient(t, st, clock))
		}
		for i := range 20 {
			if _, err := clients[0].Enqueue(ctx, errand.RawArgs{KindName: "charge"}, &errand.EnqueueOpts{ID: fmt.Sprintf("c%d", i), MaxAttempts: 1}); err != nil {
				t.Fatal(err)
			}
		}
		// Claimed by a worker that dies: the sweep kills them all.
		if _, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 20, Lease: 30 * time.Second, Owner: "crashed"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(31 * time.Second)
		if r, err := st.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil || r.Dead != 20 {
			t.Fatalf("sweep: %+v %v", r, err)
		}
		errs := make(chan error, len(clients))
		for _, c := range clients {
			go func() {
				_, err := errand.ScanDeadHooks(ctx, c)
				errs <- err
			}()
		}
		for range clients {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		refunds, err := clients[0].List(ctx, &errand.ListOpts{Kind: "refund", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(refunds) != 20 {
			t.Fatalf("%d hook jobs for 20 deaths noticed by 4 scanners, want 20", len(refunds))
		}
	})
}
