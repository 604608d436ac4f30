package chaos

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportNotChecked checks that an invariant the run could not check is
// shown as skipped, with the reason, and not as held.
func TestReportNotChecked(t *testing.T) {
	r := &Report{History: "the clock_skew fault ran a worker an hour ahead"}
	r.finish(nil)
	var b bytes.Buffer
	r.Write(&b)
	out := b.String()
	if !strings.Contains(out, "skip "+invHistory) || strings.Contains(out, "ok   "+invHistory) {
		t.Errorf("report shows the unchecked history as held:\n%s", out)
	}
	if !strings.Contains(out, "ok   "+invCron) {
		t.Errorf("report lost a held invariant:\n%s", out)
	}
	for _, i := range r.Invariants {
		if (i.Name == invHistory) != (i.NotChecked != "") {
			t.Errorf("%s: not_checked %q", i.Name, i.NotChecked)
		}
	}
}
