package errand_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestRemoteAckEndsRunRecordedElsewhere: a remote worker's success,
// acknowledged through an API server whose last look at smtp's breaker
// found it clean, ends the run of failures that another server recorded
// since, so that failures that were not in a row do not open it.
func TestRemoteAckEndsRunRecordedElsewhere(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		acking, other := smtpClient(t, s, clock, nil), smtpClient(t, s, clock, nil)
		for range 4 {
			enqueue(t, other, "send_email", nil)
		}
		ok := claimSMTP(t, acking, 1) // acking sees smtp clean
		failing := claimSMTP(t, other, 3)
		failSMTP(t, other, failing[0])
		failSMTP(t, other, failing[1])
		if _, err := acking.Ack(ctx, ok[0].ID, *ok[0].LeaseToken); err != nil {
			t.Fatal(err)
		}
		if b := smtpBreaker(t, acking); b.Failures != 0 {
			t.Fatalf("breaker after a success: %d failures in its run; want 0", b.Failures)
		}
		failSMTP(t, other, failing[2])
		if b := smtpBreaker(t, acking); b.State != errandstore.BreakerClosed || b.Failures != 1 {
			t.Fatalf("breaker after fail, fail, ack, fail: %s with %d; want closed with a run of 1", b.State, b.Failures)
		}
	})
}

// TestAckManyEndsRunRecordedElsewhere: AckMany follows the same rule.
func TestAckManyEndsRunRecordedElsewhere(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		acking, other := smtpClient(t, s, clock, nil), smtpClient(t, s, clock, nil)
		for range 4 {
			enqueue(t, other, "send_email", nil)
		}
		ok := claimSMTP(t, acking, 2)
		for _, j := range claimSMTP(t, other, 2) {
			failSMTP(t, other, j)
		}
		rs, err := acking.AckMany(ctx, []errandstore.JobLease{{ID: ok[0].ID, LeaseToken: *ok[0].LeaseToken}, {ID: ok[1].ID, LeaseToken: *ok[1].LeaseToken}})
		if err != nil || rs[0].Err != nil || rs[1].Err != nil {
			t.Fatalf("AckMany: %+v, %v", rs, err)
		}
		if b := smtpBreaker(t, acking); b.Failures != 0 {
			t.Fatalf("breaker after the successes: %d failures in its run; want 0", b.Failures)
		}
	})
}

// TestLocalSuccessEndsRunRecordedElsewhere: a worker's own success follows
// the remote rule: it ends a run that another process recorded after this
// one last read the breaker (when it claimed the job).
func TestLocalSuccessEndsRunRecordedElsewhere(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		other := smtpClient(t, s, clock, nil)
		c := smtpClient(t, s, clock, func(ctx context.Context, j *errandtype.Job) error {
			for _, f := range claimSMTP(t, other, 2) {
				failSMTP(t, other, f)
			}
			return nil
		})
		for range 3 {
			enqueue(t, c, "send_email", nil)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("WorkOne: %s; want succeeded", r.Result)
		}
		if b := smtpBreaker(t, c); b.Failures != 0 {
			t.Fatalf("breaker after the success: %d failures in its run; want 0", b.Failures)
		}
	})
}

// TestAcksReadBreakersAndWriteOnlyToReset: acknowledgments of a healthy
// dependency read no job and write no breaker; each reads the breaker
// once, which is what tells a success that ends a run from one that ends
// none.
func TestAcksReadBreakersAndWriteOnlyToReset(t *testing.T) {
	clock := newTestClock()
	st := &countingStore{Store: openStore(t, clock)}
	c := smtpClient(t, st, clock, nil)
	ctx := context.Background()
	for range 4 {
		enqueue(t, c, "send_email", nil)
	}
	js := claimSMTP(t, c, 4)
	if len(js) != 4 {
		t.Fatalf("claim took %d jobs; want 4", len(js))
	}
	st.lists.Store(0)
	for _, j := range js[:2] {
		if _, err := c.Ack(ctx, j.ID, *j.LeaseToken); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AckMany(ctx, []errandstore.JobLease{{ID: js[2].ID, LeaseToken: *js[2].LeaseToken}, {ID: js[3].ID, LeaseToken: *js[3].LeaseToken}}); err != nil {
		t.Fatal(err)
	}
	if l, g, u := st.lists.Load(), st.gets.Load(), st.updates.Load(); l != 3 || g != 0 || u != 0 {
		t.Fatalf("3 acknowledgments (one of 2 jobs) read the breakers %d times, jobs %d times, and wrote breakers %d times; want 3, 0, 0", l, g, u)
	}
}
