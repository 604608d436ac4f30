package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var effectCases = []testCase{
	{"RecordTx", testEffectRecordTx},
	{"RecordTxFenced", testEffectRecordTxFenced},
	{"BeginCompleteRelease", testEffectBeginCompleteRelease},
	{"Abandoned", testEffectAbandoned},
	{"HeldElsewhere", testEffectHeldElsewhere},
	{"StaleFinish", testEffectStaleFinish},
}

func sameEffect(t *testing.T, what string, want, got *errandstore.Effect) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: no ledger entry, want %+v", what, want)
		return
	}
	if got.Key != want.Key || got.JobID != want.JobID || got.State != want.State || got.LeaseToken != want.LeaseToken ||
		got.Message != want.Message || got.Status != want.Status ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("%s: ledger entry\n got %+v\nwant %+v", what, *got, *want)
	}
}

func (e *env) effect(key string) *errandstore.Effect {
	e.t.Helper()
	f, err := e.s.EffectGet(e.ctx, &errandstore.EffectGetParams{Key: key})
	if err != nil {
		e.t.Fatalf("EffectGet(%s): %v", key, err)
	}
	return f
}

func (e *env) noEffect(key string) {
	e.t.Helper()
	if f, err := e.s.EffectGet(e.ctx, &errandstore.EffectGetParams{Key: key}); !errors.Is(err, errandtype.ErrNotFound) {
		e.t.Errorf("EffectGet(%s) = %+v, %v; want ErrNotFound", key, f, err)
	}
}

// recordTx records key for j in a transaction of its own and ends it.
func (e *env) recordTx(key string, j *errandtype.Job, tok string, commit bool) (bool, error) {
	e.t.Helper()
	var first bool
	err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		var err error
		first, err = tx.EffectRecord(ctx, &errandstore.EffectRecordParams{Key: key, JobID: j.ID, LeaseToken: tok})
		if err == nil && !commit {
			err = errRollback
		}
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return first, err
}

func (e *env) begin(key string, j *errandtype.Job) *errandstore.Effect {
	e.t.Helper()
	f, err := e.s.EffectBegin(e.ctx, &errandstore.EffectParams{Key: key, JobID: j.ID, LeaseToken: token(j)})
	if err != nil {
		e.t.Fatalf("EffectBegin(%s) by job %s: %v", key, j.ID, err)
	}
	return f
}

// testEffectRecordTx checks guarantee 2's ledger: an effect recorded in its
// own transaction happens once, and not at all if that transaction rolls
// back.
func testEffectRecordTx(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	now := e.now()

	// Rolled back: no record, and the key is still free.
	if first, err := e.recordTx("pay_1", j, token(j), false); err != nil || !first {
		t.Fatalf("first record (rolled back) = %v, %v; want true", first, err)
	}
	e.noEffect("pay_1")

	// Committed: recorded once.
	if first, err := e.recordTx("pay_1", j, token(j), true); err != nil || !first {
		t.Fatalf("first record = %v, %v; want true", first, err)
	}
	want := &errandstore.Effect{Key: "pay_1", JobID: "a", State: errandtype.EffectCompleted, LeaseToken: token(j), CreatedAt: now, UpdatedAt: now}
	sameEffect(t, "recorded effect", want, e.effect("pay_1"))
	e.clock.Advance(time.Second)
	for _, commit := range []bool{false, true} {
		if first, err := e.recordTx("pay_1", j, token(j), commit); err != nil || first {
			t.Errorf("repeated record = %v, %v; want false", first, err)
		}
	}
	sameEffect(t, "effect after repeats", want, e.effect("pay_1"))

	// A later delivery of the same job finds the key.
	e.recordOK(retry(j, 0))
	j2 := e.claimOne("a")
	if first, err := e.recordTx("pay_1", j2, token(j2), true); err != nil || first {
		t.Errorf("record by the next attempt = %v, %v; want false", first, err)
	}
	// It is the same ledger the remote protocol reads.
	if f := e.begin("pay_1", j2); f.Status != errandtype.EffectAlreadyCompleted {
		t.Errorf("EffectBegin of a recorded key: status %q, want completed", f.Status)
	}
}

func testEffectRecordTxFenced(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b")
	j := e.claimOne("a")
	if _, err := e.recordTx("k1", j, "stale", true); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("record with a wrong token: %v, want ErrLeaseLost", err)
	}
	e.noEffect("k1")
	e.clock.Advance(lease)
	if _, err := e.recordTx("k1", j, token(j), true); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("record at lease expiry: %v, want ErrLeaseLost", err)
	}
	e.noEffect("k1")
	// An empty token is not fenced: it serves effects outside a claim.
	queued := e.get("b")
	if first, err := e.recordTx("k2", queued, "", true); err != nil || !first {
		t.Errorf("unfenced record = %v, %v; want true", first, err)
	}
	sameEffect(t, "unfenced effect", &errandstore.Effect{Key: "k2", JobID: "b", State: errandtype.EffectCompleted, CreatedAt: e.now(), UpdatedAt: e.now()}, e.effect("k2"))
}

// testEffectBeginCompleteRelease walks the remote-effect protocol: begin,
// complete, and release-then-retake on a later delivery.
func testEffectBeginCompleteRelease(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	e.noEffect("charge")
	j := e.claimOne("a")
	t0 := e.now()
	f := e.begin("charge", j)
	want := &errandstore.Effect{Key: "charge", JobID: "a", State: errandtype.EffectInProgress, LeaseToken: token(j), CreatedAt: t0, UpdatedAt: t0, Status: errandtype.EffectBegun}
	sameEffect(t, "begun", want, f)
	want.Status = ""
	sameEffect(t, "EffectGet after begin", want, e.effect("charge"))
	// Beginning again under the same lease is the same delivery: still its.
	if f := e.begin("charge", j); f.Status != errandtype.EffectBegun || f.State != errandtype.EffectInProgress {
		t.Errorf("begin again by the holder: status %q state %q, want begun, in_progress", f.Status, f.State)
	}

	t1 := e.clock.Advance(time.Second)
	f, err := e.s.EffectRelease(e.ctx, &errandstore.EffectReleaseParams{EffectParams: errandstore.EffectParams{Key: "charge", JobID: "a", LeaseToken: token(j)}, Message: "provider said 503"})
	if err != nil {
		t.Fatalf("EffectRelease: %v", err)
	}
	want = &errandstore.Effect{Key: "charge", JobID: "a", State: errandtype.EffectFailed, LeaseToken: token(j), Message: "provider said 503", CreatedAt: t0, UpdatedAt: t1}
	sameEffect(t, "released", want, f)
	sameEffect(t, "EffectGet after release", want, e.effect("charge"))

	// The next delivery retakes it and completes it.
	e.recordOK(retry(j, 0))
	j2 := e.claimOne("a")
	t2 := e.clock.Advance(time.Second)
	f = e.begin("charge", j2)
	if f.Status != errandtype.EffectRetaken || f.State != errandtype.EffectInProgress || f.LeaseToken != token(j2) ||
		!f.CreatedAt.Equal(t0) || !f.UpdatedAt.Equal(t2) {
		t.Errorf("begin after a release: %+v; want retaken, in_progress under the new token, created %v, updated %v", *f, t0, t2)
	}
	t3 := e.clock.Advance(time.Second)
	f, err = e.s.EffectComplete(e.ctx, &errandstore.EffectParams{Key: "charge", JobID: "a", LeaseToken: token(j2)})
	if err != nil {
		t.Fatalf("EffectComplete: %v", err)
	}
	want = &errandstore.Effect{Key: "charge", JobID: "a", State: errandtype.EffectCompleted, LeaseToken: token(j2), CreatedAt: t0, UpdatedAt: t3}
	sameEffect(t, "completed", want, f)
	sameEffect(t, "EffectGet after complete", want, e.effect("charge"))

	// Any later delivery sees it done and changes nothing.
	e.recordOK(retry(j2, 0))
	j3 := e.claimOne("a")
	e.clock.Advance(time.Second)
	if f := e.begin("charge", j3); f.Status != errandtype.EffectAlreadyCompleted || f.State != errandtype.EffectCompleted {
		t.Errorf("begin after completion: %+v, want status completed", *f)
	}
	sameEffect(t, "entry after a begin found it completed", want, e.effect("charge"))
}

// testEffectAbandoned checks that a delivery that began an effect and lost
// its lease leaves it for the next delivery to take over, flagged as
// abandoned, and cannot finish it afterwards.
func testEffectAbandoned(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	t0 := e.now()
	e.begin("send", j)
	e.clock.Advance(lease)
	j2 := e.claimOne("a")
	t1 := e.clock.Advance(time.Second)
	f := e.begin("send", j2)
	want := &errandstore.Effect{Key: "send", JobID: "a", State: errandtype.EffectInProgress, LeaseToken: token(j2), CreatedAt: t0, UpdatedAt: t1, Status: errandtype.EffectAbandoned}
	sameEffect(t, "taken over", want, f)
	want.Status = ""
	for _, finish := range []string{"complete", "release"} {
		p := &errandstore.EffectParams{Key: "send", JobID: "a", LeaseToken: token(j)}
		var err error
		if finish == "complete" {
			_, err = e.s.EffectComplete(e.ctx, p)
		} else {
			_, err = e.s.EffectRelease(e.ctx, &errandstore.EffectReleaseParams{EffectParams: *p, Message: "late"})
		}
		if !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("%s by the old delivery: %v, want ErrLeaseLost", finish, err)
		}
	}
	sameEffect(t, "entry after the old delivery tried to finish", want, e.effect("send"))
}

// testEffectHeldElsewhere checks that an effect shared by two jobs is held
// by whichever began it while its lease lives.
func testEffectHeldElsewhere(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b")
	a := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: time.Minute, Owner: owner})[0]
	b := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 10 * time.Minute, Owner: owner})[0]
	if a.ID != "a" || b.ID != "b" {
		t.Fatalf("claimed %s then %s", a.ID, b.ID)
	}
	t0 := e.now()
	e.begin("shared", a)
	held := &errandstore.Effect{Key: "shared", JobID: "a", State: errandtype.EffectInProgress, LeaseToken: token(a), CreatedAt: t0, UpdatedAt: t0}
	e.clock.Advance(time.Minute - time.Microsecond)
	f := e.begin("shared", b)
	want := *held
	want.Status = errandtype.EffectHeldElsewhere
	sameEffect(t, "begin by another job while held", &want, f)
	sameEffect(t, "entry while held", held, e.effect("shared"))
	// b cannot finish what it does not hold.
	if _, err := e.s.EffectComplete(e.ctx, &errandstore.EffectParams{Key: "shared", JobID: "b", LeaseToken: token(b)}); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("complete by a job that does not hold the entry: %v, want ErrLeaseLost", err)
	}
	sameEffect(t, "entry after a foreign complete", held, e.effect("shared"))

	// a's lease ends: b takes the entry over.
	t1 := e.clock.Advance(time.Microsecond)
	f = e.begin("shared", b)
	want = errandstore.Effect{Key: "shared", JobID: "b", State: errandtype.EffectInProgress, LeaseToken: token(b), CreatedAt: t0, UpdatedAt: t1, Status: errandtype.EffectAbandoned}
	sameEffect(t, "begin after the holder's lease ended", &want, f)
}

// testEffectStaleFinish checks that complete and release are fenced by the
// job's lease and change nothing when it is gone.
func testEffectStaleFinish(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	t0 := e.now()
	e.begin("k", j)
	want := &errandstore.Effect{Key: "k", JobID: "a", State: errandtype.EffectInProgress, LeaseToken: token(j), CreatedAt: t0, UpdatedAt: t0}
	finish := func(tok string) []error {
		p := &errandstore.EffectParams{Key: "k", JobID: "a", LeaseToken: tok}
		_, err1 := e.s.EffectComplete(e.ctx, p)
		_, err2 := e.s.EffectRelease(e.ctx, &errandstore.EffectReleaseParams{EffectParams: *p, Message: "x"})
		return []error{err1, err2}
	}
	for _, err := range finish("stale") {
		if !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("finish with a wrong token: %v, want ErrLeaseLost", err)
		}
	}
	sameEffect(t, "entry after finishes with a wrong token", want, e.effect("k"))
	e.clock.Advance(lease)
	for _, err := range finish(token(j)) {
		if !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("finish at lease expiry: %v, want ErrLeaseLost", err)
		}
	}
	sameEffect(t, "entry after finishes past the lease", want, e.effect("k"))
	if _, err := e.s.EffectBegin(e.ctx, &errandstore.EffectParams{Key: "k2", JobID: "a", LeaseToken: token(j)}); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("begin past the lease: %v, want ErrLeaseLost", err)
	}
	e.noEffect("k2")
}
