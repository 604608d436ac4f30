package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

type manyArgs struct {
	N int `json:"n"`
}

func (manyArgs) Kind() string { return "many" }

// manyClient returns a client whose kind "many" is run by fn, n jobs
// enqueued with args 0 to n-1 (ids many-0...), and the ids.
func manyClient(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, n int, opts *errand.ManyOpts,
	fn func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error) (*errand.Client[*sql.Tx], []string) {
	t.Helper()
	ks := errand.NewKinds()
	errand.HandleMany(ks, fn, opts)
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: ks})
	var ids []string
	for i := range n {
		r, err := c.Enqueue(context.Background(), manyArgs{N: i}, &errand.EnqueueOpts{ID: "many-" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	return c, ids
}

// runManyWorker starts a worker with slots slots once every job is
// enqueued, so that its first claim takes them all, and waits until it has
// finished n attempts.
func runManyWorker(t *testing.T, c *errand.Client[*sql.Tx], slots, n int) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: slots}, PollInterval: time.Hour, PollOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	workerWaitFor(t, 20*time.Second, func() bool { st := w.Stats(); return st.JobsCompleted+st.LeasesLost >= int64(n) })
	return w
}

func TestHandleManyTakesClaimedJobsInCallsOfAtMostMax(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var mu sync.Mutex
		var sizes []int
		var seen []int
		c, ids := manyClient(t, s, clock, 5, &errand.ManyOpts{Max: 3}, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			mu.Lock()
			defer mu.Unlock()
			sizes = append(sizes, len(jobs))
			for _, j := range jobs {
				seen = append(seen, j.Args.N)
			}
			return make([]error, len(jobs))
		})
		w := runManyWorker(t, c, 10, 5)
		mu.Lock()
		slices.Sort(sizes)
		slices.Sort(seen)
		if !slices.Equal(sizes, []int{2, 3}) || !slices.Equal(seen, []int{0, 1, 2, 3, 4}) {
			t.Errorf("calls of %v jobs with args %v; want calls of 2 and 3 jobs, args 0 to 4 once each", sizes, seen)
		}
		mu.Unlock()
		for _, id := range ids {
			if j := getJob(t, c, id); j.State != errandtype.StateSucceeded || j.Attempt != 1 {
				t.Errorf("job %s: %s attempt %d, want succeeded on attempt 1", id, j.State, j.Attempt)
			}
		}
		if st := w.Stats(); st.JobsCompleted != 5 || st.JobsRunning != 0 {
			t.Errorf("stats %+v, want 5 completed, none running", st)
		}
	})
}

func TestHandleManyRecordsAnOutcomePerJob(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		calls := 0
		c, ids := manyClient(t, s, clock, 3, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			calls++
			errs := make([]error, len(jobs))
			for i, j := range jobs {
				switch j.Args.N {
				case 1:
					errs[i] = errandWithClass("flaky")
				case 2:
					errs[i] = errand.Permanent(errors.New("never"))
				}
			}
			return errs
		})
		runManyWorker(t, c, 10, 3)
		if calls != 1 {
			t.Errorf("%d calls, want the 3 jobs in 1", calls)
		}
		want := []struct {
			state errandtype.JobState
			class string
		}{{errandtype.StateSucceeded, ""}, {errandtype.StateRetrying, "flaky"}, {errandtype.StateDead, errand.ClassPermanent}}
		for i, id := range ids {
			j := getJob(t, c, id)
			class := ""
			if len(j.Errors) > 0 {
				class = j.Errors[len(j.Errors)-1].Class
			}
			if j.State != want[i].state || class != want[i].class || j.Attempt != 1 || len(j.Errors) > 1 {
				t.Errorf("job %s: %s class %q attempt %d errors %d; want %s class %q on attempt 1", id, j.State, class, j.Attempt, len(j.Errors), want[i].state, want[i].class)
			}
		}
	})
}

func errandWithClass(class string) error { return errand.WithClass(class, errors.New(class)) }

func TestHandleManyPanicFailsEveryJobOfTheCall(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c, ids := manyClient(t, s, clock, 2, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			panic("boom")
		})
		runManyWorker(t, c, 10, 2)
		for _, id := range ids {
			j := getJob(t, c, id)
			if j.State != errandtype.StateRetrying || len(j.Errors) != 1 || j.Errors[0].Class != errand.ClassPanic ||
				!strings.Contains(j.Errors[0].Message, "boom") || j.Errors[0].Stack == "" {
				t.Errorf("job %s: %s errors %+v; want retrying with one panic error and its stack", id, j.State, j.Errors)
			}
		}
	})
}

func TestHandleManyWrongResultCountFailsEveryJob(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c, ids := manyClient(t, s, clock, 2, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			return []error{nil}
		})
		runManyWorker(t, c, 10, 2)
		for _, id := range ids {
			j := getJob(t, c, id)
			if j.State != errandtype.StateRetrying || len(j.Errors) != 1 || j.Errors[0].Class != errand.ClassResultCount {
				t.Errorf("job %s: %s errors %+v; want retrying with class %s", id, j.State, j.Errors, errand.ClassResultCount)
			}
		}
	})
}

func TestHandleManyLostLeaseIsNotAcknowledged(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var c *errand.Client[*sql.Tx]
		c, ids := manyClient(t, s, clock, 2, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			// Another party ends the second job's lease while the call
			// runs; the handler then reports both done.
			for _, j := range jobs {
				if j.Args.N == 1 {
					if _, err := c.Fail(ctx, j.Job.ID, *j.Job.LeaseToken, &errand.FailOpts{Class: "taken", Message: "taken"}); err != nil {
						t.Errorf("fail the second job: %v", err)
					}
				}
			}
			return make([]error, len(jobs))
		})
		w := runManyWorker(t, c, 10, 2)
		if j := getJob(t, c, ids[0]); j.State != errandtype.StateSucceeded {
			t.Errorf("job %s: %s, want succeeded", ids[0], j.State)
		}
		if j := getJob(t, c, ids[1]); j.State != errandtype.StateRetrying || len(j.Errors) != 1 || j.Errors[0].Class != "taken" {
			t.Errorf("job %s: %s errors %+v, want retrying as the other party left it", ids[1], j.State, j.Errors)
		}
		if st := w.Stats(); st.LeasesLost != 1 || st.JobsCompleted != 1 {
			t.Errorf("stats %+v, want 1 completed and 1 lease lost", st)
		}
	})
}

func TestHandleManyRefusesABadMax(t *testing.T) {
	ks := errand.NewKinds()
	errand.HandleMany(ks, func(context.Context, []*errand.ManyJob[manyArgs]) []error { return nil }, &errand.ManyOpts{Max: -1})
	_, err := errand.NewClient(openStore(t, newTestClock()), &errand.Config{Kinds: ks})
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || ie.Field != "Kinds.many.Max" {
		t.Fatalf("NewClient: %v, want an input error on Kinds.many.Max", err)
	}
}

func TestHandleManyOutsideAWorkerTakesOneJob(t *testing.T) {
	clock := newTestClock()
	var sizes []int
	c, ids := manyClient(t, openStore(t, clock), clock, 1, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
		sizes = append(sizes, len(jobs))
		return []error{nil}
	})
	r, err := c.WorkOne(context.Background(), nil)
	if err != nil || r == nil || r.Result != errand.ResultSucceeded || !slices.Equal(sizes, []int{1}) {
		t.Fatalf("WorkOne: %+v, %v, calls %v; want job %s succeeded in one call of one job", r, err, sizes, ids[0])
	}
}

func TestHandleManyLeavesOutAJobWhoseArgsDoNotDecode(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var mu sync.Mutex
		var seen []int
		c, ids := manyClient(t, s, clock, 2, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			mu.Lock()
			defer mu.Unlock()
			for _, j := range jobs {
				seen = append(seen, j.Args.N)
			}
			return make([]error, len(jobs))
		})
		// Args of a version newer than the handler's: dead-lettered
		// before the call, which goes on without it.
		newer, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "many", JSON: []byte(`{"n":9}`), Version: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		runManyWorker(t, c, 10, 3)
		mu.Lock()
		slices.Sort(seen)
		if !slices.Equal(seen, []int{0, 1}) {
			t.Errorf("handler saw args %v, want 0 and 1", seen)
		}
		mu.Unlock()
		if j := getJob(t, c, newer.Job.ID); j.State != errandtype.StateDead || len(j.Errors) != 1 || j.Errors[0].Class != errand.ClassUnknownVersion {
			t.Errorf("newer job: %s errors %+v, want dead with class %s", j.State, j.Errors, errand.ClassUnknownVersion)
		}
		for _, id := range ids {
			if j := getJob(t, c, id); j.State != errandtype.StateSucceeded {
				t.Errorf("job %s: %s, want succeeded", id, j.State)
			}
		}
	})
}

func TestHandleManyGivesEachJobItsOwnContext(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c, ids := manyClient(t, s, clock, 2, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			errs := make([]error, len(jobs))
			for i, j := range jobs {
				// A checkpoint through the job's own context lands on
				// that job.
				if err := errand.SetProgress(j.Context(), j.Args.N); err != nil {
					errs[i] = err
				}
			}
			return errs
		})
		runManyWorker(t, c, 10, 2)
		for i, id := range ids {
			if j := getJob(t, c, id); j.State != errandtype.StateSucceeded || string(j.Progress) != string(rune('0'+i)) {
				t.Errorf("job %s: %s progress %s, want succeeded with progress %d", id, j.State, j.Progress, i)
			}
		}
	})
}

func TestHandleManyLostLeaseEndsOnlyThatJobsContext(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		const lease = time.Minute
		var c *errand.Client[*sql.Tx]
		c, ids := manyClient(t, s, clock, 2, nil, func(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
			if len(jobs) != 2 {
				t.Errorf("%d jobs, want 2", len(jobs))
				return make([]error, len(jobs))
			}
			lost, kept := jobs[0], jobs[1]
			if kept.Args.N == 1 {
				lost, kept = kept, lost
			}
			if _, err := c.Fail(ctx, lost.Job.ID, *lost.Job.LeaseToken, &errand.FailOpts{Class: "taken", Message: "taken"}); err != nil {
				t.Errorf("fail the second job: %v", err)
			}
			// The first heartbeat finds the second job's lease lost.
			wait, cancel := context.WithTimeout(context.Background(), clockWait)
			defer cancel()
			if err := clock.BlockUntilAt(wait, clock.Now().Add(lease/3), 1); err != nil {
				t.Errorf("no heartbeat armed: %v", err)
			}
			clock.Advance(lease / 3)
			select {
			case <-lost.Context().Done():
			case <-wait.Done():
				t.Errorf("the lost job's context did not end")
			}
			if kept.Context().Err() != nil || ctx.Err() != nil {
				t.Errorf("kept job's context %v, call's %v; want both going on", kept.Context().Err(), ctx.Err())
			}
			return make([]error, len(jobs))
		})
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 10}, Lease: lease, PollInterval: time.Hour, PollOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop(context.Background()) })
		workerWaitFor(t, 20*time.Second, func() bool { st := w.Stats(); return st.JobsCompleted+st.LeasesLost >= 2 })
		if j := getJob(t, c, ids[0]); j.State != errandtype.StateSucceeded {
			t.Errorf("job %s: %s, want succeeded", ids[0], j.State)
		}
		if j := getJob(t, c, ids[1]); j.State != errandtype.StateRetrying || len(j.Errors) != 1 || j.Errors[0].Class != "taken" {
			t.Errorf("job %s: %s errors %+v, want retrying as the other party left it", ids[1], j.State, j.Errors)
		}
	})
}

// lingerWorker starts a worker polling every poll, on the fake clock.
func lingerWorker(t *testing.T, c *errand.Client[*sql.Tx], poll time.Duration) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 10}, Lease: 5 * time.Minute, PollInterval: poll, PollOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// callSizes records the sizes of a many handler's calls.
type callSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (s *callSizes) fn(ctx context.Context, jobs []*errand.ManyJob[manyArgs]) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes = append(s.sizes, len(jobs))
	return make([]error, len(jobs))
}

func (s *callSizes) get() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sizes)
}

func TestHandleManyLingerGathersJobsOfLaterClaims(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		const poll, linger = 10 * time.Second, 30 * time.Second
		var calls callSizes
		c, _ := manyClient(t, s, clock, 1, &errand.ManyOpts{Max: 5, Linger: linger}, calls.fn)
		t0 := clock.Now()
		w := lingerWorker(t, c, poll)
		blockUntilAt(t, clock, t0.Add(poll), 1) // the first claim took job a; the queue is idle
		if _, err := c.Enqueue(context.Background(), manyArgs{N: 1}, &errand.EnqueueOpts{ID: "many-b"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(poll)
		blockUntilAt(t, clock, t0.Add(2*poll), 1) // the next claim took job b
		workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsRunning == 2 })
		if got := calls.get(); len(got) != 0 {
			t.Fatalf("calls of %v jobs before the linger passed; want none", got)
		}
		clock.Advance(linger - poll)
		workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsCompleted == 2 })
		if got := calls.get(); !slices.Equal(got, []int{2}) {
			t.Errorf("calls of %v jobs; want one call of the 2 jobs of two claims", got)
		}
	})
}

func TestHandleManyLingerDoesNotDelayAFullCall(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		const linger = 30 * time.Second
		var calls callSizes
		c, _ := manyClient(t, s, clock, 3, &errand.ManyOpts{Max: 2, Linger: linger}, calls.fn)
		w := lingerWorker(t, c, time.Hour)
		// The clock stands still: a call of Max jobs starts at once.
		workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsCompleted == 2 })
		if got, st := calls.get(), w.Stats(); !slices.Equal(got, []int{2}) || st.JobsRunning != 1 {
			t.Fatalf("calls of %v jobs, %d running; want one call of 2, the third job waiting", got, st.JobsRunning)
		}
		clock.Advance(linger)
		workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsCompleted == 3 })
		if got := calls.get(); !slices.Equal(got, []int{2, 1}) {
			t.Errorf("calls of %v jobs; want 2, then 1 once the linger passed", got)
		}
	})
}

func TestHandleManyLingerEndsWhenTheWorkerStops(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var calls callSizes
		c, ids := manyClient(t, s, clock, 1, &errand.ManyOpts{Max: 5, Linger: 30 * time.Second}, calls.fn)
		w := lingerWorker(t, c, time.Hour)
		workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsRunning == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), clockWait)
		defer cancel()
		if err := w.Stop(ctx); err != nil || ctx.Err() != nil {
			t.Fatalf("stop: %v, %v; want the lingering call made at once", err, ctx.Err())
		}
		if got := calls.get(); !slices.Equal(got, []int{1}) {
			t.Errorf("calls of %v jobs; want the lingering call of 1", got)
		}
		if j := getJob(t, c, ids[0]); j.State != errandtype.StateSucceeded {
			t.Errorf("job %s: %s, want succeeded", ids[0], j.State)
		}
	})
}

func TestHandleManyLingerUnderHalfTheLease(t *testing.T) {
	clock := newTestClock()
	c, _ := manyClient(t, openStore(t, clock), clock, 0, &errand.ManyOpts{Linger: 20 * time.Second}, nil)
	_, err := c.NewWorker(&errand.WorkerConfig{Lease: 30 * time.Second})
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || ie.Field != "Kinds.many.Linger" {
		t.Fatalf("NewWorker: %v, want an input error on Kinds.many.Linger", err)
	}
}

func TestHandleManyRefusesABadLinger(t *testing.T) {
	for _, o := range []*errand.ManyOpts{
		{Linger: -time.Second},
		{Linger: errand.MaxManyLinger + time.Second},
		{Linger: time.Minute, KindOpts: errand.KindOpts{Timeout: 30 * time.Second}},
	} {
		ks := errand.NewKinds()
		errand.HandleMany(ks, func(context.Context, []*errand.ManyJob[manyArgs]) []error { return nil }, o)
		_, err := errand.NewClient(openStore(t, nil), &errand.Config{Kinds: ks})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "Linger") {
			t.Errorf("linger %v timeout %v: %v; want an input error about Linger", o.Linger, o.Timeout, err)
		}
	}
}

// TestHandleManyRawPassesArgsAsStored: a raw many handler gets its jobs'
// args and versions as stored, undecoded, in calls of at most Max, and a
// replay that replaces the args keeps the job's version.
func TestHandleManyRawPassesArgsAsStored(t *testing.T) {
	clock := newTestClock()
	s := openStore(t, clock)
	var mu sync.Mutex
	var sizes []int
	got := map[string]errand.RawArgs{}
	ks := errand.NewKinds()
	errand.HandleManyRaw(ks, "raw", func(ctx context.Context, jobs []*errand.ManyJob[errand.RawArgs]) []error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(jobs))
		errs := make([]error, len(jobs))
		for i, j := range jobs {
			got[j.Job.ID] = j.Args
			if j.Job.ID == "r2" {
				errs[i] = errand.Permanent(errors.New("no"))
			}
		}
		return errs
	}, &errand.ManyOpts{Max: 2})
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: ks})
	for i, args := range []string{`{"a":1}`, `[1,2]`, `"x"`} {
		enqueueRaw := errand.RawArgs{KindName: "raw", JSON: []byte(args), Version: i + 1}
		if _, err := c.Enqueue(context.Background(), enqueueRaw, &errand.EnqueueOpts{ID: "r" + string(rune('0'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	runManyWorker(t, c, 10, 3)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{1, 2}) {
		t.Errorf("calls of %v jobs; want calls of 1 and 2", sizes)
	}
	if a := got["r1"]; string(a.JSON) != `[1,2]` || a.Version != 2 || a.KindName != "raw" {
		t.Errorf("r1's args %+v (%s); want [1,2] version 2", a, a.JSON)
	}
	if j := getJob(t, c, "r2"); j.State != errandtype.StateDead {
		t.Fatalf("r2 is %s, want dead", j.State)
	}
	j, err := c.Replay(context.Background(), "r2", &errand.ReplayOpts{Operator: "ana", Reason: "fixed", Args: []byte(`{"fixed":true}`)})
	if err != nil || j.ArgsVersion != 3 {
		t.Fatalf("replay with new args: version %d, %v; want the job's 3 kept", j.ArgsVersion, err)
	}
}
