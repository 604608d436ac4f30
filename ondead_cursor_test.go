package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestOnDeadHookHasNoLookbackLimit: a job of a kind that died 30 days
// before any worker with the kind's hook existed (a worker without the
// hook ran it) gets its hook when the first hooked worker starts, once:
// workers starting later look from the cursor the first left in the store,
// find no death twice, and still find a death after it.
func TestOnDeadHookHasNoLookbackLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		// The old release: charge has a handler, no hook.
		ks := errand.NewKinds()
		ks.HandleRaw("charge", errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
			return errand.Permanent(errors.New("card declined"))
		}), nil)
		old := newClient(t, st, &errand.Config{Kinds: ks, Clock: clock})
		if _, err := old.Enqueue(ctx, errand.RawArgs{KindName: "charge", JSON: json.RawMessage(`{"Mode":"permanent"}`)}, &errand.EnqueueOpts{ID: "ancient"}); err != nil {
			t.Fatal(err)
		}
		if r := workOne(t, old, nil); r.Result != errand.ResultDead {
			t.Fatalf("old release's attempt: %s; want dead", r.Result)
		}
		clock.Advance(30 * 24 * time.Hour)

		// The new release adds the hook.
		c := hookClient(t, st, clock)
		noHook(t, c, "ancient", 0)
		if n, err := errand.ScanDeadHooks(ctx, c); err != nil || n != 1 {
			t.Fatalf("first hooked worker's look found %d (%v); want the death of 30 days ago", n, err)
		}
		wantHook(t, c, "ancient", 0)
		if n, err := errand.ScanDeadHooks(ctx, c); err != nil || n != 0 {
			t.Fatalf("a later worker's look found %d (%v); want none", n, err)
		}

		// A death no handler sees, after the cursor: a lease swept on the
		// final attempt.
		if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "charge", JSON: json.RawMessage(`{}`)}, &errand.EnqueueOpts{ID: "swept", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 30 * time.Second, Owner: "crashed"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(31 * time.Second)
		if _, err := st.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(90 * 24 * time.Hour) // and no hooked worker runs for 90 days
		if n, err := errand.ScanDeadHooks(ctx, c); err != nil || n != 1 {
			t.Fatalf("look after 90 days found %d (%v); want the swept job", n, err)
		}
		wantHook(t, c, "swept", 0)
		if n, err := errand.ScanDeadHooks(ctx, c); err != nil || n != 0 {
			t.Fatalf("a later look found %d (%v); want none", n, err)
		}
		refunds, err := c.List(ctx, &errand.ListOpts{Kind: "refund"})
		if err != nil {
			t.Fatal(err)
		}
		if len(refunds) != 2 {
			t.Fatalf("%d hook jobs; want one per death, 2", len(refunds))
		}
	})
}
