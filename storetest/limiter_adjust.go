package storetest

import (
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// testLimiterAdjustMoved: LimiterAdjust says whether a signal moved an
// adaptive bucket: a throttle does, the same overshoot reported again
// within the interval does not, and a bucket that is missing or not
// adaptive is left alone.
func testLimiterAdjustMoved(t *testing.T, h harness) {
	e := open(t, h)
	spec := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 100, Burst: 10, Floor: 5, Ceiling: 500, Target: 1500 * time.Microsecond}
	e.takeOne("dependency:api", spec, 0)
	if got := e.bucket("dependency:api").Spec; got.Target != spec.Target || got.Floor != 5 || got.Ceiling != 500 {
		t.Fatalf("stored rule %+v; want the target, floor and ceiling given", got)
	}
	e.takeOne("kind:fixed", rateSpec(100, 10), 0)
	adjust := func(name string, sig errandtype.LimiterSignal) *errandstore.LimiterAdjustResult {
		t.Helper()
		r, err := e.limiters().LimiterAdjust(e.ctx, &errandstore.LimiterAdjustParams{Name: name, Signal: sig})
		if err != nil {
			t.Fatalf("LimiterAdjust %s: %v", name, err)
		}
		return r
	}
	throttle := errandtype.LimiterSignal{Throttled: 1, Class: "http_429"}
	if r := adjust("dependency:api", throttle); !r.Moved || r.Limiter == nil || r.Limiter.Spec.Rate != 90 {
		t.Fatalf("a throttle: %+v; want moved to 90/s", r)
	}
	e.clock.Advance(100 * time.Millisecond)
	if r := adjust("dependency:api", throttle); r.Moved || r.Limiter == nil || r.Limiter.Spec.Rate != 90 {
		t.Fatalf("the same overshoot 100ms later: %+v; want not moved, still 90/s", r)
	}
	e.clock.Advance(time.Second)
	if r := adjust("dependency:api", throttle); !r.Moved || r.Limiter.Spec.Rate != 90*0.85 {
		t.Fatalf("a throttle an interval later: %+v; want moved to 76.5/s", r)
	}
	for _, name := range []string{"kind:fixed", "kind:missing"} {
		if r := adjust(name, throttle); r.Moved || r.Limiter != nil {
			t.Fatalf("%s: %+v; want left alone", name, r)
		}
	}
}
