package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// failSMTP fails job j of send_email through c, as a remote worker does.
func failSMTP(t *testing.T, c *errand.Client[*sql.Tx], j *errandtype.Job) {
	t.Helper()
	if _, err := c.Fail(context.Background(), j.ID, *j.LeaseToken, &errand.FailOpts{Message: "dial smtp: connection refused"}); err != nil {
		t.Fatal(err)
	}
}

// kindFailures is the failed attempts of kind in the last hour.
func kindFailures(t *testing.T, c *errand.Client[*sql.Tx], kind string) int {
	t.Helper()
	ins, err := c.Insights(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ins.Kinds {
		if k.Kind == kind {
			return k.FailedLastHour
		}
	}
	return 0
}

// TestBreakerRunCountsEveryFailure: with no success between them, every
// counted failure of smtp's kind is one of its breaker's run: the one of a
// job that was running when the breaker opened, and a failed probe's, as
// much as those that opened it.
func TestBreakerRunCountsEveryFailure(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		h := errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return errors.New("dial smtp: connection refused") })
		c := smtpClient(t, s, clock, h)
		for range 5 {
			enqueue(t, c, "send_email", nil)
		}
		running := claimSMTP(t, c, 1) // runs while the breaker opens
		for range 3 {
			if r := workOne(t, c, nil); r.Result != errand.ResultRetrying {
				t.Fatalf("WorkOne: %s; want retrying", r.Result)
			}
		}
		if b := smtpBreaker(t, c); b.State != errandtype.BreakerOpen || b.Failures != 3 {
			t.Fatalf("breaker after 3 failures: %s with %d; want open with 3", b.State, b.Failures)
		}
		failSMTP(t, c, running[0])
		clock.Advance(47 * time.Second)
		if r := workOne(t, c, nil); r.Result != errand.ResultRetrying {
			t.Fatalf("WorkOne of the probe: %s; want retrying", r.Result)
		}
		b := smtpBreaker(t, c)
		if n := kindFailures(t, c, "send_email"); b.State != errandtype.BreakerOpen || b.Failures != n || n != 5 || b.Trips != 2 {
			t.Fatalf("breaker after the probe failed: %s with %d failures in its run, %d trips; the kind failed %d times; want open with 5, 2 trips",
				b.State, b.Failures, b.Trips, n)
		}
	})
}
