package errand

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// UniqueOpts makes a job unique by key: while a job of the key is in one of
// the states of Scope (and, with a Window, was enqueued in the same window),
// enqueueing another job with the key inserts nothing and returns the job
// that holds it, with [EnqueueResult.Duplicate] set.
//
// The database enforces it: a unique index covers exactly the rows that
// hold their key, so two concurrent enqueues cannot both insert, and a job
// frees its key the moment it leaves its scope, whatever moves it there (an
// outcome, a sweep, a cancel, a retention prune).
type UniqueOpts struct {
	// Key is the unique key, shown to operators as the job's unique_key.
	Key string
	// Scope is the set of states in which the job holds Key. The zero value
	// is [UniqueAlways]: the job holds its key in every state, for as long
	// as it exists.
	Scope UniqueScope
	// Window, when non-zero, limits the key to one job per window: the
	// store's clock at enqueue, truncated to a multiple of Window since the
	// Unix epoch, becomes part of the key. Window: time.Hour enqueues at
	// most one job of the key per clock hour (within Scope); a job of the
	// previous hour no longer counts. A millisecond to ten years
	// ([MinUniqueWindow], [MaxUniqueWindow]).
	Window time.Duration
}

// UniqueScope is a set of job states: those in which a unique job holds its
// key. Its value is stored with the job; bit i stands for the i-th state of
// [uniqueStateBits], an order fixed for good.
//
// A scope always holds the unfinished states (queued, running, retrying),
// since a job moves among them without anyone asking and a key that a job
// took back on its own would have to be refused to the store's own
// bookkeeping. It adds any of the finished states; one that holds
// cancelled jobs holds dead ones too, because a dead job that holds its
// ordering key may be cancelled. Only an operator's replay brings a job back
// into its scope, and a replay that would take a key another job holds is
// refused ([UniqueConflictError]).
type UniqueScope uint8

// Named scopes.
const (
	// UniqueAlways holds the key in every state, for as long as the job
	// exists (until retention prunes it): once a key was used it never
	// enqueues again. The default, and the scope of recurring ticks.
	UniqueAlways = UniqueScope(1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5)
	// UniqueUntilFinished holds the key while the job is queued, scheduled,
	// running or waiting out a retry: at most one pending job per key, and
	// the key is free again once the job succeeded, died or was cancelled.
	UniqueUntilFinished = UniqueScope(1<<0 | 1<<1 | 1<<2)
	// UniqueUntilSucceeded is UniqueUntilFinished that also holds the key
	// while the job is dead, so that a dead letter is replayed rather than
	// silently enqueued anew. A success or a cancel frees the key.
	UniqueUntilSucceeded = UniqueUntilFinished | 1<<4
)

// uniqueInvalid marks a scope built from a name that is no state.
const uniqueInvalid UniqueScope = 1 << 7

// uniqueStateBits gives each state its bit of a UniqueScope. The bits are
// stored with every unique job and named in the unique index: never
// reorder them, only add.
var uniqueStateBits = []JobState{StateQueued, StateRunning, StateRetrying, StateSucceeded, StateDead, StateCancelled}

func uniqueBit(s JobState) UniqueScope {
	for i, st := range uniqueStateBits {
		if st == s {
			return 1 << i
		}
	}
	return uniqueInvalid
}

// UniqueScopeOf returns the scope holding exactly states. Validate reports
// an unknown state or a scope that lacks the unfinished states.
func UniqueScopeOf(states ...JobState) UniqueScope {
	var s UniqueScope
	for _, st := range states {
		s |= uniqueBit(st)
	}
	return s
}

// Holds reports whether a job in state st holds a key of scope s. The zero
// scope is UniqueAlways.
func (s UniqueScope) Holds(st JobState) bool { return s.orDefault()&uniqueBit(st)&^uniqueInvalid != 0 }

// States lists the states of s in the order of [JobStates].
func (s UniqueScope) States() []JobState { return statesWhere(s.Holds) }

func (s UniqueScope) orDefault() UniqueScope {
	if s == 0 {
		return UniqueAlways
	}
	return s
}

var uniqueScopeNames = map[UniqueScope]string{
	UniqueAlways:         "always",
	UniqueUntilFinished:  "until_finished",
	UniqueUntilSucceeded: "until_succeeded",
}

// String returns the scope's name (always, until_finished,
// until_succeeded) or else its states, comma-separated.
func (s UniqueScope) String() string {
	if name, ok := uniqueScopeNames[s.orDefault()]; ok {
		return name
	}
	if s&uniqueInvalid != 0 {
		return fmt.Sprintf("UniqueScope(%d)", uint8(s))
	}
	names := make([]string, 0, len(JobStates))
	for _, st := range s.States() {
		names = append(names, string(st))
	}
	return strings.Join(names, ",")
}

// ParseUniqueScope reads a scope's name (always, until_finished,
// until_succeeded; a dash may stand for the underscore) or a
// comma-separated list of states, and checks it as Validate does. An
// empty text is the zero scope, UniqueAlways.
func ParseUniqueScope(text string) (UniqueScope, error) {
	t := strings.ReplaceAll(strings.TrimSpace(text), "-", "_")
	if t == "" {
		return 0, nil
	}
	for s, name := range uniqueScopeNames {
		if t == name {
			return s, nil
		}
	}
	var s UniqueScope
	for _, part := range strings.Split(t, ",") {
		st, err := ParseJobState(strings.TrimSpace(part))
		if err != nil {
			return 0, &InputError{Field: "unique_scope", Message: fmt.Sprintf("%q is neither always, until_finished, until_succeeded nor a list of states: %v", text, err)}
		}
		s |= uniqueBit(st)
	}
	return s, s.Validate()
}

// Validate reports a scope that lacks an unfinished state, holds cancelled
// jobs but not dead ones, or names no state, with what to change. The zero
// scope is valid (UniqueAlways).
func (s UniqueScope) Validate() error {
	s = s.orDefault()
	if s&uniqueInvalid != 0 || s&^UniqueAlways != 0 {
		return &InputError{Field: "unique_scope", Message: "names a state that does not exist; build it from job states or use a named scope"}
	}
	if s&UniqueUntilFinished != UniqueUntilFinished {
		return &InputError{Field: "unique_scope", Message: fmt.Sprintf("%s leaves out an unfinished state; a scope holds queued, running and retrying jobs, plus any of succeeded, dead and cancelled", s)}
	}
	if s.Holds(StateCancelled) && !s.Holds(StateDead) {
		return &InputError{Field: "unique_scope", Message: fmt.Sprintf("%s holds cancelled jobs but not dead ones; add dead (a dead job can be cancelled, which must not take a key)", s)}
	}
	return nil
}

// MarshalText implements encoding.TextMarshaler: the scope's String.
func (s UniqueScope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseUniqueScope.
func (s *UniqueScope) UnmarshalText(b []byte) error {
	v, err := ParseUniqueScope(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MinUniqueWindow and MaxUniqueWindow bound a unique window. A window
// longer than the time since the Unix epoch would start at the epoch,
// which the stores keep as no window; a key meant to be held for good
// needs no window.
const (
	MinUniqueWindow = time.Millisecond
	MaxUniqueWindow = 10 * 365 * 24 * time.Hour
)

// UniqueWindowStart is the start, in Unix microseconds, of the window of
// length window that holds now: now truncated to a multiple of window
// since the Unix epoch, or 0 when window is 0 (no window). Every store
// computes a unique job's window this way, from its clock at enqueue.
func UniqueWindowStart(now time.Time, window time.Duration) int64 {
	w := window.Microseconds()
	if w <= 0 {
		return 0
	}
	us := now.UnixMicro()
	return us - us%w
}

// UniqueHeldSQL is the condition under which a row of the jobs table holds
// its unique key: it has one and its state is in its scope
// (unique_states, the job's UniqueScope). It is the predicate of the unique
// index errand_jobs_unique on (unique_key, unique_window_us), which every
// SQL store's migration spells out word for word and every query that
// looks for a key's holder repeats, so that SQLite uses that index. The
// CASE maps each state to its bit of [uniqueStateBits].
func UniqueHeldSQL() string {
	var b strings.Builder
	b.WriteString("unique_key IS NOT NULL AND (unique_states & CASE state")
	for i, st := range uniqueStateBits {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", st, 1<<i)
	}
	b.WriteString(" ELSE 0 END) <> 0")
	return b.String()
}

// UniqueScopeColumn is the value of a job's unique_states column: its scope
// with the default made explicit, as the column's default is too (a job
// with no unique key holds nothing whatever its scope).
func (p *JobInsertParams) UniqueScopeColumn() int { return int(p.UniqueScope.orDefault()) }

// UniqueWindowColumn is the value of a job's unique_window_us column when
// it is inserted at now: see [UniqueWindowStart].
func (p *JobInsertParams) UniqueWindowColumn(now time.Time) int64 {
	if p.UniqueKey == "" {
		return 0
	}
	return UniqueWindowStart(now, p.UniqueWindow)
}

// SetUniqueColumns fills a job's unique scope and window from its stored
// columns: unique_states and unique_window_us (Unix microseconds, 0 for
// none).
func (j *Job) SetUniqueColumns(states int64, windowUS int64) {
	if j.UniqueKey == nil {
		return
	}
	scope := UniqueScope(states)
	j.UniqueScope = &scope
	if windowUS != 0 {
		t := time.UnixMicro(windowUS).UTC()
		j.UniqueWindowStart = &t
	}
}

// UniqueConflictError reports a replay refused because the job would take
// back a unique key that another job now holds. Nothing was written.
// errors.Is(err, ErrUniqueConflict) is true.
type UniqueConflictError struct {
	// ID is the job that was to be replayed.
	ID string
	// Key is its unique key.
	Key string
	// HeldBy is the job holding the key, when known.
	HeldBy string
}

// ErrUniqueConflict reports that a unique key is held by another job. The
// concrete error is a *UniqueConflictError.
var ErrUniqueConflict = errors.New("unique key held by another job")

func (e *UniqueConflictError) Error() string {
	by := "another job"
	if e.HeldBy != "" {
		by = "job " + e.HeldBy
	}
	return fmt.Sprintf("unique key %q is held by %s; cancel or finish that job first, or leave this one as it is", e.Key, by)
}

// Is makes errors.Is(err, ErrUniqueConflict) true.
func (e *UniqueConflictError) Is(target error) bool { return target == ErrUniqueConflict }

// UniqueReplayHolderSQL is the query a SQL store runs before a replay of a
// job with a unique key that its current state does not hold: the id of
// another job holding the key in the job's window. Its parameters are the
// key, the window and the replayed job's id, in that order as ?1, ?2, ?3;
// jobs is the jobs table's name. It repeats UniqueHeldSQL so that SQLite
// reads the unique index.
func UniqueReplayHolderSQL(jobs string, param func(n int) string) string {
	return `SELECT id FROM ` + jobs + ` WHERE unique_key = ` + param(1) + ` AND unique_window_us = ` + param(2) +
		` AND ` + UniqueHeldSQL() + ` AND id <> ` + param(3) + ` LIMIT 1`
}

// ReplayTakesKey reports whether replaying a job in state st with unique
// scope scope takes its unique key back: a replay makes it queued, which
// every scope holds, so it does when st is outside the scope.
func ReplayTakesKey(scope UniqueScope, st JobState) bool {
	return !scope.Holds(st)
}
