package errandtype

import "time"

// NextStep names what happens next to a job: the rule behind the "next" of
// errand inspect and of the dashboard's job page, which each word the step
// in their own voice. A new state is given its steps here, once.
type NextStep string

const (
	// NextScheduled: a waiting job becomes claimable at its AvailableAt,
	// which is still ahead.
	NextScheduled NextStep = "scheduled"
	// NextHeld: a waiting job is due, but an earlier job of its ordering
	// key holds it back (Job.HeldBy).
	NextHeld NextStep = "held"
	// NextDue: a waiting job is due; the next worker to claim from its
	// queue takes it.
	NextDue NextStep = "due"
	// NextRunning: a worker runs the job under a live lease (or one whose
	// end is not known).
	NextRunning NextStep = "running"
	// NextCancelling: a cancel was requested while the lease is live; the
	// worker cancels the handler and ends the attempt cancelled.
	NextCancelling NextStep = "cancelling"
	// NextSweepCancel: a cancel was requested and the lease expired; the
	// next sweep of expired leases makes the job cancelled.
	NextSweepCancel NextStep = "sweep_cancel"
	// NextSweepRetry: the lease expired with attempts left; the next sweep
	// makes the job claimable again.
	NextSweepRetry NextStep = "sweep_retry"
	// NextSweepDead: the lease expired on the final attempt; the next sweep
	// makes the job dead (class lease_expired).
	NextSweepDead NextStep = "sweep_dead"
	// NextNever: the job succeeded and never runs again.
	NextNever NextStep = "never"
	// NextReplay: the job is finished and runs again only if replayed.
	NextReplay NextStep = "replay"
	// NextUnknown: the job's state is none this version knows.
	NextUnknown NextStep = "unknown"
)

// NextSteps lists every step, so that each surface can be checked to word
// them all.
var NextSteps = []NextStep{NextScheduled, NextHeld, NextDue, NextRunning, NextCancelling, NextSweepCancel,
	NextSweepRetry, NextSweepDead, NextNever, NextReplay, NextUnknown}

// Next is what happens next to a job as of a moment on the store's clock.
type Next struct {
	Step NextStep
	// Attempt is the attempt the step is about, of the job's MaxAttempts:
	// the next one for a job that will be claimed again (waiting, or whose
	// lease expired with attempts left), the job's current or last one
	// otherwise.
	Attempt int
	// Owner names the worker holding the job's lease: its LeaseOwner, or
	// "an unnamed worker" when the store recorded none.
	Owner string
}

// NextOf returns what happens next to j as of now, the store's time.
func NextOf(j *Job, now time.Time) Next {
	n := Next{Step: nextStep(j, now), Attempt: j.Attempt, Owner: "an unnamed worker"}
	switch n.Step {
	case NextScheduled, NextHeld, NextDue, NextSweepRetry:
		n.Attempt++
	}
	if j.LeaseOwner != nil {
		n.Owner = *j.LeaseOwner
	}
	return n
}

func nextStep(j *Job, now time.Time) NextStep {
	switch st := j.State; {
	case st.Waiting():
		switch {
		case j.AvailableAt.After(now):
			return NextScheduled
		case j.HeldBy != nil:
			return NextHeld
		}
		return NextDue
	case st == StateRunning:
		return runningStep(j, now)
	case st == StateSucceeded:
		return NextNever
	case st.Terminal():
		return NextReplay
	}
	return NextUnknown
}

// runningStep is the step of a running job: its lease decides, and a
// cancel request outranks a retry.
func runningStep(j *Job, now time.Time) NextStep {
	live := j.LeaseUntil == nil || j.LeaseUntil.After(now)
	switch {
	case j.CancelRequestedAt != nil && live:
		return NextCancelling
	case j.CancelRequestedAt != nil:
		return NextSweepCancel
	case live:
		return NextRunning
	case j.Attempt >= j.MaxAttempts:
		return NextSweepDead
	}
	return NextSweepRetry
}
