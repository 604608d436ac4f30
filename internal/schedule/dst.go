package schedule

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
//     03:00 is skipped): a daily job is late that day, not lost. Ticks
//     that one jump skips together fire once, at the jump ("15 1,2 * * *"
//     when 01:00 to 03:00 is skipped).
//   - A spec whose hour field covers every hour ("*/15 * * * *",
//     "0 * * * *") means an interval, and follows elapsed time: it fires
//     in both passes of a repeated hour and not at all in a skipped one,
//     so the jobs stay evenly spaced.
//
// robfig/cron alone fires a fixed-hour spec twice in a repeated hour and
// skips it in a skipped one, and steps hours by adding an hour, which a
// 30-minute shift (Lord Howe Island) throws off. dstSchedule handles the
// fixed-hour case itself, for a shift of any size. @every specs ignore
// zones altogether.

// allHours is a SpecSchedule's Hour bits when the field covers every hour.
const allHours = 1<<24 - 1

// dstSchedule is a zoned cron spec with the fixed-hour DST rules above. It
// reads the spec on the wall clock, where no hour repeats or goes missing,
// and maps each tick of the wall clock to the instant it fires at
// (wallInstant). That mapping never goes backwards, so the first tick after
// t's wall-clock reading that fires after t is the next one; ticks that
// map to the same instant (two skipped by one jump) fire once.
type dstSchedule struct {
	loc *time.Location
	// wall is the spec read in naive wall-clock time: UTC standing for
	// the zone's wall clock.
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
	return dstSchedule{loc: cs.Location, wall: &wall}
}

func (d dstSchedule) Next(t time.Time) time.Time {
	// A tick at or before t's reading maps to t or earlier: start after it.
	for w := d.wall.Next(wallAsUTC(t.In(d.loc))); !w.IsZero(); w = d.wall.Next(w) {
		// Ticks still behind t are those of the rest of a repeated
		// hour, when t is in its second pass.
		if at := wallInstant(w, d.loc); at.After(t) {
			return at.In(t.Location())
		}
	}
	return time.Time{}
}

// wallInstant returns the first instant at which loc's clock reads w (a
// wall-clock time given as UTC) or, when the clocks jump over w, the
// instant of the jump.
func wallInstant(w time.Time, loc *time.Location) time.Time {
	// The instants reading w lie within a day of w, whatever the
	// offsets; walk the zone's periods across that span, in order.
	const span = 24 * time.Hour
	cur := w.Add(-span).In(loc)
	for {
		start, end := cur.ZoneBounds()
		_, offset := cur.Zone()
		off := time.Duration(offset) * time.Second
		if at := w.Add(-off); !at.Before(start) && (end.IsZero() || at.Before(end)) {
			return at
		}
		if end.IsZero() || end.After(w.Add(span)) {
			break
		}
		// The clocks jump from end+off to end+next at end.
		_, nextOffset := end.In(loc).Zone()
		next := time.Duration(nextOffset) * time.Second
		if !w.Before(end.Add(off)) && w.Before(end.Add(next)) {
			return end
		}
		cur = end.In(loc)
	}
	// Not reached for a zone whose offsets stay within a day.
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
}

// wallAsUTC is t's wall-clock reading as a UTC time.
func wallAsUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
