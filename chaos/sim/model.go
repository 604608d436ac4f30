package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// model is the reference the store is checked against: what errand's rules
// say every job is, step by step.
type model struct {
	jobs []*mjob // in enqueue order, which is seq order
	byID map[string]*mjob
	// tokens lists every lease token each job was claimed with.
	tokens map[string][]string
	// sweeps paces the claims' sweeps as the store's handle does.
	sweeps errandstore.ClaimSweeps
	// lastSweepAt is when the store last swept; lastSweep what that sweep
	// changed.
	lastSweepAt time.Time
	lastSweep   errandstore.SweepResult
}

func newModel() *model {
	return &model{byID: map[string]*mjob{}, tokens: map[string][]string{}}
}

// merr is one entry of a job's history, as the model expects it.
type merr struct {
	attempt, replay int
	class           string
	at              time.Time
}

type mjob struct {
	id          string
	args        json.RawMessage
	priority    int
	maxAttempts int
	maxAge      time.Duration
	uniqueKey   string
	uniqueScope errandtype.UniqueScope

	state        errandtype.JobState
	attempt      int
	replays      int
	availableAt  time.Time
	deadline     time.Time // zero: none
	token        string    // of the running attempt
	leaseUntil   time.Time
	cancelReq    bool
	finishedAt   time.Time // zero: none
	errs         []merr
	cancelAudits int
}

// holder returns the job that holds unique key key, other than not, or nil.
func (m *model) holder(key string, not *mjob) *mjob {
	for _, j := range m.jobs {
		if j != not && j.uniqueKey == key && j.uniqueScope.Holds(j.state) {
			return j
		}
	}
	return nil
}

// insert adds the job p describes, unless its unique key is held: then it
// returns the holder.
func (m *model) insert(p *errandstore.JobInsertParams, now time.Time) *mjob {
	if p.UniqueKey != "" {
		if h := m.holder(p.UniqueKey, nil); h != nil {
			return h
		}
	}
	j := &mjob{
		id: p.ID, args: p.Args, priority: p.Priority, maxAttempts: p.MaxAttempts, maxAge: p.MaxAge,
		uniqueKey: p.UniqueKey, uniqueScope: p.UniqueScope.OrDefault(),
		state: errandtype.StateQueued, availableAt: now.Add(p.Delay),
	}
	if p.MaxAge > 0 {
		j.deadline = now.Add(p.MaxAge)
	}
	m.jobs = append(m.jobs, j)
	m.byID[j.id] = j
	return nil
}

// claimable returns the ids of the jobs a claim of limit at now takes, in
// claim order: waiting, available, before any deadline; by priority,
// available_at, seq.
func (m *model) claimable(now time.Time, limit int) []string {
	var cs []*mjob
	for _, j := range m.jobs {
		if j.state.Waiting() && !j.availableAt.After(now) && (j.deadline.IsZero() || j.deadline.After(now)) {
			cs = append(cs, j)
		}
	}
	// m.jobs is in seq order and the sort is stable: seq breaks ties.
	slices.SortStableFunc(cs, func(a, b *mjob) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority), a.availableAt.Compare(b.availableAt))
	})
	var ids []string
	for _, j := range cs[:min(limit, len(cs))] {
		ids = append(ids, j.id)
	}
	return ids
}

func (j *mjob) claim(token string, until time.Time) {
	j.state, j.attempt, j.token, j.leaseUntil = errandtype.StateRunning, j.attempt+1, token, until
}

// holds reports whether token is j's live lease at now.
func (j *mjob) holds(token string, now time.Time) bool {
	return j.state == errandtype.StateRunning && j.token == token && j.leaseUntil.After(now)
}

func (j *mjob) endLease() { j.token, j.leaseUntil = "", time.Time{} }

// record applies an outcome under j's live lease.
func (j *mjob) record(o *errandstore.JobOutcome, now time.Time) {
	k := o.Kind
	j.state = k.State()
	if k.YieldsToCancel() && j.cancelReq {
		j.state = errandtype.StateCancelled
	}
	if !k.CountsAttempt() {
		j.attempt--
	}
	switch {
	case k.Delayed():
		j.availableAt = now.Add(o.Delay)
	case k.State().Waiting():
		j.availableAt = now
	}
	if j.state.Terminal() {
		j.finishedAt = now
	}
	if k.AppendsError() {
		j.errs = append(j.errs, merr{attempt: o.Error.Attempt, replay: j.replays, class: o.Error.Class, at: now})
	}
	j.endLease()
}

// sweepLease applies the sweep of an expired lease at now.
func (j *mjob) sweepLease(now time.Time, r *errandstore.SweepResult) {
	if j.state != errandtype.StateRunning || j.leaseUntil.After(now) {
		return
	}
	e := merr{attempt: j.attempt, replay: j.replays, class: errandstore.ClassLeaseExpired, at: now}
	switch {
	case j.cancelReq:
		j.state, j.finishedAt = errandtype.StateCancelled, now
		e.class = errandstore.ClassCancelled
		r.Cancelled++
	case j.attempt >= j.maxAttempts:
		j.state, j.finishedAt = errandtype.StateDead, now
		r.Dead++
	default:
		j.state, j.availableAt = errandtype.StateRetrying, now
		r.Retried++
	}
	j.errs = append(j.errs, e)
	j.endLease()
}

// sweepDeadline applies the sweep of a waiting job past its deadline.
func (j *mjob) sweepDeadline(now time.Time, r *errandstore.SweepResult) {
	if !j.state.Waiting() || j.deadline.IsZero() || j.deadline.After(now) {
		return
	}
	j.errs = append(j.errs, merr{attempt: j.attempt, replay: j.replays, class: errandstore.ClassExpired, at: now})
	j.state, j.finishedAt = errandtype.StateDead, now
	r.Dead++
}

// replayRefusal returns nil when j may be replayed, errState when its state
// forbids it, errUnique when it would take back a key another job holds.
func (m *model) replayRefusal(j *mjob) error {
	if errandstore.CheckReplay(j.id, j.state) != nil {
		return errState
	}
	if j.uniqueKey != "" && errandstore.ReplayTakesKey(j.uniqueScope, j.state) && m.holder(j.uniqueKey, j) != nil {
		return errUnique
	}
	return nil
}

func (j *mjob) replay(now time.Time) {
	j.state, j.attempt, j.availableAt, j.replays = errandtype.StateQueued, 0, now, j.replays+1
	j.deadline = time.Time{}
	if j.maxAge > 0 {
		j.deadline = now.Add(j.maxAge)
	}
	j.endLease()
	j.finishedAt, j.cancelReq = time.Time{}, false
}

// cancel applies JobCancel's decision at now; wrote reports that it
// changed j (and is audited), refused that its state forbids it.
func (j *mjob) cancel(now time.Time) (wrote, refused bool) {
	if errandstore.CheckCancelJob(j.id, j.state, false) != nil {
		return false, true
	}
	switch {
	case !errandstore.CancelRequests(j.state):
		j.state, j.finishedAt = errandtype.StateCancelled, now
		return true, false
	case j.cancelReq:
		return false, false
	}
	j.cancelReq = true
	return true, false
}

// transitions are the moves errand's rules allow a job in one step,
// derived from the rules' own tables: claims of waiting jobs, cancels,
// deadlines, outcomes, sweeps of leases, replays.
var transitions = func() map[[2]errandtype.JobState]bool {
	t := map[[2]errandtype.JobState]bool{}
	add := func(from, to errandtype.JobState) { t[[2]errandtype.JobState{from, to}] = true }
	for _, w := range errandstore.WaitingStates {
		add(w, errandtype.StateRunning)
		add(w, errandtype.StateDead)
	}
	for _, c := range errandstore.CancellableStates {
		if !errandstore.CancelRequests(c) {
			add(c, errandtype.StateCancelled)
		}
	}
	add(errandtype.StateDead, errandtype.StateCancelled) // a dead job holding its ordering key
	for _, k := range errandstore.OutcomeKinds {
		add(errandtype.StateRunning, k.State())
		if k.YieldsToCancel() {
			add(errandtype.StateRunning, errandtype.StateCancelled)
		}
	}
	for _, st := range []errandtype.JobState{errandtype.StateRetrying, errandtype.StateDead, errandtype.StateCancelled} {
		add(errandtype.StateRunning, st) // sweeps of expired leases
	}
	for _, st := range errandstore.ReplayableStates {
		add(st, errandtype.StateQueued)
	}
	return t
}()

// check reads every job from the store and checks it against the model
// and the invariants.
func (s *sim) check() error {
	js, err := s.st.JobList(s.ctx, &errandstore.JobListParams{Queue: queue, Limit: 1 << 20})
	if err != nil {
		return fmt.Errorf("JobList: %w", err)
	}
	now := s.now()
	got := map[string]*errandtype.Job{}
	for _, j := range js {
		if got[j.ID] != nil {
			return fmt.Errorf("job %s listed twice", j.ID)
		}
		got[j.ID] = j
	}
	for _, mj := range s.m.jobs {
		if got[mj.id] == nil {
			return fmt.Errorf("job %s lost: the model has it %s", mj.id, mj.state)
		}
	}
	if len(js) != len(s.m.jobs) {
		return fmt.Errorf("the store has %d jobs, the model %d", len(js), len(s.m.jobs))
	}
	for _, j := range js {
		mj := s.m.byID[j.ID]
		if prev := s.seen[j.ID]; prev != nil && prev.State != j.State && !transitions[[2]errandtype.JobState{prev.State, j.State}] {
			return fmt.Errorf("job %s moved from %s to %s, which no rule allows", j.ID, prev.State, j.State)
		}
		if err := invariants(j, now, s.m.lastSweepAt); err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
		if err := mj.compare(j); err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
	}
	s.seen = got
	return nil
}

// invariants checks what holds of every job whatever the model says.
func invariants(j *errandtype.Job, now, lastSweep time.Time) error {
	if j.Attempt < 0 || j.Attempt > j.MaxAttempts {
		return fmt.Errorf("attempt %d of %d", j.Attempt, j.MaxAttempts)
	}
	running := j.State == errandtype.StateRunning
	if running != (j.LeaseToken != nil) || running != (j.LeaseUntil != nil) {
		return fmt.Errorf("state %s with lease token %v, lease until %v", j.State, j.LeaseToken != nil, j.LeaseUntil != nil)
	}
	if running && !j.LeaseUntil.After(lastSweep) {
		return fmt.Errorf("running under a lease that ended at %s, before the sweep at %s", j.LeaseUntil, lastSweep)
	}
	if running && j.Attempt < 1 {
		return fmt.Errorf("running at attempt %d: attempts are counted at claim", j.Attempt)
	}
	if j.State.Terminal() != (j.FinishedAt != nil) {
		return fmt.Errorf("state %s with finished_at %v", j.State, j.FinishedAt)
	}
	// One history entry per ended attempt of the current cycle, numbered
	// 1, 2, ...: entries of interruptions and expiries count no attempt.
	var attempts []int
	for _, e := range j.Errors {
		if e.Replay == j.Replays && e.Class != "interrupted" && e.Class != errandstore.ClassExpired {
			attempts = append(attempts, e.Attempt)
		}
	}
	ended := j.Attempt
	if running || j.State == errandtype.StateSucceeded {
		ended--
	}
	if len(attempts) != ended {
		return fmt.Errorf("state %s at attempt %d with %d history entries for the attempts of replay %d: %v", j.State, j.Attempt, len(attempts), j.Replays, attempts)
	}
	for i, a := range attempts {
		if a != i+1 {
			return fmt.Errorf("history of replay %d names attempts %v, want 1..%d", j.Replays, attempts, ended)
		}
	}
	if len(j.Args) == 0 || !json.Valid(j.Args) {
		return fmt.Errorf("args %q lost", j.Args)
	}
	return nil
}

// compare checks the store's job against the model's.
func (mj *mjob) compare(j *errandtype.Job) error {
	var diffs []string
	diff := func(field string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			diffs = append(diffs, fmt.Sprintf("%s %v, want %v", field, got, want))
		}
	}
	diff("state", j.State, mj.state)
	diff("attempt", j.Attempt, mj.attempt)
	diff("max_attempts", j.MaxAttempts, mj.maxAttempts)
	diff("priority", j.Priority, mj.priority)
	diff("replays", j.Replays, mj.replays)
	diff("available_at", ts(j.AvailableAt), ts(mj.availableAt))
	diff("deadline", ts(timeOf(j.Deadline)), ts(mj.deadline))
	diff("lease_token", strOf(j.LeaseToken), mj.token)
	diff("lease_until", ts(timeOf(j.LeaseUntil)), ts(mj.leaseUntil))
	diff("cancel requested", j.CancelRequestedAt != nil, mj.cancelReq)
	diff("finished_at", ts(timeOf(j.FinishedAt)), ts(mj.finishedAt))
	diff("unique_key", strOf(j.UniqueKey), mj.uniqueKey)
	var ga, wa any
	if err := json.Unmarshal(j.Args, &ga); err != nil {
		diffs = append(diffs, fmt.Sprintf("args %q: %v", j.Args, err))
	}
	_ = json.Unmarshal(mj.args, &wa)
	diff("args", ga, wa)
	var errs, want []string
	for _, e := range j.Errors {
		errs = append(errs, merr{attempt: e.Attempt, replay: e.Replay, class: e.Class, at: e.At}.String())
	}
	for _, e := range mj.errs {
		want = append(want, e.String())
	}
	diff("errors", errs, want)
	if len(diffs) > 0 {
		return fmt.Errorf("differs from the model: %v", diffs)
	}
	return nil
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// ts shows a time of the run as its offset from Epoch, "none" for zero.
func ts(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Sub(Epoch).String()
}

func (e merr) String() string {
	return fmt.Sprintf("%s@%d/r%d/%s", e.class, e.attempt, e.replay, ts(e.at))
}

func strOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
