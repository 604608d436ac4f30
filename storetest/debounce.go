package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var debounceCases = []testCase{
	{"LastWinsTakesArgsAndPushesStart", testDebounceLastWins},
	{"LastWinsMaxWait", testDebounceMaxWait},
	{"LastWinsNotIntoStartedJob", testDebounceNotStarted},
	{"FirstWinsWithinWindow", testDebounceFirstWins},
	{"KeyIsPerKind", testDebouncePerKind},
	{"SameKeyInOneBatch", testDebounceBatch},
	{"InCallerTransaction", testDebounceTx},
	{"ConcurrentLeaveOneJob", testDebounceConcurrent},
	{"InvalidRefused", testDebounceInvalid},
}

// debounced returns insert parameters for a job of key in mode, with args
// {"n":n}.
func debounced(id, key string, mode errandtype.DebounceMode, window time.Duration, n int) *errandstore.JobInsertParams {
	p := newJob(id)
	p.Args = json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
	p.Debounce = &errandstore.JobDebounce{Key: key, Mode: mode, Window: window}
	return p
}

// wantAbsorbed requires that inserting p folded it into job holder,
// which then has absorbed enqueues, args {"n":n} and starts at start.
func (e *env) wantAbsorbed(p *errandstore.JobInsertParams, holder string, absorbed, n int, start time.Time) {
	e.t.Helper()
	r := e.insertOne(p)
	if !r.Absorbed || !r.Duplicate || r.Job.ID != holder {
		e.t.Fatalf("insert %s: got job %s, duplicate %v, absorbed %v; want it absorbed by %s", p.ID, r.Job.ID, r.Duplicate, r.Absorbed, holder)
	}
	e.notFound(p.ID)
	for _, j := range []*errandtype.Job{r.Job, e.get(holder)} {
		e.wantDebounced(j, p.Debounce.Key, absorbed, n, start)
	}
}

// wantDebounced checks a job of a debounce key.
func (e *env) wantDebounced(j *errandtype.Job, key string, absorbed, n int, start time.Time) {
	e.t.Helper()
	args := fmt.Sprintf(`{"n":%d}`, n)
	if j.DebounceKey == nil || *j.DebounceKey != key || j.Absorbed != absorbed || !sameJSON(j.Args, []byte(args)) || !j.AvailableAt.Equal(start) {
		e.t.Fatalf("job %s: debounce key %v, absorbed %d, args %s, available at %s; want %q, %d, %s, %s",
			j.ID, j.DebounceKey, j.Absorbed, j.Args, j.AvailableAt, key, absorbed, args, start)
	}
}

// testDebounceLastWins: the first enqueue waits a window; each later one,
// while the job is queued, gives it its args and a start a window from
// now, and is counted.
func testDebounceLastWins(t *testing.T, h harness) {
	e := open(t, h)
	const w = 10 * time.Second
	j := e.wantNew(debounced("d1", "user:42", errandtype.DebounceLastWins, w, 1))
	e.wantDebounced(j, "user:42", 0, 1, T0.Add(w))
	e.wantDebounced(e.get("d1"), "user:42", 0, 1, T0.Add(w))
	e.clock.Advance(3 * time.Second)
	e.wantAbsorbed(debounced("d2", "user:42", errandtype.DebounceLastWins, w, 2), "d1", 1, 2, T0.Add(13*time.Second))
	e.clock.Advance(4 * time.Second)
	e.wantAbsorbed(debounced("d3", "user:42", errandtype.DebounceLastWins, w, 3), "d1", 2, 3, T0.Add(17*time.Second))
	e.wantNew(debounced("other", "user:7", errandtype.DebounceLastWins, w, 1))
}

// testDebounceMaxWait: a burst that never goes quiet starts no later than
// MaxWait after the first enqueue.
func testDebounceMaxWait(t *testing.T, h harness) {
	e := open(t, h)
	const w = 10 * time.Second
	mk := func(id string, n int) *errandstore.JobInsertParams {
		p := debounced(id, "k", errandtype.DebounceLastWins, w, n)
		p.Debounce.MaxWait = 25 * time.Second
		return p
	}
	e.wantNew(mk("d0", 0))
	for i := 1; i <= 3; i++ {
		e.clock.Advance(8 * time.Second)
		start := min(T0.Add(time.Duration(8*i)*time.Second+w).UnixMicro(), T0.Add(25*time.Second).UnixMicro())
		e.wantAbsorbed(mk(fmt.Sprint("d", i), i), "d0", i, i, time.UnixMicro(start).UTC())
	}
}

// testDebounceNotStarted: a job that has started keeps its args; a new
// enqueue of its key makes a new job.
func testDebounceNotStarted(t *testing.T, h harness) {
	e := open(t, h)
	const w = time.Second
	e.wantNew(debounced("d1", "k", errandtype.DebounceLastWins, w, 1))
	e.clock.Advance(w)
	e.claimOne("d1")
	j := e.wantNew(debounced("d2", "k", errandtype.DebounceLastWins, w, 2))
	e.wantDebounced(j, "k", 0, 2, e.now().Add(w))
	e.wantAbsorbed(debounced("d3", "k", errandtype.DebounceLastWins, w, 3), "d2", 1, 3, e.now().Add(w))
	if got := e.get("d1"); got.Absorbed != 0 || !sameJSON(got.Args, []byte(`{"n":1}`)) {
		t.Fatalf("running job d1: absorbed %d, args %s; want it untouched", got.Absorbed, got.Args)
	}
}

// testDebounceFirstWins: within a window of the key's job, an enqueue is
// absorbed and the job keeps its args and start; past it, or once the job
// was cancelled, a new job is made.
func testDebounceFirstWins(t *testing.T, h harness) {
	e := open(t, h)
	const w = time.Minute
	fw := func(id string, n int) *errandstore.JobInsertParams {
		return debounced(id, "k", errandtype.DebounceFirstWins, w, n)
	}
	j := e.wantNew(fw("t1", 1))
	e.wantDebounced(j, "k", 0, 1, T0)
	e.clock.Advance(30 * time.Second)
	e.claimOne("t1") // a running job absorbs too
	e.wantAbsorbed(fw("t2", 2), "t1", 1, 1, T0)
	e.clock.Advance(30 * time.Second) // t1's window is over
	e.wantNew(fw("t3", 3))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "t3", Operator: "ana", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	e.wantNew(fw("t4", 4))
	e.wantAbsorbed(fw("t5", 5), "t4", 1, 4, e.now())
}

// testDebouncePerKind: one key of two kinds is two keys.
func testDebouncePerKind(t *testing.T, h harness) {
	e := open(t, h)
	e.wantNew(debounced("a", "k", errandtype.DebounceLastWins, time.Second, 1))
	b := debounced("b", "k", errandtype.DebounceLastWins, time.Second, 1)
	b.Kind = "sms"
	e.wantNew(b)
}

// testDebounceBatch: within one insert, a later job of a key folds into
// the earlier one, and jobs without a key keep the batch's order.
func testDebounceBatch(t *testing.T, h harness) {
	e := open(t, h)
	const w = time.Second
	rs := e.insertResults(newJob("p1"), debounced("a", "k", errandtype.DebounceLastWins, w, 1), newJob("p2"),
		debounced("b", "k", errandtype.DebounceLastWins, w, 2), newJob("p3"))
	for i, id := range []string{"p1", "a", "p2", "a", "p3"} {
		if rs[i].Job.ID != id || rs[i].Absorbed != (i == 3) {
			t.Fatalf("result %d: job %s, absorbed %v; want %s, absorbed %v", i, rs[i].Job.ID, rs[i].Absorbed, id, i == 3)
		}
	}
	if !(rs[0].Job.Seq < rs[1].Job.Seq && rs[1].Job.Seq < rs[2].Job.Seq && rs[2].Job.Seq < rs[4].Job.Seq) {
		t.Fatalf("seqs %d %d %d %d; want the batch's order", rs[0].Job.Seq, rs[1].Job.Seq, rs[2].Job.Seq, rs[4].Job.Seq)
	}
	e.wantDebounced(e.get("a"), "k", 1, 2, T0.Add(w))
	e.notFound("b")
}

// testDebounceTx: in a caller's transaction, a fold is undone with it.
func testDebounceTx(t *testing.T, h harness) {
	e := open(t, h)
	const w = time.Second
	e.wantNew(debounced("a", "k", errandtype.DebounceLastWins, w, 1))
	e.clock.Advance(time.Millisecond)
	err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		rs, err := tx.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
			debounced("b", "k", errandtype.DebounceLastWins, w, 2)}})
		if err != nil {
			return err
		}
		if !rs[0].Absorbed || rs[0].Job.ID != "a" {
			return fmt.Errorf("got job %s, absorbed %v; want it absorbed by a", rs[0].Job.ID, rs[0].Absorbed)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	e.wantDebounced(e.get("a"), "k", 0, 1, T0.Add(w))
	e.notFound("b")
}

// testDebounceConcurrent: concurrent enqueues of one key, from two stores,
// leave exactly one pending job, which counts all the others.
func testDebounceConcurrent(t *testing.T, h harness) {
	e := open(t, h)
	other := e.second()
	const inserters = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range inserters {
		s := e.s
		if w%2 == 1 {
			s = other
		}
		id := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			<-start
			p := debounced(id, "k", errandtype.DebounceLastWins, time.Minute, w)
			if _, err := s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}}); err != nil {
				t.Errorf("insert %s: %v", id, err)
			}
		})
	}
	close(start)
	wg.Wait()
	js, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0].Absorbed != inserters-1 {
		t.Fatalf("%d concurrent enqueues of one key left %d jobs %v; want one that absorbed %d", inserters, len(js), ids(js), inserters-1)
	}
}

// testDebounceInvalid: bad debounce options are refused and write nothing.
func testDebounceInvalid(t *testing.T, h harness) {
	e := open(t, h)
	unique := debounced("unique", "k", errandtype.DebounceLastWins, time.Second, 1)
	unique.UniqueKey = "u"
	delayed := debounced("delayed", "k", errandtype.DebounceLastWins, time.Second, 1)
	delayed.Delay = time.Minute
	short := debounced("short", "k", errandtype.DebounceLastWins, time.Microsecond, 1)
	waitFirst := debounced("wait-first", "k", errandtype.DebounceFirstWins, time.Second, 1)
	waitFirst.Debounce.MaxWait = time.Minute
	waitShort := debounced("wait-short", "k", errandtype.DebounceLastWins, time.Minute, 1)
	waitShort.Debounce.MaxWait = time.Second
	noKey := debounced("nokey", "", errandtype.DebounceLastWins, time.Second, 1)
	badMode := debounced("badmode", "k", 9, time.Second, 1)
	for _, p := range []*errandstore.JobInsertParams{unique, delayed, short, waitFirst, waitShort, noKey, badMode} {
		_, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{newJob("ok-" + p.ID), p}})
		if !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("insert %s: %v; want an *InputError", p.ID, err)
		}
		e.notFound(p.ID)
		e.notFound("ok-" + p.ID)
	}
}
