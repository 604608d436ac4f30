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

// TestRetryBudgetHoldsBackRetriesOfFairQueues: a spent retry budget keeps
// the kind's retries out of a claim whether the queue's jobs carry
// fairness keys (a fair claim) or not.
func TestRetryBudgetHoldsBackRetriesOfFairQueues(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		name := "plain"
		if keyed {
			name = "fairness key"
		}
		t.Run(name, func(t *testing.T) {
			eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
				c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "flaky",
					Handler: errand.HandlerFunc(func(_ context.Context, j *errandtype.Job) error {
						if j.Attempt == 1 {
							return errand.RetryAfter(time.Second, errors.New("down"))
						}
						return nil
					})}})})
				opts := &errand.EnqueueOpts{ID: "f1"}
				if keyed {
					opts.FairnessKey = "tenant-1"
				}
				enqueue(t, c, "flaky", opts)
				budget := &errand.WorkOneOpts{RetryBudgets: []errand.RetryBudget{{Kind: "flaky", Ratio: 0, Min: -1}}}
				if r := workOne(t, c, budget); r.Result != errand.ResultRetrying {
					t.Fatalf("first attempt: %+v", r)
				}
				clock.Advance(2 * time.Second)
				if r := workOne(t, c, budget); r.Result != errand.ResultIdle {
					j := getJob(t, c, "f1")
					t.Fatalf("a retry claimed over a spent budget: result %s, job %s at attempt %d", r.Result, j.State, j.Attempt)
				}
				// A first attempt of the kind is not held back.
				first := &errand.EnqueueOpts{ID: "f2"}
				if keyed {
					first.FairnessKey = "tenant-2"
				}
				enqueue(t, c, "flaky", first)
				if r := workOne(t, c, budget); r.Result != errand.ResultRetrying || r.JobID == nil || *r.JobID != "f2" {
					t.Fatalf("first attempt of f2 with the budget spent: %+v; want it run", r)
				}
			})
		})
	}
}
