package schedule

import (
	"slices"
	"testing"
	"time"
)

// TestHalfHourDST: Lord Howe Island shifts its clocks by 30 minutes (on 6
// April 2025 back from 02:00 to 01:30, on 5 October 2025 forward from 02:00
// to 02:30); a fixed-hour spec still fires once a day.
func TestHalfHourDST(t *testing.T) {
	lh, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec       string
		from, want time.Time
	}{
		{"0 3 * * *", time.Date(2025, 4, 5, 3, 0, 0, 0, lh), time.Date(2025, 4, 6, 3, 0, 0, 0, lh)},   // clocks back 30 min
		{"0 3 * * *", time.Date(2025, 10, 4, 3, 0, 0, 0, lh), time.Date(2025, 10, 5, 3, 0, 0, 0, lh)}, // clocks forward 30 min
		{"30 1 * * *", time.Date(2025, 10, 5, 1, 30, 0, 0, lh), time.Date(2025, 10, 6, 1, 30, 0, 0, lh)},
	} {
		_, s, err := Stored(c.spec, lh)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Next(c.from); !got.Equal(c.want) {
			t.Errorf("%q in Lord_Howe: next after %s = %s, want %s", c.spec, c.from.Format(time.RFC3339), got.In(lh).Format(time.RFC3339), c.want.Format(time.RFC3339))
		}
	}
}

// vixieCron is the oracle of TestScheduleDSTOracle: the fire times of a
// spec in loc over (from, to], found by reading the zone's clock minute by
// minute, as Vixie cron does, with no knowledge of where the clocks jump.
//
// It walks every whole-minute instant u from a day before from to to, and
// keeps latest, the latest wall-clock minute read so far. At u the clock
// reads r; the wall-clock minutes after latest up to r are reached at u for
// the first time: r alone on an ordinary minute, none when r repeats a
// reading (clocks went back), and r with every minute the clocks jumped
// over when they went forward.
//
//   - A fixed-hour spec (interval false) fires at u when a minute reached
//     at u for the first time matches it: once per wall-clock time of day,
//     at its first occurrence, or at the jump if the clocks skipped it.
//     Several skipped ticks reached at the same jump fire once.
//   - An interval spec (its hour field covers every hour) fires at u when
//     r matches it, whether or not r was read before: it follows elapsed
//     time, in both passes of a repeated hour and in no skipped one.
//
// match reads a wall-clock minute given as a UTC time.
func vixieCron(loc *time.Location, match func(wall time.Time) bool, interval bool, from, to time.Time) []time.Time {
	wallOf := func(u time.Time) time.Time {
		l := u.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
	}
	start := from.Add(-24 * time.Hour).Truncate(time.Minute)
	latest := wallOf(start)
	var fires []time.Time
	for u := start.Add(time.Minute); !u.After(to); u = u.Add(time.Minute) {
		r := wallOf(u)
		fire := false
		if interval {
			fire = match(r)
		} else {
			for m := latest.Add(time.Minute); !m.After(r); m = m.Add(time.Minute) {
				fire = fire || match(m)
			}
		}
		if r.After(latest) {
			latest = r
		}
		if fire && u.After(from) {
			fires = append(fires, u)
		}
	}
	return fires
}

// TestScheduleDSTOracle compares the ticks of a zoned spec with the vixieCron oracle
// over the five days around every clock change of 2025 and 2026 in zones
// that shift by an hour, by 30 minutes (Lord Howe), by two hours (Troll),
// at a quarter-hour offset (Chatham) and at midnight (Santiago, Cairo).
func TestScheduleDSTOracle(t *testing.T) {
	zones := []string{
		"America/New_York", "Europe/Paris", "Australia/Sydney", "Australia/Lord_Howe", "Antarctica/Troll",
		"Pacific/Chatham", "America/Santiago", "Africa/Cairo", "America/Nuuk",
	}
	at := func(minute int, hours ...int) func(time.Time) bool {
		return func(w time.Time) bool { return w.Minute() == minute && slices.Contains(hours, w.Hour()) }
	}
	specs := []struct {
		spec     string
		match    func(wall time.Time) bool
		interval bool
	}{
		{"0 3 * * *", at(0, 3), false},
		{"30 1 * * *", at(30, 1), false},
		{"30 2 * * *", at(30, 2), false},
		{"0 2 * * *", at(0, 2), false},
		{"15 1,2,3 * * *", at(15, 1, 2, 3), false},
		{"0 9 * * MON-FRI", func(w time.Time) bool {
			return at(0, 9)(w) && w.Weekday() >= time.Monday && w.Weekday() <= time.Friday
		}, false},
		{"*/15 * * * *", func(w time.Time) bool { return w.Minute()%15 == 0 }, true},
		{"0 * * * *", func(w time.Time) bool { return w.Minute() == 0 }, true},
	}
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		var changes []time.Time
		for u := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC); ; {
			_, end := u.In(loc).ZoneBounds()
			if end.IsZero() || end.Year() > 2026 {
				break
			}
			_, before := end.Add(-time.Second).In(loc).Zone()
			if _, after := end.In(loc).Zone(); after != before {
				changes = append(changes, end)
			}
			u = end
		}
		if len(changes) < 4 {
			t.Fatalf("%s: %d clock changes in 2025-2026, want at least 4", zone, len(changes))
		}
		for _, sp := range specs {
			_, s, err := Stored(sp.spec, loc)
			if err != nil {
				t.Fatal(err)
			}
			for _, change := range changes {
				from, to := change.Add(-48*time.Hour), change.Add(72*time.Hour)
				want := vixieCron(loc, sp.match, sp.interval, from, to)
				var got []time.Time
				for n := s.Next(from); !n.IsZero() && !n.After(to); n = s.Next(n) {
					got = append(got, n)
				}
				if !slices.EqualFunc(got, want, time.Time.Equal) {
					t.Errorf("%q in %s around %s:\n got %s\nwant %s", sp.spec, zone, change.In(loc).Format(time.RFC3339),
						formatIn(loc, got), formatIn(loc, want))
				}
			}
		}
	}
}

func formatIn(loc *time.Location, ts []time.Time) string {
	var b []byte
	for _, t := range ts {
		b = append(b, ' ')
		b = t.In(loc).AppendFormat(b, "01-02T15:04Z07:00")
	}
	return string(b)
}
