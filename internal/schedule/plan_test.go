package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// noTicks is a spec whose ticks have run out.
type noTicks struct{}

func (noTicks) Next(time.Time) time.Time { return time.Time{} }

func TestPlanTick(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	every := everySchedule(time.Minute)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	skip, catchUp := errandtype.MissedSkip, errandtype.MissedCatchUp
	for _, tc := range []struct {
		name   string
		next   time.Time
		now    time.Time
		missed errandtype.MissedPolicy
		want   step
		due    bool
	}{
		{"ahead", at(time.Minute), at(59 * time.Second), skip, step{}, false},
		{"on time", at(time.Minute), at(time.Minute), skip, step{Tick: at(time.Minute), To: at(2 * time.Minute)}, true},
		{"late within grace", at(time.Minute), at(time.Minute + 10*time.Second), catchUp, step{Tick: at(time.Minute), To: at(2 * time.Minute)}, true},
		// Down until 12:05:05: 12:01 to 12:04 are missed, 12:05 is late.
		{"missed, skipped", at(time.Minute), at(5*time.Minute + 5*time.Second), skip,
			step{Tick: at(time.Minute), To: at(5 * time.Minute), Skip: true}, true},
		{"missed, caught up", at(time.Minute), at(5*time.Minute + 5*time.Second), catchUp,
			step{Tick: at(time.Minute), To: at(5 * time.Minute), CatchUp: true}, true},
		// Only the next tick is missed, and the one after is ahead.
		{"missed alone", at(time.Minute), at(time.Minute + 11*time.Second), catchUp,
			step{Tick: at(time.Minute), To: at(2 * time.Minute), CatchUp: true}, true},
	} {
		got, due, err := planTick(every, tc.next, tc.now, tc.missed, 10*time.Second)
		if err != nil || due != tc.due || got != tc.want {
			t.Errorf("%s: planTick = %+v, %v, %v; want %+v, %v", tc.name, got, due, err, tc.want, tc.due)
		}
	}
	for _, now := range []time.Time{at(time.Minute), at(time.Hour)} {
		if _, due, err := planTick(noTicks{}, at(time.Minute), now, skip, 10*time.Second); !due || !errors.Is(err, errNoNextTick) {
			t.Errorf("planTick with no next tick at %s = %v, %v; want due and errNoNextTick", now, due, err)
		}
	}
}

// TestStoredSpecParsesAlike: the spec a scheduler reads back from the store
// has the ticks of the spec it registered, DST rules included.
func TestStoredSpecParsesAlike(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 10, 31, 16, 0, 0, 0, time.UTC) // the night New York's clocks go back
	for _, spec := range []string{"30 1 * * *", "0 * * * *", "@every 90s", "CRON_TZ=Europe/Paris 0 9 * * *"} {
		stored, ticks, err := Stored(spec, ny)
		if err != nil {
			t.Fatalf("Stored(%q): %v", spec, err)
		}
		again, err := parseSpec(stored)
		if err != nil {
			t.Fatalf("parseSpec(%q): %v", stored, err)
		}
		for a, b, i := ticks.Next(from), again.Next(from), 0; i < 30; a, b, i = ticks.Next(a), again.Next(b), i+1 {
			if !a.Equal(b) {
				t.Fatalf("%q stored as %q: tick %d is %s, read back %s", spec, stored, i, a, b)
			}
		}
	}
}
