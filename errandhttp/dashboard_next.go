package errandhttp

import (
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// nextStep says in words what happens next to j, as of now on the store's
// clock: when it runs or retries and with which attempt, whose lease it runs
// under, or that only a replay runs it again. handled reports whether a
// live worker handles the job's kind in its queue; a waiting job of a kind
// nobody handles says so, since it waits until one does. Which step applies
// is errandtype.NextOf's to say; stepWords words it.
func nextStep(j *errandtype.Job, now time.Time, handled bool) string {
	next := errandtype.NextOf(j, now)
	n := nextOf{j: j, now: now, next: next, attempt: fmt.Sprintf("attempt %d of %d", next.Attempt, j.MaxAttempts)}
	if j.HeldBy != nil {
		key := ""
		if j.OrderingKey != nil {
			key = " of ordering key " + *j.OrderingKey
		}
		n.held = fmt.Sprintf("held back by job %s%s (one job of a key runs at a time, in order)", *j.HeldBy, key)
	}
	s := stepWords[next.Step](n)
	if j.State.Waiting() && !handled {
		s += fmt.Sprintf("; no live worker handles kind %s in queue %s, so it waits until one does", j.Kind, j.Queue)
	}
	return s
}

// nextOf is what nextStep says of one job: the job, the store's now, its
// next step, the attempt the step is about ("attempt 2 of 5") and what
// holds it back ("" for nothing).
type nextOf struct {
	j             *errandtype.Job
	now           time.Time
	next          errandtype.Next
	attempt, held string
}

func (n nextOf) at(t time.Time) string { return clockTime(t, n.now) }

// stepWords words each of errandtype.NextSteps for the dashboard.
var stepWords = map[errandtype.NextStep]func(nextOf) string{
	errandtype.NextScheduled: func(n nextOf) string {
		return n.waiting("runs", "retries") + " at " + n.at(n.j.AvailableAt) + ", " + n.attempt
	},
	errandtype.NextHeld: func(n nextOf) string {
		return n.waiting("ready", "due to retry") + " since " + n.at(n.j.AvailableAt) + " but " + n.held + "; then " + n.attempt
	},
	errandtype.NextDue: func(n nextOf) string {
		if n.j.State == errandtype.StateRetrying {
			return "retries as soon as a worker claims it (due since " + n.at(n.j.AvailableAt) + "), " + n.attempt
		}
		return "waiting for a worker since " + n.at(n.j.AvailableAt) + ", " + n.attempt
	},
	errandtype.NextRunning: func(n nextOf) string {
		if n.j.LeaseUntil == nil {
			return fmt.Sprintf("running under lease of %s, %s", n.next.Owner, n.attempt)
		}
		return fmt.Sprintf("running under lease of %s until %s, %s", n.next.Owner, n.at(*n.j.LeaseUntil), n.attempt)
	},
	errandtype.NextCancelling: func(n nextOf) string {
		return fmt.Sprintf("cancel requested at %s: %s cancels the handler and ends the attempt cancelled (%s)",
			n.at(*n.j.CancelRequestedAt), n.next.Owner, n.attempt)
	},
	errandtype.NextSweepCancel: func(n nextOf) string {
		return fmt.Sprintf("cancel requested at %s, and the lease of %s expired at %s; the next sweep makes it cancelled",
			n.at(*n.j.CancelRequestedAt), n.next.Owner, n.at(*n.j.LeaseUntil))
	},
	errandtype.NextSweepRetry: func(n nextOf) string {
		return fmt.Sprintf("the lease of %s expired at %s; the next sweep retries it, %s", n.next.Owner, n.at(*n.j.LeaseUntil), n.attempt)
	},
	errandtype.NextSweepDead: func(n nextOf) string {
		return fmt.Sprintf("the lease of %s expired at %s on the final attempt; the next sweep makes it dead (class lease_expired)", n.next.Owner, n.at(*n.j.LeaseUntil))
	},
	errandtype.NextNever: func(n nextOf) string {
		s := string(n.j.State)
		if n.j.FinishedAt != nil {
			s += " at " + n.at(*n.j.FinishedAt)
		}
		return s + "; it will not run again"
	},
	errandtype.NextReplay: nextOf.replay,
	errandtype.NextUnknown: func(n nextOf) string {
		return "in unknown state " + string(n.j.State)
	},
}

// waiting picks the word of a waiting job: queued's or retrying's.
func (n nextOf) waiting(queued, retrying string) string {
	if n.j.State == errandtype.StateRetrying {
		return retrying
	}
	return queued
}

// replay is the next step of a finished job that only a replay runs
// again; a dead one says how it died and whether it holds its ordering
// key.
func (n nextOf) replay() string {
	j := n.j
	if j.State != errandtype.StateDead {
		return string(j.State) + ": replay to run again"
	}
	s := "dead"
	if j.LastError != nil {
		s += fmt.Sprintf(" after %s (class %s)", n.attempt, j.LastError.Class)
	}
	s += ": replay to run again"
	if j.OrderingHold && j.OrderingKey != nil {
		s += "; it holds ordering key " + *j.OrderingKey + ", so the later jobs of the key wait until it is replayed or cancelled"
	}
	return s
}

// breakerStep is what the circuit breaker that holds a waiting job back
// (see errand.BreakerHolds) adds to its next step: nothing while the
// breaker is closed.
func breakerStep(b *errandtype.BreakerRecord, now time.Time) string {
	switch b.State {
	case errandtype.BreakerOpen:
		if b.OpenUntil != nil && b.OpenUntil.After(now) {
			return fmt.Sprintf("; but its dependency %s is down (circuit breaker open until %s), so workers leave it waiting, its attempts unused; then one probe tests %s", b.Dependency, clockTime(*b.OpenUntil, now), b.Dependency)
		}
		return fmt.Sprintf("; but its dependency %s is down (circuit breaker open, cool-down over): it waits for a probe job to succeed", b.Dependency)
	case errandtype.BreakerHalfOpen:
		return fmt.Sprintf("; but its dependency %s is being tested (circuit breaker half-open): it waits until a probe job succeeds", b.Dependency)
	}
	return ""
}

// clockTime formats t in UTC: the time of day alone when t falls on now's
// day, with the date otherwise.
func clockTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04:05 UTC")
	}
	return t.Format("2006-01-02 15:04:05 UTC")
}
