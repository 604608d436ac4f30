package errand

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/registry"
)

// Remote workers: a process that is not a Go [Worker] (a Node.js service,
// a script behind the JSON API of errand/errandhttp) works jobs through
// these methods. It claims jobs with [Client.Claim], renews each lease with
// [Client.Heartbeat] while it works, and reports the outcome with
// [Client.Ack] or [Client.Fail]. Every call after the claim names the job
// and the lease token its claim wrote, and is fenced exactly like a local
// worker's: a stale or wrong token is ErrLeaseLost and nothing changes.
// A failure is classified and scheduled by this client's retry policy for
// the job's kind, exactly as a local worker would schedule it.

// MaxClaimJobs bounds how many jobs one remote claim takes.
const MaxClaimJobs = 100

// ClaimOpts describe a remote worker's claim.
type ClaimOpts struct {
	// Queue to claim from. Default: DefaultQueue.
	Queue string
	// Kinds the remote worker has handlers for; at least one, unless
	// AnyKind. A worker never claims a job it cannot run.
	Kinds []string
	// AnyKind claims jobs of every kind, for a worker that finds its
	// handler only once it holds the job (a Faktory worker, which never
	// announces its job types). It cannot be combined with Kinds. The
	// rate limits and retry budgets of kinds, and the circuit breakers of
	// their dependencies, bind a claim only through the kinds it names, so
	// they do not bind this one; the queue's rate limit does.
	AnyKind bool
	// Lease is how long the claim holds unless renewed with
	// [Client.Heartbeat]. Default: DefaultLease; at least MinLease.
	Lease time.Duration
	// Limit is the most jobs to claim: 1 to MaxClaimJobs. Default 1.
	Limit int
	// Owner names the remote worker, recorded as each job's lease_owner so
	// that operators see who holds it. Required.
	Owner string
}

// Claim claims up to opts.Limit available jobs for a remote worker and
// returns them with their lease tokens (Job.LeaseToken, Job.LeaseUntil; see
// [Job.Envelope]). An empty result means nothing was available. The
// cluster's rate limits and retry budgets, kept in the store by the Workers
// that configure them, bind these claims too: a claim takes at most as
// many jobs as their buckets hold tokens for, and none while the queue's
// limit is spent. So do the circuit breakers of the dependencies this
// client's kinds name ([KindOpts].Dependency): no job of a kind whose
// dependency's breaker is open is claimed, and a half-open breaker lets
// through only its probes, counted across the cluster. A queue with
// fairness keys waiting is claimed fairly, as a Worker claims it.
func (c *Client[TTx]) Claim(ctx context.Context, opts *ClaimOpts) ([]*errandtype.Job, error) {
	var o ClaimOpts
	if opts != nil {
		o = *opts
	}
	if o.Queue == "" {
		o.Queue = DefaultQueue
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Limit == 0 {
		o.Limit = 1
	}
	if err := errandstore.CheckName("queue", o.Queue); err != nil {
		return nil, err
	}
	switch {
	case o.AnyKind && len(o.Kinds) > 0:
		return nil, &errandtype.InputError{Field: "kinds", Message: "is set, and so is AnyKind; name the kinds or claim any kind, not both"}
	case len(o.Kinds) == 0 && !o.AnyKind:
		return nil, &errandtype.InputError{Field: "kinds", Message: "is empty; name the kinds this worker has handlers for"}
	}
	for _, k := range o.Kinds {
		if err := errandstore.CheckName("kinds", k); err != nil {
			return nil, err
		}
	}
	// A kind named twice is one kind: taken twice from a kind's rate
	// limit, the claim's plan would be refused, and every claim come back
	// empty.
	o.Kinds = slices.Compact(slices.Sorted(slices.Values(o.Kinds)))
	if err := checkLease("lease", o.Lease); err != nil {
		return nil, err
	}
	if o.Limit < 1 || o.Limit > MaxClaimJobs {
		return nil, &errandtype.InputError{Field: "max_jobs", Message: fmt.Sprintf("%d is out of range; claim 1 to %d jobs at once", o.Limit, MaxClaimJobs)}
	}
	if err := errandstore.CheckIdentifier("worker", o.Owner, errandstore.MaxIDBytes); err != nil {
		return nil, err
	}
	// The cluster's rate limits, retry budgets and circuit breakers bind a
	// remote claim as they bind a Worker's, and a queue with fairness keys
	// is claimed fairly (see remote_flow.go).
	jobs, err := c.claimOutside(ctx, &errandstore.JobClaimParams{
		Queues: []string{o.Queue},
		Kinds:  o.Kinds,
		Limit:  o.Limit,
		Lease:  o.Lease,
		Owner:  o.Owner,
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	c.noteRemoteWorker(ctx, &o)
	// A remote worker gets what this client's codec opens; a value sealed
	// with a key it lacks stays sealed, for a worker that holds the key.
	c.openForReader(jobs...)
	return jobs, nil
}

// noteRemoteWorker records a claim of opts.Owner in the worker registry:
// each claim of a remote worker counts as its heartbeat (see
// internal/registry), written at most once per DefaultWorkerHeartbeat.
func (c *Client[TTx]) noteRemoteWorker(ctx context.Context, o *ClaimOpts) {
	c.remotes.Note(ctx, c.store, c.logger, c.clock.Now(), DefaultWorkerHeartbeat,
		&registry.Claim{Owner: o.Owner, Queue: o.Queue, Kinds: o.Kinds, Lease: o.Lease})
}

// checkLeaseRef validates the job id and lease token of a remote call.
func checkLeaseRef(id, token string) error {
	if id == "" {
		return &errandtype.InputError{Field: "id", Message: "is empty; name the claimed job"}
	}
	if token == "" {
		return &errandtype.InputError{Field: "lease_token", Message: "is empty; pass the lease_token the claim returned"}
	}
	return errandstore.CheckLeaseText(id, token)
}

// Heartbeat renews a remote worker's lease on job id to lease from now on
// the store's clock (zero: DefaultLease) and returns the new lease_until.
// It returns an error wrapping ErrLeaseLost when the job is no longer
// running under token: stop working on it, since another worker may run it.
func (c *Client[TTx]) Heartbeat(ctx context.Context, id, token string, lease time.Duration) (time.Time, error) {
	r, err := c.HeartbeatJob(ctx, id, token, lease)
	return r.LeaseUntil, err
}

// HeartbeatJob renews a remote worker's lease as [Client.Heartbeat] does and
// also reports, in CancelRequested, that an operator asked to cancel the
// job. A remote worker that sees it stops working on the job and reports
// the attempt with [Client.Fail]: a failure reported while a cancel is
// pending ends the job cancelled (or with [Client.Ack], when the work was
// done anyway: it succeeds).
func (c *Client[TTx]) HeartbeatJob(ctx context.Context, id, token string, lease time.Duration) (errandstore.HeartbeatResult, error) {
	if err := checkLeaseRef(id, token); err != nil {
		return errandstore.HeartbeatResult{}, err
	}
	if lease == 0 {
		lease = DefaultLease
	}
	if err := checkLease("lease", lease); err != nil {
		return errandstore.HeartbeatResult{}, err
	}
	rs, err := c.store.JobHeartbeatMany(ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{{ID: id, LeaseToken: token}}, Lease: lease})
	if err != nil {
		return errandstore.HeartbeatResult{}, fmt.Errorf("heartbeat job %s: %w", id, err)
	}
	if rs[0].Err != nil {
		return errandstore.HeartbeatResult{}, fmt.Errorf("heartbeat job %s: %w", id, rs[0].Err)
	}
	return rs[0], nil
}

// Ack records that a remote worker finished job id: it succeeds, fenced by
// token. It returns an error wrapping ErrLeaseLost, with nothing written,
// when the job is no longer running under token.
func (c *Client[TTx]) Ack(ctx context.Context, id, token string) (errandstore.OutcomeResult, error) {
	if err := checkLeaseRef(id, token); err != nil {
		return errandstore.OutcomeResult{}, err
	}
	o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: id, LeaseToken: token}, Kind: errandstore.OutcomeSucceeded}
	r, err := writeOutcome(ctx, c.store, o, true)
	g := c.outsideGate(ctx)
	g.observeRemote(ctx, &attempt{job: c.ackedJob(ctx, g, id, r)}, o, r, firstErr(err, r.Err))
	r, err = c.remoteResult("ack", o, r, err)
	if err == nil {
		c.afterRemoteOutcome(ctx, o, nil, r)
		c.remoteSucceeded(ctx, r)
	}
	return r, err
}

// firstErr returns the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// AckMany records, in one transaction, that a remote worker finished the
// jobs of leases: each succeeds, fenced by its own token. The result has
// one entry per lease, in order: state succeeded, or Err ErrLeaseLost with
// nothing written for that job. At most MaxClaimJobs leases at once, each
// of a different job.
// Acknowledging a batch costs one commit instead of one per job.
func (c *Client[TTx]) AckMany(ctx context.Context, leases []errandstore.JobLease) ([]errandstore.OutcomeResult, error) {
	if err := checkLeases("acknowledge", len(leases), func(i int) (errandstore.JobLease, error) { return leases[i], nil }); err != nil {
		return nil, err
	}
	outs := make([]*errandstore.JobOutcome, len(leases))
	for i, l := range leases {
		outs[i] = &errandstore.JobOutcome{JobLease: l, Kind: errandstore.OutcomeSucceeded}
	}
	return c.recordRemoteMany(ctx, "ack", outs, nil, func(i int, r errandstore.OutcomeResult) {
		c.afterRemoteOutcome(ctx, outs[i], nil, r)
		c.remoteSucceeded(ctx, r)
	})
}

// checkLeases validates the n entries of a batch call that does verb to
// each: 1 to MaxClaimJobs of them, each a different job, each entry as
// entry(i) returns its lease and its own check of the rest. An error names
// the entry, jobs[i].field.
func checkLeases(verb string, n int, entry func(i int) (errandstore.JobLease, error)) error {
	if n == 0 || n > MaxClaimJobs {
		return &errandtype.InputError{Field: "jobs", Message: fmt.Sprintf("holds %d leases; %s 1 to %d at once", n, verb, MaxClaimJobs)}
	}
	first := make(map[string]int, n)
	for i := range n {
		l, err := entry(i)
		if err := firstErr(checkLeaseRef(l.ID, l.LeaseToken), err); err != nil {
			var ie *errandtype.InputError
			if errors.As(err, &ie) {
				return &errandtype.InputError{Field: fmt.Sprintf("jobs[%d].%s", i, ie.Field), Message: ie.Message}
			}
			return err
		}
		// A job listed twice would be recorded by one entry and reported
		// lease_lost by the other, an answer that contradicts itself.
		if j, ok := first[l.ID]; ok {
			return &errandtype.InputError{Field: fmt.Sprintf("jobs[%d].id", i), Message: fmt.Sprintf("%q is also jobs[%d]; list each job once", l.ID, j)}
		}
		first[l.ID] = i
	}
	return nil
}

// recordRemoteMany writes outs, a remote worker's outcomes, in one
// transaction, reports each to its dependency's breaker as a Worker
// reports its own, and calls after with each result, in order. as holds
// the attempt of each outcome, or is nil for acknowledgements, which do
// not read their jobs: the store then reports what their follow-ups need,
// as it does for a wait on a job's result (see handedResult).
func (c *Client[TTx]) recordRemoteMany(ctx context.Context, op string, outs []*errandstore.JobOutcome, as []*attempt, after func(i int, r errandstore.OutcomeResult)) ([]errandstore.OutcomeResult, error) {
	follow := as == nil || c.watches.watching()
	rs, err := c.store.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outs, Follow: follow})
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", op, err)
	}
	g := c.outsideGate(ctx)
	var succeeded map[string]bool // one success per dependency is enough
	if g != nil {
		succeeded = map[string]bool{}
	}
	for i, o := range outs {
		if g != nil {
			var a *attempt
			if as != nil {
				a = as[i]
			} else {
				a = &attempt{job: c.ackedJob(ctx, g, o.ID, rs[i])}
			}
			g.report(ctx, g.remoteEvent(ctx, a, o, rs[i], rs[i].Err), succeeded)
		}
		after(i, rs[i])
	}
	return rs, nil
}

// FailOpts describe a remote worker's failed attempt.
type FailOpts struct {
	// Class is the failure class, a short snake_case word. Default
	// ClassError (or ClassPermanent when Permanent).
	Class string
	// Message says what went wrong. It is cleaned with [CleanText].
	Message string
	// Stack is an optional stack trace, cleaned likewise.
	Stack string
	// RetryAfter, when positive, retries after it instead of the retry
	// policy's backoff, as [RetryAfter] does. The attempt still counts. At
	// most MaxDelay.
	RetryAfter time.Duration
	// Permanent dead-letters the job at once, as [Permanent] does. It
	// cannot be combined with RetryAfter.
	Permanent bool
}

// Fail records a remote worker's failed attempt of job id, fenced by
// token: the job retries on its kind's retry policy (this client's), or
// after opts.RetryAfter, or dies when opts.Permanent or on its final
// attempt, exactly as a local worker decides. The result holds the new
// state and, for a retry, when it runs next. It returns an error wrapping
// ErrLeaseLost, with nothing written, when the job is no longer running
// under token.
func (c *Client[TTx]) Fail(ctx context.Context, id, token string, opts *FailOpts) (errandstore.OutcomeResult, error) {
	var o FailOpts
	if opts != nil {
		o = *opts
	}
	if err := checkLeaseRef(id, token); err != nil {
		return errandstore.OutcomeResult{}, err
	}
	if err := o.check(); err != nil {
		return errandstore.OutcomeResult{}, err
	}
	job, err := c.runningJob(ctx, id, token)
	if err != nil {
		return errandstore.OutcomeResult{}, fmt.Errorf("fail job %s: %w", id, err)
	}
	a := o.attempt(job)
	out := c.outcome(a)
	r, err := c.recordObserved(ctx, "fail", a, out)
	if err == nil {
		c.afterRemoteFail(ctx, a, out, r)
	}
	return r, err
}

// JobFailure is one failed attempt of a batch [Client.FailMany] records:
// the job, the lease token its claim returned, and what went wrong.
type JobFailure struct {
	errandstore.JobLease
	FailOpts
}

// FailMany records, in one transaction, a remote worker's failed attempts
// of several jobs, each fenced by its own token and decided exactly as
// [Client.Fail] decides it: a retry on its kind's policy or after its
// RetryAfter, death when Permanent or on its final attempt, cancelled when
// an operator asked for its cancel. The result has one entry per failure,
// in order: the job's new state (and, for a retry, when it runs next), or
// Err ErrLeaseLost with nothing written for that job. At most MaxClaimJobs
// failures at once, each of a different job; on bad input nothing is
// written.
func (c *Client[TTx]) FailMany(ctx context.Context, fails []JobFailure) ([]errandstore.OutcomeResult, error) {
	err := checkLeases("fail", len(fails), func(i int) (errandstore.JobLease, error) { return fails[i].JobLease, fails[i].check() })
	if err != nil {
		return nil, err
	}
	rs := make([]errandstore.OutcomeResult, len(fails))
	var outs []*errandstore.JobOutcome
	var as []*attempt
	var at []int // the entry of each written outcome
	ids := make([]string, len(fails))
	for i := range fails {
		ids[i] = fails[i].ID
	}
	read, err := c.jobsRead(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("fail: %w", err)
	}
	for i := range fails {
		f := &fails[i]
		job, err := read(f.ID)
		if err == nil {
			job, err = heldUnder(job, f.LeaseToken)
		}
		if errors.Is(err, errandtype.ErrLeaseLost) {
			rs[i].Err = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fail job %s: %w", f.ID, err)
		}
		a := f.attempt(job)
		outs, as, at = append(outs, c.outcome(a)), append(as, a), append(at, i)
	}
	if len(outs) == 0 {
		return rs, nil
	}
	_, err = c.recordRemoteMany(ctx, "fail", outs, as, func(k int, r errandstore.OutcomeResult) {
		rs[at[k]] = r
		c.afterRemoteFail(ctx, as[k], outs[k], r)
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// attempt is the attempt of job that a remote worker reports failed as o
// says.
func (o *FailOpts) attempt(job *errandtype.Job) *attempt {
	if job.CancelRequestedAt != nil {
		// The worker stops because an operator cancelled the job: the
		// attempt ends the job cancelled, whatever it says of itself.
		return &attempt{job: job, err: ErrJobCancelled, cancelled: true}
	}
	return &attempt{job: job, err: o.failure(), stack: o.Stack}
}

// afterRemoteFail runs what follows a remote worker's failed attempt a,
// written as o and recorded as r: the follow-ups of the job's new state,
// and a throttle's observation by the adaptive limits of its kind.
func (c *Client[TTx]) afterRemoteFail(ctx context.Context, a *attempt, o *errandstore.JobOutcome, r errandstore.OutcomeResult) {
	if r.Err != nil {
		return
	}
	c.afterRemoteOutcome(ctx, o, a.job, r)
	if t, ok := throttleOf(a.err, false); ok {
		c.observeOutsideAdaptive(ctx, a.job.Kind, t)
	}
}

// check refuses options that say what no failure can be.
func (o *FailOpts) check() error {
	if o.Class != "" && !errandstore.ValidClass(o.Class) {
		return &errandtype.InputError{Field: "class", Message: fmt.Sprintf("%q is not a short snake_case word; use e.g. \"receipt_unavailable\"", errandstore.CleanText(o.Class, 80))}
	}
	if o.RetryAfter < 0 {
		return &errandtype.InputError{Field: "retry_after", Message: "is negative; give a positive duration such as 30s"}
	}
	if err := errandstore.CheckDelay("retry_after", o.RetryAfter); err != nil {
		return err
	}
	if o.Permanent && o.RetryAfter > 0 {
		return &errandtype.InputError{Field: "retry_after", Message: "is set on a permanent failure; a permanent failure is never retried, so drop one of them"}
	}
	return nil
}

// failure is the error a local handler would have returned for o.
func (o *FailOpts) failure() error {
	je := &JobError{class: o.Class}
	if je.class == "" {
		je.class = ClassError
	}
	if o.Message != "" {
		je.err = errors.New(o.Message)
	}
	switch {
	case o.Permanent:
		return Permanent(je)
	case o.RetryAfter > 0:
		return RetryAfter(o.RetryAfter, je)
	}
	return je
}

// runningJob reads job id, which must be running under token: ErrLeaseLost
// otherwise. The retry decision needs the attempt and the job's own
// backoff. The read is not fenced, but the write is: a job claimed again
// since has a new token, and the outcome is refused.
func (c *Client[TTx]) runningJob(ctx context.Context, id, token string) (*errandtype.Job, error) {
	job, err := c.jobOrNil(ctx, id)
	if err != nil {
		return nil, err
	}
	return heldUnder(job, token)
}

// jobOrNil reads job id: nil, and no error, when there is none.
func (c *Client[TTx]) jobOrNil(ctx context.Context, id string) (*errandtype.Job, error) {
	job, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: id})
	if errors.Is(err, errandtype.ErrNotFound) {
		return nil, nil
	}
	return job, err
}

// heldUnder returns job if it runs under token, else ErrLeaseLost: the
// check of runningJob on a job read (nil: not found).
func heldUnder(job *errandtype.Job, token string) (*errandtype.Job, error) {
	if job == nil || job.State != errandtype.StateRunning || job.LeaseToken == nil || *job.LeaseToken != token {
		return nil, errandtype.ErrLeaseLost
	}
	return job, nil
}

// jobsRead reads the jobs of ids, at once when the store can
// (errandstore.ManyJobGetter), and returns a lookup of each: nil for an id
// of no job. Without that capability the lookup reads the job then.
func (c *Client[TTx]) jobsRead(ctx context.Context, ids []string) (func(id string) (*errandtype.Job, error), error) {
	if c.caps.getMany == nil {
		return func(id string) (*errandtype.Job, error) { return c.jobOrNil(ctx, id) }, nil
	}
	jobs, err := c.caps.getMany.JobGetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*errandtype.Job, len(jobs))
	for _, j := range jobs {
		byID[j.ID] = j
	}
	return func(id string) (*errandtype.Job, error) { return byID[id], nil }, nil
}

// afterRemoteOutcome runs, after a remote worker's outcome o, recorded as
// r, what follows it in a worker (see [engine.afterOutcome]): when the job
// ended (succeeded, dead, cancelled), its on-dead hook, the completion of
// its batch, the advance of its workflow, and the wake of this process's
// waits on its result, handed what r reports. job is the job as read
// before the outcome, or nil: an acknowledgement does not read the job.
// Without it, the job's kind, batch and workflow come from r, and the job
// is read only when its on-dead hook needs it (or the store does not
// report them in r). A failed read is logged; the leader's pass completes
// the batch and advances the workflow later.
func (c *engine) afterRemoteOutcome(ctx context.Context, o *errandstore.JobOutcome, job *errandtype.Job, r errandstore.OutcomeResult) {
	id := o.ID
	var res WorkResult
	switch {
	case r.Err != nil:
		return
	case r.State == errandtype.StateSucceeded:
		res.Result = ResultSucceeded
	case r.State == errandtype.StateDead:
		res.Result = ResultDead
	case r.State == errandtype.StateCancelled:
		res.Result = ResultCancelled
	default:
		return
	}
	if job == nil && r.Kind != "" && !(res.Result == ResultDead && c.hasDeadHook(r.Kind)) {
		job = &errandtype.Job{ID: id, Kind: r.Kind, State: r.State, BatchID: r.BatchID, WorkflowID: r.WorkflowID}
	}
	if job == nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCompleteTimeout)
		j, err := c.store.JobGet(gctx, &errandstore.JobGetParams{ID: id})
		cancel()
		if err != nil {
			if !errors.Is(err, errandtype.ErrNotFound) {
				c.logger.Warn("read of an acknowledged job failed; the leader completes its batch and advances its workflow on its next sweep", "job_id", id, "err", err)
			}
			return
		}
		job = j
	}
	res.JobID, res.Kind, res.Attempt = &job.ID, job.Kind, job.Attempt
	c.afterOutcome(ctx, job, &res, handedResult(o, r))
}

// recordObserved writes the outcome o of a remote attempt a and reports it
// to the circuit breakers as a Worker reports its own attempts.
func (c *Client[TTx]) recordObserved(ctx context.Context, op string, a *attempt, o *errandstore.JobOutcome) (errandstore.OutcomeResult, error) {
	r, err := writeOutcome(ctx, c.store, o, c.watches.watching())
	c.outsideGate(ctx).observeRemote(ctx, a, o, r, firstErr(err, r.Err))
	return c.remoteResult(op, o, r, err)
}

// remoteResult turns what writing a remote outcome returned into the
// caller's result, a refused lease into an error.
func (c *Client[TTx]) remoteResult(op string, o *errandstore.JobOutcome, r errandstore.OutcomeResult, err error) (errandstore.OutcomeResult, error) {
	if err != nil {
		return errandstore.OutcomeResult{}, fmt.Errorf("%s job %s: %w", op, o.ID, err)
	}
	if r.Err != nil {
		return errandstore.OutcomeResult{}, fmt.Errorf("%s job %s: %w", op, o.ID, r.Err)
	}
	return r, nil
}
