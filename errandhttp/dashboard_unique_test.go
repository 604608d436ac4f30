package errandhttp

import (
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestDashboardJobDetailUniqueAndHold: a job's page shows its unique
// key's scope and window, and a dead job that holds its ordering key says
// that the rest of the key waits for it.
func TestDashboardJobDetailUniqueAndHold(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	h := NewDashboard(c, nil)
	enqueue(t, c, failArgs{Note: "bad entry"}, &errand.EnqueueOpts{ID: "head", Queue: "ledger", OrderingKey: "acct-7",
		OrderingOnDead: errand.OrderingHoldOnDead,
		Unique:         &errand.UniqueOpts{Key: "entry:1", Scope: errandtype.UniqueUntilSucceeded, Window: 24 * time.Hour}})
	workOne(t, c, "ledger")
	body := mustGet(t, h, "/jobs/head")
	wantContains(t, "dead head", body,
		"entry:1 (scope until_succeeded), in the window from",
		"acct-7, held while dead until replayed or cancelled",
		"it holds ordering key acct-7, so the later jobs of the key wait until it is replayed or cancelled")
}

// TestDashboardJobDetailDebounce: a job's page shows its debounce key and
// how many enqueues it absorbed.
func TestDashboardJobDetailDebounce(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	h := NewDashboard(c, nil)
	opts := &errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:42", Window: time.Minute}}
	var id string
	for range 3 {
		id = enqueue(t, c, failArgs{Note: "reindex"}, opts).ID
	}
	wantContains(t, "debounced job", mustGet(t, h, "/jobs/"+id), "Debounce key", "user:42 (absorbed 2 enqueues)")
}
