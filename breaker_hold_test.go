package errand_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// declareByClaim makes c record its kinds' dependencies, as its first
// claim outside a worker does, claiming nothing.
func declareByClaim(t *testing.T, c *errand.Client[*sql.Tx], kind string) {
	t.Helper()
	if js, err := c.Claim(context.Background(), &errand.ClaimOpts{Queue: "nothing_here", Kinds: []string{kind}, Owner: "remote-1"}); err != nil || len(js) != 0 {
		t.Fatalf("Claim = %d jobs, %v; want none", len(js), err)
	}
}

// TestBreakerHoldsSeenByEveryReader: a client that declares no kinds (the
// CLI's, another host's) reports the jobs of a kind whose dependency's
// breaker is open as held by it, not ready, in a job's record, the queue
// statistics and the insights, once a client that declares the kind has
// recorded it; a later client that declares the kind without a dependency
// wins.
func TestBreakerHoldsSeenByEveryReader(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		declaring := smtpClient(t, s, clock, nil)
		reader := newClient(t, s, &errand.Config{Clock: clock})
		held := enqueue(t, declaring, "send_email", nil)
		enqueue(t, declaring, "send_email", nil)
		clock.Advance(5 * time.Second)
		ready := enqueue(t, declaring, "audit_log", nil)
		clock.Advance(10 * time.Second)
		tripSMTP(t, s)

		check := func(what string, wantHeld bool) {
			t.Helper()
			j, err := reader.Get(ctx, held.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := j.HeldByBreaker != nil && *j.HeldByBreaker == "smtp"; got != wantHeld || j.HeldByBreaker != nil && !wantHeld {
				t.Errorf("%s: Get: held_by_breaker %v; want smtp %v", what, j.HeldByBreaker, wantHeld)
			}
			js, err := reader.List(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				if want := wantHeld && j.Kind == "send_email"; (j.HeldByBreaker != nil) != want {
					t.Errorf("%s: List: job %s of %s held_by_breaker %v; want held %v", what, j.ID, j.Kind, j.HeldByBreaker, want)
				}
			}
			if j := getJob(t, reader, ready.ID); j.HeldByBreaker != nil {
				t.Errorf("%s: audit_log's job is held by %s", what, *j.HeldByBreaker)
			}
			st, err := reader.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			age, heldKinds := 15.0, []errandtype.BreakerHeldKind{}
			if wantHeld {
				age, heldKinds = 10, []errandtype.BreakerHeldKind{{Kind: "send_email", Dependency: "smtp", Waiting: 2}}
			}
			if len(st) != 1 || st[0].OldestReadyAgeSeconds != age || len(st[0].BreakerHeldKinds) != len(heldKinds) ||
				len(heldKinds) == 1 && st[0].BreakerHeldKinds[0] != heldKinds[0] {
				t.Errorf("%s: Stats = %+v; want oldest ready age %vs, breaker-held kinds %+v", what, st, age, heldKinds)
			}
			ins, err := reader.Insights(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range ins.Kinds {
				if k.Kind != "send_email" {
					continue
				}
				wantReady, wantBy := 2, 0
				if wantHeld {
					wantReady, wantBy = 0, 2
				}
				if k.Ready != wantReady || k.HeldByBreaker != wantBy || (k.Breaker != nil) != wantHeld || wantHeld != (k.OldestReadyAgeSeconds == 0) {
					t.Errorf("%s: insights of send_email: ready %d, held by breaker %d (%v), oldest ready %vs; want ready %d, held %d",
						what, k.Ready, k.HeldByBreaker, k.Breaker, k.OldestReadyAgeSeconds, wantReady, wantBy)
				}
			}
		}
		check("before any client declared send_email", false)
		declareByClaim(t, declaring, "send_email")
		check("once declared", true)

		// A new version declares send_email without a dependency.
		kinds := errand.NewKinds()
		kinds.HandleRaw("send_email", nil, nil)
		kinds.HandleRaw("charge", nil, &errand.KindOpts{Dependency: "payments"})
		declareByClaim(t, newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds}), "charge")
		check("declared again without a dependency", false)
		declareByClaim(t, smtpClient(t, s, clock, nil), "send_email")
		check("declared again with smtp", true)

		if _, err := reader.ResetBreaker(ctx, "smtp", "ana", "relay fixed"); err != nil {
			t.Fatal(err)
		}
		check("after the breaker's reset", false)
	})
}
