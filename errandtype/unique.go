package errandtype

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// UniqueScope is a set of job states: those in which a unique job holds its
// key. Its value is stored with the job; bit i stands for the i-th state of
// [UniqueStateBits], an order fixed for good.
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
	UniqueAlways = UniqueScope(1<<len(uniqueBitOrder) - 1)
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

// UniqueStateBits gives each state its bit of a UniqueScope: bit i stands
// for the i-th state. The order is job.go's, beside JobStates, and fixed
// for good: the bits are stored with every unique job and named in the
// unique index.
var UniqueStateBits = uniqueBitOrder[:]

// UniqueBit returns the bit of state s in a UniqueScope.
func UniqueBit(s JobState) UniqueScope {
	for i, st := range UniqueStateBits {
		if st == s {
			return 1 << i
		}
	}
	return uniqueInvalid
}

// Holds reports whether a job in state st holds a key of scope s. The zero
// scope is UniqueAlways.
func (s UniqueScope) Holds(st JobState) bool { return s.OrDefault()&UniqueBit(st)&^uniqueInvalid != 0 }

// States lists the states of s in the order of [JobStates].
func (s UniqueScope) States() []JobState { return StatesWhere(s.Holds) }

func (s UniqueScope) OrDefault() UniqueScope {
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
	if name, ok := uniqueScopeNames[s.OrDefault()]; ok {
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
		s |= UniqueBit(st)
	}
	return s, s.Validate()
}

// Validate reports a scope that lacks an unfinished state, holds cancelled
// jobs but not dead ones, or names no state, with what to change. The zero
// scope is valid (UniqueAlways).
func (s UniqueScope) Validate() error {
	s = s.OrDefault()
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
