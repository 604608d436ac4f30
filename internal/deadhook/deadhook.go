// Package deadhook looks for the dead jobs of a worker's hooked kinds whose
// on-dead hook job was never enqueued, and has their hooks fired. Every
// worker that handles a kind with a hook runs one: it is not a leader duty,
// since a hook is a function of the workers that declare it, and the leader
// may not be one of them.
package deadhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Detection is at-least-once, by two paths: the worker that records a dead
// outcome enqueues the hook job at once, and every worker that handles a
// kind with a hook looks, every SweepInterval, for dead jobs of its hooked
// kinds that have no hook job: jobs swept to dead (a lease expired on the
// final attempt, a deadline passed while waiting) and jobs whose worker died
// between the outcome and the hook. Where to look from is kept in the
// store, per kind (see [errandstore.DeadHookCursorStore]): a worker starting
// looks from where the cluster last finished looking, however long no
// worker with the hook ran, and a kind never looked at is looked at from its
// first dead job. A look moves the cursors forward only past deaths whose
// hooks are enqueued; after the first look a worker looks at the deaths
// since its last look, with a margin. Each look reads the finished-jobs
// index from the cursor on, so its cost follows the deaths since, not the
// table.

// Overlap is how far before its last look a worker looks again: a
// transaction that dead-lettered a job may commit a moment after the time it
// wrote into finished_at.
const Overlap = 5 * time.Minute

// CursorEvery is how far a worker's looks move before it writes its kinds'
// cursors again: a worker that restarts looks again at most that much more,
// and a look every SweepInterval writes rarely.
const CursorEvery = time.Minute

// Page is how many dead jobs one look reads at a time.
const Page = 200

// Config is what a Scanner takes from its worker.
type Config struct {
	// Now reads the store's clock, which finished_at is written on.
	Now   func(context.Context) (time.Time, error)
	Store errandstore.DeadHookStore
	// Cursors is nil when the store keeps none: a start looks from the
	// first death.
	Cursors errandstore.DeadHookCursorStore
	Clock   errandtype.TimeSource // for the ticker between looks
	Logger  *slog.Logger
	Kinds   []string // the hooked kinds, sorted
	Every   time.Duration
	// Fire enqueues the hook job of a dead job (or finds it enqueued).
	Fire func(context.Context, *errandtype.Job) error
}

// Scanner finds the dead jobs of a worker's hooked kinds that have no hook
// job and fires their hooks.
type Scanner struct {
	cfg     Config
	since   time.Time // zero before the first look
	written time.Time // the cursor this worker last wrote; zero: none yet
}

// New returns a scanner; Run looks.
func New(cfg Config) *Scanner { return &Scanner{cfg: cfg} }

// Run looks at once, then every interval, until ctx ends.
func (s *Scanner) Run(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		if _, err := s.Scan(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("look for dead jobs without their on-dead hook failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// start returns where a worker's first look starts: the earliest cursor of
// its kinds, or the zero time (every death) when one of them has none.
func (s *Scanner) start(ctx context.Context) (time.Time, error) {
	if s.cfg.Cursors == nil {
		return time.Time{}, nil
	}
	cs, err := s.cfg.Cursors.DeadHookCursors(ctx, &errandstore.DeadHookCursorsParams{Kinds: s.cfg.Kinds})
	if err != nil {
		return time.Time{}, fmt.Errorf("read dead-hook cursors: %w", err)
	}
	var from time.Time
	for i, k := range s.cfg.Kinds {
		at, ok := cs[k]
		if !ok {
			return time.Time{}, nil
		}
		if i == 0 || at.Before(from) {
			from = at
		}
	}
	return from, nil
}

// fireAll fires the hooks of jobs, calling held with the death of each
// whose hook the store refused: it is looked for again.
func (s *Scanner) fireAll(ctx context.Context, jobs []*errandtype.Job, held func(time.Time)) {
	for _, j := range jobs {
		if err := s.cfg.Fire(ctx, j); err != nil {
			// One hook that cannot be enqueued (its args do not
			// marshal, say) must not stop the others; one the store
			// refused is looked for again.
			s.cfg.Logger.Error("on-dead hook failed", "job_id", j.ID, "err", err)
			var ie *errandtype.InputError
			if !errors.As(err, &ie) && !errors.Is(err, errandtype.ErrInvalid) {
				held(*j.FinishedAt)
			}
		}
	}
}

// advanceCursors writes the store's cursors up to to, when it keeps them
// and they moved CursorEvery since this worker last wrote them.
func (s *Scanner) advanceCursors(ctx context.Context, to time.Time) error {
	if s.cfg.Cursors == nil || to.IsZero() || !s.written.IsZero() && to.Sub(s.written) < CursorEvery {
		return nil
	}
	err := s.cfg.Cursors.DeadHookCursorAdvance(ctx, &errandstore.DeadHookCursorAdvanceParams{Kinds: s.cfg.Kinds, To: to})
	if err != nil {
		return fmt.Errorf("advance dead-hook cursors: %w", err)
	}
	s.written = to
	return nil
}

// Scan fires the hooks of the dead jobs found since the last look, and
// returns how many jobs it looked at. It moves the cursors up to the
// earliest death whose hook could not be enqueued for a reason that may
// pass (the store's), else to the margin before now.
func (s *Scanner) Scan(ctx context.Context) (int, error) {
	now, err := s.cfg.Now(ctx)
	if err != nil {
		return 0, err
	}
	since := s.since
	if since.IsZero() {
		if since, err = s.start(ctx); err != nil {
			return 0, err
		}
	}
	to := now.Add(-Overlap)
	held := func(at time.Time) { // the look is not done past at
		if at.Before(to) {
			to = at
		}
	}
	seen := 0
	for {
		jobs, err := s.cfg.Store.JobListDeadUnhooked(ctx, &errandstore.JobListDeadUnhookedParams{Kinds: s.cfg.Kinds, Since: since, Limit: Page})
		if err != nil {
			return seen, err
		}
		seen += len(jobs)
		s.fireAll(ctx, jobs, held)
		if len(jobs) < Page {
			break
		}
		last := *jobs[len(jobs)-1].FinishedAt
		if !last.After(since) {
			held(since) // a page of one instant: the next look goes on
			break
		}
		since = last
	}
	if err := s.advanceCursors(ctx, to); err != nil {
		return seen, err
	}
	s.since = to
	return seen, nil
}
