package schedule

import (
	"errors"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// step is what a scheduler does with a schedule whose next fire time has
// come: advance it to To, and enqueue a job for Tick unless Skip.
type step struct {
	Tick, To time.Time
	// CatchUp marks the job of missed ticks.
	CatchUp bool
	// Skip advances past missed ticks without a job.
	Skip bool
}

// planTick decides what to do about next, a schedule's stored next fire
// time, at now. due is false while next is ahead.
func planTick(ticks Ticks, next, now time.Time, missed errandtype.MissedPolicy, grace time.Duration) (s step, due bool, err error) {
	if next.After(now) {
		return step{}, false, nil
	}
	if now.Sub(next) <= grace {
		to := ticks.Next(next)
		if to.IsZero() {
			return step{}, true, errNoNextTick
		}
		return step{Tick: next, To: to}, true, nil
	}
	// next is missed, and so may be ticks after it: go on with the first
	// tick that is not, which may be due already (late, within grace).
	to := ticks.Next(now.Add(-grace - time.Microsecond))
	if !to.After(next) {
		to = ticks.Next(next)
	}
	if to.IsZero() {
		return step{}, true, errNoNextTick
	}
	return step{Tick: next, To: to, CatchUp: missed == errandtype.MissedCatchUp, Skip: missed != errandtype.MissedCatchUp}, true, nil
}

var errNoNextTick = errors.New("the spec has no next tick")

// missedOf returns r's missed-tick policy, MissedSkip when it names none
// this errand knows.
func missedOf(r *errandtype.ScheduleRecord) errandtype.MissedPolicy {
	if r.Missed == errandtype.MissedCatchUp {
		return errandtype.MissedCatchUp
	}
	return errandtype.MissedSkip
}
