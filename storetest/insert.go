package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var insertCases = []testCase{
	{"Defaults", testInsertDefaults},
	{"Schedule", testInsertSchedule},
	{"DuplicateID", testInsertDuplicateID},
	{"DuplicateUniqueKey", testInsertDuplicateUniqueKey},
	{"BatchAtomic", testInsertBatchAtomic},
	{"LargeBatch", testInsertLargeBatch},
	{"Tx", testInsertTx},
	{"LargeBatchTx", testInsertLargeBatchTx},
	{"TimePrecision", testInsertTimePrecision},
	{"Now", testNow},
	{"GetMany", testGetMany},
}

// testGetMany: a store that reads many jobs at once (ManyJobGetter) returns
// each as JobGet does, leaving out ids of no job, once each.
func testGetMany(t *testing.T, h harness) {
	e := open(t, h)
	g, ok := e.s.(errandstore.ManyJobGetter)
	if !ok {
		t.Skip("the store is not a ManyJobGetter")
	}
	held := newJob("held")
	held.OrderingKey = "k"
	behind := newJob("behind")
	behind.OrderingKey = "k"
	e.insert(held, newJob("b"), behind)
	e.claimOne("held")
	jobs, err := g.JobGetMany(e.ctx, []string{"behind", "none", "held", "b", "held", "bad\x00id"})
	if err != nil {
		t.Fatalf("JobGetMany: %v", err)
	}
	got := map[string]*errandtype.Job{}
	for _, j := range jobs {
		if got[j.ID] != nil {
			t.Errorf("job %s returned twice", j.ID)
		}
		got[j.ID] = j
	}
	if len(got) != 3 {
		t.Fatalf("JobGetMany returned %v; want behind, held and b", ids(jobs))
	}
	for _, id := range []string{"behind", "held", "b"} {
		same(t, "JobGetMany's "+id, e.get(id), got[id])
	}
	if jobs, err := g.JobGetMany(e.ctx, nil); err != nil || len(jobs) != 0 {
		t.Errorf("JobGetMany of no ids: %v, %v; want none", ids(jobs), err)
	}
}

// testInsertDefaults checks that every field of a new job round-trips, and
// that unset fields read back as null.
func testInsertDefaults(t *testing.T, h harness) {
	e := open(t, h)
	now := e.now()
	full := &errandstore.JobInsertParams{
		ID:          "pay_1",
		Queue:       "receipts",
		Kind:        "send_receipt",
		Args:        json.RawMessage(`{"payment_id": "pay_1", "amount": 1250, "note": "caf\u00e9 \u2615", "lines": [1, 2.5, null, true]}`),
		ArgsVersion: 2,
		Priority:    -3,
		MaxAttempts: 7,
		BackoffBase: 2 * time.Second,
		BackoffMax:  10 * time.Minute,
		UniqueKey:   "receipt:pay_1",
		OrderingKey: "customer:9",
		Tags:        []string{"billing", "eu"},
	}
	bare := newJob("bare")
	rs := e.insertResults(full, bare)

	wantFull := &errandtype.Job{
		ID: "pay_1", Queue: "receipts", Kind: "send_receipt", Args: full.Args, ArgsVersion: 2,
		Priority: -3, State: errandtype.StateQueued, Attempt: 0, MaxAttempts: 7,
		BackoffBase: errandtype.Duration(2 * time.Second), BackoffMax: errandtype.Duration(10 * time.Minute),
		AvailableAt: now, UniqueKey: ptr("receipt:pay_1"), UniqueScope: ptr(errandtype.UniqueAlways), OrderingKey: ptr("customer:9"),
		CreatedAt: now, Errors: []errandtype.AttemptError{}, Tags: []string{"billing", "eu"},
	}
	wantBare := &errandtype.Job{
		ID: "bare", Queue: errand.DefaultQueue, Kind: "email", Args: bare.Args, ArgsVersion: 1,
		State: errandtype.StateQueued, MaxAttempts: 3, AvailableAt: now, CreatedAt: now,
		Errors: []errandtype.AttemptError{}, Tags: []string{},
	}
	for i, want := range []*errandtype.Job{wantFull, wantBare} {
		r := rs[i]
		if r.Duplicate {
			t.Errorf("job %s: Duplicate = true for a new job", want.ID)
		}
		if r.Job.Seq <= 0 {
			t.Errorf("job %s: Seq = %d, want a positive sequence", want.ID, r.Job.Seq)
		}
		want.Seq = r.Job.Seq
		same(t, "inserted job "+want.ID, want, r.Job)
		same(t, "JobGet "+want.ID, want, e.get(want.ID))
		// Stores must not hand back nil slices: they marshal as null,
		// and the JSON conventions want [].
		if r.Job.Errors == nil || r.Job.Tags == nil {
			t.Errorf("job %s: Errors or Tags is a nil slice; want empty", want.ID)
		}
	}
	if rs[1].Job.Seq <= rs[0].Job.Seq {
		t.Errorf("Seq of the second job %d is not after the first's %d", rs[1].Job.Seq, rs[0].Job.Seq)
	}
	if !sameJSON(e.get("pay_1").Args, full.Args) {
		t.Errorf("args changed in the round trip: got %s", e.get("pay_1").Args)
	}
}

func testInsertSchedule(t *testing.T, h harness) {
	e := open(t, h)
	now := e.now()
	zone := time.FixedZone("UTC+5", 5*3600)
	for _, c := range []struct {
		name         string
		delay        time.Duration
		runAt        time.Time
		maxAge       time.Duration
		wantAvail    time.Time
		wantDeadline *time.Time
	}{
		{name: "now", wantAvail: now},
		{name: "delay", delay: 90 * time.Second, wantAvail: now.Add(90 * time.Second)},
		{name: "run-at", runAt: now.Add(time.Hour), wantAvail: now.Add(time.Hour)},
		{name: "run-at-other-zone", runAt: now.Add(2 * time.Hour).In(zone), wantAvail: now.Add(2 * time.Hour)},
		{name: "run-at-past", runAt: now.Add(-time.Hour), wantAvail: now.Add(-time.Hour)},
		{name: "max-age", maxAge: 10 * time.Minute, wantAvail: now, wantDeadline: ptr(now.Add(10 * time.Minute))},
		{name: "max-age-delayed", delay: time.Minute, maxAge: 10 * time.Minute, wantAvail: now.Add(time.Minute), wantDeadline: ptr(now.Add(10 * time.Minute))},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newJob(c.name)
			p.Delay, p.RunAt, p.MaxAge = c.delay, c.runAt, c.maxAge
			j := e.insert(p)[0]
			want := &errandtype.Job{
				ID: c.name, Queue: errand.DefaultQueue, Kind: "email", Args: p.Args, ArgsVersion: 1,
				State: errandtype.StateQueued, MaxAttempts: 3, AvailableAt: c.wantAvail, Deadline: c.wantDeadline,
				CreatedAt: now, Errors: []errandtype.AttemptError{}, Tags: []string{}, Seq: j.Seq,
			}
			same(t, "inserted", want, j)
			same(t, "JobGet", want, e.get(c.name))
		})
	}
}

func testInsertDuplicateID(t *testing.T, h harness) {
	e := open(t, h)
	orig := e.insertIDs("a")[0]
	e.clock.Advance(time.Minute)

	other := newJob("a")
	other.Queue, other.Kind, other.Args, other.Priority = "other", "sms", json.RawMessage(`{"n":2}`), 9
	other.UniqueKey = "key-b"
	rs := e.insertResults(newJob("b"), other)
	if rs[0].Duplicate {
		t.Errorf("new job b in the batch reported as a duplicate")
	}
	if !rs[1].Duplicate {
		t.Fatalf("second insert of id a: Duplicate = false")
	}
	same(t, "duplicate result", orig, rs[1].Job)
	e.unchanged("existing job a", orig)
	// The duplicate wrote nothing: its unique key is still free.
	p := newJob("c")
	p.UniqueKey = "key-b"
	if r := e.insertResults(p)[0]; r.Duplicate {
		t.Errorf("unique key of a rejected duplicate was stored: job c is a duplicate of %s", r.Job.ID)
	}
	js, err := e.s.JobList(e.ctx, &errandstore.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(js); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("jobs after duplicate insert: %v, want [a b c]", got)
	}
}

func testInsertDuplicateUniqueKey(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("first")
	p.UniqueKey = "digest:2026-11-29"
	orig := e.insert(p)[0]
	e.clock.Advance(time.Second)

	dup := newJob("second")
	dup.UniqueKey = "digest:2026-11-29"
	r := e.insertResults(dup)[0]
	if !r.Duplicate {
		t.Fatalf("insert with a taken unique key: Duplicate = false, job %s", r.Job.ID)
	}
	same(t, "duplicate result", orig, r.Job)
	e.notFound("second")

	// A unique key stays taken whatever the holder's state, even terminal.
	j := e.claimOne("first")
	e.recordOK(succeeded(j))
	done := e.get("first")
	dup.ID = "third"
	r = e.insertResults(dup)[0]
	if !r.Duplicate {
		t.Fatalf("insert with the unique key of a succeeded job: Duplicate = false")
	}
	same(t, "duplicate of a succeeded job", done, r.Job)
	e.notFound("third")

	// One id twice in a batch, the first copy losing on a taken unique
	// key: the second copy is the one written, and each result says so.
	lose, win := newJob("twice"), newJob("twice")
	lose.UniqueKey = "digest:2026-11-29"
	win.Queue = "other"
	rs := e.insertResults(lose, win)
	// The first copy conflicts on both its key (held by first) and its id
	// (now held by the second copy): a duplicate of either.
	if !rs[0].Duplicate || (rs[0].Job.ID != "first" && rs[0].Job.Queue != "other") {
		t.Errorf("first copy of a repeated id, its unique key taken: duplicate %v of %s, want a duplicate of first or of the second copy", rs[0].Duplicate, rs[0].Job.ID)
	}
	if rs[1].Duplicate || rs[1].Job.ID != "twice" || rs[1].Job.Queue != "other" || rs[1].Job.UniqueKey != nil {
		t.Errorf("second copy of a repeated id: duplicate %v, job %s in %s, want it written", rs[1].Duplicate, rs[1].Job.ID, rs[1].Job.Queue)
	}

	// Within one batch the second job with a key is the duplicate.
	a, b := newJob("x"), newJob("y")
	a.UniqueKey, b.UniqueKey = "k", "k"
	rs = e.insertResults(a, b)
	if rs[0].Duplicate || !rs[1].Duplicate || rs[1].Job.ID != "x" {
		t.Errorf("batch with one key twice: got (%s, dup %v), (%s, dup %v); want x new, y a duplicate of x",
			rs[0].Job.ID, rs[0].Duplicate, rs[1].Job.ID, rs[1].Duplicate)
	}
	e.notFound("y")
}

// testInsertBatchAtomic checks that a batch with a bad job inserts nothing.
func testInsertBatchAtomic(t *testing.T, h harness) {
	for _, c := range []struct {
		name string
		bad  func(p *errandstore.JobInsertParams)
	}{
		{"no-kind", func(p *errandstore.JobInsertParams) { p.Kind = "" }},
		{"no-queue", func(p *errandstore.JobInsertParams) { p.Queue = "" }},
		{"no-id", func(p *errandstore.JobInsertParams) { p.ID = "" }},
		{"zero-max-attempts", func(p *errandstore.JobInsertParams) { p.MaxAttempts = 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := open(t, h)
			bad := newJob("bad")
			c.bad(bad)
			rs, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{newJob("good"), bad}})
			if !errors.Is(err, errandtype.ErrInvalid) {
				t.Fatalf("JobInsertMany with a bad job = %v, %v; want an error wrapping ErrInvalid", rs, err)
			}
			e.notFound("good")
		})
	}
}

// testInsertLargeBatch checks a batch as large as a bulk enqueue sends,
// which a store may write many jobs per statement or stream in bulk: the
// results are in the batch's order, each new job reads back as its result
// says with seq following the batch, duplicates anywhere in the batch (of
// existing jobs or of an earlier job of the batch, by id or by unique key)
// are reported with their holder and write nothing, and a bad job at the
// end of a large batch inserts nothing.
func testInsertLargeBatch(t *testing.T, h harness) {
	for _, c := range []struct {
		name             string
		uniqueKeys, dups bool
	}{
		{"unique-keys-and-duplicates", true, true},
		{"duplicate-ids", false, true},
		{"all-new", false, false},
	} {
		t.Run(c.name, func(t *testing.T) { testInsertLargeBatchOf(t, h, c.uniqueKeys, c.dups) })
	}
}

// testInsertLargeBatchOf runs testInsertLargeBatch on a batch with or
// without unique keys, and with or without duplicates.
func testInsertLargeBatchOf(t *testing.T, h harness, uniqueKeys, dups bool) {
	e := open(t, h)
	held := newJob("held")
	held.UniqueKey = "key-held"
	existing := e.insert(newJob("existing"), held)
	e.clock.Advance(time.Minute)
	now := e.now()

	const n = 2500
	ps := largeBatch(n, now, uniqueKeys)
	dupOf := map[int]string{} // batch index: the job that holds its id or key
	if dups {
		dupOf[7], ps[7] = "existing", newJob("existing")         // the id of an existing job
		dupOf[2100], ps[2100] = "bulk-0042", newJob("bulk-0042") // the id of an earlier job of the batch
	}
	if dups && uniqueKeys {
		dupOf[1234], ps[1234].UniqueKey = "held", "key-held"         // the unique key of an existing job
		dupOf[n-1], ps[n-1].UniqueKey = "bulk-0003", ps[3].UniqueKey // the unique key of an earlier job
	}

	rs := e.insertResults(ps...)
	byID := map[string]*errandtype.Job{}
	for _, j := range e.listAll() {
		j.HeldBy = nil // not part of an insert's result
		byID[j.ID] = j
	}
	if want := 2 + n - len(dupOf); len(byID) != want {
		t.Errorf("%d jobs stored after the batch, want %d", len(byID), want)
	}
	wantLargeBatchResults(t, ps, rs, dupOf, byID, now)
	if dups {
		same(t, "duplicate of an existing job", existing[0], rs[7].Job)
	}
	if dups && uniqueKeys {
		same(t, "duplicate of an existing unique key", existing[1], rs[1234].Job)
	}
	e.wantLargeBadBatchRefused(len(byID))
}

// largeBatch is a batch of n jobs, inserted at now, whose fields vary from
// job to job: priorities, delays, ordering keys, deadlines, tags, unique
// keys (if uniqueKeys) and run times.
func largeBatch(n int, now time.Time, uniqueKeys bool) []*errandstore.JobInsertParams {
	ps := make([]*errandstore.JobInsertParams, n)
	for i := range ps {
		p := newJob(fmt.Sprintf("bulk-%04d", i))
		p.Args = json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))
		switch i % 5 {
		case 1:
			p.Priority, p.Delay = i%7-3, time.Duration(i)*time.Second
		case 2:
			p.OrderingKey, p.MaxAge = fmt.Sprintf("order-%d", i%3), time.Hour
		case 3:
			p.Tags = []string{"bulk", fmt.Sprint(i)}
			if uniqueKeys {
				p.UniqueKey = fmt.Sprintf("unique-%d", i)
			}
		case 4:
			p.RunAt = now.Add(time.Duration(i) * time.Millisecond)
		}
		ps[i] = p
	}
	return ps
}

// wantLargeBatchResults checks the results rs of inserting ps at now: in
// the batch's order, a duplicate (of the job dupOf names) where dupOf has
// the index, and otherwise the new job, with seq following the batch, as
// stored (byID) and with the fields of its params.
func wantLargeBatchResults(t *testing.T, ps []*errandstore.JobInsertParams, rs []errandstore.JobInsertResult,
	dupOf map[int]string, byID map[string]*errandtype.Job, now time.Time) {
	t.Helper()
	var lastSeq int64
	for i, r := range rs {
		p := ps[i]
		if holder, ok := dupOf[i]; ok {
			if !r.Duplicate || r.Job == nil || r.Job.ID != holder {
				t.Errorf("job %d (%s): result %+v, want a duplicate of %s", i, p.ID, r, holder)
			}
			continue
		}
		if r.Duplicate || r.Job == nil || r.Job.ID != p.ID {
			t.Errorf("job %d (%s): result %+v, want the new job", i, p.ID, r)
			continue
		}
		if r.Job.Seq <= lastSeq {
			t.Errorf("job %d (%s): seq %d after %d; want seq in the batch's order", i, p.ID, r.Job.Seq, lastSeq)
		}
		lastSeq = r.Job.Seq
		same(t, "stored job "+p.ID, byID[p.ID], r.Job)
		if !insertedAs(r.Job, p, now) {
			t.Errorf("job %d (%s): stored %+v, want the fields of %+v", i, p.ID, r.Job, p)
		}
	}
}

// insertedAs reports whether j has the fields of p, inserted at now, that
// largeBatch varies.
func insertedAs(j *errandtype.Job, p *errandstore.JobInsertParams, now time.Time) bool {
	wantAvail := now.Add(p.Delay)
	if !p.RunAt.IsZero() {
		wantAvail = p.RunAt
	}
	return j.AvailableAt.Equal(wantAvail) && j.Priority == p.Priority && sameJSON(j.Args, p.Args) &&
		deref(j.UniqueKey) == p.UniqueKey && deref(j.OrderingKey) == p.OrderingKey &&
		(p.MaxAge > 0) == (j.Deadline != nil) && len(j.Tags) == len(p.Tags)
}

// wantLargeBadBatchRefused checks that a bad job at the end of a large
// batch makes the store write nothing of it: stored jobs stay at stored.
func (e *env) wantLargeBadBatchRefused(stored int) {
	t := e.t
	t.Helper()
	bad := make([]*errandstore.JobInsertParams, 1500)
	for i := range bad {
		bad[i] = newJob(fmt.Sprintf("bad-batch-%04d", i))
	}
	bad[len(bad)-1].MaxAttempts = 0
	if rs, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: bad}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Fatalf("JobInsertMany of a large batch with a bad job = %d results, %v; want an error wrapping ErrInvalid", len(rs), err)
	}
	e.notFound("bad-batch-0000")
	if got, want := len(e.listAll()), stored; got != want {
		t.Errorf("%d jobs stored after the rejected batch, want %d", got, want)
	}
}

// listAll returns every job, in seq order.
func (e *env) listAll() []*errandtype.Job {
	e.t.Helper()
	var all []*errandtype.Job
	for {
		p := &errandstore.JobListParams{Limit: 1000}
		if len(all) > 0 {
			p.AfterSeq = all[len(all)-1].Seq
		}
		js, err := e.s.JobList(e.ctx, p)
		if err != nil {
			e.t.Fatalf("JobList: %v", err)
		}
		all = append(all, js...)
		if len(js) < p.Limit {
			return all
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// testInsertTx checks guarantee 1: a job exists iff the transaction that
// inserted it committed.
func testInsertTx(t *testing.T, h harness) {
	for _, commit := range []bool{true, false} {
		name := "rollback"
		if commit {
			name = "commit"
		}
		t.Run(name, func(t *testing.T) {
			e := open(t, h)
			existing := e.insertIDs("existing")[0]
			var rs []errandstore.JobInsertResult
			err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
				var err error
				rs, err = tx.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{newJob("in-tx"), newJob("existing")}})
				if err != nil {
					return fmt.Errorf("JobInsertManyTx: %w", err)
				}
				if len(rs) != 2 || rs[0].Duplicate || !rs[1].Duplicate {
					return fmt.Errorf("JobInsertManyTx results %+v: want in-tx new, existing a duplicate", rs)
				}
				same(t, "duplicate inside a transaction", existing, rs[1].Job)
				// Not visible outside the transaction before it ends.
				if j, err := e.s.JobGet(e.ctx, &errandstore.JobGetParams{ID: "in-tx"}); !errors.Is(err, errandtype.ErrNotFound) {
					return fmt.Errorf("JobGet of an uncommitted job = %v, %v; want ErrNotFound", j, err)
				}
				if !commit {
					return errRollback
				}
				return nil
			})
			if err != nil && !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
			if commit {
				same(t, "committed job", rs[0].Job, e.get("in-tx"))
				e.claimOne("existing")
				e.claimOne("in-tx")
				return
			}
			e.notFound("in-tx")
			e.claimOne("existing")
			e.claimNone()
			// The id is free again.
			e.insertIDs("in-tx")
		})
	}
}

// testInsertLargeBatchTx checks a batch large enough for a store's bulk
// path (PostgreSQL's COPY) inside the caller's transaction: all new, with
// one job's id taken (the bulk path meets it and falls back), and with
// unique keys (which take the other path). The results are what is stored
// once the transaction commits, a duplicate leaves the transaction usable
// for the caller's next insert, and a rollback leaves no job behind.
func testInsertLargeBatchTx(t *testing.T, h harness) {
	for _, c := range []struct{ uniqueKeys, dup bool }{{false, false}, {false, true}, {true, true}} {
		for _, commit := range []bool{true, false} {
			uniqueKeys, dup := c.uniqueKeys, c.dup
			name := fmt.Sprintf("unique-keys-%t-taken-id-%t-commit-%t", uniqueKeys, dup, commit)
			t.Run(name, func(t *testing.T) { testInsertLargeBatchTxOf(t, h, uniqueKeys, dup, commit) })
		}
	}
}

// testInsertLargeBatchTxOf runs testInsertLargeBatchTx on a batch with or
// without unique keys and a taken id, in a transaction that commits or
// rolls back.
func testInsertLargeBatchTxOf(t *testing.T, h harness, uniqueKeys, dup, commit bool) {
	e := open(t, h)
	existing := e.insertIDs("existing")[0]
	const n = 300
	ps := make([]*errandstore.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob(fmt.Sprintf("big-%03d", i))
		ps[i].Priority = i % 3
		if uniqueKeys {
			ps[i].UniqueKey = fmt.Sprintf("key-%03d", i)
		}
	}
	if dup {
		ps[n/2] = newJob("existing")
	}
	rs := e.insertBatchThenOneInTx(ps, commit)
	if len(rs) != n {
		t.Fatalf("%d results for %d jobs", len(rs), n)
	}
	taken := -1 // the index of the job with the taken id, if any
	if dup {
		taken = n / 2
	}
	for i, r := range rs {
		if i == taken {
			if !r.Duplicate {
				t.Fatalf("job %d: a new job with the taken id %s", i, r.Job.ID)
			}
			same(t, "duplicate", existing, r.Job)
			continue
		}
		e.wantBatchTxResult(ps, rs, i, i > 0 && i-1 != taken, commit)
	}
	if commit {
		e.get("after")
		return
	}
	e.notFound("after")
	same(t, "existing job after the rollback", existing, e.get("existing"))
	// The ids and keys are free again.
	e.insert(ps[0], ps[n-1])
}

// insertBatchThenOneInTx inserts ps, then a job "after", in one
// transaction that commits if commit and rolls back if not, and returns the
// results of the batch.
func (e *env) insertBatchThenOneInTx(ps []*errandstore.JobInsertParams, commit bool) []errandstore.JobInsertResult {
	e.t.Helper()
	var rs []errandstore.JobInsertResult
	err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		var err error
		if rs, err = tx.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: ps}); err != nil {
			return fmt.Errorf("JobInsertManyTx: %w", err)
		}
		if _, err := tx.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{newJob("after")}}); err != nil {
			return fmt.Errorf("JobInsertManyTx after the batch: %w", err)
		}
		if !commit {
			return errRollback
		}
		return nil
	})
	if err != nil && !errors.Is(err, errRollback) {
		e.t.Fatal(err)
	}
	return rs
}

// wantBatchTxResult checks rs[i], the result of inserting the new job
// ps[i] in a transaction: that job, with seq after the previous result's
// if afterPrev, stored as the result says if the transaction committed,
// and not stored if it rolled back.
func (e *env) wantBatchTxResult(ps []*errandstore.JobInsertParams, rs []errandstore.JobInsertResult, i int, afterPrev, commit bool) {
	t := e.t
	t.Helper()
	r := rs[i]
	if r.Duplicate || r.Job.ID != ps[i].ID {
		t.Fatalf("job %d: %+v, want new job %s", i, r, ps[i].ID)
	}
	if afterPrev && r.Job.Seq <= rs[i-1].Job.Seq {
		t.Fatalf("job %d: seq %d after %d, want the batch's order", i, r.Job.Seq, rs[i-1].Job.Seq)
	}
	if commit {
		same(t, "committed job "+r.Job.ID, r.Job, e.get(r.Job.ID))
	} else {
		e.notFound(r.Job.ID)
	}
}

// testInsertTimePrecision checks that stores keep times at microsecond
// precision, truncating, and do so in every field alike: the history's
// timestamps must match the columns'.
func testInsertTimePrecision(t *testing.T, h harness) {
	e := open(t, h)
	e.clock.Set(T0.Add(789 * time.Nanosecond))
	now := T0
	p := newJob("a")
	p.MaxAge = time.Hour
	p.RunAt = T0.Add(time.Second + 999*time.Nanosecond)
	j := e.insert(p)[0]
	if !j.CreatedAt.Equal(now) || !j.AvailableAt.Equal(T0.Add(time.Second)) || j.Deadline == nil || !j.Deadline.Equal(now.Add(time.Hour)) {
		t.Errorf("created_at %v, available_at %v, deadline %v; want %v, %v, %v",
			j.CreatedAt, j.AvailableAt, j.Deadline, now, T0.Add(time.Second), now.Add(time.Hour))
	}
	e.clock.Set(T0.Add(time.Second + 500*time.Nanosecond))
	now = T0.Add(time.Second)
	c := e.claimOne("a")
	if !c.AttemptedAt.Equal(now) || !c.LeaseUntil.Equal(now.Add(lease)) {
		t.Errorf("attempted_at %v, lease_until %v; want %v, %v", c.AttemptedAt, c.LeaseUntil, now, now.Add(lease))
	}
	e.clock.Set(T0.Add(2*time.Second + 1*time.Nanosecond))
	now = T0.Add(2 * time.Second)
	r := e.recordOK(retry(c, time.Minute))
	if !r.AvailableAt.Equal(now.Add(time.Minute)) {
		t.Errorf("retry available_at %v, want %v", r.AvailableAt, now.Add(time.Minute))
	}
	g := e.get("a")
	if len(g.Errors) != 1 || !g.Errors[0].At.Equal(now) || g.LastError == nil || !g.LastError.At.Equal(now) {
		t.Errorf("history %+v, last_error %+v: want one entry and last_error at %v", g.Errors, g.LastError, now)
	}
	if !g.AvailableAt.Equal(now.Add(time.Minute)) {
		t.Errorf("available_at %v, want %v", g.AvailableAt, now.Add(time.Minute))
	}
}

func testNow(t *testing.T, h harness) {
	e := open(t, h)
	for _, at := range []time.Time{T0, T0.Add(time.Hour)} {
		e.clock.Set(at)
		got, err := e.s.Now(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(at) {
			t.Errorf("Now = %v, want the injected clock's %v", got, at)
		}
	}
}
