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
// nobody handles says so, since it waits until one does.
func nextStep(j *errandtype.Job, now time.Time, handled bool) string {
	n := nextOf{j: j, now: now, attempt: fmt.Sprintf("attempt %d of %d", j.Attempt+1, j.MaxAttempts)}
	if j.HeldBy != nil {
		key := ""
		if j.OrderingKey != nil {
			key = " of ordering key " + *j.OrderingKey
		}
		n.held = fmt.Sprintf("held back by job %s%s (one job of a key runs at a time, in order)", *j.HeldBy, key)
	}
	var s string
	switch j.State {
	case errandtype.StateQueued:
		s = n.queued()
	case errandtype.StateRetrying:
		s = n.retrying()
	case errandtype.StateRunning:
		s = n.running()
	default:
		s = n.finished()
	}
	if j.State.Waiting() && !handled {
		s += fmt.Sprintf("; no live worker handles kind %s in queue %s, so it waits until one does", j.Kind, j.Queue)
	}
	return s
}

// nextOf is what nextStep says of one job: the job, the store's now, its
// next attempt ("attempt 2 of 5") and what holds it back ("" for nothing).
type nextOf struct {
	j             *errandtype.Job
	now           time.Time
	attempt, held string
}

func (n nextOf) at(t time.Time) string { return clockTime(t, n.now) }

// queued is the next step of a queued job.
func (n nextOf) queued() string {
	switch j := n.j; {
	case j.AvailableAt.After(n.now):
		return "runs at " + n.at(j.AvailableAt) + ", " + n.attempt
	case n.held != "":
		return "ready since " + n.at(j.AvailableAt) + " but " + n.held + "; then " + n.attempt
	default:
		return "waiting for a worker since " + n.at(j.AvailableAt) + ", " + n.attempt
	}
}

// retrying is the next step of a job waiting out its backoff.
func (n nextOf) retrying() string {
	switch j := n.j; {
	case j.AvailableAt.After(n.now):
		return "retries at " + n.at(j.AvailableAt) + ", " + n.attempt
	case n.held != "":
		return "due to retry since " + n.at(j.AvailableAt) + " but " + n.held + "; then " + n.attempt
	default:
		return "retries as soon as a worker claims it (due since " + n.at(j.AvailableAt) + "), " + n.attempt
	}
}

// running is the next step of a running job: its lease, a cancel request,
// or what the next sweep does once the lease has expired.
func (n nextOf) running() string {
	j := n.j
	owner := "an unnamed worker"
	if j.LeaseOwner != nil {
		owner = *j.LeaseOwner
	}
	switch {
	case j.CancelRequestedAt != nil && (j.LeaseUntil == nil || j.LeaseUntil.After(n.now)):
		return fmt.Sprintf("cancel requested at %s: %s cancels the handler and ends the attempt cancelled (attempt %d of %d)",
			n.at(*j.CancelRequestedAt), owner, j.Attempt, j.MaxAttempts)
	case j.CancelRequestedAt != nil:
		return fmt.Sprintf("cancel requested at %s, and the lease of %s expired at %s; the next sweep makes it cancelled",
			n.at(*j.CancelRequestedAt), owner, n.at(*j.LeaseUntil))
	case j.LeaseUntil == nil:
		return fmt.Sprintf("running under lease of %s, attempt %d of %d", owner, j.Attempt, j.MaxAttempts)
	case j.LeaseUntil.After(n.now):
		return fmt.Sprintf("running under lease of %s until %s, attempt %d of %d", owner, n.at(*j.LeaseUntil), j.Attempt, j.MaxAttempts)
	case j.Attempt >= j.MaxAttempts:
		return fmt.Sprintf("the lease of %s expired at %s on the final attempt; the next sweep makes it dead (class lease_expired)", owner, n.at(*j.LeaseUntil))
	default:
		return fmt.Sprintf("the lease of %s expired at %s; the next sweep retries it, attempt %d of %d", owner, n.at(*j.LeaseUntil), j.Attempt+1, j.MaxAttempts)
	}
}

// finished is the next step of a job in a terminal state (or one this
// version does not know).
func (n nextOf) finished() string {
	j := n.j
	switch j.State {
	case errandtype.StateSucceeded:
		s := "succeeded"
		if j.FinishedAt != nil {
			s += " at " + n.at(*j.FinishedAt)
		}
		return s + "; it will not run again"
	case errandtype.StateDead:
		s := "dead"
		if j.LastError != nil {
			s += fmt.Sprintf(" after attempt %d of %d (class %s)", j.Attempt, j.MaxAttempts, j.LastError.Class)
		}
		s += ": replay to run again"
		if j.OrderingHold && j.OrderingKey != nil {
			s += "; it holds ordering key " + *j.OrderingKey + ", so the later jobs of the key wait until it is replayed or cancelled"
		}
		return s
	case errandtype.StateCancelled:
		return "cancelled: replay to run again"
	default:
		return "in unknown state " + string(j.State)
	}
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
