package errand

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Pauses: an operator stops the claims of a queue or a kind across the
// cluster ([Client.Pause]); running jobs finish, waiting ones wait. Each
// client reads the store's pauses when it claims, at most every
// pauseRefresh, so a pause or a resume made anywhere takes effect within a
// second on a worker at the default poll interval; one made through this
// client takes effect here at once.

// pauseRefresh is how long a client's view of the pauses serves its claims
// before it is read again.
const pauseRefresh = 500 * time.Millisecond

// pausedRecheck bounds how long a paused queue's loop sleeps before it
// looks again.
const pausedRecheck = time.Second

// PauseTarget names what a pause stops: a queue or a kind, one of them.
type PauseTarget struct {
	Queue string
	Kind  string
}

func (t PauseTarget) params(paused bool, operator, reason string) (*errandstore.PauseSetParams, error) {
	p := &errandstore.PauseSetParams{Paused: paused, Operator: operator, Reason: reason}
	switch {
	case t.Queue != "" && t.Kind != "":
		return nil, &errandtype.InputError{Field: "target", Message: "names a queue and a kind; pause one at a time"}
	case t.Queue != "":
		p.Scope, p.Name = errandtype.PauseQueue, t.Queue
	case t.Kind != "":
		p.Scope, p.Name = errandtype.PauseKind, t.Kind
	default:
		return nil, &errandtype.InputError{Field: "target", Message: "is empty; name a queue or a kind"}
	}
	return p, p.Validate()
}

// Pause stops the claims of a queue or a kind by every worker and remote
// worker of the store, recording operator and reason with the pause and
// in the audit ([AuditPause]). Running jobs finish; jobs waiting in the
// queue, or of the kind, wait until [Client.Resume], and count as paused
// in [Client.Stats]. Pausing what is paused keeps the first pause and
// reports changed false.
func (c *Client[TTx]) Pause(ctx context.Context, target PauseTarget, operator, reason string) (p *errandtype.Pause, changed bool, err error) {
	r, err := c.setPause(ctx, target, true, operator, reason)
	if err != nil {
		return nil, false, err
	}
	return r.Pause, r.Changed, nil
}

// Resume lifts the pause of a queue or a kind, audited as [AuditResume],
// and wakes this process's idle workers. Resuming what is not paused
// reports changed false.
func (c *Client[TTx]) Resume(ctx context.Context, target PauseTarget, operator, reason string) (changed bool, err error) {
	r, err := c.setPause(ctx, target, false, operator, reason)
	if err != nil {
		return false, err
	}
	c.wakes.Wake(nil)
	return r.Changed, nil
}

func (c *Client[TTx]) setPause(ctx context.Context, target PauseTarget, paused bool, operator, reason string) (*errandstore.PauseSetResult, error) {
	ps := c.caps.pauses
	if ps == nil {
		return nil, errNoPauseStore
	}
	p, err := target.params(paused, operator, reason)
	if err != nil {
		return nil, err
	}
	r, err := ps.PauseSet(ctx, p)
	if err != nil {
		return nil, err
	}
	c.paused.forget()
	return r, nil
}

// Pauses lists the pauses in force, queues first, then by name.
func (c *Client[TTx]) Pauses(ctx context.Context) ([]errandtype.Pause, error) {
	ps := c.caps.pauses
	if ps == nil {
		return []errandtype.Pause{}, nil
	}
	return ps.PauseList(ctx)
}

var errNoPauseStore = &errandtype.InputError{Field: "store", Message: "keeps no pauses; use errand/sqlite or errand/postgres"}

// pauseView is a client's view of the store's pauses, read again when
// older than pauseRefresh.
type pauseView struct {
	store  errandstore.PauseStore // nil: the store keeps none
	clock  TimeSource
	logger interface{ Warn(string, ...any) }
	mu     sync.Mutex // one read at a time
	snap   atomic.Pointer[pauseSnap]
}

// pauseSnap is the pauses as read at a time; nil maps when none.
type pauseSnap struct {
	at            time.Time
	queues, kinds map[string]bool
}

// forget makes the next claim read the pauses again.
func (v *pauseView) forget() { v.snap.Store(nil) }

// current returns the pauses, read again if stale: nil when none are in
// force or the store keeps none. A failed read keeps the last view, or
// none, and is logged: the claim it serves will meet the same store.
func (v *pauseView) current(ctx context.Context) *pauseSnap {
	if v.store == nil {
		return nil
	}
	s := v.snap.Load()
	if s != nil && v.fresh(s) {
		return s
	}
	if s != nil && !v.mu.TryLock() {
		return s // another loop reads them
	} else if s == nil {
		v.mu.Lock()
	}
	defer v.mu.Unlock()
	if n := v.snap.Load(); n != nil && v.fresh(n) {
		return n
	}
	ps, err := v.store.PauseList(ctx)
	if err != nil {
		if ctx.Err() == nil {
			v.logger.Warn("read pauses failed; keeping the last", "err", err)
		}
		return s
	}
	n := &pauseSnap{at: v.clock.Now()}
	for _, p := range ps {
		m := &n.queues
		if p.Scope == errandtype.PauseKind {
			m = &n.kinds
		}
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[p.Name] = true
	}
	v.snap.Store(n)
	return n
}

func (v *pauseView) fresh(s *pauseSnap) bool {
	age := v.clock.Now().Sub(s.at)
	return age >= 0 && age < pauseRefresh
}

// any reports whether any pause is in force.
func (v *pauseView) any(ctx context.Context) bool {
	s := v.current(ctx)
	return s != nil && (len(s.queues) > 0 || len(s.kinds) > 0)
}

// filter returns the kinds of a claim of queue that are not paused, and
// held when nothing is left to claim: the queue or all its kinds are
// paused. kinds is returned as it is when nothing of it is paused.
func (v *pauseView) filter(ctx context.Context, queue string, kinds []string) (out []string, held bool) {
	s := v.current(ctx)
	if s == nil {
		return kinds, false
	}
	if s.queues[queue] {
		return nil, true
	}
	if len(s.kinds) == 0 {
		return kinds, false
	}
	for _, k := range kinds {
		if !s.kinds[k] {
			out = append(out, k)
		}
	}
	if len(out) == len(kinds) {
		return kinds, false
	}
	return out, len(out) == 0
}

// paused reports whether a job of kind in queue may not be claimed now.
func (v *pauseView) paused(ctx context.Context, queue, kind string) bool {
	s := v.current(ctx)
	return s != nil && (s.queues[queue] || s.kinds[kind])
}

// waitPaused sleeps a paused queue's loop until a wake-up, its poll
// interval or pausedRecheck, and reports false when the loop ends.
func (w *Worker) waitPaused(loopCtx context.Context, poll Timer, queue string) bool {
	wake := w.c.wakes.Chan(queue)
	poll.Reset(min(w.cfg.PollInterval, pausedRecheck))
	select {
	case <-loopCtx.Done():
		return false
	case <-wake:
		poll.Stop()
	case <-poll.C():
	}
	return true
}

// pauseStats marks the paused queues of qs and counts their waiting jobs
// of paused kinds, after holdStats: what is paused is not ready, so it
// leaves the oldest ready age, as what a breaker holds does.
func pauseStats(qs []errandtype.QueueStats, ps []errandtype.Pause) {
	queues, kinds := map[string]errandtype.Pause{}, map[string]bool{}
	for _, p := range ps {
		if p.Scope == errandtype.PauseQueue {
			queues[p.Name] = p
		} else {
			kinds[p.Name] = true
		}
	}
	for i := range qs {
		q := &qs[i]
		q.PausedKinds = []errandtype.KindCount{}
		if p, ok := queues[q.Queue]; ok {
			q.Paused, q.OldestReadyAgeSeconds = &p, 0
			continue
		}
		for kind, n := range q.WaitingByKind {
			if kinds[kind] && n > 0 {
				q.PausedKinds = append(q.PausedKinds, errandtype.KindCount{Kind: kind, Waiting: n})
			}
		}
		slices.SortFunc(q.PausedKinds, func(a, b errandtype.KindCount) int { return strings.Compare(a.Kind, b.Kind) })
		if len(q.PausedKinds) == 0 || q.ReadyAgeByKind == nil {
			continue
		}
		held := map[string]bool{}
		for _, h := range q.BreakerHeldKinds {
			held[h.Kind] = true
		}
		q.OldestReadyAgeSeconds = 0
		for kind, age := range q.ReadyAgeByKind {
			if !kinds[kind] && !held[kind] {
				q.OldestReadyAgeSeconds = max(q.OldestReadyAgeSeconds, age)
			}
		}
	}
}

// pauseInsights moves the ready jobs of paused queues and kinds to Paused.
func pauseInsights(ins *Insights, ps []errandtype.Pause) {
	if len(ps) == 0 {
		return
	}
	paused := map[errandtype.Pause]bool{}
	for _, p := range ps {
		paused[errandtype.Pause{Scope: p.Scope, Name: p.Name}] = true
	}
	for i := range ins.Kinds {
		k := &ins.Kinds[i]
		if paused[errandtype.Pause{Scope: errandtype.PauseQueue, Name: k.Queue}] || paused[errandtype.Pause{Scope: errandtype.PauseKind, Name: k.Kind}] {
			k.Paused, k.Ready, k.OldestReadyAgeSeconds = k.Ready, 0, 0
		}
	}
}
