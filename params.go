package errand

import (
	"fmt"
	"sort"
)

// The Validate methods state what every store must refuse, so that stores
// agree and a third-party store need not rediscover the rules. Each returns
// an *InputError, or nil. Stores call them before writing anything.

// Validate checks what a store depends on. The Client fills in the rest.
func (p *JobInsertParams) Validate() error {
	if p.ID == "" || p.Queue == "" || p.Kind == "" || p.MaxAttempts < 1 {
		return &InputError{Field: "job", Message: "id, queue, kind and max_attempts are required; enqueue through errand.Client"}
	}
	return nil
}

// Validate checks a claim's parameters.
func (p *JobClaimParams) Validate() error {
	if len(p.Queues) == 0 || p.Limit < 1 || p.Lease <= 0 {
		return &InputError{Field: "claim", Message: "needs at least one queue, a limit of at least 1 and a positive lease"}
	}
	return nil
}

// Validate checks a heartbeat's parameters.
func (p *JobHeartbeatParams) Validate() error {
	if p.Lease <= 0 {
		return &InputError{Field: "lease", Message: "must be positive"}
	}
	return nil
}

// Validate checks that an outcome has what its kind needs.
func (o *JobOutcome) Validate() error {
	switch o.Kind {
	case OutcomeSucceeded, OutcomeSnooze:
		return nil
	case OutcomeRetry, OutcomeDead, OutcomeInterrupted:
		if o.Error == nil {
			return &InputError{Field: "outcome", Message: fmt.Sprintf("a %s outcome needs an error entry", o.Kind)}
		}
		return nil
	}
	return &InputError{Field: "outcome", Message: fmt.Sprintf("unknown outcome kind %q", o.Kind)}
}

// Validate checks that a ledger entry and its lease are named.
func (p *EffectParams) Validate() error {
	if p.Key == "" || p.JobID == "" || p.LeaseToken == "" {
		return &InputError{Field: "effect", Message: "key, job id and lease token are required"}
	}
	return nil
}

// Validate checks an election's parameters.
func (p *LeaderElectParams) Validate() error {
	if p.Name == "" || p.Holder == "" || p.TTL <= 0 {
		return &InputError{Field: "leader", Message: "name, holder and a positive TTL are required"}
	}
	return nil
}

// Validate checks a registration.
func (p *WorkerRegisterParams) Validate() error {
	if p.ID == "" {
		return &InputError{Field: "worker id", Message: "is empty; name the worker, e.g. host:pid"}
	}
	if p.HeartbeatInterval <= 0 {
		return &InputError{Field: "heartbeat interval", Message: "must be positive, e.g. 5s"}
	}
	return nil
}

// Validate checks a heartbeat's counts.
func (st WorkerStats) Validate() error {
	if st.JobsRunning < 0 || st.JobsCompleted < 0 || st.LastCompletedAgo < 0 {
		return &InputError{Field: "worker stats", Message: "counts and last-completed age must not be negative"}
	}
	return nil
}

// Validate checks a listing's parameters.
func (p *WorkerListParams) Validate() error {
	if p.StaleAfter < 0 {
		return &InputError{Field: "stale after", Message: "must not be negative; 0 means three heartbeat intervals"}
	}
	return nil
}

// SortClaimOrder sorts jobs in the order claims take them: priority, then
// available_at, then seq. Stores use it on what a claim returned.
func SortClaimOrder(jobs []*Job) {
	sort.Slice(jobs, func(i, k int) bool {
		a, b := jobs[i], jobs[k]
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if !a.AvailableAt.Equal(b.AvailableAt) {
			return a.AvailableAt.Before(b.AvailableAt)
		}
		return a.Seq < b.Seq
	})
}
