package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// Config is one simulation run.
type Config struct {
	// Store is the store under test, on a fresh, empty database whose
	// clock is Clock.
	Store errandstore.Store
	// Clock is the store's clock; Run alone moves it.
	Clock *errandtest.Clock
	// Seed chooses every operation.
	Seed uint64
	// Steps is the number of operations; zero means DefaultSteps.
	Steps int
}

// DefaultSteps is the length of a run when Config.Steps is zero.
const DefaultSteps = 100

// Failure is a run that broke an invariant or whose store call failed.
type Failure struct {
	Seed uint64
	// Step is the failing step, counted from 1.
	Step int
	// Trace lists the operations up to and including the failing one.
	Trace []string
	Err   error
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, step %d: %v\nreproduce: go test ./chaos/sim -run TestSim -seed %d -v\ntrace:\n", f.Seed, f.Step, f.Err, f.Seed)
	for _, l := range f.Trace {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func (f *Failure) Unwrap() error { return f.Err }

// Result summarises a run that kept every invariant.
type Result struct {
	Steps int
	Jobs  int
	// Ops counts the steps of each operation, Events what they did (see
	// the Event constants).
	Ops    map[string]int
	Events map[string]int
	Trace  []string
}

// op is one kind of step. A new operation (a signal, a durable sleep) is a
// new entry: its do draws its arguments from s.rng, calls the store,
// updates the model and returns what broke.
type op struct {
	name   string
	weight int
	do     func(s *sim) error
}

var ops = []op{
	{"enqueue", 6, (*sim).enqueue},
	{"claim", 6, (*sim).claim},
	{"heartbeat", 3, (*sim).heartbeat},
	{"outcome", 6, (*sim).outcome},
	{"advance", 5, (*sim).advance},
	{"sweep", 2, (*sim).sweep},
	{"replay", 2, (*sim).replay},
	{"cancel", 2, (*sim).cancel},
}

const (
	queue    = "sim"
	kind     = "sim.work"
	nWorkers = 3
	// uniqueKeys is the pool of unique keys: few, so that they collide.
	uniqueKeys = 3
)

// Epoch is where every run's clock starts, so that a seed's times are the
// same on every run.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// held is a lease a simulated worker holds, live or not.
type held struct {
	id, token string
	attempt   int
}

type sim struct {
	ctx     context.Context
	st      errandstore.Store
	clock   *errandtest.Clock
	rng     *rand.Rand
	m       *model
	workers [nWorkers][]held
	trace   []string
	line    string // the current step's trace line
	nextID  int
	ops     map[string]int
	events  map[string]int
	// seen is each job as the store last returned it, read after every
	// step.
	seen map[string]*errandtype.Job
}

// Run runs one simulation. Its error is a *Failure.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Store == nil || cfg.Clock == nil {
		return nil, errors.New("sim: Config needs a Store and its Clock")
	}
	steps := cfg.Steps
	if steps <= 0 {
		steps = DefaultSteps
	}
	s := &sim{
		ctx: ctx, st: cfg.Store, clock: cfg.Clock,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		m:      newModel(),
		ops:    map[string]int{},
		events: map[string]int{},
		seen:   map[string]*errandtype.Job{},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for step := 1; step <= steps; step++ {
		n := s.rng.IntN(total)
		var o op
		for _, o = range ops {
			if n < o.weight {
				break
			}
			n -= o.weight
		}
		s.line = fmt.Sprintf("%d %s %s:", step, s.clock.Now().Sub(Epoch), o.name)
		s.ops[o.name]++
		err := o.do(s)
		if err == nil {
			err = s.check()
		}
		s.trace = append(s.trace, s.line)
		if err != nil {
			return nil, &Failure{Seed: cfg.Seed, Step: step, Trace: s.trace, Err: err}
		}
	}
	if err := s.checkAudit(); err != nil {
		return nil, &Failure{Seed: cfg.Seed, Step: steps, Trace: s.trace, Err: err}
	}
	return &Result{Steps: steps, Jobs: len(s.m.jobs), Ops: s.ops, Events: s.events, Trace: s.trace}, nil
}

func (s *sim) note(format string, args ...any) { s.line += " " + fmt.Sprintf(format, args...) }

func (s *sim) now() time.Time { return s.clock.Now() }

func (s *sim) enqueue() error {
	n := 1 + s.rng.IntN(3)
	var ps []*errandstore.JobInsertParams
	for range n {
		s.nextID++
		p := &errandstore.JobInsertParams{
			ID: fmt.Sprintf("j%d", s.nextID), Queue: queue, Kind: kind, ArgsVersion: 1,
			Args:        json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, s.nextID, strings.Repeat("x", s.rng.IntN(8)))),
			Priority:    s.rng.IntN(3),
			MaxAttempts: 1 + s.rng.IntN(3),
		}
		if s.rng.IntN(3) == 0 {
			p.Delay = time.Duration(1+s.rng.IntN(60)) * time.Second
		}
		if s.rng.IntN(5) == 0 {
			p.MaxAge = time.Duration(5+s.rng.IntN(120)) * time.Second
		}
		if s.rng.IntN(3) == 0 {
			p.UniqueKey = fmt.Sprintf("u%d", s.rng.IntN(uniqueKeys))
			p.UniqueScope = []errandtype.UniqueScope{errandtype.UniqueAlways, errandtype.UniqueUntilFinished, errandtype.UniqueUntilSucceeded}[s.rng.IntN(3)]
		}
		ps = append(ps, p)
	}
	rs, err := s.st.JobInsertMany(s.ctx, &errandstore.JobInsertManyParams{Jobs: ps})
	if err != nil {
		return fmt.Errorf("JobInsertMany: %w", err)
	}
	if len(rs) != len(ps) {
		return fmt.Errorf("JobInsertMany: %d results for %d jobs", len(rs), len(ps))
	}
	now := s.now()
	for i, p := range ps {
		holder := s.m.insert(p, now)
		desc := p.ID
		if p.UniqueKey != "" {
			desc += "/" + p.UniqueKey + "/" + p.UniqueScope.String()
		}
		if p.Delay > 0 {
			desc += fmt.Sprintf("+%s", p.Delay)
		}
		got := rs[i]
		switch {
		case holder != nil && (!got.Duplicate || got.Job == nil || got.Job.ID != holder.id):
			return fmt.Errorf("enqueue %s: want a duplicate of %s (key %s held), got duplicate=%v job %s", p.ID, holder.id, p.UniqueKey, got.Duplicate, jobID(got.Job))
		case holder == nil && (got.Duplicate || got.Job == nil || got.Job.ID != p.ID):
			return fmt.Errorf("enqueue %s: want it inserted, got duplicate=%v job %s", p.ID, got.Duplicate, jobID(got.Job))
		case holder != nil:
			desc += "=dup:" + holder.id
			s.events[EventDuplicate]++
		}
		s.note("%s", desc)
	}
	return nil
}

func jobID(j *errandtype.Job) string {
	if j == nil {
		return "<nil>"
	}
	return j.ID
}

func (s *sim) claim() error {
	w := s.rng.IntN(nWorkers)
	limit := 1 + s.rng.IntN(4)
	lease := time.Duration(5+s.rng.IntN(20)) * time.Second
	now := s.now()
	sweeps := s.m.sweeps.Due(now)
	if err := s.expectSweep(now, sweeps); err != nil {
		return err
	}
	if sweeps {
		s.note("(sweeps: %+v)", s.m.lastSweep)
	}
	want := s.m.claimable(now, limit)
	got, err := s.st.JobClaimMany(s.ctx, &errandstore.JobClaimParams{Queues: []string{queue}, Limit: limit, Lease: lease, Owner: fmt.Sprintf("w%d", w)})
	if err != nil {
		return fmt.Errorf("JobClaimMany: %w", err)
	}
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	s.note("w%d limit=%d lease=%s -> %v", w, limit, lease, ids)
	if !slices.Equal(ids, want) {
		return fmt.Errorf("claim: got %v, the model claims %v (in claim order)", ids, want)
	}
	for _, j := range got {
		mj := s.m.byID[j.ID]
		if j.LeaseToken == nil || *j.LeaseToken == "" {
			return fmt.Errorf("claim: job %s claimed without a lease token", j.ID)
		}
		for _, other := range s.m.tokens[j.ID] {
			if other == *j.LeaseToken {
				return fmt.Errorf("claim: job %s claimed with a token it was claimed with before", j.ID)
			}
		}
		mj.claim(*j.LeaseToken, now.Add(lease))
		s.m.tokens[j.ID] = append(s.m.tokens[j.ID], *j.LeaseToken)
		if j.Attempt != mj.attempt {
			return fmt.Errorf("claim: job %s returned with attempt %d, want %d (counted at claim)", j.ID, j.Attempt, mj.attempt)
		}
		s.workers[w] = append(s.workers[w], held{id: j.ID, token: *j.LeaseToken, attempt: j.Attempt})
	}
	return nil
}

// pickHeld returns a random non-empty subset of worker w's leases, in
// random order, sometimes naming one twice.
func (s *sim) pickHeld(w int) []held {
	hs := slices.Clone(s.workers[w])
	s.rng.Shuffle(len(hs), func(i, k int) { hs[i], hs[k] = hs[k], hs[i] })
	hs = hs[:1+s.rng.IntN(len(hs))]
	if s.rng.IntN(10) == 0 {
		hs = append(hs, hs[0])
	}
	return hs
}

// worker picks a worker that holds leases, or returns -1.
func (s *sim) worker() int {
	var ws []int
	for w := range nWorkers {
		if len(s.workers[w]) > 0 {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return -1
	}
	return ws[s.rng.IntN(len(ws))]
}

func (s *sim) heartbeat() error {
	w := s.worker()
	if w < 0 {
		s.note("no leases")
		return nil
	}
	hs := s.pickHeld(w)
	lease := time.Duration(5+s.rng.IntN(20)) * time.Second
	ls := make([]errandstore.JobLease, len(hs))
	for i, h := range hs {
		ls[i] = errandstore.JobLease{ID: h.id, LeaseToken: h.token}
	}
	now := s.now()
	rs, err := s.st.JobHeartbeatMany(s.ctx, &errandstore.JobHeartbeatParams{Leases: ls, Lease: lease})
	if err != nil {
		return fmt.Errorf("JobHeartbeatMany: %w", err)
	}
	if len(rs) != len(hs) {
		return fmt.Errorf("heartbeat: %d results for %d leases", len(rs), len(hs))
	}
	s.note("w%d lease=%s", w, lease)
	for i, h := range hs {
		mj := s.m.byID[h.id]
		live := mj.holds(h.token, now)
		r := rs[i]
		s.note("%s:%s", h.id, okLost(r.Err))
		switch {
		case live && r.Err != nil:
			return fmt.Errorf("heartbeat of %s under its live lease: %v", h.id, r.Err)
		case !live && r.Err == nil:
			return fmt.Errorf("fencing: heartbeat of %s with a stale token renewed it until %s", h.id, r.LeaseUntil)
		case !live && !errors.Is(r.Err, errandtype.ErrLeaseLost):
			return fmt.Errorf("heartbeat of %s with a stale token: %v, want ErrLeaseLost", h.id, r.Err)
		case live && (!r.LeaseUntil.Equal(now.Add(lease)) || r.CancelRequested != mj.cancelReq):
			return fmt.Errorf("heartbeat of %s: lease until %s, cancel requested %v; want %s, %v", h.id, r.LeaseUntil, r.CancelRequested, now.Add(lease), mj.cancelReq)
		case live:
			mj.leaseUntil = now.Add(lease)
		default:
			s.events[EventHeartbeatFenced]++
		}
	}
	return nil
}

func okLost(err error) string {
	if err == nil {
		return "ok"
	}
	return "lost"
}

func (s *sim) outcome() error {
	w := s.worker()
	if w < 0 {
		s.note("no leases")
		return nil
	}
	hs := s.pickHeld(w)
	allSucceeded := s.rng.IntN(4) == 0 // one statement for the group
	outs := make([]*errandstore.JobOutcome, len(hs))
	for i, h := range hs {
		k := errandstore.OutcomeKinds[s.rng.IntN(len(errandstore.OutcomeKinds))]
		if allSucceeded {
			k = errandstore.OutcomeSucceeded
		}
		if k == errandstore.OutcomeRetry && h.attempt >= s.m.byID[h.id].maxAttempts {
			k = errandstore.OutcomeDead // the retry policy, which callers apply: the final attempt's failure is final
		}
		o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: h.id, LeaseToken: h.token}, Kind: k}
		if k.Delayed() {
			o.Delay = time.Duration(s.rng.IntN(30)) * time.Second
		}
		if k.AppendsError() {
			class := "error"
			switch k {
			case errandstore.OutcomeInterrupted:
				class = "interrupted"
			case errandstore.OutcomeCancelled:
				class = errandstore.ClassCancelled
			}
			o.Error = &errandtype.AttemptError{Attempt: h.attempt, Class: class, Message: "attempt " + fmt.Sprint(h.attempt) + " " + string(k)}
		}
		outs[i] = o
	}
	now := s.now()
	rs, err := s.st.JobRecordOutcomes(s.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outs})
	if err != nil {
		return fmt.Errorf("JobRecordOutcomes: %w", err)
	}
	if len(rs) != len(outs) {
		return fmt.Errorf("outcome: %d results for %d outcomes", len(rs), len(outs))
	}
	s.note("w%d", w)
	for i, o := range outs {
		mj := s.m.byID[o.ID]
		live := mj.holds(o.LeaseToken, now)
		r := rs[i]
		s.note("%s:%s=%s", o.ID, o.Kind, okLost(r.Err))
		switch {
		case live && r.Err != nil:
			return fmt.Errorf("outcome %s of %s under its live lease: %v", o.Kind, o.ID, r.Err)
		case !live && r.Err == nil:
			return fmt.Errorf("fencing: outcome %s of %s with a stale token applied: state %s", o.Kind, o.ID, r.State)
		case !live && !errors.Is(r.Err, errandtype.ErrLeaseLost):
			return fmt.Errorf("outcome %s of %s with a stale token: %v, want ErrLeaseLost", o.Kind, o.ID, r.Err)
		case live:
			mj.record(o, now)
			if r.State != mj.state {
				return fmt.Errorf("outcome %s of %s: result state %s, the model's %s", o.Kind, o.ID, r.State, mj.state)
			}
			s.events["outcome "+string(o.Kind)+" to "+string(mj.state)]++
		default:
			s.events[EventOutcomeFenced]++
		}
	}
	// A worker forgets the leases it reported on, whatever became of them.
	s.workers[w] = slices.DeleteFunc(s.workers[w], func(h held) bool { return slices.Contains(hs, h) })
	return nil
}

func (s *sim) advance() error {
	d := time.Duration(1+s.rng.IntN(3000)) * time.Millisecond
	if s.rng.IntN(3) == 0 {
		d = time.Duration(5+s.rng.IntN(25)) * time.Second
	}
	s.clock.Advance(d)
	s.note("%s", d)
	return nil
}

func (s *sim) sweep() error {
	now := s.now()
	s.m.sweeps.Swept(now)
	if err := s.expectSweep(now, true); err != nil {
		return err
	}
	r, err := s.st.JobSweep(s.ctx, &errandstore.JobSweepParams{})
	if err != nil {
		return fmt.Errorf("JobSweep: %w", err)
	}
	s.note("retried=%d dead=%d cancelled=%d", r.Retried, r.Dead, r.Cancelled)
	if r != s.m.lastSweep {
		return fmt.Errorf("sweep: counted %+v, the model %+v", r, s.m.lastSweep)
	}
	return nil
}

// expectSweep applies to the model the sweep that a store does at now
// (in a claim or a JobSweep), when it does one, after checking that
// errandtype.NextOf foretells what the sweep does to each running job.
func (s *sim) expectSweep(now time.Time, sweeps bool) error {
	if !sweeps {
		return nil
	}
	s.m.lastSweepAt, s.m.lastSweep = now, errandstore.SweepResult{}
	for _, mj := range s.m.jobs {
		if mj.state != errandtype.StateRunning {
			continue
		}
		prior := mj.state
		seen := s.seen[mj.id]
		if seen == nil {
			return fmt.Errorf("sweep: running job %s was never read", mj.id)
		}
		next := errandtype.NextOf(seen, now).Step
		want := map[errandtype.NextStep]errandtype.JobState{
			errandtype.NextRunning: errandtype.StateRunning, errandtype.NextCancelling: errandtype.StateRunning,
			errandtype.NextSweepRetry: errandtype.StateRetrying, errandtype.NextSweepDead: errandtype.StateDead,
			errandtype.NextSweepCancel: errandtype.StateCancelled,
		}[next]
		mj.sweepLease(now, &s.m.lastSweep)
		if mj.state != want {
			return fmt.Errorf("sweep: NextOf says %s for job %s, the model sweeps it to %s", next, mj.id, mj.state)
		}
		if mj.state != prior {
			s.events["sweep running to "+string(mj.state)]++
		}
	}
	for _, mj := range s.m.jobs {
		prior := mj.state
		mj.sweepDeadline(now, &s.m.lastSweep)
		if mj.state != prior {
			s.events["sweep "+string(prior)+" past its deadline to "+string(mj.state)]++
		}
	}
	return nil
}

// pick returns a random job, more often one in a state of prefer.
func (s *sim) pick(prefer []errandtype.JobState) *mjob {
	if len(s.m.jobs) == 0 {
		return nil
	}
	var ps []*mjob
	for _, mj := range s.m.jobs {
		if slices.Contains(prefer, mj.state) {
			ps = append(ps, mj)
		}
	}
	if len(ps) > 0 && s.rng.IntN(4) > 0 {
		return ps[s.rng.IntN(len(ps))]
	}
	return s.m.jobs[s.rng.IntN(len(s.m.jobs))]
}

func (s *sim) replay() error {
	mj := s.pick(errandstore.ReplayableStates)
	if mj == nil {
		s.note("no jobs")
		return nil
	}
	now := s.now()
	wantErr := s.m.replayRefusal(mj)
	j, err := s.st.JobReplay(s.ctx, &errandstore.JobReplayParams{ID: mj.id, Operator: "sim", Reason: "step"})
	s.note("%s (%s) -> %v", mj.id, mj.state, errText(err))
	var se *errandtype.StateError
	var ue *errandtype.UniqueConflictError
	switch {
	case wantErr == nil && err != nil:
		return fmt.Errorf("replay of %s (%s): %w", mj.id, mj.state, err)
	case wantErr == errState && !errors.As(err, &se):
		return fmt.Errorf("replay of %s (%s): got %v, want a *StateError", mj.id, mj.state, err)
	case wantErr == errUnique && !errors.As(err, &ue):
		return fmt.Errorf("replay of %s (%s) whose key %s another job holds: got %v, want a *UniqueConflictError", mj.id, mj.state, mj.uniqueKey, err)
	case wantErr == errUnique:
		s.events[EventReplayKeyHeld]++
		return nil
	case wantErr != nil:
		return nil
	}
	s.events["replay "+string(mj.state)]++
	mj.replay(now)
	if j.State != errandtype.StateQueued || j.Replays != mj.replays {
		return fmt.Errorf("replay of %s: returned state %s, replays %d", mj.id, j.State, j.Replays)
	}
	audit, err := s.st.JobReplayAudit(s.ctx, &errandstore.JobReplayAuditParams{JobID: mj.id})
	if err != nil {
		return fmt.Errorf("JobReplayAudit: %w", err)
	}
	if len(audit) != mj.replays || audit[len(audit)-1].Replay != mj.replays || !audit[len(audit)-1].At.Equal(now) {
		return fmt.Errorf("replay of %s: audit %+v, want %d records, the last of replay %d at %s", mj.id, audit, mj.replays, mj.replays, now)
	}
	return nil
}

// Events a run counts beside those named by the states they move between
// ("sweep running to dead", "outcome retry to cancelled", ...).
const (
	EventDuplicate       = "enqueue found its unique key held"
	EventHeartbeatFenced = "heartbeat with a stale token refused"
	EventOutcomeFenced   = "outcome with a stale token refused"
	EventReplayKeyHeld   = "replay refused: its unique key is held"
)

var (
	errState  = errors.New("state")
	errUnique = errors.New("unique")
)

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func (s *sim) cancel() error {
	mj := s.pick(errandstore.CancellableStates)
	if mj == nil {
		s.note("no jobs")
		return nil
	}
	now := s.now()
	prior := mj.state
	wrote, refused := mj.cancel(now)
	j, err := s.st.JobCancel(s.ctx, &errandstore.JobCancelParams{ID: mj.id, Operator: "sim", Reason: "step"})
	s.note("%s (%s) -> %v", mj.id, prior, errText(err))
	var se *errandtype.StateError
	switch {
	case refused && !errors.As(err, &se):
		return fmt.Errorf("cancel of %s (%s): got %v, want a *StateError", mj.id, prior, err)
	case refused:
		return nil
	case err != nil:
		return fmt.Errorf("cancel of %s (%s): %w", mj.id, prior, err)
	case j.State != mj.state:
		return fmt.Errorf("cancel of %s (%s): returned state %s, the model's %s", mj.id, prior, j.State, mj.state)
	}
	if wrote {
		mj.cancelAudits++
		s.events["cancel "+string(prior)+" to "+string(mj.state)]++
	}
	return s.checkCancelAudit(mj)
}

func (s *sim) checkCancelAudit(mj *mjob) error {
	as, err := s.st.AuditList(s.ctx, &errandstore.AuditListParams{JobID: mj.id, Action: errandtype.AuditCancel})
	if err != nil {
		return fmt.Errorf("AuditList: %w", err)
	}
	if len(as) != mj.cancelAudits {
		return fmt.Errorf("job %s: %d cancel audit records, want %d", mj.id, len(as), mj.cancelAudits)
	}
	return nil
}

// checkAudit checks, at the end of a run, that every job's replays and
// cancels are audited.
func (s *sim) checkAudit() error {
	for _, mj := range s.m.jobs {
		audit, err := s.st.JobReplayAudit(s.ctx, &errandstore.JobReplayAuditParams{JobID: mj.id})
		if err != nil {
			return fmt.Errorf("JobReplayAudit: %w", err)
		}
		if len(audit) != mj.replays {
			return fmt.Errorf("job %s: %d replay audit records, want %d", mj.id, len(audit), mj.replays)
		}
		if err := s.checkCancelAudit(mj); err != nil {
			return err
		}
	}
	return nil
}
