package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// The invariants, in the report's order.
const (
	invLogged    = "every acknowledged enqueue exists"
	invSettled   = "every job is terminal or legitimately waiting"
	invEffect    = "every succeeded job's effect is in the sink exactly once"
	invLease     = "nothing running with an expired lease"
	invAttempts  = "attempts <= max attempts (record and deliveries)"
	invFence     = "late acknowledgments are fenced"
	invDead      = "dead jobs keep their payload and an error per attempt"
	invAudit     = "terminal states change only by audited actions"
	invWorkflows = "workflows finish or compensate"
	invBatches   = "batch callbacks fire once"
	invCron      = "cron ticks fire once"
	invDuplicate = "duplicate enqueues return the first job"
	invHistory   = "the linear queue's history is linearizable"
)

var invariants = []string{invLogged, invSettled, invEffect, invLease, invAttempts, invFence, invDead, invAudit,
	invWorkflows, invBatches, invCron, invDuplicate, invHistory}

// drainMargin is how far ahead of now the drain looks for due jobs.
const drainMargin = 30 * time.Second

// drain waits until no job is running or due within drainMargin, or
// DrainTimeout. Cron ticks of the last seconds do not count: the schedule
// fires every second while workers run.
func (r *run) drain(ctx context.Context) bool {
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		jobs, err := r.listAll(ctx, errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying)
		if err == nil {
			busy := 0
			now := time.Now()
			for _, j := range jobs {
				if j.Kind == "chaos_tick" && now.Sub(j.CreatedAt) < 5*time.Second {
					continue
				}
				// A job due within the margin is waited for too, so that
				// none comes due between the drain and the check.
				if j.State == errandtype.StateRunning || j.AvailableAt.Before(now.Add(drainMargin)) {
					busy++
				}
			}
			if busy == 0 {
				return true
			}
			r.logf("draining: %d jobs due or running", busy)
		}
		sleepCtx(ctx, time.Second)
	}
	return false
}

func (r *run) listAll(ctx context.Context, states ...errandtype.JobState) ([]*errandtype.Job, error) {
	var out []*errandtype.Job
	var after int64
	for {
		page, err := r.client.List(ctx, &errand.ListOpts{States: states, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// check reads the store and the sink directly, once everything stopped,
// and tests every invariant.
func (r *run) check(ctx context.Context, dir string) *Report {
	rep := &Report{Seed: r.cfg.Seed, Store: r.target.Name(), Duration: r.cfg.Duration.String(),
		Ops: map[string]int{}, Faults: map[string]int{}, Skipped: r.skipped, States: map[string]int{}, Waiting: map[string]int{}}
	r.mu.Lock()
	for k, v := range r.counts {
		rep.Ops[k] = v
	}
	for k, v := range r.faults {
		rep.Faults[k] = v
	}
	r.mu.Unlock()
	v := map[string][]Violation{}
	add := func(inv, id, format string, args ...any) {
		v[inv] = append(v[inv], Violation{Invariant: inv, JobID: id, Detail: fmt.Sprintf(format, args...)})
	}
	for _, e := range r.early {
		v[e.Invariant] = append(v[e.Invariant], e)
	}
	fail := func(err error) *Report {
		add(invLogged, "", "could not read the store: %v", err)
		rep.finish(v)
		return rep
	}

	logged, order, err := readLog(r.logp)
	if err != nil {
		return fail(err)
	}
	jobs, err := r.listAll(ctx)
	if err != nil {
		return fail(err)
	}
	byID := map[string]*errandtype.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
		rep.States[string(j.State)]++
	}
	sv, err := r.sink.read(ctx)
	if err != nil {
		return fail(err)
	}
	audit, err := r.readAudit(ctx)
	if err != nil {
		return fail(err)
	}
	now := time.Now()

	waiting := rep.Waiting
	// Logged enqueues: present, payload intact.
	for _, id := range order {
		e := logged[id]
		switch e.Kind {
		case "@batch":
			r.checkBatch(ctx, id, byID, sv, add)
			continue
		case "@workflow":
			r.checkWorkflow(ctx, id, byID, waiting, add)
			continue
		}
		j, ok := byID[id]
		if !ok {
			add(invLogged, id, "logged as enqueued (%s, via %s) but not in the store", e.Kind, e.Via)
			continue
		}
		if d := digest(j.Args); d != e.Digest || j.Kind != e.Kind || j.MaxAttempts != e.MaxAttempts {
			add(invDead, id, "stored job differs from the logged enqueue: kind %s/%s, max attempts %d/%d, digest match %v",
				j.Kind, e.Kind, j.MaxAttempts, e.MaxAttempts, d == e.Digest)
		}
	}

	// Every job in the store, whoever enqueued it.
	for _, j := range jobs {
		switch j.State {
		case errandtype.StateSucceeded:
			if n := sv.effects[j.ID]; n != 1 {
				add(invEffect, j.ID, "succeeded, but the sink holds %d effects", n)
			}
		case errandtype.StateRunning:
			if j.LeaseUntil == nil || j.LeaseUntil.Before(now) {
				add(invLease, j.ID, "running with a lease that expired at %v", j.LeaseUntil)
			} else {
				waiting["running under a live lease"]++
			}
		case errandtype.StateQueued, errandtype.StateRetrying:
			switch {
			case j.AvailableAt.After(now):
				if logged[j.ID].Scheduled {
					waiting["scheduled after the run"]++
				} else {
					waiting[string(j.State)+", due in "+roundUp(j.AvailableAt.Sub(now))+" (a backoff; over 1m: a skewed clock's)"]++
				}
			case j.Kind == "chaos_tick" && now.Sub(j.CreatedAt) < 30*time.Second:
				waiting["cron tick fired as the workers stopped"]++
			case j.HeldBy != nil || j.HeldByBreaker != nil:
				waiting["held by an ordering key or a breaker"]++
			default:
				add(invSettled, j.ID, "%s and due since %s, but no worker took it", j.State, now.Sub(j.AvailableAt).Round(time.Second))
			}
		}
		if j.Attempt > j.MaxAttempts {
			add(invAttempts, j.ID, "attempt %d of at most %d", j.Attempt, j.MaxAttempts)
		}
		// Every delivered lease is a claim; a claim the worker gave back
		// while draining (class interrupted) does not use an attempt.
		given := 0
		for _, e := range j.Errors {
			if e.Class == "interrupted" {
				given++
			}
		}
		if n, max := len(sv.tokens[j.ID]), j.MaxAttempts*(j.Replays+1)+given; n > max {
			add(invAttempts, j.ID, "delivered under %d leases, more than %d attempts allow", n, max)
		}
		if n := sv.staleAckOK[j.ID]; n > 0 {
			add(invFence, j.ID, "%d outcomes sent after the lease expired were recorded, not refused as lease_lost", n)
		}
		if acks := sv.acksOK[j.ID]; len(acks) > 1 {
			add(invFence, j.ID, "%d acknowledgments succeeded (attempts %v)", len(acks), acks)
		} else if len(acks) == 1 && (j.State != errandtype.StateSucceeded || acks[0] != j.Attempt) && j.Replays == 0 {
			add(invFence, j.ID, "the acknowledgment of attempt %d succeeded, but the job is %s at attempt %d", acks[0], j.State, j.Attempt)
		}
		if j.State == errandtype.StateDead {
			seen := map[int]bool{}
			for _, e := range j.Errors {
				if e.Replay == j.Replays {
					seen[e.Attempt] = true
				}
			}
			for a := 1; a <= j.Attempt; a++ {
				if !seen[a] {
					add(invDead, j.ID, "dead after %d attempts, but attempt %d has no error", j.Attempt, a)
					break
				}
			}
			if len(j.Args) == 0 {
				add(invDead, j.ID, "dead without its payload")
			}
		}
		// Terminal states change only by audited actions.
		au := audit[j.ID]
		if j.State == errandtype.StateCancelled && au.cancels == 0 && j.WorkflowID == nil {
			add(invAudit, j.ID, "cancelled without a cancel in the audit")
		}
		if j.Replays != au.replays {
			add(invAudit, j.ID, "replayed %d times, the audit records %d", j.Replays, au.replays)
		}
		if j.Kind == "chaos_tick" {
			tick := strings.TrimPrefix(deref(j.UniqueKey), "errand.cron:tick:")
			if tick == "" {
				add(invCron, j.ID, "a tick job without its tick's unique key")
			}
			rep.CronTicks++
		}
	}
	r.mu.Lock()
	for id, n := range r.replays {
		if j, ok := byID[id]; ok && j.Replays < n {
			add(invAudit, id, "%d replays acknowledged, the job counts %d", n, j.Replays)
		}
	}
	for id := range r.cancels {
		if audit[id].cancels == 0 {
			add(invAudit, id, "a cancel was acknowledged but the audit has none")
		}
	}
	r.mu.Unlock()
	ticks := map[string]int{}
	for _, j := range jobs {
		if j.Kind == "chaos_tick" {
			ticks[deref(j.UniqueKey)]++
		}
	}
	var times []time.Time
	for k, n := range ticks {
		if n > 1 {
			add(invCron, k, "tick fired %d jobs", n)
		}
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(k, "errand.cron:tick:")); err == nil {
			times = append(times, t)
		}
	}
	// The longest gap between ticks: a schedule that stalls after a fault
	// shows here (missed ticks are skipped by design, so it is a figure).
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for i := 1; i < len(times); i++ {
		if g := times[i].Sub(times[i-1]); g > rep.cronGap {
			rep.cronGap = g
		}
	}
	rep.CronMaxGap = rep.cronGap.String()

	for id, n := range sv.deliveries {
		rep.Deliveries += n
		if n > 1 {
			rep.Redeliveries += n - 1
		}
		if _, ok := byID[id]; !ok {
			rep.Ops["deliveries_of_unknown_jobs"]++
		}
	}
	rep.StaleAcks, rep.StaleAcksFenced = sv.staleAcks, sv.staleFenced
	for _, w := range r.workers {
		rep.LeaseLostLogged += w.count(`msg="lease lost"`)
		rep.Ops["worker_exits_restarted"] += w.exits
	}
	if r.skew != nil {
		rep.LeaseLostLogged += r.skew.count(`msg="lease lost"`)
	}
	rep.Jobs = len(jobs)
	rep.Logged = len(logged)
	rep.HistoryOps, rep.History = r.checkHistory(dir, add)
	rep.finish(v)
	return rep
}

func roundUp(d time.Duration) string {
	if d < time.Second {
		return "under 1s"
	}
	if d < time.Minute {
		return "under 1m"
	}
	return "over 1m"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type auditCounts struct{ replays, cancels int }

func (r *run) readAudit(ctx context.Context) (map[string]auditCounts, error) {
	out := map[string]auditCounts{}
	var before int64
	for {
		page, err := r.client.Audit(ctx, &errand.AuditOpts{BeforeID: before, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			if a.JobID == nil {
				continue
			}
			c := out[*a.JobID]
			switch a.Action {
			case errandtype.AuditReplay, errandtype.AuditReplayArgs, errandtype.AuditBulkReplay:
				c.replays++
			case errandtype.AuditCancel:
				c.cancels++
			}
			out[*a.JobID] = c
		}
		if len(page) < 1000 {
			return out, nil
		}
		before = page[len(page)-1].ID
	}
}

func (r *run) checkBatch(ctx context.Context, id string, byID map[string]*errandtype.Job, sv *sinkView, add func(inv, id, format string, args ...any)) {
	b, err := r.client.Batch(ctx, id)
	if err != nil {
		add(invLogged, id, "batch logged as enqueued but not readable: %v", err)
		return
	}
	if b.CompletedAt == nil {
		add(invBatches, id, "batch still open: %d of %d members pending", b.Pending(), b.Total)
		return
	}
	if b.Final == nil || b.Final.Succeeded+b.Final.Dead+b.Final.Cancelled != b.Total {
		add(invBatches, id, "completed batch's final counts do not add up to its %d members: %+v", b.Total, b.Final)
	}
	if b.CallbackJobID == nil {
		add(invBatches, id, "completed without a callback job")
		return
	}
	cb, ok := byID[*b.CallbackJobID]
	if !ok {
		add(invBatches, id, "callback job %s is not in the store", *b.CallbackJobID)
		return
	}
	if cb.State == errandtype.StateSucceeded && sv.effects[cb.ID] != 1 {
		add(invBatches, id, "callback %s succeeded with %d effects", cb.ID, sv.effects[cb.ID])
	}
	n := 0
	for _, j := range byID {
		if j.Kind == "chaos_batch_done" && j.BatchID == nil && strings.HasPrefix(j.ID, id+".") {
			n++
		}
	}
	if n > 1 {
		add(invBatches, id, "%d callback jobs", n)
	}
}

func (r *run) checkWorkflow(ctx context.Context, id string, byID map[string]*errandtype.Job, waiting map[string]int, add func(inv, id, format string, args ...any)) {
	w, err := r.client.Workflow(ctx, id)
	if err != nil {
		add(invLogged, id, "workflow logged as enqueued but not readable: %v", err)
		return
	}
	switch w.State {
	case errandtype.WorkflowSucceeded:
		for _, s := range w.Steps {
			if s.State == nil || *s.State != errandtype.StateSucceeded {
				add(invWorkflows, id, "succeeded, but step %s is %v", s.Name, s.State)
			}
		}
	case errandtype.WorkflowFailed:
		for _, s := range w.Steps {
			if s.State != nil && *s.State == errandtype.StateSucceeded && s.Compensation != nil {
				if j, ok := byID[s.Compensation.JobID]; !ok || !j.State.Terminal() {
					add(invWorkflows, id, "failed, but step %s's compensation did not finish", s.Name)
				}
			}
		}
	case errandtype.WorkflowCompensating:
		// A dead compensation holds the workflow until an operator
		// replays it (docs/workflows.md), and one that waits past the
		// drain (a backoff, or a skewed clock's on SQLite) or runs under a
		// live lease holds it for now; anything else is stuck.
		for _, s := range w.Steps {
			c := s.Compensation
			if c == nil {
				continue
			}
			if c.State != nil && *c.State == errandtype.StateDead {
				waiting["workflow held by a dead compensation"]++
				return
			}
			if j, ok := byID[c.JobID]; ok && waitsPastDrain(j) {
				waiting["workflow waiting on a compensation that waits"]++
				return
			}
		}
		add(invWorkflows, id, "still compensating after the drain, with no dead or waiting compensation holding it")
	default:
		// A step whose retry waits past the drain (a backoff, or a skewed
		// clock's on SQLite) or that runs under a live lease holds its
		// workflow legitimately.
		for _, j := range byID {
			if j.WorkflowID == nil || *j.WorkflowID != id {
				continue
			}
			if waitsPastDrain(j) {
				waiting["workflow waiting on a step that waits"]++
				return
			}
		}
		add(invWorkflows, id, "still %s after the drain, with no step waiting", w.State)
	}
}

// waitsPastDrain reports a job that legitimately is not finished yet: due
// after now, or running under a live lease.
func waitsPastDrain(j *errandtype.Job) bool {
	now := time.Now()
	return (j.State.Waiting() && j.AvailableAt.After(now)) ||
		(j.State == errandtype.StateRunning && j.LeaseUntil != nil && j.LeaseUntil.After(now))
}
