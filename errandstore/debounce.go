package errandstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// JobDebounce folds an enqueue into the pending job of its key and kind
// instead of inserting another: see [InsertKeyed].
type JobDebounce struct {
	Key  string
	Mode errandtype.DebounceMode
	// Window: last-wins, how long after the latest enqueue the job starts;
	// first-wins, how long after the key's last job was enqueued a new one
	// is absorbed by it.
	Window time.Duration
	// MaxWait (last-wins only) bounds how long after its first enqueue the
	// pending job may be pushed back; zero is DebounceMaxWaitFactor
	// windows.
	MaxWait time.Duration
}

// DebounceMaxWaitFactor is the default MaxWait in windows: a burst that
// never goes quiet still runs at least once every ten windows.
const DebounceMaxWaitFactor = 10

// MaxWaitOrDefault is d's MaxWait with the default applied.
func (d *JobDebounce) MaxWaitOrDefault() time.Duration {
	if d.MaxWait > 0 {
		return d.MaxWait
	}
	return min(DebounceMaxWaitFactor*d.Window, MaxUniqueWindow)
}

// DebounceStart is when a last-wins job first enqueued at created starts
// after an enqueue at now: a window from now, but no later than its
// MaxWait after created.
func (d *JobDebounce) DebounceStart(created, now time.Time) time.Time {
	start, latest := now.Add(d.Window), created.Add(d.MaxWaitOrDefault())
	if latest.Before(start) {
		return latest
	}
	return start
}

// checkDebounce checks the debounce key, its mode, window and max wait,
// and what a debounced job cannot also take.
func (p *JobInsertParams) checkDebounce() error {
	d := p.Debounce
	if d == nil {
		return nil
	}
	if d.Key == "" {
		return &errandtype.InputError{Field: "debounce_key", Message: "is empty, but a debounce is set; give the key"}
	}
	if err := CheckIdentifier("debounce_key", d.Key, MaxIDBytes); err != nil {
		return err
	}
	if d.Mode > errandtype.DebounceFirstWins {
		return &errandtype.InputError{Field: "debounce_mode", Message: fmt.Sprintf("%s is not a mode; use last_wins or first_wins", d.Mode)}
	}
	if err := checkDebounceSpan("debounce_window", d.Window, MinUniqueWindow); err != nil {
		return err
	}
	if d.MaxWait != 0 {
		if d.Mode != errandtype.DebounceLastWins {
			return &errandtype.InputError{Field: "debounce_max_wait", Message: "bounds a last_wins debounce; leave it out with first_wins"}
		}
		if err := checkDebounceSpan("debounce_max_wait", d.MaxWait, d.Window); err != nil {
			return err
		}
	}
	return p.checkDebounceWith()
}

// checkDebounceSpan checks a debounce duration against its floor and
// MaxUniqueWindow.
func checkDebounceSpan(field string, d, floor time.Duration) error {
	if d < floor {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is too short; give at least %s", d, floor)}
	}
	if d > MaxUniqueWindow {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is longer than %s (ten years); give a shorter one", d, MaxUniqueWindow)}
	}
	return nil
}

// checkDebounceWith refuses what a debounced job cannot also take: a
// caller's id or a unique key (each decides what a repeated enqueue
// returns) and, last-wins, a start of its own (the window sets it).
func (p *JobInsertParams) checkDebounceWith() error {
	if p.UniqueKey != "" {
		return &errandtype.InputError{Field: "debounce_key", Message: "a job takes a unique key or a debounce key, not both; keep one"}
	}
	if p.CallerID {
		return &errandtype.InputError{Field: "id", Message: "a debounced job may fold into another job, so it takes no id of yours; drop the id or the debounce key"}
	}
	if p.Debounce.Mode == errandtype.DebounceLastWins && (p.Delay != 0 || !p.RunAt.IsZero()) {
		return &errandtype.InputError{Field: "debounce_window", Message: "sets when a last_wins job starts; drop the delay or run-at time"}
	}
	return nil
}

// HasDebounce reports whether a job of params has a debounce key: then a
// store inserts params with InsertKeyed, in a transaction.
func HasDebounce(params []*JobInsertParams) bool {
	return slices.ContainsFunc(params, func(p *JobInsertParams) bool { return p.Debounce != nil })
}

// DebounceHolderSQL is the condition, on the jobs table, that a row is the
// job an enqueue with a debounce key folds into, given the kind as ?1 and
// the key as ?2 and, first-wins, the oldest created_at that counts as ?3.
// A store reads the newest such row. The index errand_jobs_debounce on
// (kind, debounce_key, created_at) holds only rows with a key.
func DebounceHolderSQL(mode errandtype.DebounceMode, param func(n int) string) string {
	where := `kind = ` + param(1) + ` AND debounce_key = ` + param(2) + ` AND ` + DebounceStateSQL(mode)
	if mode == errandtype.DebounceFirstWins {
		where += ` AND created_at > ` + param(3)
	}
	return where
}

// DebounceStateSQL is the condition on a row's state for it to absorb an
// enqueue: last-wins, queued (not yet started, so its args can still
// change); first-wins, neither dead nor cancelled (the new work would be
// lost). A store's Absorb repeats it, for a job that moved since it was
// found.
func DebounceStateSQL(mode errandtype.DebounceMode) string {
	if mode == errandtype.DebounceLastWins {
		return `state = '` + string(errandtype.StateQueued) + `'`
	}
	return `state NOT IN ('` + string(errandtype.StateDead) + `', '` + string(errandtype.StateCancelled) + `')`
}

// KeyedTx is what InsertKeyed needs of a store, inside the transaction
// that inserts the jobs.
type KeyedTx interface {
	// LockKeys holds each of keys (in that order) until the transaction
	// ends, so that enqueues of one key take turns. A store whose
	// transactions already take turns (one writer) does nothing.
	LockKeys(ctx context.Context, keys []string) error
	// Now is the store's clock.
	Now(ctx context.Context) (time.Time, error)
	// FindHolder returns the newest job that p folds into at now (see
	// DebounceHolderSQL), or nil.
	FindHolder(ctx context.Context, p *JobInsertParams, now time.Time) (*errandtype.Job, error)
	// Absorb adds one to the job's absorbed count and, with start set, gives
	// it p's args and args version and start as its available_at. It
	// returns the job, or nil when the job is no longer one p folds into
	// (claimed, or pruned, since FindHolder read it).
	Absorb(ctx context.Context, id string, p *JobInsertParams, start *time.Time) (*errandtype.Job, error)
	// Insert inserts params as JobInsertManyTx does.
	Insert(ctx context.Context, params []*JobInsertParams) ([]JobInsertResult, error)
}

// InsertKeyed inserts params, some with a debounce key, in tx: in order,
// each keyed job folds into the holder of its key if there is one (an
// earlier job of params too) or is inserted. Jobs without a key between
// them are inserted together. Every job is checked before any is written.
func InsertKeyed(ctx context.Context, tx KeyedTx, params []*JobInsertParams) ([]JobInsertResult, error) {
	for _, p := range params {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	if err := tx.LockKeys(ctx, debounceLocks(params)); err != nil {
		return nil, fmt.Errorf("insert jobs: lock debounce keys: %w", err)
	}
	out := make([]JobInsertResult, len(params))
	var run []int // jobs without a key, not yet inserted
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		sub := make([]*JobInsertParams, len(run))
		for k, i := range run {
			sub[k] = params[i]
		}
		rs, err := tx.Insert(ctx, sub)
		if err != nil {
			return err
		}
		for k, i := range run {
			out[i] = rs[k]
		}
		run = run[:0]
		return nil
	}
	for i, p := range params {
		if p.Debounce == nil {
			run = append(run, i)
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		r, err := insertKeyedOne(ctx, tx, p)
		if err != nil {
			return nil, fmt.Errorf("insert job %s: %w", p.ID, err)
		}
		out[i] = r
	}
	return out, flush()
}

// insertKeyedOne folds p into its key's holder, or inserts it.
func insertKeyedOne(ctx context.Context, tx KeyedTx, p *JobInsertParams) (JobInsertResult, error) {
	d := p.Debounce
	now, err := tx.Now(ctx)
	if err != nil {
		return JobInsertResult{}, fmt.Errorf("read the clock: %w", err)
	}
	holder, err := tx.FindHolder(ctx, p, now)
	if err != nil {
		return JobInsertResult{}, fmt.Errorf("find the debounce key's job: %w", err)
	}
	if holder != nil {
		var start *time.Time
		if d.Mode == errandtype.DebounceLastWins {
			t := d.DebounceStart(holder.CreatedAt, now)
			start = &t
		}
		j, err := tx.Absorb(ctx, holder.ID, p, start)
		if err != nil {
			return JobInsertResult{}, fmt.Errorf("fold into job %s: %w", holder.ID, err)
		}
		if j != nil {
			return JobInsertResult{Job: j, Duplicate: true, Absorbed: true}, nil
		}
	}
	q := *p
	if d.Mode == errandtype.DebounceLastWins {
		q.Delay = d.Window // it waits a window for the rest of its burst
		q.Checked = true   // p was, and checkDebounce refuses a delay of the caller's
	}
	rs, err := tx.Insert(ctx, []*JobInsertParams{&q})
	if err != nil {
		return JobInsertResult{}, err
	}
	if !rs[0].Duplicate {
		rs[0].Job.DebounceKey = &d.Key
	}
	return rs[0], nil
}

// debounceLocks are the kinds and keys of params' debounced jobs, each
// once, sorted: transactions that lock keys in one order cannot deadlock.
func debounceLocks(params []*JobInsertParams) []string {
	var keys []string
	for _, p := range params {
		if p.Debounce != nil {
			keys = append(keys, strconv.Itoa(len(p.Kind))+":"+p.Kind+":"+p.Debounce.Key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
