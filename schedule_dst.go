package errand

import (
	"time"

	"github.com/robfig/cron/v3"
)

// Daylight saving time. A cron spec in a zone with DST meets wall-clock
// times that happen twice (the hour repeated when clocks go back) or never
// (the hour skipped when they go forward). errand follows Vixie cron, the
// behaviour operators of crontabs know:
//
//   - A spec at fixed hours ("30 1 * * *": its hour field does not cover
//     every hour) means a time of day, to run once that day. In a repeated
//     hour it fires once, at the first occurrence: a daily charge or report
//     at 01:30 must not run twice because the clocks went back. In a skipped
//     hour it fires once, at the moment the clocks jump (03:00 when 02:00 to
//     03:00 is skipped): a daily job is late that day, not lost.
//   - A spec whose hour field covers every hour ("*/15 * * * *",
//     "0 * * * *") means an interval, and follows elapsed time: it fires
//     in both passes of a repeated hour and not at all in a skipped one,
//     so the jobs stay evenly spaced.
//
// robfig/cron alone fires a fixed-hour spec twice in a repeated hour and
// skips it in a skipped one; dstSchedule corrects the fixed-hour case.
// @every specs ignore zones altogether.

// allHours is a SpecSchedule's Hour bits when the field covers every hour.
const allHours = 1<<24 - 1

// dstSchedule is a zoned cron spec with the fixed-hour DST rules above.
type dstSchedule struct {
	spec *cron.SpecSchedule
	// wall is spec read in naive wall-clock time (UTC standing for the
	// zone's wall clock), to find ticks that fall in a skipped hour.
	wall *cron.SpecSchedule
}

// withDST wraps a parsed spec in the DST rules when they can matter: a
// fixed-hour spec in a zone other than UTC.
func withDST(s cron.Schedule) cron.Schedule {
	cs, ok := s.(*cron.SpecSchedule)
	if !ok || cs.Location == time.UTC || cs.Hour&allHours == allHours {
		return s
	}
	wall := *cs
	wall.Location = time.UTC
	return dstSchedule{spec: cs, wall: &wall}
}

func (d dstSchedule) Next(t time.Time) time.Time {
	loc := d.spec.Location
	n := d.spec.Next(t)
	if at, ok := d.skippedTick(t, n); ok {
		return at
	}
	for !n.IsZero() && repeatedPass(n.In(loc)) {
		n = d.spec.Next(n)
	}
	return n
}

// skippedTick finds the first forward jump of the clocks after t and no
// later than n (or, when n is zero, within a year) whose skipped wall-clock
// times hold a tick of the spec; it returns the instant of the jump.
func (d dstSchedule) skippedTick(t, n time.Time) (time.Time, bool) {
	loc := d.spec.Location
	limit := n
	if limit.IsZero() {
		limit = t.AddDate(1, 0, 0)
	}
	cur := t.In(loc)
	for {
		_, end := cur.ZoneBounds()
		if end.IsZero() || end.After(limit) {
			return time.Time{}, false
		}
		_, before := end.Add(-time.Nanosecond).Zone()
		_, after := end.Zone()
		if gap := time.Duration(after-before) * time.Second; gap > 0 {
			// The wall clock reads from..from+gap never happen.
			from := wallAsUTC(end.Add(-time.Nanosecond)).Add(time.Nanosecond)
			if tick := d.wall.Next(from.Add(-time.Second)); !tick.Before(from) && tick.Before(from.Add(gap)) && end.After(t) {
				return end, true
			}
		}
		cur = end
	}
}

// repeatedPass reports whether t, in its zone, falls in the second pass of
// a repeated hour: its wall-clock time happened already, before the clocks
// went back.
func repeatedPass(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, after := start.Zone()
	back := time.Duration(before-after) * time.Second
	return back > 0 && t.Sub(start) < back
}

// wallAsUTC is t's wall-clock reading as a UTC time.
func wallAsUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
