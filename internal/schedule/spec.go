// Package schedule is errand's cron machinery: it reads a schedule's spec
// into its ticks and runs a Worker's schedules, enqueueing one job per tick.
//
// Exactly one job per tick, across any number of processes: a schedule's
// next fire time lives in the store (errandstore.ScheduleStore), and a
// process fires a tick by moving that time forward from the value it read,
// a compare-and-set, in the transaction that inserts the tick's job. The
// job's unique key names the schedule and the tick (errand.ScheduleUniqueKey),
// so even a schedule row reset by hand cannot enqueue a tick twice. No
// leadership is involved: every worker with schedules runs them, and the
// store decides. A restart reads the stored next fire time, so it neither
// loses nor repeats a tick.
//
// Ticks that pass while no process runs the schedule are late or missed. A
// tick up to its grace late still gets its own job. Older ticks are missed,
// and the schedule's errandtype.MissedPolicy decides: skip them, or catch up
// with one job for all of them (keyed by the first), then go on with the
// first tick that is not missed.
//
// A spec decides ticks on the store's clock. Registering a name with a spec
// that differs from the stored one replaces the spec and computes the next
// fire time afresh from now; the pending tick of the old spec does not fire.
// Kind, queue and policy follow the latest registration without resetting
// the next fire time. While processes disagree on a name's spec (a rolling
// deploy), ticks follow the stored spec, the latest registered.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/robfig/cron/v3"
)

// Ticks are the fire times of a spec.
type Ticks interface {
	// Next returns the first tick after t, or the zero time if none.
	Next(t time.Time) time.Time
}

var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Stored returns spec as the store keeps it (see canonicalSpec) and its
// ticks, refusing one too long to store or that never fires. loc is the
// zone of a spec that names none; nil means UTC.
func Stored(spec string, loc *time.Location) (string, Ticks, error) {
	stored, err := canonicalSpec(spec, loc)
	if err != nil {
		return "", nil, err
	}
	if len(stored) > errandstore.MaxSpecBytes {
		return "", nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("is %d bytes as stored (with its zone); use at most %d, with ranges (0-30) and steps (*/5) rather than lists", len(stored), errandstore.MaxSpecBytes)}
	}
	ticks, err := parseSpec(stored)
	if err != nil {
		return "", nil, err
	}
	// A spec with no tick (the 30th of February) would be stored with no
	// next fire time and fail on every turn of the scheduler.
	if ticks.Next(time.Now()).IsZero() {
		return "", nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q never fires; check the day of the month against the month", spec)}
	}
	return stored, ticks, nil
}

// CheckLocation refuses a zone that hosts may read differently.
func CheckLocation(loc *time.Location) error {
	if loc != nil && loc != time.UTC && loc != time.Local {
		if _, err := time.LoadLocation(loc.String()); err != nil {
			return &errandtype.InputError{Field: "Location", Message: fmt.Sprintf("%q is not a zone of the time zone database (a time.FixedZone?); load a named zone with time.LoadLocation(\"Europe/Paris\") so every host reads the spec alike", loc.String())}
		}
	}
	if loc == time.Local {
		return &errandtype.InputError{Field: "Location", Message: "is time.Local; name the zone (time.LoadLocation(\"Europe/Paris\")) so every host reads the spec alike"}
	}
	return nil
}

// canonicalSpec returns spec as the store keeps it: trimmed, with loc as a
// CRON_TZ= prefix when spec names no zone and loc is not nil or UTC.
func canonicalSpec(spec string, loc *time.Location) (string, error) {
	spec = strings.Join(strings.Fields(spec), " ")
	if spec == "" {
		return "", &errandtype.InputError{Field: "spec", Message: "is empty; give a cron expression (\"0 9 * * *\"), a descriptor (\"@hourly\") or \"@every 1m\""}
	}
	if strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=") {
		if strings.HasPrefix(spec, "CRON_TZ=@every") || strings.Contains(spec, " @every") {
			return "", &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: @every takes no time zone; drop the CRON_TZ= prefix", spec)}
		}
		// The cron parser panics on a zone with no expression after it.
		if !strings.Contains(spec, " ") {
			return "", &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q names a zone but no schedule; write CRON_TZ=ZONE then a cron expression, e.g. \"CRON_TZ=Europe/Paris 0 9 * * *\"", spec)}
		}
		return spec, nil
	}
	if loc == nil || loc == time.UTC || strings.HasPrefix(spec, "@every ") {
		return spec, nil
	}
	return "CRON_TZ=" + loc.String() + " " + spec, nil
}

// parseSpec parses a spec as the store keeps it.
func parseSpec(spec string) (Ticks, error) {
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second {
			return nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: give @every a duration of at least a second, e.g. \"@every 1m\"", spec)}
		}
		// Stores keep fire times in microseconds: a tick between two
		// would be kept before itself, and found due again at once.
		if every%time.Microsecond != 0 {
			return nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: give @every a whole number of microseconds, e.g. \"@every 1.5s\"", spec)}
		}
		return everySchedule(every), nil
	}
	s, err := specParser.Parse(spec)
	if err != nil {
		return nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: %v; give a cron expression (\"0 9 * * *\", seconds optional), a descriptor (\"@hourly\") or \"@every 1m\"", spec, err)}
	}
	if cs, ok := s.(*cron.SpecSchedule); ok && cs.Location == time.Local {
		cs.Location = time.UTC // no zone named: UTC, whatever the host's
	}
	return withDST(s), nil // see dst.go
}

// everySchedule ticks at the multiples of its duration since the zero
// time, whoever asks and whenever.
type everySchedule time.Duration

func (e everySchedule) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d)
}
