package errandhttp

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
)

// TestDashboardOverviewPagesQueues: the overview shows the DefaultTopN
// deepest queues and the busiest DefaultTopN rows of their kinds, links
// to the queues after them, and that page shows them.
func TestDashboardOverviewPagesQueues(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	for i := range DefaultTopN + 2 {
		enqueue(t, c, errand.RawArgs{KindName: "k" + strconv.Itoa(i)}, &errand.EnqueueOpts{Queue: "deep"})
	}
	for i := range DefaultTopN + 1 {
		enqueue(t, c, errand.RawArgs{KindName: "one"}, &errand.EnqueueOpts{Queue: fmt.Sprintf("q%03d", i)})
	}
	h := NewDashboard(c, nil)
	first := mustGet(t, h, "/")
	wantContains(t, "the first page", first, `?queue=deep"`, `?queue=q000"`, `?queue=q098"`,
		fmt.Sprintf(`<a href="/?from=%d#queues">and 2 more</a>`, DefaultTopN),
		fmt.Sprintf("The busiest %d rows of these queues; and %d more", DefaultTopN, DefaultTopN+2+99-DefaultTopN))
	wantLacks(t, "the first page", first, `?queue=q099"`, `?queue=q100"`)
	next := mustGet(t, h, "/?from="+strconv.Itoa(DefaultTopN))
	wantContains(t, "the next page", next, `?queue=q099"`, `?queue=q100"`, "The queues after the 100 deepest")
	wantLacks(t, "the next page", next, `?queue=deep"`, "and 2 more")
}
