package errandstore

import (
	"context"
	"log/slog"

	"github.com/errandhq/errand/errandtype"
)

// UnreadJob is a job a store's claim took, under the lease it wrote, but
// whose row did not decode: the claim committed it running, and nobody
// works it.
type UnreadJob struct {
	Lease   JobLease
	Attempt int
	Err     error
}

// ClaimedRows gathers the rows of a claim as a store reads them, where a
// row that does not decode fails only itself (see GiveBackUnread).
type ClaimedRows struct {
	Jobs   []*errandtype.Job
	Unread []UnreadJob
}

// Add takes one row: its job, or derr, what kept it from decoding; lease
// then reads the row's lease apart, and fails the whole read (Add returns
// derr) when even that cannot be read.
func (c *ClaimedRows) Add(j *errandtype.Job, derr error, lease func() (UnreadJob, bool)) error {
	if derr == nil {
		c.Jobs = append(c.Jobs, j)
		return nil
	}
	u, ok := lease()
	if !ok {
		return derr
	}
	u.Err = derr
	c.Unread = append(c.Unread, u)
	return nil
}

// GiveBackUnread gives back the jobs of a committed claim whose rows did
// not decode, through the store's own JobRecordOutcomes, as a worker gives
// back a job whose sealed args it cannot open: queued again after
// UnreadableRetryDelay, the attempt uncounted, the reason in the job's
// history (class ClassUnreadable). Held until their leases expired
// instead, each would spend an attempt it never ran; when the give-back
// fails, that is what happens, and logger says so.
func GiveBackUnread(ctx context.Context, s interface {
	JobRecordOutcomes(context.Context, *JobRecordOutcomesParams) ([]OutcomeResult, error)
}, logger *slog.Logger, unread []UnreadJob) {
	if len(unread) == 0 {
		return
	}
	os := make([]*JobOutcome, len(unread))
	ids := make([]string, len(unread))
	for i, u := range unread {
		ids[i] = u.Lease.ID
		os[i] = &JobOutcome{JobLease: u.Lease, Kind: OutcomeInterrupted, Delay: UnreadableRetryDelay,
			Error: &errandtype.AttemptError{Attempt: u.Attempt, Class: ClassUnreadable,
				Message: CleanText("the worker could not read the claimed job: "+u.Err.Error(), MaxMessageBytes)}}
	}
	logger.Warn("claimed jobs could not be read; given back", "jobs", ids, "err", unread[0].Err)
	if _, err := s.JobRecordOutcomes(ctx, &JobRecordOutcomesParams{Outcomes: os}); err != nil {
		logger.Error("give back unreadable jobs failed; they run again once their leases expire", "jobs", ids, "err", err)
	}
}
