package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

func TestEnqueueRejectsBadInputAndWritesNothing(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{})
	ctx := context.Background()
	enqueue(t, c, "task", nil) // so "nothing written" is not just an empty table

	tests := []struct {
		name  string
		kind  string
		args  any
		opts  errand.EnqueueOpts
		field string // the field the error names
	}{
		{"empty kind", "", nil, errand.EnqueueOpts{}, "kind"},
		{"kind with a space", "send receipt", nil, errand.EnqueueOpts{}, "kind"},
		{"kind with a control character", "send\x00receipt", nil, errand.EnqueueOpts{}, "kind"},
		{"kind too long", strings.Repeat("k", 129), nil, errand.EnqueueOpts{}, "kind"},
		{"queue with a space", "task", nil, errand.EnqueueOpts{Queue: "low priority"}, "queue"},
		{"queue with a tab", "task", nil, errand.EnqueueOpts{Queue: "mail\t"}, "queue"},
		{"invalid JSON args", "task", json.RawMessage(`{"id": 7`), errand.EnqueueOpts{}, "args"},
		{"invalid JSON args as bytes", "task", []byte(`not json`), errand.EnqueueOpts{}, "args"},
		{"args that cannot be encoded", "task", map[string]any{"ch": make(chan int)}, errand.EnqueueOpts{}, "args"},
		{"args too large", "task", json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`), errand.EnqueueOpts{}, "args"},
		{"negative delay", "task", nil, errand.EnqueueOpts{Delay: -time.Second}, "delay"},
		{"delay with run-at", "task", nil, errand.EnqueueOpts{Delay: time.Second, RunAt: clock.Now().Add(time.Hour)}, "run_at"},
		{"negative max age", "task", nil, errand.EnqueueOpts{MaxAge: -time.Second}, "max_age"},
		{"start-by before run-at", "task", nil, errand.EnqueueOpts{RunAt: clock.Now().Add(time.Hour), StartBy: clock.Now().Add(time.Minute)}, "start_by"},
		{"negative backoff base", "task", nil, errand.EnqueueOpts{BackoffBase: -time.Second}, "backoff"},
		{"negative backoff max", "task", nil, errand.EnqueueOpts{BackoffMax: -time.Second}, "backoff"},
		{"backoff max below base", "task", nil, errand.EnqueueOpts{BackoffBase: time.Minute, BackoffMax: time.Second}, "backoff_max"},
		{"negative max attempts", "task", nil, errand.EnqueueOpts{MaxAttempts: -1}, "max_attempts"},
		{"negative args version", "task", errand.RawArgs{KindName: "task", Version: -1}, errand.EnqueueOpts{}, "args_version"},
		{"id with surrounding spaces", "task", nil, errand.EnqueueOpts{ID: " pay_1"}, "id"},
		{"id with a control character", "task", nil, errand.EnqueueOpts{ID: "pay\n1"}, "id"},
		{"unique key too long", "task", nil, errand.EnqueueOpts{UniqueKey: strings.Repeat("u", 256)}, "unique_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				if !errors.Is(err, errandtype.ErrInvalid) {
					t.Fatalf("%s: error %v, want one that is ErrInvalid", how, err)
				}
				var ie *errandtype.InputError
				if !errors.As(err, &ie) || ie.Field != tt.field {
					t.Fatalf("%s: error %v names field %q, want %q", how, err, fieldOf(err), tt.field)
				}
			}
			before := rowCounts(t, st.DB())

			args := argsOf(tt.kind, tt.args)
			_, err := c.Enqueue(ctx, args, &tt.opts)
			check("Enqueue", err)

			// In a batch, one bad job rejects the whole batch.
			_, err = c.EnqueueMany(ctx, []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "task"}}, {Args: args, Opts: &tt.opts}})
			check("EnqueueMany", err)

			tx, err := st.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.EnqueueTx(ctx, tx, args, &tt.opts)
			check("EnqueueTx", err)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}

			if after := rowCounts(t, st.DB()); after != before {
				t.Fatalf("rows (jobs, replays, effects) went from %v to %v", before, after)
			}
		})
	}
}

// argsOf makes args of kind from v: raw JSON as it is, a JobArgs as it is,
// any other value marshalled.
func argsOf(kind string, v any) errand.JobArgs {
	switch a := v.(type) {
	case nil:
		return errand.RawArgs{KindName: kind}
	case errand.JobArgs:
		return a
	case json.RawMessage:
		return errand.RawArgs{KindName: kind, JSON: a}
	case []byte:
		return errand.RawArgs{KindName: kind, JSON: a}
	}
	return valueArgs{kind, v}
}

// valueArgs are args of a kind named at run time, marshalled from any value.
type valueArgs struct {
	kind string
	v    any
}

func (a valueArgs) Kind() string                 { return a.kind }
func (a valueArgs) MarshalJSON() ([]byte, error) { return json.Marshal(a.v) }

func fieldOf(err error) string {
	var ie *errandtype.InputError
	if errors.As(err, &ie) {
		return ie.Field
	}
	return ""
}

func TestNewClientRejectsBadConfig(t *testing.T) {
	st := openStore(t, newTestClock())
	h := errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })
	for name, cfg := range map[string]*errand.Config{
		"negative max attempts":      {MaxAttempts: -1},
		"kind without a name":        {Kinds: kindsOf([]testKind{{Handler: h}})},
		"kind declared twice":        {Kinds: kindsOf([]testKind{{Name: "a", Handler: h}, {Name: "a"}})},
		"kind negative max attempts": {Kinds: kindsOf([]testKind{{Name: "a", MaxAttempts: -2}})},
		"kind negative timeout":      {Kinds: kindsOf([]testKind{{Name: "a", Timeout: -time.Second}})},
	} {
		if _, err := errand.NewClient(st, cfg); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", name, err)
		}
	}
	if _, err := errand.NewClient[*sql.Tx](nil, &errand.Config{}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("nil store: error %v, want ErrInvalid", err)
	}
	producer := newClient(t, st, &errand.Config{})
	if _, err := producer.WorkOne(context.Background(), &errand.WorkOneOpts{}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("WorkOne without handlers: error %v, want ErrInvalid", err)
	}
	worker := handlerClient(t, st, h)
	for name, opts := range map[string]*errand.WorkOneOpts{
		"negative lease": {Lease: -time.Second},
		"bad queue":      {Queues: []string{"two words"}},
	} {
		if _, err := worker.WorkOne(context.Background(), opts); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("WorkOne with %s: error %v, want ErrInvalid", name, err)
		}
	}
}

func TestEnqueueTxCommitsWithTheApplication(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, newTestClock())
	c := newClient(t, st, &errand.Config{})
	mustExec(t, st.DB(), `CREATE TABLE payments (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`)

	pay := func(id string, commit bool) {
		t.Helper()
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO payments (id, amount) VALUES (?, 1250)`, id); err != nil {
			t.Fatal(err)
		}
		r, err := c.EnqueueTx(ctx, tx, argsOf("send_receipt", map[string]string{"payment_id": id}), &errand.EnqueueOpts{ID: "receipt:" + id})
		if err != nil {
			t.Fatalf("enqueue in tx: %v", err)
		}
		if r.Duplicate || r.Job.State != errandtype.StateQueued {
			t.Fatalf("enqueue in tx: %+v", r)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	pay("pay_rolled_back", false)
	if n := count(t, st.DB(), `SELECT count(*) FROM payments`); n != 0 {
		t.Fatalf("%d payments after rollback", n)
	}
	if _, err := c.Get(ctx, "receipt:pay_rolled_back"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("job of a rolled-back transaction: %v, want ErrNotFound", err)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_jobs`); n != 0 {
		t.Fatalf("%d jobs after rollback", n)
	}

	pay("pay_committed", true)
	if n := count(t, st.DB(), `SELECT count(*) FROM payments WHERE id = 'pay_committed'`); n != 1 {
		t.Fatalf("%d payments after commit, want 1", n)
	}
	j, err := c.Get(ctx, "receipt:pay_committed")
	if err != nil {
		t.Fatalf("job of a committed transaction: %v", err)
	}
	if string(j.Args) != `{"payment_id":"pay_committed"}` || j.Kind != "send_receipt" {
		t.Fatalf("job %s args %s", j.Kind, j.Args)
	}

	// The rolled-back id is free: nothing of it survived.
	pay("pay_rolled_back", true)
}

func TestEnqueueDuplicateReturnsTheExistingJob(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{})

	first, err := c.Enqueue(ctx, argsOf("charge", map[string]int{"amount": 1}), &errand.EnqueueOpts{ID: "pay_1"})
	if err != nil || first.Duplicate {
		t.Fatalf("first enqueue: %+v, %v", first, err)
	}
	clock.Advance(time.Minute)
	// Another job under the id: with FirstWins, the first job.
	again, err := c.Enqueue(ctx, argsOf("charge", map[string]int{"amount": 2}), &errand.EnqueueOpts{ID: "pay_1", Priority: 9, FirstWins: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Job.Seq != first.Job.Seq || string(again.Job.Args) != `{"amount":1}` ||
		again.Job.Priority != 0 || !again.Job.CreatedAt.Equal(first.Job.CreatedAt) {
		t.Fatalf("duplicate id: %+v, want the first job unchanged with Duplicate set", again)
	}

	byKey, err := c.Enqueue(ctx, errand.RawArgs{KindName: "digest"}, &errand.EnqueueOpts{UniqueKey: "digest:2026-11-29"})
	if err != nil || byKey.Duplicate {
		t.Fatalf("first keyed enqueue: %+v, %v", byKey, err)
	}
	// A second job with the same key, even under another id and inside a
	// transaction, is the first job.
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "digest"}, &errand.EnqueueOpts{ID: "other-id", UniqueKey: "digest:2026-11-29"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.Job.ID != byKey.Job.ID {
		t.Fatalf("duplicate key: %+v, want job %s with Duplicate set", dup, byKey.Job.ID)
	}
	if _, err := c.Get(ctx, "other-id"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("the duplicate's id exists: %v", err)
	}
	// The key stays taken whatever the first job's state.
	if _, err := c.Cancel(ctx, byKey.Job.ID, &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "digest"}, &errand.EnqueueOpts{UniqueKey: "digest:2026-11-29"}); err != nil || !r.Duplicate {
		t.Fatalf("key of a cancelled job: %+v, %v; want a duplicate", r, err)
	}

	rs, err := c.EnqueueMany(ctx, []errand.EnqueueParams{
		{Args: argsOf("charge", map[string]int{"amount": 1}), Opts: &errand.EnqueueOpts{ID: "pay_1"}},
		{Args: errand.RawArgs{KindName: "charge"}, Opts: &errand.EnqueueOpts{ID: "pay_2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rs[0].Duplicate || rs[1].Duplicate || rs[1].Job.ID != "pay_2" {
		t.Fatalf("batch with one duplicate: %+v", rs)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_jobs`); n != 3 {
		t.Fatalf("%d jobs, want 3 (pay_1, the digest, pay_2)", n)
	}
}

func TestConcurrentEnqueuesOfOneUniqueKeyMakeOneJob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	// Two stores on one file: two writers, as two processes would have.
	clients := []*errand.Client[*sql.Tx]{
		newClient(t, openStoreAt(t, path, nil), &errand.Config{}),
		newClient(t, openStoreAt(t, path, nil), &errand.Config{}),
	}
	const n = 16
	results := make([]*errand.EnqueueResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = clients[i%2].Enqueue(context.Background(), errand.RawArgs{KindName: "digest"},
				&errand.EnqueueOpts{UniqueKey: "digest:2026-11-29"})
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if !results[i].Duplicate {
			fresh++
		}
		if results[i].Job.ID != results[0].Job.ID {
			t.Fatalf("enqueue %d returned job %s, enqueue 0 job %s", i, results[i].Job.ID, results[0].Job.ID)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d enqueues reported a new job, want exactly 1", fresh)
	}
	if n := count(t, openStoreAt(t, path, nil).DB(), `SELECT count(*) FROM errand_jobs`); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}

func TestReplay(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	fail := true
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error {
		if fail {
			return errand.Permanent(errors.New("card declined"))
		}
		return nil
	})
	job := enqueue(t, c, "task", &errand.EnqueueOpts{ID: "pay_7", MaxAttempts: 3})

	// Not dead yet: replay is refused and writes nothing.
	before := rowCounts(t, st.DB())
	_, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "retry"})
	var se *errandtype.StateError
	if !errors.Is(err, errandtype.ErrWrongState) || !errors.As(err, &se) || se.State != errandtype.StateQueued {
		t.Fatalf("replay of a queued job: %v, want a StateError naming queued", err)
	}
	if _, err := c.Replay(ctx, "no-such-job", &errand.ReplayOpts{Operator: "ana", Reason: "retry"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("replay of a missing job: %v, want ErrNotFound", err)
	}
	if after := rowCounts(t, st.DB()); after != before {
		t.Fatalf("refused replays wrote rows: %v to %v", before, after)
	}

	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultDead {
		t.Fatalf("result %+v, want dead", r)
	}
	dead := getJob(t, c, job.ID)

	// Without an operator or a reason, replay is bad input.
	for _, opts := range []*errand.ReplayOpts{{Reason: "card updated"}, {Operator: "ana"}, {Operator: " ", Reason: "x"}, {Operator: "ana", Reason: "\t"}} {
		before := rowCounts(t, st.DB())
		if _, err := c.Replay(ctx, job.ID, opts); !errors.Is(err, errandtype.ErrInvalid) {
			t.Fatalf("replay with %+v: %v, want ErrInvalid", opts, err)
		}
		if after := rowCounts(t, st.DB()); after != before {
			t.Fatalf("replay with %+v wrote rows: %v to %v", opts, before, after)
		}
		if j := getJob(t, c, job.ID); j.State != errandtype.StateDead || j.Replays != 0 {
			t.Fatalf("replay with %+v changed the job: %s replays %d", opts, j.State, j.Replays)
		}
	}

	clock.Advance(time.Hour)
	replayed, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "card updated"})
	if err != nil {
		t.Fatal(err)
	}
	if replayed.ID != job.ID || replayed.State != errandtype.StateQueued || replayed.Attempt != 0 || replayed.Replays != 1 ||
		!replayed.AvailableAt.Equal(clock.Now()) || replayed.FinishedAt != nil || replayed.LeaseToken != nil {
		t.Fatalf("replayed job: id %s %s attempt %d replays %d available %v finished %v",
			replayed.ID, replayed.State, replayed.Attempt, replayed.Replays, replayed.AvailableAt, replayed.FinishedAt)
	}
	if len(replayed.Errors) != 1 || replayed.Errors[0].Message != dead.Errors[0].Message || replayed.Seq != dead.Seq {
		t.Fatalf("replay lost the history: %+v", replayed.Errors)
	}
	audit, err := c.ReplayAudit(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Operator != "ana" || audit[0].Reason != "card updated" ||
		audit[0].PriorState != errandtype.StateDead || audit[0].Replay != 1 || !audit[0].At.Equal(clock.Now()) || audit[0].JobID != job.ID {
		t.Fatalf("audit %+v, want one record by ana, reason \"card updated\", prior state dead, at %v", audit, clock.Now())
	}

	// A replayed, running job cannot be replayed again.
	fail = false
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded || r.Attempt != 1 {
		t.Fatalf("after replay: %+v, want succeeded on attempt 1 of the new cycle", r)
	}
	if _, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "again"}); !errors.Is(err, errandtype.ErrWrongState) {
		t.Fatalf("replay of a succeeded job: %v, want ErrWrongState", err)
	}

	// A failure in the new cycle is tagged with the replay number.
	fail = true
	second := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	if _, err := c.Replay(ctx, second.ID, &errand.ReplayOpts{Operator: "bo", Reason: "one more"}); err != nil {
		t.Fatal(err)
	}
	workOne(t, c, &errand.WorkOneOpts{})
	j := getJob(t, c, second.ID)
	if len(j.Errors) != 2 || j.Errors[0].Replay != 0 || j.Errors[1].Replay != 1 || j.Errors[1].Attempt != 1 {
		t.Fatalf("history %+v, want attempt 1 of replay 0 and attempt 1 of replay 1", j.Errors)
	}
}

func TestReplayOfACancelledJob(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, newTestClock())
	c := newClient(t, st, &errand.Config{})
	job := enqueue(t, c, "task", nil)
	cancelled, err := c.Cancel(ctx, job.ID, &errand.CancelOpts{Operator: "ana", Reason: "not needed"})
	if err != nil || cancelled.State != errandtype.StateCancelled || cancelled.FinishedAt == nil {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}
	if _, err := c.Cancel(ctx, job.ID, &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); !errors.Is(err, errandtype.ErrWrongState) {
		t.Fatalf("second cancel: %v, want ErrWrongState", err)
	}
	j, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "cancelled by mistake"})
	if err != nil || j.State != errandtype.StateQueued || j.Replays != 1 {
		t.Fatalf("replay: %+v, %v", j, err)
	}
	audit, err := c.ReplayAudit(ctx, job.ID)
	if err != nil || len(audit) != 1 || audit[0].PriorState != errandtype.StateCancelled {
		t.Fatalf("audit %+v, %v; want prior state cancelled", audit, err)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, newTestClock())
	c := newClient(t, st, &errand.Config{})
	var ids []string
	for i := range 5 {
		kind := "a"
		if i%2 == 1 {
			kind = "b"
		}
		ids = append(ids, enqueue(t, c, kind, nil).ID)
	}
	if _, err := c.Cancel(ctx, ids[0], &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	after := int64(0)
	for {
		page, err := c.List(ctx, &errand.ListOpts{Limit: 2, AfterSeq: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("page of %d jobs, limit 2", len(page))
		}
		for _, j := range page {
			got = append(got, j.ID)
		}
		after = page[len(page)-1].Seq
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("paged list %v, want %v", got, ids)
	}
	bs, err := c.List(ctx, &errand.ListOpts{Kind: "b"})
	if err != nil || len(bs) != 2 || bs[0].ID != ids[1] || bs[1].ID != ids[3] {
		t.Fatalf("kind b: %d jobs, %v", len(bs), err)
	}
	cs, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateCancelled}})
	if err != nil || len(cs) != 1 || cs[0].ID != ids[0] {
		t.Fatalf("cancelled: %d jobs, %v", len(cs), err)
	}
	if _, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{"sleeping"}}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Fatalf("unknown state: %v, want ErrInvalid", err)
	}
}
