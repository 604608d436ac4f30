package registry

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Remote workers in the worker registry: each claim of a remote worker
// counts as its heartbeat, so that `errand workers` lists it with the
// queues and kinds it claims, and a client's stats do not report its kinds
// as handled by no live worker. Its declared heartbeat interval is its
// lease: a remote worker that has not claimed for WorkerMissedHeartbeats
// leases is shown as gone (a worker busy that long on one job included).
// Its job counters are not tracked. The registry is for operators, so a
// failed registry write is logged and the claim stands.

// maxRemoteWorkers bounds how many remote workers a client remembers; past
// it the memory is cleared, and workers register again at their next
// claim.
const maxRemoteWorkers = 1000

// Claim is what a remote worker's claim tells of it.
type Claim struct {
	Owner string
	Queue string
	Kinds []string // sorted, each once
	Lease time.Duration
}

// Remotes remembers, per remote worker, what the registry holds and when
// it was last written, so that a worker polling with claims writes the
// registry at most once per heartbeat interval. The zero value remembers
// none.
type Remotes struct {
	mu   sync.Mutex
	seen map[string]*remoteWorker
}

type remoteWorker struct {
	queues  []string
	kinds   []string
	lease   time.Duration
	written time.Time // on the client's clock
}

// Note records claim c, made at now, in the registry: a registration when
// the worker is new to this client or claims from a queue or of a kind its
// record lacks, else a heartbeat when the last write is every old.
func (r *Remotes) Note(ctx context.Context, st Store, logger *slog.Logger, now time.Time, every time.Duration, c *Claim) {
	params, register, write := r.note(c, now, every)
	if !write {
		return
	}
	var err error
	if !register {
		_, err = st.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: c.Owner, Stats: errandstore.WorkerStats{SentAt: now}})
		register = errors.Is(err, errandtype.ErrNotFound) // pruned, or stopped: it is back
	}
	if register {
		_, err = st.WorkerRegister(ctx, params)
	}
	if err != nil {
		logger.Warn("record remote worker", "worker_id", c.Owner, "err", err)
	}
}

// note notes claim c at now, and returns what to write: its registration,
// whether it is new or changed (register), and whether to write at all.
func (r *Remotes) note(c *Claim, now time.Time, every time.Duration) (params *errandstore.WorkerRegisterParams, register, write bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil || len(r.seen) >= maxRemoteWorkers {
		r.seen = map[string]*remoteWorker{}
	}
	w := r.seen[c.Owner]
	register = w == nil || !slices.Contains(w.queues, c.Queue) || !containsAll(w.kinds, c.Kinds) || w.lease != c.Lease
	if !register && now.Sub(w.written) < every {
		return nil, false, false
	}
	if w == nil {
		w = &remoteWorker{}
		r.seen[c.Owner] = w
	}
	if register {
		w.add(c)
	}
	w.written = now
	params = &errandstore.WorkerRegisterParams{ID: c.Owner, Host: "remote", Kinds: slices.Clone(w.kinds), HeartbeatInterval: w.lease}
	for _, q := range w.queues {
		params.Queues = append(params.Queues, errandtype.WorkerQueue{Name: q})
	}
	return params, register, true
}

// add adds the queue, kinds and lease of c to w's record.
func (w *remoteWorker) add(c *Claim) {
	if !slices.Contains(w.queues, c.Queue) {
		w.queues = append(w.queues, c.Queue)
	}
	for _, k := range c.Kinds {
		if !slices.Contains(w.kinds, k) {
			w.kinds = append(w.kinds, k)
		}
	}
	slices.Sort(w.kinds)
	w.lease = c.Lease
}

func containsAll(set, items []string) bool {
	for _, it := range items {
		if !slices.Contains(set, it) {
			return false
		}
	}
	return true
}
