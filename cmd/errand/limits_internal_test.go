package main

import (
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// TestLimitsTableAdaptive: errand limits shows an adaptive limit's rate,
// bounds, and when and why it last moved.
func TestLimitsTableAdaptive(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	r := &errandtype.LimiterRecord{Name: "kind:hook", Tokens: 3, UpdatedAt: at,
		Spec:     errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 90, Burst: 9, Floor: 5, Ceiling: 500, Target: 2 * time.Second},
		Adaptive: &errandtype.AdaptiveState{MovedAt: at, HeldUntil: at.Add(30 * time.Second), Reason: "throttled: 2 attempts turned away (last http_429)"}}
	var b strings.Builder
	if err := writeLimitsTable(&b, []*errandtype.LimiterRecord{r}); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"90/s adaptive between 5 and 500 within 2s, burst 9", "kind:hook last moved 2026-12-06T12:00:00Z: throttled: 2 attempts turned away (last http_429) (held until 2026-12-06T12:00:30Z)"} {
		if !strings.Contains(b.String(), part) {
			t.Errorf("errand limits lacks %q:\n%s", part, b.String())
		}
	}
}

// TestLimitsTableConcurrency: errand limits shows a concurrency limit's
// free slots, its limit now (an adaptive one's within its bounds) and its
// running jobs.
func TestLimitsTableConcurrency(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	running := 3
	r := &errandtype.LimiterRecord{Name: "concurrency:export", Tokens: 4, UpdatedAt: at, Running: &running, Denied: 7,
		Spec: errandtype.LimiterSpec{Mode: errandtype.LimiterModeConcurrency, Rate: 7.2, Floor: 2, Ceiling: 50}}
	dep := &errandtype.LimiterRecord{Name: "concurrency:dependency:files", Tokens: 1, UpdatedAt: at, Running: &running, Counts: []string{"export", "import"},
		Spec: errandtype.LimiterSpec{Mode: errandtype.LimiterModeConcurrency, Rate: 4}}
	var b strings.Builder
	if err := writeLimitsTable(&b, []*errandtype.LimiterRecord{r, dep}); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"concurrency:export", "4.00", "7 at once (7.2) adaptive between 2 and 50, 3 running", " 7 ",
		"4 at once, 3 running of export, import"} {
		if !strings.Contains(b.String(), part) {
			t.Errorf("errand limits lacks %q:\n%s", part, b.String())
		}
	}
}
