package errandstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

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
// CASE maps each state to its bit of [errandtype.UniqueStateBits].
func UniqueHeldSQL() string {
	var b strings.Builder
	b.WriteString("unique_key IS NOT NULL AND (unique_states & CASE state")
	for i, st := range errandtype.UniqueStateBits {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", st, 1<<i)
	}
	b.WriteString(" ELSE 0 END) <> 0")
	return b.String()
}

// UniqueScopeColumn is the value of a job's unique_states column: its scope
// with the default made explicit, as the column's default is too (a job
// with no unique key holds nothing whatever its scope).
func (p *JobInsertParams) UniqueScopeColumn() int { return int(p.UniqueScope.OrDefault()) }

// UniqueWindowColumn is the value of a job's unique_window_us column when
// it is inserted at now: see [UniqueWindowStart].
func (p *JobInsertParams) UniqueWindowColumn(now time.Time) int64 {
	if p.UniqueKey == "" {
		return 0
	}
	return UniqueWindowStart(now, p.UniqueWindow)
}

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
func ReplayTakesKey(scope errandtype.UniqueScope, st errandtype.JobState) bool {
	return !scope.Holds(st)
}
