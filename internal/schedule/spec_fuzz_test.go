package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// FuzzStored: a spec Stored accepts is stored in a canonical form that
// Stored keeps as it is and that ticks as the spec does; a spec it refuses
// gets an *InputError on the spec.
func FuzzStored(f *testing.F) {
	for _, spec := range []string{
		"0 9 * * *", "0 9 * * MON-FRI", "*/10 * * * * *", "  0   3 * * *  ", "0\t3\t*\t*\t*",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
		"@every 1m", "@every 90s", "@every 1.5s", "@every  30s", "@every 500ms", "@every 1.0000005s",
		"CRON_TZ=Europe/Paris 0 9 * * *", "TZ=America/New_York 30 2 * * *", "CRON_TZ=UTC @hourly",
		"CRON_TZ=Europe/Paris @every 1m", "0 0 30 2 *", "0 0 31 4,6 *", "", "   ", "* * *", "61 * * * *",
		"CRON_TZ=Nowhere/Land 0 9 * * *", "CRON_TZ=Europe/Paris", "TZ=", "0 2 * * SUN", "0,15,30,45 * * * *",
	} {
		for loc := range uint8(3) {
			f.Add(spec, loc)
		}
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		f.Fatal(err)
	}
	locs := []*time.Location{nil, time.UTC, paris}
	// Start times around a DST change, a leap day and a year's end.
	starts := []time.Time{
		time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 0, 59, 59, 999_999_000, time.UTC),
		time.Date(2028, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 30, 0, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, spec string, li uint8) {
		if len(spec) > 200 {
			return
		}
		loc := locs[int(li)%len(locs)]
		stored, ticks, err := Stored(spec, loc)
		if err != nil {
			var ie *errandtype.InputError
			if !errors.As(err, &ie) || ie.Field != "spec" || ie.Message == "" {
				t.Fatalf("Stored(%q, %v): %v (%T), want an *InputError on spec", spec, loc, err, err)
			}
			return
		}
		again, ticks2, err := Stored(stored, loc)
		if err != nil {
			t.Fatalf("Stored(%q) accepted as %q, which it refuses: %v", spec, stored, err)
		}
		if again != stored {
			t.Fatalf("Stored(%q) = %q, and Stored of that = %q; want it kept", spec, stored, again)
		}
		// In another zone too: the stored form names its zone or needs none.
		other, _, err := Stored(stored, nil)
		if err != nil || other != stored {
			t.Fatalf("Stored(%q, nil) = %q, %v; want %q kept whatever the zone", stored, other, err, stored)
		}
		for _, from := range starts {
			a, b := ticks.Next(from), ticks2.Next(from)
			if !a.Equal(b) {
				t.Fatalf("%q from %v: next %v, but its stored form %q: %v", spec, from, a, stored, b)
			}
			if !a.IsZero() && !a.After(from) {
				t.Fatalf("%q from %v: next %v is not after it", spec, from, a)
			}
		}
	})
}
