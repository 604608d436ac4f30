package errandstore

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// The Validate methods state what every store must refuse, so that stores
// agree and a third-party store need not rediscover the rules. Each returns
// an [*errandtype.InputError], or nil. Stores call them before writing anything.

// Validate checks a job before it is written: the Client fills in the
// defaults, then calls it, and stores call it again. See limits.go for the
// rules. Params the Client built pass the store's call at once: the
// Client checked them, and nobody else holds them to change them (the
// checks were a third of a bulk enqueue's CPU, half of it repeated).
func (p *JobInsertParams) Validate() error {
	if p.Checked {
		return nil
	}
	if err := p.checkIdentity(); err != nil {
		return err
	}
	if err := p.checkNumbers(); err != nil {
		return err
	}
	if err := p.checkBackoff(); err != nil {
		return err
	}
	if err := p.checkTiming(); err != nil {
		return err
	}
	if err := p.checkUnique(); err != nil {
		return err
	}
	if err := p.checkDebounce(); err != nil {
		return err
	}
	return p.checkLabels()
}

// checkIdentity checks what names the job and its work: id, queue, kind
// and args.
func (p *JobInsertParams) checkIdentity() error {
	if p.ID == "" || p.Queue == "" || p.Kind == "" || p.MaxAttempts == 0 || p.ArgsVersion == 0 {
		return &errandtype.InputError{Field: "job", Message: "id, queue, kind, max_attempts and args_version are required; enqueue through errand.Client"}
	}
	if err := checkID("id", p.ID, MaxIDBytes); err != nil {
		return err
	}
	if err := CheckName("queue", p.Queue); err != nil {
		return err
	}
	if err := CheckName("kind", p.Kind); err != nil {
		return err
	}
	if !json.Valid(p.Args) {
		return &errandtype.InputError{Field: "args", Message: "is not valid JSON; pass an object such as {\"id\": 7}"}
	}
	if !p.ArgsChecked {
		if _, err := checkJSONText("args", p.Args, MaxArgsBytes); err != nil {
			return err
		}
	}
	return nil
}

// checkNumbers checks the numbers the stores keep in 32-bit columns.
func (p *JobInsertParams) checkNumbers() error {
	if err := checkRange("max_attempts", p.MaxAttempts, 1, errandtype.MaxAttemptsLimit); err != nil {
		return err
	}
	if err := checkRange("priority", p.Priority, MinPriority, MaxPriority); err != nil {
		return err
	}
	return checkRange("args_version", p.ArgsVersion, 1, MaxArgsVersion)
}

// checkBackoff checks the job's own retry policy.
func (p *JobInsertParams) checkBackoff() error {
	if p.BackoffBase < 0 || p.BackoffMax < 0 {
		return &errandtype.InputError{Field: "backoff", Message: "backoff base and max must not be negative"}
	}
	if err := CheckBackoff("backoff_base", p.BackoffBase); err != nil {
		return err
	}
	if err := CheckBackoff("backoff_max", p.BackoffMax); err != nil {
		return err
	}
	if p.BackoffBase > 0 && p.BackoffMax > 0 && p.BackoffMax < p.BackoffBase {
		return &errandtype.InputError{Field: "backoff_max", Message: fmt.Sprintf("%s is less than the backoff base %s; raise it or lower the base", p.BackoffMax, p.BackoffBase)}
	}
	return nil
}

// checkTiming checks when the job may run: its delay or run-at time and
// its maximum age.
func (p *JobInsertParams) checkTiming() error {
	if p.Delay < 0 {
		return &errandtype.InputError{Field: "delay", Message: "must not be negative"}
	}
	if err := CheckDelay("delay", p.Delay); err != nil {
		return err
	}
	if p.Delay > 0 && !p.RunAt.IsZero() {
		return &errandtype.InputError{Field: "run_at", Message: "give a delay or a run-at time, not both"}
	}
	if err := checkRunAt(p.RunAt); err != nil {
		return err
	}
	if p.MaxAge < 0 {
		return &errandtype.InputError{Field: "max_age", Message: "must not be negative"}
	}
	if p.MaxAge > 0 && p.MaxAge < MinMaxAge {
		return &errandtype.InputError{Field: "max_age", Message: fmt.Sprintf("%s is too short; give at least %s, or none", p.MaxAge, MinMaxAge)}
	}
	return checkStartBy(p.StartBy, p.RunAt)
}

// checkUnique checks the unique key, its scope and its window.
func (p *JobInsertParams) checkUnique() error {
	if p.UniqueKey != "" {
		if err := CheckIdentifier("unique_key", p.UniqueKey, MaxIDBytes); err != nil {
			return err
		}
	}
	if err := p.UniqueScope.Validate(); err != nil {
		return err
	}
	if p.UniqueWindow < 0 || (p.UniqueWindow > 0 && p.UniqueWindow < MinUniqueWindow) {
		return &errandtype.InputError{Field: "unique_window", Message: fmt.Sprintf("%s is too short; give at least %s, or none", p.UniqueWindow, MinUniqueWindow)}
	}
	if p.UniqueWindow > MaxUniqueWindow {
		return &errandtype.InputError{Field: "unique_window", Message: fmt.Sprintf("%s is longer than %s (ten years); give a shorter one, or none to hold the key for as long as the scope says", p.UniqueWindow, MaxUniqueWindow)}
	}
	if p.UniqueKey == "" && (p.UniqueScope != 0 || p.UniqueWindow != 0) {
		return &errandtype.InputError{Field: "unique_key", Message: "is empty, but a unique scope or window is set; give the key too"}
	}
	return nil
}

// checkLabels checks the ordering and fairness keys, the tags and the
// metadata.
func (p *JobInsertParams) checkLabels() error {
	if p.OrderingKey != "" {
		if err := CheckIdentifier("ordering_key", p.OrderingKey, MaxIDBytes); err != nil {
			return err
		}
	}
	if p.FairnessKey != "" {
		if err := CheckIdentifier("fairness_key", p.FairnessKey, MaxIDBytes); err != nil {
			return err
		}
	}
	if err := checkTags(p.Tags); err != nil {
		return err
	}
	return checkMetadataText(p.Metadata)
}

// checkTags checks a job's tags, or those a listing asks for.
func checkTags(tags []string) error {
	if len(tags) > MaxTags {
		return &errandtype.InputError{Field: "tags", Message: fmt.Sprintf("%d tags; give at most %d", len(tags), MaxTags)}
	}
	for _, t := range tags {
		if err := CheckIdentifier("tag", t, MaxTagBytes); err != nil {
			return err
		}
	}
	return nil
}

// CheckProgress checks a handler's checkpoint before a store writes it:
// valid JSON that every store can keep, at most 1 MiB as PostgreSQL keeps
// it. It reports whether the checkpoint holds a number that
// [github.com/errandhq/errand.PlainJSON] would rewrite.
func CheckProgress(progress json.RawMessage) (rewrite bool, err error) {
	if !json.Valid(progress) {
		return false, &errandtype.InputError{Field: "progress", Message: "is not valid JSON"}
	}
	if len(progress) > MaxArgsBytes {
		return false, &errandtype.InputError{Field: "progress", Message: fmt.Sprintf("is %d bytes; keep a checkpoint under %d bytes: where the work is, not the work done", len(progress), MaxArgsBytes)}
	}
	return checkJSONText("progress", progress, MaxArgsBytes)
}

// Validate checks a checkpoint: see [CheckProgress].
func (p *JobSetProgressParams) Validate() error {
	if err := CheckLeaseText(p.ID, p.LeaseToken); err != nil {
		return err
	}
	_, err := CheckProgress(p.Progress)
	return err
}

// Validate checks an effect record's key.
func (p *EffectRecordParams) Validate() error {
	if p.LeaseToken != "" {
		if err := CheckLeaseText(p.JobID, p.LeaseToken); err != nil {
			return err
		}
	}
	return validateEffectKey(p.Key)
}

// Validate checks a release: its entry and lease as [EffectParams.Validate]
// does, and a message every store keeps.
func (p *EffectReleaseParams) Validate() error {
	if err := p.EffectParams.Validate(); err != nil {
		return err
	}
	return checkText("effect message", p.Message)
}

// Validate checks that the cancel's audit record is text every store keeps.
func (p *JobCancelParams) Validate() error { return checkAuditText(p.Operator, p.Reason) }

// Validate checks that the replay's audit record is text every store keeps.
// Args, when set, the Client has checked as an enqueue checks them.
func (p *JobReplayParams) Validate() error {
	if p.FromStep != nil {
		if *p.FromStep < 0 {
			return &errandtype.InputError{Field: "from_step", Message: fmt.Sprintf("is %d; steps count from 0", *p.FromStep)}
		}
		if p.ClearProgress || p.Args != nil {
			return &errandtype.InputError{Field: "from_step", Message: "is given with a restart or corrected args, which clear every step; give one of them"}
		}
	}
	return checkAuditText(p.Operator, p.Reason)
}

func checkAuditText(operator, reason string) error {
	if err := checkText("operator", operator); err != nil {
		return err
	}
	return checkText("reason", reason)
}

// Validate checks that the question names queues and kinds by text every
// store keeps.
func (p *JobNextDueParams) Validate() error {
	if err := checkTexts("queues", p.Queues); err != nil {
		return err
	}
	return checkTexts("kinds", p.Kinds)
}

// checkTexts checks a list of text that every store must keep.
func checkTexts(field string, list []string) error {
	for _, s := range list {
		if err := checkText(field, s); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a heartbeat's counts.
func (p *WorkerHeartbeatParams) Validate() error { return p.Stats.Validate() }

// Validate checks a prune's parameters.
func (p *WorkerPruneParams) Validate() error {
	if p.OlderThan < 0 {
		return &errandtype.InputError{Field: "older than", Message: "must not be negative"}
	}
	return nil
}

// CheckBackoff refuses a backoff of less than a millisecond but none:
// stores keep it in microseconds, where less than one is none, the
// default, not the delay asked for.
func CheckBackoff(field string, d time.Duration) error {
	if d > 0 && d < MinMaxAge {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is too short; give at least %s, or none for the default", d, MinMaxAge)}
	}
	return nil
}

// Validate checks a claim's parameters.
func (p *JobClaimParams) Validate() error {
	if len(p.Queues) == 0 || p.Limit < 1 || p.Lease <= 0 {
		return &errandtype.InputError{Field: "claim", Message: "needs at least one queue, a limit of at least 1 and a positive lease"}
	}
	if n := len(p.Queues) + len(p.Kinds) + len(p.SkipRetryKinds); n > MaxClaimNames {
		return &errandtype.InputError{Field: "kinds", Message: fmt.Sprintf("the claim names %d queues and kinds; name at most %d", n, MaxClaimNames)}
	}
	if err := checkText("owner", p.Owner); err != nil {
		return err
	}
	if err := checkTexts("queues", p.Queues); err != nil {
		return err
	}
	if err := checkTexts("kinds", p.Kinds); err != nil {
		return err
	}
	return checkTexts("skip retry kinds", p.SkipRetryKinds)
}

// Validate checks an insert that claims: the job, and a claim of its
// queue alone for one job.
func (p *JobInsertClaimParams) Validate() error {
	if p.Job == nil {
		return &errandtype.InputError{Field: "job", Message: "is nil; give the job to insert"}
	}
	if err := p.Job.Validate(); err != nil {
		return err
	}
	c := &p.Claim
	if len(c.Queues) != 1 || c.Queues[0] != p.Job.Queue || c.Limit != 1 || len(c.SkipRetryKinds) > 0 {
		return &errandtype.InputError{Field: "claim", Message: "must name the job's queue alone, a limit of 1 and no retry kinds to skip"}
	}
	return c.Validate()
}

// Validate checks a heartbeat's parameters.
func (p *JobHeartbeatParams) Validate() error {
	if p.Lease <= 0 {
		return &errandtype.InputError{Field: "lease", Message: "must be positive"}
	}
	for _, l := range p.Leases {
		if err := CheckLeaseText(l.ID, l.LeaseToken); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks that an outcome has what its kind needs.
func (o *JobOutcome) Validate() error {
	if err := CheckLeaseText(o.ID, o.LeaseToken); err != nil {
		return err
	}
	switch {
	case !slices.Contains(OutcomeKinds, o.Kind):
		return &errandtype.InputError{Field: "outcome", Message: fmt.Sprintf("unknown outcome kind %q", o.Kind)}
	case o.Delete && o.Kind != OutcomeSucceeded:
		return &errandtype.InputError{Field: "outcome", Message: fmt.Sprintf("a %s outcome cannot delete its job; only a success can", o.Kind)}
	case !o.Kind.AppendsError():
		return nil
	default:
		if o.Error == nil {
			return &errandtype.InputError{Field: "outcome", Message: fmt.Sprintf("a %s outcome needs an error entry", o.Kind)}
		}
		if !ValidClass(o.Error.Class) {
			return &errandtype.InputError{Field: "outcome", Message: fmt.Sprintf("class %q is not a short snake_case word", o.Error.Class)}
		}
		if err := checkText("outcome message", o.Error.Message); err != nil {
			return err
		}
		return checkText("outcome stack", o.Error.Stack)
	}
}

// Validate checks that a ledger entry and its lease are named.
func (p *EffectParams) Validate() error {
	if p.Key == "" || p.JobID == "" || p.LeaseToken == "" {
		return &errandtype.InputError{Field: "effect", Message: "key, job id and lease token are required"}
	}
	if err := CheckLeaseText(p.JobID, p.LeaseToken); err != nil {
		return err
	}
	return CheckIdentifier("effect key", p.Key, MaxEffectKeyBytes)
}

// Validate checks an election's parameters.
func (p *LeaderElectParams) Validate() error {
	if p.Name == "" || p.Holder == "" || p.TTL <= 0 {
		return &errandtype.InputError{Field: "leader", Message: "name, holder and a positive TTL are required"}
	}
	return checkLeaderText(p.Name, p.Holder)
}

// Validate checks that the lease to end is named by text every store keeps.
func (p *LeaderResignParams) Validate() error { return checkLeaderText(p.Name, p.Holder) }

func checkLeaderText(name, holder string) error {
	if err := checkText("leader name", name); err != nil {
		return err
	}
	return checkText("leader holder", holder)
}

// Validate checks a registration.
func (p *WorkerRegisterParams) Validate() error {
	if p.ID == "" {
		return &errandtype.InputError{Field: "worker id", Message: "is empty; name the worker, e.g. host:pid"}
	}
	if err := CheckIdentifier("worker id", p.ID, MaxIDBytes); err != nil {
		return err
	}
	if err := checkText("host", p.Host); err != nil {
		return err
	}
	if err := checkRange("pid", p.PID, 0, math.MaxInt32); err != nil {
		return err
	}
	if err := CheckInterval("heartbeat interval", p.HeartbeatInterval, "5s"); err != nil {
		return err
	}
	for _, q := range p.Queues {
		if err := checkText("queue", q.Name); err != nil {
			return err
		}
	}
	return checkTexts("kinds", p.Kinds)
}

// Validate checks a heartbeat's counts.
func (st WorkerStats) Validate() error {
	if st.JobsRunning < 0 || st.JobsCompleted < 0 || st.LastCompletedAgo < 0 {
		return &errandtype.InputError{Field: "worker stats", Message: "counts and last-completed age must not be negative"}
	}
	// Both stores keep the jobs running in 32 bits.
	return checkRange("jobs running", int(st.JobsRunning), 0, math.MaxInt32)
}

// Validate checks a listing's parameters.
func (p *WorkerListParams) Validate() error {
	if p.StaleAfter < 0 {
		return &errandtype.InputError{Field: "stale after", Message: "must not be negative; 0 means three heartbeat intervals"}
	}
	return nil
}

// SortClaimOrder sorts jobs in the order claims take them: priority, then
// available_at, then seq. Stores use it on what a claim returned.
func SortClaimOrder(jobs []*errandtype.Job) {
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

// validateEffectKey checks the key of an effect ledger entry.
func validateEffectKey(key string) error {
	if key == "" {
		return &errandtype.InputError{Field: "key", Message: "is empty; key the effect by the job id"}
	}
	return CheckIdentifier("effect key", key, MaxEffectKeyBytes)
}
