package errandhttp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestDashboardOverviewShowsFairness: the queues table shows each queue's
// fairness keys with the most waiting jobs, most first, and the workers
// table each queue's weight.
func TestDashboardOverviewShowsFairness(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	for i := range 7 {
		enqueue(t, c, okArgs{}, &errand.EnqueueOpts{Queue: "tenants", FairnessKey: "acme"})
		if i < 2 {
			enqueue(t, c, okArgs{}, &errand.EnqueueOpts{Queue: "tenants", FairnessKey: "globex"})
		}
	}
	for i := range 6 {
		enqueue(t, c, okArgs{}, &errand.EnqueueOpts{Queue: "tenants", FairnessKey: fmt.Sprintf("small-%d", i)})
	}
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{Queue: "plain"})
	_, err := c.Store().WorkerRegister(context.Background(), &errandstore.WorkerRegisterParams{
		ID: "web-1:812", Host: "web-1", PID: 812, HeartbeatInterval: 5 * time.Second,
		Queues: []errandtype.WorkerQueue{{Name: "critical", Concurrency: 10, Weight: 6}, {Name: "low", Concurrency: 10, Weight: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := mustGet(t, NewDashboard(c, nil), "/")
	row := tableRow(t, body, `href="/jobs?queue=tenants"`)
	wantContains(t, "tenants row", row, `<span class="key">acme</span> 7, <span class="key">globex</span> 2, <span class="key">small-0</span> 1`)
	wantLacks(t, "tenants row (top 5 keys only)", row, "small-3")
	wantContains(t, "plain row", tableRow(t, body, `href="/jobs?queue=plain"`), `<td class="fairkeys"><span class="zero">none</span></td>`)
	wantContains(t, "worker row", tableRow(t, body, "web-1:812"), "critical×10 (weight 6), low×10 (weight 1)")
}
