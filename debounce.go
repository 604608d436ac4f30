package errand

import (
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// DebounceOpts folds a burst of enqueues of one key and kind into one
// job: "reindex user 42" sent fifty times in a second runs once. Mode
// says which enqueue wins:
//
//   - [DebounceLastWins] (debounce): the first enqueue makes a job that
//     starts Window later; each further enqueue while that job is still
//     queued gives it the newest args and pushes its start to Window from
//     now, so it runs once the burst has been quiet for Window. A burst
//     that never goes quiet does not starve it: its start is never pushed
//     past MaxWait after the first enqueue.
//   - [DebounceFirstWins] (throttle): the first enqueue makes a job as
//     usual; a further enqueue within Window of it (by the store's clock)
//     is absorbed while that job has not died or been cancelled, and
//     the job keeps its args. One job per key per Window, counted from
//     the job, not from a clock boundary as a unique window is.
//
// An absorbed enqueue inserts nothing and returns the job that absorbed
// it, with [EnqueueResult.Absorbed] and Duplicate set; the job counts
// them (Job.Absorbed). Enqueues of one key take turns until the
// transaction that enqueues commits (on PostgreSQL, a transaction-level
// advisory lock per key), so concurrent ones leave one job.
type DebounceOpts struct {
	// Key names what the job is for ("user:42"); it is kept per kind.
	Key string
	// Mode is DebounceLastWins (the zero value) or DebounceFirstWins.
	Mode DebounceMode
	// Window is the quiet time (last-wins) or the throttle's period
	// (first-wins): a millisecond to ten years.
	Window time.Duration
	// MaxWait bounds, last-wins, how long after its first enqueue the job
	// may be pushed back; zero is ten windows. At least Window.
	MaxWait time.Duration
}

// storeDebounce is o as the store takes it, or nil.
func (o *DebounceOpts) storeDebounce() *errandstore.JobDebounce {
	if o == nil {
		return nil
	}
	return &errandstore.JobDebounce{Key: o.Key, Mode: o.Mode, Window: o.Window, MaxWait: o.MaxWait}
}

// DebounceMode says which enqueue of a debounce key wins: see
// [DebounceOpts].
type DebounceMode = errandtype.DebounceMode

// The debounce modes.
const (
	DebounceLastWins  = errandtype.DebounceLastWins
	DebounceFirstWins = errandtype.DebounceFirstWins
)
