package errand

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A waiting job whose kind's dependency has a breaker open or half-open is
// held back, not ready: no worker claims it (bar a half-open breaker's
// probes). Which dependency a kind names is known to the clients that
// declare it, so a client whose kinds name any records them in the store
// when it starts claiming (a Worker's Start, the first claim outside one):
// the last client to declare a kind wins, including one that declares it
// with no dependency. Every reader (errand inspect and stats, the JSON API,
// the dashboard, /metrics and readiness) decides "held or ready" with
// [BreakerHolds], from that record and the breakers' state.

// BreakerHolds are the kinds whose waiting jobs an open or half-open
// circuit breaker holds back, as read at Now.
type BreakerHolds struct {
	// Now is the store's time of the read.
	Now    time.Time
	byKind map[string]*errandtype.BreakerRecord
}

// HeldBy returns the breaker that holds back the waiting jobs of kind, or
// nil when none does. Nil-safe.
func (h *BreakerHolds) HeldBy(kind string) *errandtype.BreakerRecord {
	if h == nil {
		return nil
	}
	return h.byKind[kind]
}

// BreakerHolds reads which kinds' jobs circuit breakers hold back now: one
// read of the breakers, and one of the declared kinds when a breaker is
// open or half-open. A store without breakers holds nothing.
func (c *Client[TTx]) BreakerHolds(ctx context.Context) (*BreakerHolds, error) {
	return c.breakerHolds(ctx)
}

func (c *engine) breakerHolds(ctx context.Context) (*BreakerHolds, error) {
	bs := c.caps.breakers
	if bs == nil {
		return &BreakerHolds{}, nil
	}
	read, err := bs.BreakerList(ctx, &errandstore.BreakerListParams{})
	if err != nil {
		return nil, fmt.Errorf("read breakers: %w", err)
	}
	h := &BreakerHolds{Now: read.Now, byKind: map[string]*errandtype.BreakerRecord{}}
	holding := map[string]*errandtype.BreakerRecord{}
	for _, b := range read.Breakers {
		if b.State != errandstore.BreakerClosed {
			holding[b.Dependency] = b
		}
	}
	if len(holding) == 0 {
		return h, nil
	}
	kinds, err := bs.BreakerKindsList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read breakers: %w", err)
	}
	for _, k := range kinds {
		if b := holding[k.Dependency]; b != nil {
			h.byKind[k.Kind] = b
		}
	}
	return h, nil
}

// holdJobs sets HeldByBreaker of the waiting jobs that h holds back.
func (h *BreakerHolds) holdJobs(jobs ...*errandtype.Job) {
	for _, j := range jobs {
		if b := h.HeldBy(j.Kind); b != nil && j.State.Waiting() {
			dep := b.Dependency
			j.HeldByBreaker = &dep
		}
	}
}

// holdStats takes the kinds h holds back out of each queue's oldest ready
// age and lists them in BreakerHeldKinds.
func (h *BreakerHolds) holdStats(qs []errandtype.QueueStats) {
	for i := range qs {
		q := &qs[i]
		q.BreakerHeldKinds = []errandtype.BreakerHeldKind{}
		for kind, n := range q.WaitingByKind {
			if b := h.HeldBy(kind); b != nil && n > 0 {
				q.BreakerHeldKinds = append(q.BreakerHeldKinds, errandtype.BreakerHeldKind{Kind: kind, Dependency: b.Dependency, Waiting: n})
			}
		}
		sortHeldKinds(q.BreakerHeldKinds)
		if q.ReadyAgeByKind == nil {
			continue // a store that does not break its age down by kind
		}
		q.OldestReadyAgeSeconds = 0
		for kind, age := range q.ReadyAgeByKind {
			if h.HeldBy(kind) == nil {
				q.OldestReadyAgeSeconds = max(q.OldestReadyAgeSeconds, age)
			}
		}
	}
}

// holdInsights moves the ready jobs of the kinds h holds back to
// HeldByBreaker.
func (h *BreakerHolds) holdInsights(ins *Insights) {
	for i := range ins.Kinds {
		k := &ins.Kinds[i]
		if b := h.HeldBy(k.Kind); b != nil {
			dep := b.Dependency
			k.HeldByBreaker, k.Ready, k.OldestReadyAgeSeconds, k.Breaker = k.Ready, 0, 0, &dep
		}
	}
}

// declareDependencies records the dependencies that g's kinds name (see
// breaker.Gate.Declare). Nil-safe.
func (c *engine) declareDependencies(ctx context.Context, g *breakerGate) {
	if g != nil {
		g.Declare(ctx)
	}
}

// sortHeldKinds orders held kinds by kind.
func sortHeldKinds(ks []errandtype.BreakerHeldKind) {
	slices.SortFunc(ks, func(a, b errandtype.BreakerHeldKind) int { return strings.Compare(a.Kind, b.Kind) })
}
