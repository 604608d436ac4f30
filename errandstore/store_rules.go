package errandstore

import (
	"slices"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// The rules below are the same for every store. Each store calls them, or
// renders its SQL from them, so that the stores agree by construction and a
// new state, outcome or rule is written down once, here. A store holds
// only what its SQL dialect forces.

// WaitingStates are the states of a job that waits for a worker: claimable
// once its available_at has passed, cancellable, and held back by its
// ordering key while the key is taken.
var WaitingStates = errandtype.StatesWhere(errandtype.JobState.Waiting)

// UnfinishedStates are the states of a job not yet finished: waiting or
// running. Unfinished jobs take part in the ordering-key rule (see
// [OrderingFreeSQL]); a finished one holds nothing back, but for a dead job
// that holds its key ([github.com/errandhq/errand.OrderingHoldOnDead]).
var UnfinishedStates = errandtype.StatesWhere(func(s errandtype.JobState) bool { return s.Waiting() || s == errandtype.StateRunning })

// ReplayableStates are the states JobReplay accepts.
var ReplayableStates = errandtype.StatesWhere(func(s errandtype.JobState) bool { return s == errandtype.StateDead || s == errandtype.StateCancelled })

// CancellableStates are the states JobCancel accepts: a waiting job is
// cancelled at once, a running one gets a cancel request (see
// [CancelRequestStates]).
var CancellableStates = errandtype.StatesWhere(func(s errandtype.JobState) bool { return s.Waiting() || s == errandtype.StateRunning })

// CancelRequestStates are the states in which JobCancel records a cancel
// request instead of cancelling: the job is held by a worker, which ends the
// attempt as cancelled ([OutcomeCancelled]) when the request reaches it. A
// job whose worker died with a request pending is cancelled by the sweep of
// its expired lease rather than retried: a cancel request wins.
var CancelRequestStates = []errandtype.JobState{errandtype.StateRunning}

// CancelRequests reports whether JobCancel on a job in state st records a
// cancel request rather than cancelling it at once.
func CancelRequests(st errandtype.JobState) bool { return slices.Contains(CancelRequestStates, st) }

// CancelledByRequestMessage is the history message of an attempt ended by a
// cancel request, and CancelledBySweepMessage of a job whose worker stopped
// renewing its lease with a request pending.
const (
	CancelledByRequestMessage = "cancelled by an operator while running"
	CancelledBySweepMessage   = "cancelled by an operator while running; the worker stopped renewing its lease before it ended the attempt"
)

// CheckReplay returns nil when a job in state st may be replayed, and
// otherwise the *StateError a store returns, having written nothing.
func CheckReplay(id string, st errandtype.JobState) error {
	if !slices.Contains(ReplayableStates, st) {
		return &errandtype.StateError{Op: "replay", ID: id, State: st, Allowed: ReplayableStates}
	}
	return nil
}

// ReplayHeldByWorkflow reports whether a replay of job id, of workflow
// workflowID (nil for none), depends on the workflow's state: the job is
// one of the workflow's steps, not a compensation. A store replaying such
// a job reads the workflow's row in the replay's transaction, locked
// against an advance (FOR SHARE where rows are locked), and passes it to
// [CheckReplayInWorkflow].
func ReplayHeldByWorkflow(id string, workflowID *string) bool {
	return workflowID != nil && strings.HasPrefix(id, *workflowID+workflowStepInfix)
}

// CheckCancel returns nil when a job in state st may be cancelled, and
// otherwise the *StateError a store returns, having written nothing.
func CheckCancel(id string, st errandtype.JobState) error {
	if !slices.Contains(CancellableStates, st) {
		return &errandtype.StateError{Op: "cancel", ID: id, State: st, Allowed: CancellableStates}
	}
	return nil
}

// SQLStates renders states as the list of SQL string literals inside an
// IN (...): 'queued', 'retrying'. Stores write their state conditions with
// it rather than spell the states out, so that a state is added in one
// place. Job states are plain lowercase words; nothing needs quoting.
func SQLStates(states []errandtype.JobState) string {
	quoted := make([]string, len(states))
	for i, s := range states {
		quoted[i] = "'" + string(s) + "'"
	}
	return strings.Join(quoted, ", ")
}

// The ordering-key rule: a job with an ordering key is claimable only while
// no other job of its key is running and none with a lower seq is waiting,
// or is dead and holds its key ([OrderingHoldOnDead]). Jobs of one key run
// one at a time, in seq order; a finished job holds nothing back, except a
// dead one that holds its key, until it is replayed (it then runs first,
// having the lowest seq) or cancelled. Within one claim the second job of a
// key sees the first still waiting, so a batch takes at most one job per
// key. Job.HeldBy names the job a held job waits for: the first of its key,
// in seq order, that is running or holds the key ahead of it.
//
// The functions below render the rule in SQL that every SQL store runs as
// it is. jobs is the jobs table's name as the store's SQL spells it; the
// candidate row is aliased j and the rows of its key o. The terms on o
// repeat the condition of the ordering index ([OrderingIndexSQL]) word for
// word: SQLite uses a partial index only when a query repeats its
// condition, and would otherwise read every unfinished job for each
// candidate.

// orderingHoldsSQL is the condition that the row whose columns are
// prefixed by alias ("" or "o.") takes part in the ordering-key rule: it is
// unfinished, or dead and holding its key.
func OrderingHoldsSQL(alias string) string {
	return `(` + alias + `state IN (` + SQLStates(UnfinishedStates) + `) OR (` + alias + `state = '` +
		string(errandtype.StateDead) + `' AND ` + alias + `ordering_hold = 1))`
}

// orderingAheadSQL is the FROM and WHERE that select the rows o of j's key
// that hold j back: they take part in the rule and are running or come
// before j.
func orderingAheadSQL(jobs string) string {
	return `FROM ` + jobs + ` o
		WHERE o.ordering_key = j.ordering_key AND ` + OrderingHoldsSQL("o.") + `
			AND (o.state = '` + string(errandtype.StateRunning) + `' OR o.seq < j.seq)`
}

// OrderingFreeSQL is the claim condition of the ordering-key rule on a
// candidate aliased j: true when nothing of its key holds it back.
func OrderingFreeSQL(jobs string) string {
	return `(j.ordering_key IS NULL OR NOT EXISTS (SELECT 1 ` + orderingAheadSQL(jobs) + `))`
}

// HeldBySQL is the SQL of Job.HeldBy for the row aliased j: NULL unless j
// waits and has an ordering key; else the id of the first job of its key,
// in seq order, that is running or holds the key ahead of it. It walks the
// ordering index of the key and stops at the first match, which for a held
// job is the key's first row. HeldBy is non-NULL exactly when
// OrderingFreeSQL is false for a waiting job.
func HeldBySQL(jobs string) string {
	return `CASE WHEN j.ordering_key IS NOT NULL AND j.state IN (` + SQLStates(WaitingStates) + `) THEN (
		SELECT o.id ` + orderingAheadSQL(jobs) + `
		ORDER BY o.seq LIMIT 1) END`
}

// CheckCancelJob is CheckCancel for a job that may hold its ordering key
// while dead: holdsKey reports that the job has an ordering key and
// [github.com/errandhq/errand.OrderingHoldOnDead]. Such a job may be
// cancelled when dead too, which releases its key to the jobs behind it;
// otherwise the rule is CheckCancel's.
func CheckCancelJob(id string, st errandtype.JobState, holdsKey bool) error {
	if st == errandtype.StateDead && holdsKey {
		return nil
	}
	return CheckCancel(id, st)
}

// CancelJob is the cancel decision every store's JobCancel applies in its
// transaction, once it has read the job's state st under a lock, whether
// it holds its ordering key while dead (see [CheckCancelJob]) and whether a
// cancel request is pending. A state CheckCancelJob refuses is its error
// and nothing is written. A running job gets a request its worker acts on
// (request), or, with one pending, is left as it is (get); any other job
// is cancelled at once (cancel). wrote reports that request or cancel
// wrote the job: the store audits the cancel then, and only then.
func CancelJob(id string, st errandtype.JobState, holdsKey, pending bool, get, request, cancel func() (*errandtype.Job, error)) (j *errandtype.Job, wrote bool, err error) {
	if err := CheckCancelJob(id, st, holdsKey); err != nil {
		return nil, false, err
	}
	switch {
	case !CancelRequests(st):
		j, err = cancel()
	case pending:
		j, err = get()
		return j, false, err
	default:
		j, err = request()
	}
	return j, err == nil, err
}

// BeginEffect is the try-begin decision table of the effect ledger, which
// every store's EffectBegin applies once it has checked the caller's own
// lease. found is the entry for the key, or nil when there is none;
// leaseToken is the caller's. heldElsewhere reports whether the job named
// by found still runs under found's lease token with a live lease: it is
// called only when the answer matters (an in-progress entry of another
// lease). take writes the entry in progress under the caller's job and
// lease token (inserting it, or updating the one found and keeping its
// created_at) and returns it. BeginEffect returns the entry with Status
// set:
//
//	entry                              Status                  written by take
//	none                               errandtype.EffectBegun             yes
//	completed                          errandtype.EffectAlreadyCompleted  no
//	failed (released)                  errandtype.EffectRetaken           yes
//	in progress, this lease            errandtype.EffectBegun             no
//	in progress, another live lease    errandtype.EffectHeldElsewhere     no
//	in progress, another lease ended   errandtype.EffectAbandoned         yes
func BeginEffect(found *Effect, leaseToken string, heldElsewhere func() (bool, error), take func() (*Effect, error)) (*Effect, error) {
	var status errandtype.EffectStatus
	switch {
	case found == nil:
		status = errandtype.EffectBegun
	case found.State == errandtype.EffectCompleted:
		return withStatus(found, errandtype.EffectAlreadyCompleted), nil
	case found.State == errandtype.EffectFailed:
		status = errandtype.EffectRetaken
	case found.LeaseToken == leaseToken:
		return withStatus(found, errandtype.EffectBegun), nil
	default:
		held, err := heldElsewhere()
		if err != nil {
			return nil, err
		}
		if held {
			return withStatus(found, errandtype.EffectHeldElsewhere), nil
		}
		status = errandtype.EffectAbandoned
	}
	e, err := take()
	if err != nil {
		return nil, err
	}
	return withStatus(e, status), nil
}

func withStatus(e *Effect, status errandtype.EffectStatus) *Effect {
	e.Status = status
	return e
}

// WorkerReregisterSQL is the conflict clause of a worker registration's
// INSERT in a SQL store, the rule that a registration is a fresh start: a
// row with the worker's id is replaced, its counters zeroed and its
// last_completed_at, draining_at and stopped_at cleared. The new row is
// "excluded", as SQLite and PostgreSQL name it.
const WorkerReregisterSQL = `ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
	queues = excluded.queues, kinds = excluded.kinds,
	heartbeat_interval_us = excluded.heartbeat_interval_us,
	started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
	stopped_at = NULL, last_completed_at = NULL, jobs_running = 0,
	jobs_completed = 0, clock_skew_ms = 0, draining_at = NULL`

// OutcomeKinds lists every outcome kind.
var OutcomeKinds = []OutcomeKind{OutcomeSucceeded, OutcomeRetry, OutcomeDead, OutcomeSnooze, OutcomeInterrupted, OutcomeCancelled}

// State is the state a job takes when an outcome of kind k is recorded.
func (k OutcomeKind) State() errandtype.JobState {
	switch k {
	case OutcomeSucceeded:
		return errandtype.StateSucceeded
	case OutcomeRetry:
		return errandtype.StateRetrying
	case OutcomeDead:
		return errandtype.StateDead
	case OutcomeCancelled:
		return errandtype.StateCancelled
	}
	return errandtype.StateQueued // OutcomeSnooze, OutcomeInterrupted
}

// CountsAttempt reports whether the attempt that ends with k counts
// against the job's attempts. A snoozed job and a job given back on a drain
// get their attempt back.
func (k OutcomeKind) CountsAttempt() bool {
	return k != OutcomeSnooze && k != OutcomeInterrupted
}

// AppendsError reports whether k appends its Error to the job's history
// and sets last_error.
func (k OutcomeKind) AppendsError() bool {
	return k == OutcomeRetry || k == OutcomeDead || k == OutcomeInterrupted || k == OutcomeCancelled
}

// YieldsToCancel reports whether a cancel request pending on the job
// overrides an outcome of kind k: an attempt that ends in a retry, a snooze
// or a drain while a cancel is requested ends the job cancelled instead (its
// own history entry kept), so that a request the attempt did not hear of in
// time still stops the job. A success and a death are recorded as they are:
// they end the job anyway, and say truly what the attempt did.
func (k OutcomeKind) YieldsToCancel() bool { return k.State().Waiting() }

// Delayed reports whether k makes the job available its Delay after now;
// otherwise a waiting job is available now and a finished one keeps its
// available_at.
func (k OutcomeKind) Delayed() bool {
	return k == OutcomeRetry || k == OutcomeSnooze || k == OutcomeInterrupted
}

// outcomeKindsWhere lists the kinds for which keep is true.
func outcomeKindsWhere(keep func(OutcomeKind) bool) []OutcomeKind {
	return slices.DeleteFunc(slices.Clone(OutcomeKinds), func(k OutcomeKind) bool { return !keep(k) })
}

// OutcomeStateSQL renders, as a SQL CASE on the expression kind (an
// outcome kind), the state each outcome kind leads to.
func OutcomeStateSQL(kind string) string {
	var b strings.Builder
	b.WriteString("CASE " + kind)
	for _, k := range OutcomeKinds {
		b.WriteString(" WHEN '" + string(k) + "' THEN '" + string(k.State()) + "'")
	}
	b.WriteString(" END")
	return b.String()
}

// SQLOutcomeKinds renders the outcome kinds for which keep is true as the
// list of SQL string literals inside an IN (...), as SQLStates does for
// states. keep is one of OutcomeKind's predicates, such as
// OutcomeKind.Delayed.
func SQLOutcomeKinds(keep func(OutcomeKind) bool) string {
	ks := outcomeKindsWhere(keep)
	quoted := make([]string, len(ks))
	for i, k := range ks {
		quoted[i] = "'" + string(k) + "'"
	}
	return strings.Join(quoted, ", ")
}

// InsertedFor reports whether job j, which a bulk insert just wrote with
// p's id, was written for p: its unique key is p's too. When a batch names
// one id twice, the first of the two may lose on its unique key and the
// second be the one written; a store matching its inserted rows to the
// batch by id alone would report them the wrong way round.
func InsertedFor(j *errandtype.Job, p *JobInsertParams) bool {
	key := ""
	if j.UniqueKey != nil {
		key = *j.UniqueKey
	}
	return key == p.UniqueKey
}

// ReplayAuditActions are the audit actions that replay a job; their records
// carry the state the job was replayed from and its replay number after.
var ReplayAuditActions = []errandtype.AuditAction{errandtype.AuditReplay, errandtype.AuditReplayArgs, errandtype.AuditBulkReplay}

// FailureKilledSQL renders the condition, for a history entry of job alias
// job, that the entry dead-lettered its job: it is the last entry of its
// delivery cycle (the next entry, if any, has another replay number), and
// that cycle ended dead. The current cycle ended dead if the job is dead;
// an earlier one if the replay that followed it was of a dead job (not of
// a cancelled one), which the audit records: the store joins the entry to
// that record with [ReplayedFromDeadJoinSQL] as audit alias a. replay is
// the expression of the entry's replay number, next that of the next
// entry's (NULL when there is none), each followed by cast to read it as an
// integer. The insights count every other failure as retried, whatever the
// job's state now.
func FailureKilledSQL(job, replay, next, cast string) string {
	r := "coalesce((" + replay + ")" + cast + ", 0)"
	return "(coalesce((" + next + ")" + cast + ", -1) <> " + r + " AND CASE WHEN " + r + " >= " + job + ".replays THEN " +
		job + ".state = '" + string(errandtype.StateDead) + "' ELSE a.id IS NOT NULL END)"
}

// ReplayedFromDeadJoinSQL renders the LEFT JOIN of audit, as alias a, to a
// history entry of an earlier delivery cycle of job alias job: the record
// of the replay that ended the entry's cycle, if it replayed a dead job.
// A job has one replay record per replay number, so the join adds no row.
// replay and cast are as for [FailureKilledSQL].
func ReplayedFromDeadJoinSQL(audit, job, replay, cast string) string {
	actions := make([]string, len(ReplayAuditActions))
	for i, a := range ReplayAuditActions {
		actions[i] = "'" + string(a) + "'"
	}
	r := "coalesce((" + replay + ")" + cast + ", 0)"
	return "LEFT JOIN " + audit + " a ON " + r + " < " + job + ".replays AND a.job_id = " + job + ".id AND a.replay = " + r +
		" + 1 AND a.action IN (" + strings.Join(actions, ", ") + ") AND a.prior_state = '" + string(errandtype.StateDead) + "'"
}

// OpenWorkflowsSQL and FinishedWorkflowsSQL render the open and the
// finished workflow states for an IN (...), in the order of
// [errandtype.WorkflowStates], as the stores' partial indexes spell them.
var (
	OpenWorkflowsSQL     = sqlWorkflowStates(true)
	FinishedWorkflowsSQL = sqlWorkflowStates(false)
)

func sqlWorkflowStates(open bool) string {
	var quoted []string
	for _, s := range errandtype.WorkflowStates {
		if s.Open() == open {
			quoted = append(quoted, "'"+string(s)+"'")
		}
	}
	return strings.Join(quoted, ", ")
}

// TerminalStates are the finished states: succeeded, dead and cancelled.
var TerminalStates = errandtype.StatesWhere(errandtype.JobState.Terminal)

// InsightsDepthStates are the states whose jobs the insights' depth counts:
// the unfinished ones, and dead, which waits for an operator.
var InsightsDepthStates = errandtype.StatesWhere(func(s errandtype.JobState) bool {
	return !s.Terminal() || s == errandtype.StateDead
})

// InsightsFailingStates are the unfinished states whose jobs may have
// failed in the last hour without having finished since: running (failed,
// then claimed again) and retrying. Waiting jobs queued again with an error
// are read apart, from their own index.
var InsightsFailingStates = errandtype.StatesWhere(func(s errandtype.JobState) bool {
	return s == errandtype.StateRunning || s == errandtype.StateRetrying
})

// OrderingIndexSQL is the predicate of the ordering index
// errand_jobs_ordering on (ordering_key, seq), which every SQL store's
// migration spells out word for word: the rows that take part in the
// ordering-key rule.
func OrderingIndexSQL() string {
	return `ordering_key IS NOT NULL AND ` + OrderingHoldsSQL("")
}
