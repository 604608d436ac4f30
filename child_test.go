package errand_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestChildrenAwait: a parent enqueues three children and awaits each; it
// sleeps (no attempt counted) until they finish, each child's end wakes
// it, and it gets their outputs; a later attempt enqueues no child again
// and gets the recorded outputs. A dead child is an error wrapping
// ErrChildFailed.
func TestChildrenAwait(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var sums []int
		var parentRuns atomic.Int32
		kinds := errand.NewKinds()
		kinds.HandleRaw("parent", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			parentRuns.Add(1)
			var ids []string
			for i := range 3 {
				id, err := errand.Child(ctx, fmt.Sprintf("part%d", i), errand.RawArgs{KindName: "part", JSON: []byte(fmt.Sprintf(`{"n":%d}`, i+1))}, &errand.EnqueueOpts{Queue: "parts"})
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			sum := 0
			for _, id := range ids {
				n, err := errand.Await[int](ctx, id)
				if errors.Is(err, errand.ErrChildFailed) {
					sum += 1000
					continue
				}
				if err != nil {
					return err
				}
				sum += n
			}
			sums = append(sums, sum)
			return nil
		}), nil)
		kinds.HandleRaw("part", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			var args struct{ N int }
			if err := json.Unmarshal(j.Args, &args); err != nil {
				return err
			}
			if args.N == 3 {
				return errand.Permanent(errors.New("part 3 is broken"))
			}
			return errand.SetOutput(ctx, 10*args.N)
		}), nil)
		c := newClient(t, st, &errand.Config{Kinds: kinds})
		parent := enqueue(t, c, "parent", &errand.EnqueueOpts{ID: "order-1"}).ID
		if r := workOne(t, c, nil); r.Result != errand.ResultSnoozed {
			t.Fatalf("the parent's first attempt: %s %q, want snoozed awaiting its children", r.Result, r.Error)
		}
		for i := range 3 {
			id := errand.ChildJobID(parent, fmt.Sprintf("part%d", i))
			if j := getJob(t, c, id); j.State != errandtype.StateQueued {
				t.Fatalf("child %s: %s, want queued", id, j.State)
			}
		}
		// The children run; the first one's end wakes the parent.
		for range 3 {
			workOne(t, c, &errand.WorkOneOpts{Queues: []string{"parts"}})
		}
		if j := getJob(t, c, parent); j.State != errandtype.StateQueued || j.AvailableAt.After(clock.Now()) || j.Attempt != 0 {
			t.Fatalf("the parent after its children: %s, available %s, attempt %d; want queued, available now, attempt 0", j.State, j.AvailableAt, j.Attempt)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("the parent's second attempt: %s %q", r.Result, r.Error)
		}
		// Outputs 10 and 20, and 1000 for the dead one.
		if len(sums) != 1 || sums[0] != 1030 {
			t.Errorf("the parent's sums %v, want [1030]", sums)
		}
		if n, _ := c.List(ctx, &errand.ListOpts{Queue: "parts"}); len(n) != 3 {
			t.Errorf("%d children, want 3: a later attempt enqueues none again", len(n))
		}
		if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "part"}, &errand.EnqueueOpts{ID: "x.child.y"}); err == nil || !strings.Contains(err.Error(), "child job") {
			t.Errorf("a caller's id in a child's shape: %v", err)
		}
	})
}

// TestAwaitCancelledChild: a child cancelled while it waits, which runs no
// attempt, still wakes its parent.
func TestAwaitCancelledChild(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		var got error
		kinds := errand.NewKinds()
		kinds.HandleRaw("parent", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			id, err := errand.Child(ctx, "part", errand.RawArgs{KindName: "part"}, &errand.EnqueueOpts{Queue: "parts"})
			if err != nil {
				return err
			}
			_, got = errand.Await[int](ctx, id)
			if errors.Is(got, errand.ErrChildFailed) {
				return nil
			}
			return got
		}), nil)
		kinds.HandleRaw("part", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
		c := newClient(t, st, &errand.Config{Kinds: kinds})
		parent := enqueue(t, c, "parent", nil).ID
		workOne(t, c, nil)
		if j := getJob(t, c, parent); !j.AvailableAt.After(clock.Now()) {
			t.Fatalf("the parent is available at %s; want it waiting for its child", j.AvailableAt)
		}
		if _, err := c.Cancel(ctx, errand.ChildJobID(parent, "part"), &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); err != nil {
			t.Fatal(err)
		}
		if j := getJob(t, c, parent); j.AvailableAt.After(clock.Now()) {
			t.Fatalf("the parent waits until %s after its child was cancelled; want woken now", j.AvailableAt)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded || !errors.Is(got, errand.ErrChildFailed) || !strings.Contains(got.Error(), "cancelled") {
			t.Fatalf("the parent: %s %q, Await returned %v", r.Result, r.Error, got)
		}
	})
}

// TestResult: Result answers a finished job's state and output at once,
// waits for one that finishes meanwhile, and says when one has not
// finished within the wait, or is unknown.
func TestResult(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error { return errand.SetOutput(ctx, "receipt-7") })
	id := enqueue(t, c, "task", nil).ID
	if _, err := c.Result(ctx, id, 0); !errors.Is(err, errand.ErrNotFinished) || !strings.Contains(err.Error(), "queued") {
		t.Fatalf("Result of a queued job: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(50 * time.Millisecond)
		if _, err := c.WorkOne(ctx, nil); err != nil {
			t.Error(err)
		}
	}()
	r, err := c.Result(ctx, id, 10*time.Second)
	<-done
	if err != nil || r.State != errandtype.StateSucceeded || string(r.Output) != `"receipt-7"` {
		t.Fatalf("Result while it runs: %+v, %v", r, err)
	}
	if _, err := c.Result(ctx, "nope", 0); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("Result of an unknown job: %v", err)
	}
}

// TestAwaitChildOfLongID: a child whose id is as long as ids go still
// wakes its parent: the signal's name has room for it.
func TestAwaitChildOfLongID(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	kinds := errand.NewKinds()
	kinds.HandleRaw("parent", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
		id, err := errand.Child(ctx, "p", errand.RawArgs{KindName: "part"}, &errand.EnqueueOpts{Queue: "parts"})
		if err != nil {
			return err
		}
		_, err = errand.Await[int](ctx, id)
		return err
	}), nil)
	kinds.HandleRaw("part", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
	c := newClient(t, st, &errand.Config{Kinds: kinds})
	parent := strings.Repeat("o", errandstore.MaxIDBytes-len(".child.p"))
	enqueue(t, c, "parent", &errand.EnqueueOpts{ID: parent})
	if r := workOne(t, c, nil); r.Result != errand.ResultSnoozed {
		t.Fatalf("parent: %s %q", r.Result, r.Error)
	}
	workOne(t, c, &errand.WorkOneOpts{Queues: []string{"parts"}})
	if j := getJob(t, c, parent); j.AvailableAt.After(clock.Now()) {
		t.Errorf("the parent waits until %s; want woken by its child", j.AvailableAt)
	}
}

// readCounter is a workflow store that claims as it inserts, counts its
// finished JobGet calls and tells of each on read.
type readCounter struct {
	errandstore.TxStore[*sql.Tx]
	errandstore.WorkflowStore
	errandstore.InsertClaimer
	reads atomic.Int64
	read  chan struct{}
}

func newReadCounter(inner errandstore.TxStore[*sql.Tx]) *readCounter {
	return &readCounter{TxStore: inner, WorkflowStore: inner.(errandstore.WorkflowStore),
		InsertClaimer: inner.(errandstore.InsertClaimer), read: make(chan struct{}, 1)}
}

func (s *readCounter) JobGet(ctx context.Context, p *errandstore.JobGetParams) (*errandtype.Job, error) {
	j, err := s.TxStore.JobGet(ctx, p)
	s.reads.Add(1)
	select {
	case s.read <- struct{}{}:
	default:
	}
	return j, err
}

// TestResultHandedOver: a wait on a job that an attempt of this process
// finishes is handed what the outcome's committed write found, reading no
// job, and that is what a read finds: an earlier attempt's output and
// error, an output sealed by the codec, a death's error. A job its success
// deletes is read, and not found. Attempts of WorkOne and of a Worker.
func TestResultHandedOver(t *testing.T) {
	defer errand.SetPollPause(time.Hour)() // only a wake ends a wait
	eachJobStore(t, func(t *testing.T, inner errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		st := newReadCounter(inner)
		ring, err := errand.AESGCM(errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{1}, 16)})
		if err != nil {
			t.Fatal(err)
		}
		kinds := errand.NewKinds()
		kinds.HandleRaw("flaky", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			if j.Attempt > 1 {
				return nil
			}
			if err := errand.SetOutput(ctx, "first"); err != nil {
				return err
			}
			return errors.New("flaked")
		}), &errand.KindOpts{MaxAttempts: 3})
		kinds.HandleRaw("doomed", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			if err := errand.SetOutput(ctx, "last words"); err != nil {
				return err
			}
			return errand.Permanent(errors.New("card declined"))
		}), nil)
		kinds.HandleRaw("gone", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }),
			&errand.KindOpts{DeleteOnSuccess: true})
		c := newClient(t, st, &errand.Config{Kinds: kinds, Codec: ring, Clock: clock})

		// wait runs finish while Result waits on id, after its first read,
		// and returns what the wait returned and how many reads it made.
		wait := func(id string, finish func()) (*errand.JobResult, error, int64) {
			t.Helper()
			type answer struct {
				r   *errand.JobResult
				err error
			}
			got := make(chan answer, 1)
			select { // a read before the wait, if any, is told of no more
			case <-st.read:
			default:
			}
			go func() {
				r, err := c.Result(ctx, id, time.Minute)
				got <- answer{r, err}
			}()
			<-st.read
			st.reads.Store(0)
			finish()
			a := <-got
			return a.r, a.err, st.reads.Load()
		}
		handed := func(name string, r *errand.JobResult, err error, reads int64) {
			t.Helper()
			if err != nil || reads != 0 {
				t.Fatalf("%s: %+v, %v, after %d reads; want it handed over", name, r, err, reads)
			}
			read, err := c.Result(ctx, r.ID, 0)
			if err != nil || !reflect.DeepEqual(r, read) {
				t.Errorf("%s: handed %+v (output %s), read %+v (output %s), %v", name, r, r.Output, read, read.Output, err)
			}
			if _, sealed := errand.SealedKeyID(r.Output); !sealed || r.LastError == nil {
				t.Errorf("%s: output %s, last error %+v; want a sealed output and an error", name, r.Output, r.LastError)
			}
		}

		flaky := enqueue(t, c, "flaky", nil).ID
		if r := workOne(t, c, nil); r.Result != errand.ResultRetrying {
			t.Fatalf("flaky's first attempt: %s", r.Result)
		}
		clock.Advance(time.Hour)
		r, err, reads := wait(flaky, func() { workOne(t, c, nil) })
		handed("flaky, succeeded after a failure", r, err, reads)
		if r.State != errandtype.StateSucceeded || r.LastError.Message != "flaked" {
			t.Errorf("flaky: %s, last error %+v; want succeeded, the first attempt's error", r.State, r.LastError)
		}

		gone := enqueue(t, c, "gone", nil).ID
		r, err, reads = wait(gone, func() { workOne(t, c, nil) })
		if !errors.Is(err, errandtype.ErrNotFound) || reads != 1 {
			t.Errorf("a job its success deleted: %+v, %v, after %d reads; want not found, read", r, err, reads)
		}

		doomed := enqueue(t, c, "doomed", nil).ID
		r, err, reads = wait(doomed, func() { startHourlyWorker(t, c) })
		handed("doomed, by a worker", r, err, reads)
		if r.State != errandtype.StateDead || r.LastError.Message != "card declined" {
			t.Errorf("doomed: %s, last error %+v; want dead, its error", r.State, r.LastError)
		}
	})
}

// TestRemoteResultHandedOver: a wait on a job that a remote worker ends
// through this client (Ack, AckMany, Fail, FailMany) is handed what the
// outcome's committed write found, reading no job, and that is what a read
// finds. A failure reads the job it fails, once, before its write.
func TestRemoteResultHandedOver(t *testing.T) {
	defer errand.SetPollPause(time.Hour)() // only a wake ends a wait
	eachJobStore(t, func(t *testing.T, inner errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		st := newReadCounter(inner)
		c := remoteClient(t, st, clock)
		claim := func() errandstore.JobLease {
			t.Helper()
			id := enqueue(t, c, "task", nil).ID
			js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-1"})
			if err != nil || len(js) != 1 || js[0].ID != id {
				t.Fatalf("claim: %v, %v; want job %s", js, err, id)
			}
			return errandstore.JobLease{ID: id, LeaseToken: *js[0].LeaseToken}
		}
		// handed runs end while Result waits on l's job, after its first
		// read, and checks that the wait was handed the job as end left
		// it, in state want, with no read but the own reads of end.
		handed := func(name string, l errandstore.JobLease, own int64, want errandtype.JobState, end func() error) {
			t.Helper()
			type answer struct {
				r   *errand.JobResult
				err error
			}
			got := make(chan answer, 1)
			select {
			case <-st.read:
			default:
			}
			go func() {
				r, err := c.Result(ctx, l.ID, time.Minute)
				got <- answer{r, err}
			}()
			<-st.read
			st.reads.Store(0)
			if err := end(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			a := <-got
			if reads := st.reads.Load(); a.err != nil || reads != own {
				t.Fatalf("%s: %+v, %v, after %d reads; want it handed over after %d", name, a.r, a.err, reads, own)
			}
			read, err := c.Result(ctx, l.ID, 0)
			if err != nil || !reflect.DeepEqual(a.r, read) || read.State != want {
				t.Errorf("%s: handed %+v, read %+v, %v; want them equal, %s", name, a.r, read, err, want)
			}
		}

		l := claim()
		handed("Ack", l, 0, errandtype.StateSucceeded, func() error { _, err := c.Ack(ctx, l.ID, l.LeaseToken); return err })
		l = claim()
		handed("AckMany", l, 0, errandtype.StateSucceeded, func() error {
			_, err := c.AckMany(ctx, []errandstore.JobLease{l})
			return err
		})
		l = claim()
		handed("Fail", l, 1, errandtype.StateDead, func() error {
			_, err := c.Fail(ctx, l.ID, l.LeaseToken, &errand.FailOpts{Message: "card declined", Permanent: true})
			return err
		})
		l = claim()
		handed("FailMany", l, 1, errandtype.StateDead, func() error {
			_, err := c.FailMany(ctx, []errand.JobFailure{{JobLease: l, FailOpts: errand.FailOpts{Message: "card declined", Permanent: true}}})
			return err
		})
	})
}
