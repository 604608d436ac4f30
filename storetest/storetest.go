// Package storetest is the conformance suite for [errandstore.TxStore]. Every
// store runs it unchanged: errand's own (errand/sqlite, errand/postgres) and
// any third party's. A behaviour difference between stores is a bug in one
// of them, so the suite pins exact values and compares whole job records.
//
// A store's test supplies a [Harness] and calls [Exercise]:
//
//	func TestStore(t *testing.T) {
//		storetest.Exercise(t, storetest.Harness[*sql.Tx]{
//			Open: func(t *testing.T, clock errandstore.Clock) errandstore.TxStore[*sql.Tx] {
//				s, err := mystore.Open(t.Context(), filepath.Join(t.TempDir(), "db"), &mystore.Options{Clock: clock})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//		})
//	}
//
// The transaction cases run in the store's own transactions
// ([errandstore.TxStore.InTx]). Time is the injected [Clock]: no case sleeps to
// let time pass. The concurrency cases run real goroutines against two
// stores on one database and need [Harness.OpenSecond].
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Harness opens stores for the suite. TTx is the stores' transaction type.
type Harness[TTx any] struct {
	// Open returns a new store on a fresh, empty database whose clock is
	// clock. Every case opens its own. The suite closes the store when the
	// test ends; Open registers with t.Cleanup whatever else must go (the
	// database itself, say).
	Open func(t *testing.T, clock errandstore.Clock) errandstore.TxStore[TTx]

	// OpenSecond returns another store on the same database as first, with
	// connections of its own, as a second worker process would have. The
	// concurrency cases use it; when it is nil they are skipped.
	OpenSecond func(t *testing.T, first errandstore.TxStore[TTx], clock errandstore.Clock) errandstore.TxStore[TTx]

	// RefuseJob makes the database of s refuse, from then on, to insert
	// a job with the id id (a trigger that raises an error, say), as a
	// store refuses a job it cannot keep. The cases that check that one
	// failing write does not hold up the others use it; when it is nil
	// they are skipped.
	RefuseJob func(t *testing.T, s errandstore.TxStore[TTx], id string)

	// RawJob returns the row of job id in the database of s, read with
	// SQL of the test's own, every column as text: what is at rest. The
	// cases that check what a store keeps of sealed values read it; when
	// it is nil they are skipped.
	RawJob func(t *testing.T, s errandstore.TxStore[TTx], id string) string

	// AddSignals writes n signals named name, sent at at, to job id in
	// the database of s, with SQL of the test's own: the case of the
	// bound on a job's signals fills the job to just under it. When it is
	// nil that case sends them one at a time, which takes minutes.
	AddSignals func(t *testing.T, s errandstore.TxStore[TTx], id, name string, n int, at time.Time)

	// SpoilJob makes the row of job id in the database of s one errand
	// cannot read, with SQL of the test's own: its history (errors) a JSON
	// object where errand keeps a list. The case of a claimed row that
	// does not decode uses it; when it is nil that case is skipped.
	SpoilJob func(t *testing.T, s errandstore.TxStore[TTx], id string)

	// Parallel runs each group's cases side by side (t.Parallel), as many
	// at once as go test's -parallel flag allows. Set it when the
	// databases Open returns share nothing and Open and the other funcs
	// may be called from several tests at once. The cases wait mostly on
	// their databases' commits, so a suite on a server runs in a fraction
	// of the time.
	Parallel bool
}

// Exercise runs the conformance suite against the stores h opens.
func Exercise[TTx any](t *testing.T, h Harness[TTx]) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is required")
	}
	exercise(t, erase(h), h.Parallel)
}

// harness is a Harness with its transaction type erased, so that the cases
// need not be generic: inTx runs fn in a transaction of s, which the
// harness opened, with what the cases do inside one.
type harness struct {
	open       func(t *testing.T, clock errandstore.Clock) errandstore.Store
	openSecond func(t *testing.T, first errandstore.Store, clock errandstore.Clock) errandstore.Store
	refuseJob  func(t *testing.T, s errandstore.Store, id string)
	inTx       func(ctx context.Context, s errandstore.Store, fn func(ctx context.Context, tx txOps) error) error
	client     func(s errandstore.Store, cfg *errand.Config) (jobClient, error)
	rawJob     func(t *testing.T, s errandstore.Store, id string) string
	addSignals func(t *testing.T, s errandstore.Store, id, name string, n int, at time.Time)
	spoilJob   func(t *testing.T, s errandstore.Store, id string)
}

// jobClient is what the cases use of an errand.Client over a store.
type jobClient interface {
	Enqueue(ctx context.Context, args errand.JobArgs, opts *errand.EnqueueOpts) (*errand.EnqueueResult, error)
	WorkOne(ctx context.Context, o *errand.WorkOneOpts) (*errand.WorkResult, error)
	Get(ctx context.Context, id string) (*errandtype.Job, error)
	Claim(ctx context.Context, opts *errand.ClaimOpts) ([]*errandtype.Job, error)
	Replay(ctx context.Context, id string, opts *errand.ReplayOpts) (*errandtype.Job, error)
	Cancel(ctx context.Context, id string, opts *errand.CancelOpts) (*errandtype.Job, error)
	EnqueueBatch(ctx context.Context, params []errand.EnqueueParams, opts *errand.BatchOpts) (*errandstore.BatchInsertResult, error)
	EnqueueWorkflow(ctx context.Context, steps []errand.WorkflowStep, opts *errand.WorkflowOpts) (*errandstore.WorkflowInsertResult, error)
	Workflow(ctx context.Context, id string) (*errandtype.Workflow, error)
	Audit(ctx context.Context, opts *errand.AuditOpts) ([]errandtype.AuditRecord, error)
	Steps(ctx context.Context, id string) ([]errandtype.Step, error)
	Close() error
}

// txOps are a store's writes inside one of its transactions.
type txOps interface {
	JobInsertMany(ctx context.Context, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error)
	EffectRecord(ctx context.Context, p *errandstore.EffectRecordParams) (bool, error)
}

type boundTx[TTx any] struct {
	s  errandstore.TxStore[TTx]
	tx TTx
}

func (b boundTx[TTx]) JobInsertMany(ctx context.Context, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error) {
	return b.s.JobInsertManyTx(ctx, b.tx, p)
}

func (b boundTx[TTx]) EffectRecord(ctx context.Context, p *errandstore.EffectRecordParams) (bool, error) {
	return b.s.EffectRecordTx(ctx, b.tx, p)
}

// batchTxOps are the batch writes inside one of a store's transactions;
// BatchInsert returns errNoBatchTx for a store that is not an
// [errandstore.BatchTxStore] of its transaction type.
type batchTxOps interface {
	BatchInsert(ctx context.Context, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error)
}

var errNoBatchTx = errors.New("storetest: not a BatchTxStore")

func (b boundTx[TTx]) BatchInsert(ctx context.Context, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	bs, ok := any(b.s).(errandstore.BatchTxStore[TTx])
	if !ok {
		return nil, errNoBatchTx
	}
	return bs.BatchInsertTx(ctx, b.tx, p)
}

func erase[TTx any](h Harness[TTx]) harness {
	e := harness{
		open: func(t *testing.T, clock errandstore.Clock) errandstore.Store { return h.Open(t, clock) },
		inTx: func(ctx context.Context, s errandstore.Store, fn func(ctx context.Context, tx txOps) error) error {
			ts := s.(errandstore.TxStore[TTx])
			return ts.InTx(ctx, func(ctx context.Context, tx TTx) error { return fn(ctx, boundTx[TTx]{ts, tx}) })
		},
		client: func(s errandstore.Store, cfg *errand.Config) (jobClient, error) {
			return errand.NewClient(s.(errandstore.TxStore[TTx]), cfg)
		},
	}
	if h.RefuseJob != nil {
		e.refuseJob = func(t *testing.T, s errandstore.Store, id string) { h.RefuseJob(t, s.(errandstore.TxStore[TTx]), id) }
	}
	if h.RawJob != nil {
		e.rawJob = func(t *testing.T, s errandstore.Store, id string) string {
			return h.RawJob(t, s.(errandstore.TxStore[TTx]), id)
		}
	}
	if h.AddSignals != nil {
		e.addSignals = func(t *testing.T, s errandstore.Store, id, name string, n int, at time.Time) {
			h.AddSignals(t, s.(errandstore.TxStore[TTx]), id, name, n, at)
		}
	}
	if h.SpoilJob != nil {
		e.spoilJob = func(t *testing.T, s errandstore.Store, id string) { h.SpoilJob(t, s.(errandstore.TxStore[TTx]), id) }
	}
	if h.OpenSecond != nil {
		e.openSecond = func(t *testing.T, first errandstore.Store, clock errandstore.Clock) errandstore.Store {
			return h.OpenSecond(t, first.(errandstore.TxStore[TTx]), clock)
		}
	}
	return e
}

// errRollback makes a case's transaction roll back.
var errRollback = errors.New("storetest: roll back")

func exercise(t *testing.T, h harness, parallel bool) {
	t.Helper()
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Insert", insertCases},
		{"Claim", claimCases},
		{"InsertClaim", insertClaimCases},
		{"Metadata", metadataCases},
		{"Pause", pauseCases},
		{"NextDue", nextDueCases},
		{"Fencing", fencingCases},
		{"Outcome", outcomeCases},
		{"Sweep", sweepCases},
		{"StartBy", startByCases},
		{"Aging", agingCases},
		{"Replay", replayCases},
		{"Cancel", cancelCases},
		{"CancelRunning", cancelRunningCases},
		{"Checkpoint", checkpointCases},
		{"Steps", stepCases},
		{"Signals", signalCases},
		{"Events", eventCases},
		{"Streams", streamCases},
		{"Audit", auditCases},
		{"BulkReplay", bulkReplayCases},
		{"Prune", pruneCases},
		{"Insights", insightsCases},
		{"List", listCases},
		{"Stats", statsCases},
		{"Effect", effectCases},
		{"Workers", workerCases},
		{"Leader", leaderCases},
		{"Schedule", scheduleCases},
		{"Limiter", limiterCases},
		{"Concurrency", concurrencyCases},
		{"Breaker", breakerCases},
		{"Batch", batchCases},
		{"Workflow", workflowCases},
		{"WorkflowReplay", workflowReplayCases},
		{"Ordering", orderingCases},
		{"OrderingHold", orderingHoldCases},
		{"Unique", uniqueCases},
		{"Debounce", debounceCases},
		{"Search", searchCases},
		{"Codec", codecCases},
		{"Fairness", fairnessCases},
		{"Limits", limitCases},
		{"Concurrent", concurrentCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					if parallel {
						t.Parallel()
					}
					c.run(t, h)
				})
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h harness)
}

// T0 is where every case's clock starts. It is a whole microsecond, the
// precision stores keep.
var T0 = time.Date(2026, 11, 29, 9, 30, 0, 123456000, time.UTC)

const (
	lease = 30 * time.Second
	owner = "worker-1"
)

// env is one case's store and clock.
type env struct {
	t     *testing.T
	h     harness
	ctx   context.Context
	clock *Clock
	s     errandstore.Store
}

func open(t *testing.T, h harness) *env {
	t.Helper()
	clock := NewClock(T0)
	s := h.open(t, clock)
	if s == nil {
		t.Fatal("Harness.Open returned nil")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return &env{t: t, h: h, ctx: t.Context(), clock: clock, s: s}
}

// refuseJob makes e's database refuse to insert a job with id id,
// skipping the test when the harness cannot.
func (e *env) refuseJob(id string) {
	e.t.Helper()
	if e.h.refuseJob == nil {
		e.t.Skip("Harness.RefuseJob is nil")
	}
	e.h.refuseJob(e.t, e.s, id)
}

// second opens another store on e's database, skipping the test when the
// harness cannot.
func (e *env) second() errandstore.Store {
	e.t.Helper()
	if e.h.openSecond == nil {
		e.t.Skip("Harness.OpenSecond is nil")
	}
	s := e.h.openSecond(e.t, e.s, e.clock)
	if s == nil {
		e.t.Fatal("Harness.OpenSecond returned nil")
	}
	e.t.Cleanup(func() {
		if err := s.Close(); err != nil {
			e.t.Errorf("close second store: %v", err)
		}
	})
	return s
}

func (e *env) now() time.Time { return e.clock.Now() }

// newJob returns insert parameters for a plain job in the default queue.
func newJob(id string) *errandstore.JobInsertParams {
	return &errandstore.JobInsertParams{
		ID:          id,
		Queue:       errand.DefaultQueue,
		Kind:        "email",
		Args:        json.RawMessage(`{"n":1}`),
		ArgsVersion: 1,
		MaxAttempts: 3,
	}
}

func (e *env) insertResults(ps ...*errandstore.JobInsertParams) []errandstore.JobInsertResult {
	e.t.Helper()
	rs, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: ps})
	if err != nil {
		e.t.Fatalf("JobInsertMany: %v", err)
	}
	if len(rs) != len(ps) {
		e.t.Fatalf("JobInsertMany returned %d results for %d jobs", len(rs), len(ps))
	}
	return rs
}

// insert inserts new jobs and returns them.
func (e *env) insert(ps ...*errandstore.JobInsertParams) []*errandtype.Job {
	e.t.Helper()
	rs := e.insertResults(ps...)
	js := make([]*errandtype.Job, len(rs))
	for i, r := range rs {
		if r.Duplicate {
			e.t.Fatalf("JobInsertMany: job %s reported as a duplicate", ps[i].ID)
		}
		js[i] = r.Job
	}
	return js
}

// insertIDs inserts one plain job per id.
func (e *env) insertIDs(ids ...string) []*errandtype.Job {
	e.t.Helper()
	ps := make([]*errandstore.JobInsertParams, len(ids))
	for i, id := range ids {
		ps[i] = newJob(id)
	}
	return e.insert(ps...)
}

func (e *env) get(id string) *errandtype.Job {
	e.t.Helper()
	j, err := e.s.JobGet(e.ctx, &errandstore.JobGetParams{ID: id})
	if err != nil {
		e.t.Fatalf("JobGet(%s): %v", id, err)
	}
	return j
}

func (e *env) notFound(id string) {
	e.t.Helper()
	j, err := e.s.JobGet(e.ctx, &errandstore.JobGetParams{ID: id})
	if !errors.Is(err, errandtype.ErrNotFound) {
		e.t.Fatalf("JobGet(%s) = %v, %v; want ErrNotFound", id, j, err)
	}
}

func claimParams(limit int) *errandstore.JobClaimParams {
	return &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: limit, Lease: lease, Owner: owner}
}

func (e *env) claimWith(p *errandstore.JobClaimParams) []*errandtype.Job {
	e.t.Helper()
	js, err := e.s.JobClaimMany(e.ctx, p)
	if err != nil {
		e.t.Fatalf("JobClaimMany: %v", err)
	}
	return js
}

func (e *env) claim(limit int) []*errandtype.Job {
	e.t.Helper()
	return e.claimWith(claimParams(limit))
}

// claimOne claims from the default queue and requires exactly job id.
func (e *env) claimOne(id string) *errandtype.Job {
	e.t.Helper()
	js := e.claim(1)
	if len(js) != 1 || js[0].ID != id {
		e.t.Fatalf("claim: got %v, want job %s", ids(js), id)
	}
	return js[0]
}

func (e *env) claimNone() {
	e.t.Helper()
	if js := e.claim(10); len(js) != 0 {
		e.t.Fatalf("claim: got %v, want nothing claimable", ids(js))
	}
}

func (e *env) record(os ...*errandstore.JobOutcome) []errandstore.OutcomeResult {
	e.t.Helper()
	rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: os})
	if err != nil {
		e.t.Fatalf("JobRecordOutcomes: %v", err)
	}
	if len(rs) != len(os) {
		e.t.Fatalf("JobRecordOutcomes returned %d results for %d outcomes", len(rs), len(os))
	}
	return rs
}

// recordOK records one outcome and requires it to apply.
func (e *env) recordOK(o *errandstore.JobOutcome) errandstore.OutcomeResult {
	e.t.Helper()
	r := e.record(o)[0]
	if r.Err != nil {
		e.t.Fatalf("record %s outcome of job %s: %v", o.Kind, o.ID, r.Err)
	}
	return r
}

func leaseOf(j *errandtype.Job) errandstore.JobLease {
	if j.LeaseToken == nil {
		return errandstore.JobLease{ID: j.ID}
	}
	return errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}
}

func token(j *errandtype.Job) string {
	if j.LeaseToken == nil {
		return ""
	}
	return *j.LeaseToken
}

func succeeded(j *errandtype.Job) *errandstore.JobOutcome {
	return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeSucceeded}
}

func retry(j *errandtype.Job, delay time.Duration) *errandstore.JobOutcome {
	return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeRetry, Delay: delay,
		Error: &errandtype.AttemptError{Attempt: j.Attempt, Class: errand.ClassError, Message: fmt.Sprintf("attempt %d failed", j.Attempt)}}
}

func dead(j *errandtype.Job) *errandstore.JobOutcome {
	return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeDead,
		Error: &errandtype.AttemptError{Attempt: j.Attempt, Class: errand.ClassPermanent, Message: "card declined"}}
}

// entry is the history entry the store should append for o at now.
func entry(o *errandstore.JobOutcome, replay int, at time.Time) errandtype.AttemptError {
	a := *o.Error
	a.Replay = replay
	a.At = at
	return a
}

func lastErr(a errandtype.AttemptError) *errandtype.LastError {
	return &errandtype.LastError{Class: a.Class, Message: a.Message, At: a.At}
}

func ids(js []*errandtype.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// same fails the test when got differs from want in any field, listing the
// fields. Times compare as instants and JSON documents by value.
func same(t *testing.T, what string, want, got *errandtype.Job) {
	t.Helper()
	if d := jobDiff(want, got); len(d) > 0 {
		t.Errorf("%s: job record differs:\n\t%s", what, joinLines(d))
	}
}

// unchanged fails the test when job id's record differs from before.
func (e *env) unchanged(what string, before *errandtype.Job) {
	e.t.Helper()
	same(e.t, what+": the record must not change", before, e.get(before.ID))
}

func joinLines(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += "\n\t"
		}
		out += s
	}
	return out
}

func jobDiff(want, got *errandtype.Job) []string {
	if want == nil || got == nil {
		if want == got {
			return nil
		}
		return []string{fmt.Sprintf("want %v, got %v", want, got)}
	}
	w, g := jobFields(want), jobFields(got)
	return fieldDiff(w, g)
}

// fieldDiff lists, in name order, the fields whose values differ between
// two records flattened to maps.
func fieldDiff(w, g map[string]any) []string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var diffs []string
	for _, k := range keys {
		if !reflect.DeepEqual(w[k], g[k]) {
			wb, _ := json.Marshal(w[k])
			gb, _ := json.Marshal(g[k])
			diffs = append(diffs, fmt.Sprintf("%s: want %s, got %s", k, wb, gb))
		}
	}
	return diffs
}

// jobFields returns j as a map of its JSON fields, with every time in UTC
// so that equal instants compare equal.
func jobFields(j *errandtype.Job) map[string]any {
	c := *j
	c.AvailableAt = c.AvailableAt.UTC()
	c.CreatedAt = c.CreatedAt.UTC()
	c.Deadline = utc(c.Deadline)
	c.LeaseUntil = utc(c.LeaseUntil)
	c.AttemptedAt = utc(c.AttemptedAt)
	c.FinishedAt = utc(c.FinishedAt)
	c.CancelRequestedAt = utc(c.CancelRequestedAt)
	c.StartBy = utc(c.StartBy)
	if c.LastError != nil {
		le := *c.LastError
		le.At = le.At.UTC()
		c.LastError = &le
	}
	c.Errors = slices.Clone(c.Errors)
	for i := range c.Errors {
		c.Errors[i].At = c.Errors[i].At.UTC()
	}
	b, err := json.Marshal(c)
	if err != nil {
		return map[string]any{"marshal error": err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"unmarshal error": err.Error()}
	}
	return m
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// claimed is what a claim at now should make of before.
func claimed(before *errandtype.Job, tok string, now time.Time, l time.Duration, by string) *errandtype.Job {
	w := *before
	w.State = errandtype.StateRunning
	w.Attempt = before.Attempt + 1
	w.LeaseToken = ptr(tok)
	w.LeaseUntil = ptr(now.Add(l))
	w.LeaseOwner = ptr(by)
	w.AttemptedAt = ptr(now)
	return &w
}
