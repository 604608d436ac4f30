package errand_test

import (
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
)

// runScheduleUntil runs spec in America/New_York from start to end on a
// fake clock, firing at every next fire time as a worker would, and returns
// the ticks of the jobs it enqueued.
func runScheduleUntil(t *testing.T, spec string, start, end time.Time) []time.Time {
	t.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := errandtest.NewClock(start)
	st := openStore(t, clock)
	e := &scheduleEnv{t: t, ctx: t.Context(), clock: clock, c: newClient(t, st, &errand.Config{Clock: clock}), t0: start}
	r := e.runner(e.schedule("s", spec, &errand.ScheduleOpts{Location: ny}))
	for {
		next := e.fire(r)
		if next.After(end) {
			break
		}
		clock.Set(next)
	}
	keys, _ := e.ticksEnqueued()
	var ticks []time.Time
	for _, k := range keys {
		at, err := time.Parse(time.RFC3339Nano, k[len("errand.cron:s:"):])
		if err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, at)
	}
	return ticks
}

func utcTimes(ss ...string) []time.Time {
	var out []time.Time
	for _, s := range ss {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		out = append(out, t)
	}
	return out
}

// TestScheduleDST: in America/New_York, a fixed-hour spec fires once in the
// repeated hour (1 November 2026, 01:00-02:00 happens twice) and at the
// jump in the skipped one (8 March 2026, 02:00-03:00 never happens); an
// hourly spec follows elapsed time, firing in both passes of the repeated
// hour and skipping the hour that never happens.
func TestScheduleDST(t *testing.T) {
	for _, c := range []struct {
		name, spec string
		start, end string
		want       []time.Time
	}{
		{"fixed time in the repeated hour fires once", "30 1 * * *", "2026-10-31T16:00:00Z", "2026-11-02T16:00:00Z",
			utcTimes("2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z")},
		{"fixed time in the skipped hour fires at the jump", "30 2 * * *", "2026-03-07T16:00:00Z", "2026-03-09T16:00:00Z",
			utcTimes("2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z")},
		{"hourly fires in both passes of the repeated hour", "0 * * * *", "2026-11-01T03:30:00Z", "2026-11-01T08:30:00Z",
			utcTimes("2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z")},
		{"hourly skips the hour that never happens", "0 * * * *", "2026-03-08T04:30:00Z", "2026-03-08T08:30:00Z",
			utcTimes("2026-03-08T05:00:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z")},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runScheduleUntil(t, c.spec, utcTimes(c.start)[0], utcTimes(c.end)[0])
			if !slices.EqualFunc(got, c.want, time.Time.Equal) {
				t.Fatalf("ticks = %v, want %v", got, c.want)
			}
		})
	}
}
