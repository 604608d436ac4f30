package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	"github.com/errandhq/errand/sqlite"
)

// onBothStores runs fn on a fresh SQLite file and a fresh PostgreSQL
// schema, each on clock.
func onBothStores(t *testing.T, fn func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx])) {
	t.Run("sqlite", func(t *testing.T) {
		clock := newTestClock()
		fn(t, clock, openStore(t, clock))
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		clock := newTestClock()
		s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgschemas.Take(t, url), Clock: clock, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, clock, s.SQL(nil))
	})
}

// TestStepsRunOnce: a handler of three steps that fails after the second,
// then after the third: each step's function runs once, later attempts get
// the recorded results, and the job succeeds on its third attempt with the
// steps in its record.
func TestStepsRunOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var runs [3]atomic.Int32
		var attempt int
		var final string
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			attempt++
			a, err := errand.Step(ctx, "a", func(context.Context) (int, error) { runs[0].Add(1); return 40, nil })
			if err != nil {
				return err
			}
			b, err := errand.Step(ctx, "b", func(context.Context) (string, error) { runs[1].Add(1); return fmt.Sprint(a + 2), nil })
			if err != nil {
				return err
			}
			if attempt == 1 {
				return errors.New("crash after b")
			}
			c, err := errand.Step(ctx, "c", func(context.Context) ([]string, error) { runs[2].Add(1); return []string{b, "done"}, nil })
			if err != nil {
				return err
			}
			if attempt == 2 {
				return errors.New("crash after c")
			}
			final = strings.Join(c, " ")
			return nil
		})
		id := enqueue(t, c, "task", nil).ID
		for range 3 {
			workOne(t, c, nil)
			clock.Advance(time.Hour)
		}
		if j := getJob(t, c, id); j.State != errandtype.StateSucceeded || j.Attempt != 3 {
			t.Fatalf("job %s on attempt %d, want succeeded on 3", j.State, j.Attempt)
		}
		for i := range runs {
			if n := runs[i].Load(); n != 1 {
				t.Errorf("step %d ran %d times, want once", i, n)
			}
		}
		if final != "42 done" {
			t.Errorf("the last attempt saw %q, want the recorded results %q", final, "42 done")
		}
		steps, err := c.Steps(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range steps {
			got = append(got, fmt.Sprintf("%d %s %s @%d", s.Index, s.Name, s.Result, s.Attempt))
		}
		want := []string{`0 a 40 @1`, `1 b "42" @1`, `2 c ["42", "done"] @2`, `2 c ["42","done"] @2`}
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || (got[2] != want[2] && got[2] != want[3]) {
			t.Errorf("steps %q, want %q", got, want[:3])
		}
	})
}

// TestStepPermanentErrorRecorded: a step that fails permanently is
// recorded, and a replay of the dead job gets the same error back without
// running it; a step's other failures are retried on the step's own
// policy within the attempt, and are not recorded.
func TestStepPermanentErrorRecorded(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var flaky, bad atomic.Int32
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			if _, err := errand.Step(ctx, "flaky", func(context.Context) (bool, error) {
				if flaky.Add(1) < 3 {
					return false, errors.New("try again")
				}
				return true, nil
			}, errand.StepRetry(3, 0)); err != nil {
				return err
			}
			_, err := errand.Step(ctx, "bad", func(context.Context) (int, error) {
				bad.Add(1)
				return 0, errand.Permanent(errors.New("card declined"))
			})
			return err
		})
		id := enqueue(t, c, "task", nil).ID
		if r := workOne(t, c, nil); r.Result != errand.ResultDead || !strings.Contains(r.Error, "card declined") {
			t.Fatalf("first attempt: %s %q, want dead with the step's error", r.Result, r.Error)
		}
		if _, err := c.Replay(ctx, id, &errand.ReplayOpts{Operator: "ana", Reason: "again"}); err != nil {
			t.Fatal(err)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultDead || !strings.Contains(r.Error, "card declined") {
			t.Fatalf("replayed attempt: %s %q, want dead with the recorded error", r.Result, r.Error)
		}
		if flaky.Load() != 3 || bad.Load() != 1 {
			t.Errorf("flaky ran %d times (want 3: retried within the first attempt, then recorded), bad %d (want 1)", flaky.Load(), bad.Load())
		}
		// A restart clears the steps: both run again.
		if _, err := c.Replay(ctx, id, &errand.ReplayOpts{Operator: "ana", Reason: "from scratch", Restart: true}); err != nil {
			t.Fatal(err)
		}
		workOne(t, c, nil)
		if bad.Load() != 2 || flaky.Load() != 4 {
			t.Errorf("after a restart: flaky ran %d times, bad %d; want 4 and 2", flaky.Load(), bad.Load())
		}
	})
}

// TestStepsNondeterministic: code that calls another step where the job
// recorded one ends the job dead, class nondeterministic, naming both, and
// runs neither that step nor any after it.
func TestStepsNondeterministic(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		var version atomic.Int32
		var ran []string
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			names := []string{"reserve", "charge", "ship"}
			if version.Load() == 2 {
				names = []string{"reserve", "invoice", "charge", "ship"}
			}
			for i, n := range names {
				_, err := errand.Step(ctx, n, func(context.Context) (int, error) { ran = append(ran, n); return i, nil })
				if err != nil {
					// A handler that drops the error still ends the attempt as
					// nondeterministic.
					continue
				}
				if version.Load() == 1 && n == "charge" {
					return errors.New("crash after charge")
				}
			}
			return nil
		})
		version.Store(1)
		id := enqueue(t, c, "task", nil).ID
		workOne(t, c, nil)
		clock.Advance(time.Hour)
		version.Store(2)
		r := workOne(t, c, nil)
		if r.Result != errand.ResultDead || r.Class != errand.ClassNondeterministic ||
			!strings.Contains(r.Error, `"invoice"`) || !strings.Contains(r.Error, `"charge"`) {
			t.Fatalf("second attempt: %s %s %q; want dead, nondeterministic, naming invoice and charge", r.Result, r.Class, r.Error)
		}
		if strings.Join(ran, ",") != "reserve,charge" {
			t.Errorf("steps run: %v; want reserve and charge in the first attempt, nothing in the second", ran)
		}
		if j := getJob(t, c, id); j.State != errandtype.StateDead {
			t.Errorf("job %s, want dead", j.State)
		}
	})
}

// TestSleepDurable: Sleep ends the attempt without counting it and frees
// the slot; the job comes due at the recorded wake time on the injected
// clock, passes the sleep, and does not run the steps before it again.
func TestSleepDurable(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var before, after atomic.Int32
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			if _, err := errand.Step(ctx, "ask", func(context.Context) (int, error) { before.Add(1); return 1, nil }); err != nil {
				return err
			}
			// A handler that drops Sleep's error still sleeps, and the step
			// after it does not run.
			_ = errand.Sleep(ctx, 72*time.Hour)
			_, err := errand.Step(ctx, "remind", func(context.Context) (int, error) { after.Add(1); return 2, nil })
			return err
		})
		id := enqueue(t, c, "task", nil).ID
		start := clock.Now()
		if r := workOne(t, c, nil); r.Result != errand.ResultSnoozed {
			t.Fatalf("first attempt: %s %q, want snoozed", r.Result, r.Error)
		}
		j := getJob(t, c, id)
		wake := start.Add(72 * time.Hour)
		if j.Attempt != 0 || len(j.Errors) != 0 || !j.AvailableAt.Equal(wake) {
			t.Fatalf("asleep: attempt %d, history %v, available at %s; want attempt 0, no history, available at %s", j.Attempt, j.Errors, j.AvailableAt, wake)
		}
		clock.Advance(72*time.Hour - time.Second)
		if r := workOne(t, c, nil); r.JobID != nil {
			t.Fatalf("a second before its wake time the job was claimed: %s", r.Result)
		}
		clock.Advance(time.Second)
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("at the wake time: %s %q, want succeeded", r.Result, r.Error)
		}
		if before.Load() != 1 || after.Load() != 1 {
			t.Errorf("ask ran %d times, remind %d; want once each", before.Load(), after.Load())
		}
		j = getJob(t, c, id)
		if j.Attempt != 1 {
			t.Errorf("attempt %d after the sleep, want 1: a sleep counts no attempt", j.Attempt)
		}
		steps, err := c.Steps(ctx, id)
		if err != nil || len(steps) != 3 || steps[1].Name != "errand.sleep" {
			t.Errorf("steps %+v, %v; want ask, errand.sleep, remind", steps, err)
		}
	})
}

// TestStepsOutsideHandler: Step and Sleep outside a handler, and a step
// under a reserved or invalid name, are errors that say what to change.
func TestStepsOutsideHandler(t *testing.T) {
	ctx := context.Background()
	if _, err := errand.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil }); err == nil || !strings.Contains(err.Error(), "inside a handler") {
		t.Errorf("Step outside a handler: %v", err)
	}
	if err := errand.Sleep(ctx, time.Second); err == nil || !strings.Contains(err.Error(), "inside a handler") {
		t.Errorf("Sleep outside a handler: %v", err)
	}
	st := openStore(t, newTestClock())
	var errs []error
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		for _, name := range []string{"errand.mine", "", strings.Repeat("n", errandstore.MaxJobStepNameBytes+1)} {
			_, err := errand.Step(ctx, name, func(context.Context) (int, error) { return 1, nil })
			errs = append(errs, err)
		}
		return nil
	})
	id := enqueue(t, c, "task", nil).ID
	workOne(t, c, nil)
	for i, err := range errs {
		if err == nil {
			t.Errorf("bad step name %d was accepted", i)
		}
	}
	if steps, err := c.Steps(ctx, id); err != nil || len(steps) != 0 {
		t.Errorf("steps %+v, %v; want none recorded", steps, err)
	}
}

// TestPatched: a job recorded before a change goes on with the old steps,
// one that reaches the change afresh takes the new ones and records the
// marker, and both finish; a job that recorded the marker keeps taking the
// new branch.
func TestPatched(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var patched atomic.Bool
		var ran []string
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			names := []string{"reserve", "charge", "ship"}
			if patched.Load() {
				v2, err := errand.Patched(ctx, "invoice")
				if err != nil {
					return err
				}
				if v2 {
					names = []string{"reserve", "invoice", "charge", "ship"}
				}
			}
			for _, n := range names {
				if _, err := errand.Step(ctx, n, func(context.Context) (int, error) { ran = append(ran, j.ID+":"+n); return 1, nil }); err != nil {
					return err
				}
				if n == "reserve" && j.Attempt == 1 {
					return errors.New("crash after reserve")
				}
			}
			return nil
		})
		// old's record has "reserve" where the new code looks for the
		// marker: it ran the code before the change.
		old := enqueue(t, c, "task", &errand.EnqueueOpts{ID: "old"}).ID
		workOne(t, c, nil) // old records reserve with the code before the change
		patched.Store(true)
		fresh := enqueue(t, c, "task", &errand.EnqueueOpts{ID: "fresh"}).ID
		for range 4 {
			clock.Advance(time.Hour)
			workOne(t, c, nil)
		}
		for _, id := range []string{old, fresh} {
			if j := getJob(t, c, id); j.State != errandtype.StateSucceeded {
				t.Errorf("job %s: %s %v, want succeeded", id, j.State, j.Errors)
			}
		}
		want := "old:reserve fresh:reserve old:charge old:ship fresh:invoice fresh:charge fresh:ship"
		if got := strings.Join(ran, " "); got != want {
			t.Errorf("steps run:\n%s\nwant\n%s", got, want)
		}
		steps, err := c.Steps(ctx, fresh)
		if err != nil || len(steps) != 5 || steps[0].Name != "errand.patch" {
			t.Errorf("the fresh job's steps %+v, %v; want the marker first", steps, err)
		}
		if _, err := errand.Patched(ctx, "x"); err == nil {
			t.Error("Patched outside a handler: no error")
		}
	})
}

// TestSuspension words what a waiting job's handler waits for.
func TestSuspension(t *testing.T) {
	for _, c := range []struct {
		steps []errandtype.Step
		want  string
	}{
		{nil, ""},
		{[]errandtype.Step{{Name: "charge", Result: []byte(`1`)}}, ""},
		{[]errandtype.Step{{Name: "errand.sleep", Result: []byte(`{"until":"2026-12-01T10:00:00Z"}`)}}, "its handler sleeps until 2026-12-01T10:00:00Z"},
		{[]errandtype.Step{{Name: "errand.wait", Result: []byte(`{"signal":"approval"}`)}}, `its handler waits for signal "approval" without a timeout; the signal wakes it at once`},
		{[]errandtype.Step{{Name: "errand.wait", Result: []byte(`{"signal":"approval","until":"2026-12-01T10:00:00Z"}`)}}, `its handler waits for signal "approval" until 2026-12-01T10:00:00Z; the signal wakes it at once`},
		{[]errandtype.Step{{Name: "errand.wait", Result: []byte(`{"signal":"errand.child:o.child.a"}`)}}, "its handler awaits child job o.child.a, whose end wakes it"},
	} {
		if got := errand.Suspension(c.steps); got != c.want {
			t.Errorf("Suspension(%v) = %q, want %q", c.steps, got, c.want)
		}
	}
}

// TestReplayFromStep: a replay from step N keeps the results before it and
// runs it and those after it again, and the audit records where it forked;
// a fork with a restart, or from a negative step, is refused with nothing
// written.
func TestReplayFromStep(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var runs [3]atomic.Int32
		c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
			for i := range runs {
				if _, err := errand.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { runs[i].Add(1); return i, nil }); err != nil {
					return err
				}
			}
			return errand.Permanent(errors.New("stop"))
		})
		id := enqueue(t, c, "task", nil).ID
		workOne(t, c, nil)
		for what, opts := range map[string]*errand.ReplayOpts{
			"a restart":       {Operator: "ana", Reason: "r", Restart: true, FromStep: ptr(1)},
			"corrected args":  {Operator: "ana", Reason: "r", Args: []byte(`{}`), FromStep: ptr(1)},
			"a negative step": {Operator: "ana", Reason: "r", FromStep: ptr(-1)},
		} {
			if _, err := c.Replay(ctx, id, opts); err == nil || !strings.Contains(err.Error(), "from_step") {
				t.Errorf("a fork with %s: %v, want refused naming from_step", what, err)
			}
		}
		if j := getJob(t, c, id); j.State != errandtype.StateDead {
			t.Fatalf("after refused forks: %s", j.State)
		}
		if _, err := c.Replay(ctx, id, &errand.ReplayOpts{Operator: "ana", Reason: "redo the last two", FromStep: ptr(1)}); err != nil {
			t.Fatal(err)
		}
		workOne(t, c, nil)
		if runs[0].Load() != 1 || runs[1].Load() != 2 || runs[2].Load() != 2 {
			t.Errorf("steps ran %d, %d, %d times; want 1, 2, 2", runs[0].Load(), runs[1].Load(), runs[2].Load())
		}
		audit, err := c.Audit(ctx, &errand.AuditOpts{JobID: id})
		var d struct {
			FromStep *int `json:"from_step"`
		}
		if err != nil || len(audit) != 1 || json.Unmarshal(audit[0].Details, &d) != nil || d.FromStep == nil || *d.FromStep != 1 {
			t.Errorf("audit %+v, %v; want the replay with from_step 1", audit, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// countingSteps is a SQLite store that counts the step reads and writes,
// and the transactions that write them.
type countingSteps struct {
	*sqlite.Store
	reads, writes, commits atomic.Int32
}

func (s *countingSteps) JobSteps(ctx context.Context, p *errandstore.JobStepsParams) ([]errandtype.Step, error) {
	s.reads.Add(1)
	return s.Store.JobSteps(ctx, p)
}

func (s *countingSteps) JobStepRecordMany(ctx context.Context, ps []*errandstore.JobStepRecordParams) ([]error, error) {
	s.writes.Add(int32(len(ps)))
	s.commits.Add(1)
	return s.Store.JobStepRecordMany(ctx, ps)
}

// TestRecordedStepsCostNoWrite: an attempt whose steps are all recorded
// reads them once and writes none; an attempt that records them writes
// each once.
func TestRecordedStepsCostNoWrite(t *testing.T) {
	clock := newTestClock()
	st := &countingSteps{Store: openStore(t, clock)}
	var second atomic.Bool
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		for i := range 5 {
			if _, err := errand.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
		}
		if !second.Load() {
			return errand.Snooze(time.Millisecond)
		}
		return nil
	})
	enqueue(t, c, "task", nil)
	workOne(t, c, nil)
	if r, w := st.reads.Load(), st.writes.Load(); r != 1 || w != 5 {
		t.Fatalf("recording attempt: %d reads, %d writes; want 1 and 5", r, w)
	}
	second.Store(true)
	st.reads.Store(0)
	st.writes.Store(0)
	clock.Advance(time.Second)
	if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
		t.Fatalf("second attempt: %s", r.Result)
	}
	if r, w := st.reads.Load(), st.writes.Load(); r != 1 || w != 0 {
		t.Errorf("attempt from the record: %d reads, %d writes; want 1 and 0", r, w)
	}
}

// TestStepsWrittenTogether: the steps of many attempts running at once are
// written in fewer transactions than steps, each recorded once, in its
// job's order.
func TestStepsWrittenTogether(t *testing.T) {
	st := &countingSteps{Store: openStore(t, nil)}
	const jobs, steps = 200, 3
	var ran atomic.Int32
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		for i := range steps {
			if _, err := errand.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (string, error) { ran.Add(1); return j.ID, nil }); err != nil {
				return err
			}
		}
		return nil
	})
	ids := enqueueN(t, c, "task", jobs)
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 50}, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for ran.Load() < jobs*steps && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := st.writes.Load(); n != jobs*steps {
		t.Fatalf("%d steps written, want %d", n, jobs*steps)
	}
	if n := st.commits.Load(); n >= jobs*steps {
		t.Errorf("%d transactions for %d steps of attempts running together; want fewer", n, jobs*steps)
	}
	t.Logf("%d steps in %d transactions", jobs*steps, st.commits.Load())
	for _, r := range ids {
		got, err := c.Steps(ctx, r.Job.ID)
		if err != nil || len(got) != steps {
			t.Fatalf("job %s: %d steps, %v", r.Job.ID, len(got), err)
		}
		for i, s := range got {
			if s.Name != fmt.Sprintf("s%d", i) || string(s.Result) != `"`+r.Job.ID+`"` {
				t.Errorf("job %s step %d: %+v", r.Job.ID, i, s)
			}
		}
	}
}
