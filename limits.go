package errand

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/ids"
	"github.com/errandhq/errand/internal/plainjson"
)

// The limits below are one rule for every store. SQLite would store values
// that PostgreSQL refuses or alters (a NUL byte, invalid UTF-8, a number past
// 32 bits, a time past the year 9999), so the Client checks or cleans every
// value before any write, and the stores' Validate methods refuse what slips
// past, so no store ever holds what another could not.

// Limits on numbers. The stores keep them in 32-bit columns.
const (
	// MaxConcurrency bounds a worker queue's concurrency and a worker's
	// MaxWorkers: far past what one process runs at once, and well inside
	// what a claim may ask for and the worker's share of its slots hands
	// out one by one.
	MaxConcurrency = 1_000_000
)

// Limits on times and durations.
const (
	// MinLease is the shortest lease a worker may claim with. A claim,
	// a heartbeat and an outcome must each fit well inside a lease; below
	// a second a loaded machine or a busy database loses leases to
	// ordinary pauses, and every job dies of lease_expired.
	MinLease = time.Second
	// MaxLease is the longest lease a worker may claim with. The lease is
	// how long a crashed worker's job waits before another worker takes
	// it; a job that runs longer keeps a shorter lease and heartbeats.
	MaxLease = 24 * time.Hour
)

// Limits on free text: failure messages and stacks. Longer text is cut, with
// a note saying so: a history entry is for a person to read, and one huge
// message should not bloat every read of the job.
const (
	MaxStackBytes = 64 << 10
)

// ValidateName reports what a Client or Worker would refuse in s as the
// name of a queue, a kind or a dependency, for a program that checks a
// name it was given before it opens, and so perhaps creates, a database.
func ValidateName(s string) error { return errandstore.CheckName("name", s) }

// The shapes of the ids errand gives the jobs it enqueues itself. A job a
// caller enqueues under one of them would take the place of errand's own
// job: the batch's callback, the workflow's step or the on-dead job would
// find its id taken and never run. So a caller-given job id has none of
// these shapes, a step's name has no dot (so "W.step.NAME" splits one way
// only), and a batch id does not end in ".step" or ".undo" (so
// "BATCH.callback" is never a step's id).
//
//   - BATCH.callback: a batch's callback ([BatchCallbackJobID]);
//   - WORKFLOW.step.NAME and WORKFLOW.undo.NAME: a workflow's step and its
//     compensation ([WorkflowStepJobID], [WorkflowCompensationJobID]);
//   - JOB.dead.N: the on-dead job of a job that died ([DeadHookJobID]);
//   - JOB.child.NAME: a child job of a durable handler ([ChildJobID]).
func checkCallerJobID(field, id string) error {
	if len(id) > len(errandstore.BatchCallbackSuffix) && strings.HasSuffix(id, errandstore.BatchCallbackSuffix) {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q ends in %q, the shape of a batch's callback job id (BATCH.callback), which errand keeps for that job; choose another id", id, errandstore.BatchCallbackSuffix)}
	}
	dot := strings.LastIndexByte(id, '.')
	if dot < 0 || dot == len(id)-1 {
		return nil
	}
	head, tail := id[:dot], id[dot+1:]
	switch {
	case len(head) > len(".step") && (strings.HasSuffix(head, ".step") || strings.HasSuffix(head, ".undo")):
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q has the shape of a workflow job's id (WORKFLOW.step.NAME or WORKFLOW.undo.NAME), which errand keeps for those jobs; choose another id", id)}
	case len(head) > len(".dead") && strings.HasSuffix(head, ".dead") && isReplays(tail):
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q has the shape of an on-dead job's id (JOB.dead.N), which errand keeps for those jobs; choose another id", id)}
	case len(head) > len(childInfix) && strings.HasSuffix(head, childInfix):
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q has the shape of a child job's id (JOB.child.NAME), which errand keeps for those jobs; choose another id", id)}
	}
	return nil
}

// isReplays reports whether s is a replay count as DeadHookJobID writes
// it: a number of 32 bits in decimal, without leading zeros.
func isReplays(s string) bool {
	n, err := strconv.ParseInt(s, 10, 32)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
}

// plainJSON returns b with every number written as PostgreSQL's jsonb
// writes it: see [plainjson.Plain].
func plainJSON(b []byte) []byte { return plainjson.Plain(b) }

// PlainJSON returns b, JSON that every store can keep and at most max bytes
// written out (plainjson.Check's rules; max <= 0 means 1 MiB, the bound of args),
// with its numbers written as PostgreSQL's jsonb writes them: in full,
// without an exponent (1e2 as 100, 1.5E-3 as 0.0015), and zero without a
// sign. A Client writes args, progress and outputs in this form to either
// store, so that SQLite keeps the same text PostgreSQL does; a program
// that writes JSON to a store itself can do the same. Anything else is an
// *InputError.
func PlainJSON(b json.RawMessage, max int) (json.RawMessage, error) {
	if !json.Valid(b) {
		return nil, &errandtype.InputError{Field: "json", Message: "is not valid JSON"}
	}
	if max <= 0 {
		max = errandstore.MaxArgsBytes
	}
	return plainChecked("json", b, max)
}

// plainChecked checks b as plainjson.Check does and returns it in plain form
// (see plainJSON): one scan, and a copy only when a number changes.
func plainChecked(field string, b []byte, max int) ([]byte, error) {
	rewrite, err := plainjson.Check(field, b, max)
	if err != nil {
		return nil, err
	}
	if rewrite {
		b = plainJSON(b)
	}
	return b, nil
}

// checkLease validates a claim's lease.
func checkLease(field string, d time.Duration) error {
	if d < MinLease {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is too short; give at least %s (default %s)", d, MinLease, DefaultLease)}
	}
	if d > MaxLease {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is longer than %s, so a crashed worker's job would wait that long to run again; give at most %s and let the worker heartbeat (default %s)", d, MaxLease, MaxLease, DefaultLease)}
	}
	return nil
}

// DefaultLease is how long a claim holds before it must be renewed.
const DefaultLease = 30 * time.Second

// claimTimeout bounds one claim. It is not the lease: a short lease must not
// make every claim on a slow database time out. A claim that returns after
// its lease ended is harmless, since every write about its jobs is fenced
// and the first heartbeat finds the lease gone. It runs on real time, not
// the client's clock: it bounds a call to the database, which a fake clock
// cannot slow down (see clock.go).
const claimTimeout = 30 * time.Second

// DefaultOwner returns a new owner id, host:pid:random, for a worker or a
// claim that names none. The random part keeps two Workers in one process,
// or a pid reused after a restart, from sharing an id.
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d:%s", errandstore.CleanText(host, errandtype.MaxNameBytes), os.Getpid(), ids.NewToken()[:8])
}
