package errandstore

import (
	"slices"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// QueueCount is one group of a store's queue statistics: the jobs of one
// queue, state and kind.
type QueueCount struct {
	Queue string
	State errandtype.JobState
	Kind  string
	Jobs  int
	// OldestReadyAgeSeconds is how long the group's oldest claimable job
	// has been available (see [errandtype.QueueStats]), or 0 when none is.
	OldestReadyAgeSeconds float64
}

// AssembleQueueStats sums a store's counts per queue, state and kind into
// one QueueStats per queue, ordered by name: every state in Counts (0 when
// it has no jobs), the waiting jobs per kind, the oldest ready age and the
// dead-letter size. Stores call it, so that they agree on everything but
// the query.
func AssembleQueueStats(counts []QueueCount) []errandtype.QueueStats {
	byQueue := map[string]*errandtype.QueueStats{}
	for _, c := range counts {
		q := byQueue[c.Queue]
		if q == nil {
			q = &errandtype.QueueStats{Queue: c.Queue, Counts: make(map[errandtype.JobState]int, len(errandtype.JobStates)), WaitingByKind: map[string]int{},
				ReadyAgeByKind: map[string]float64{}}
			for _, st := range errandtype.JobStates {
				q.Counts[st] = 0
			}
			byQueue[c.Queue] = q
		}
		q.Counts[c.State] += c.Jobs
		if c.State.Waiting() && c.Jobs > 0 {
			q.WaitingByKind[c.Kind] += c.Jobs
		}
		q.OldestReadyAgeSeconds = max(q.OldestReadyAgeSeconds, c.OldestReadyAgeSeconds)
		if c.OldestReadyAgeSeconds > 0 {
			q.ReadyAgeByKind[c.Kind] = max(q.ReadyAgeByKind[c.Kind], c.OldestReadyAgeSeconds)
		}
	}
	out := make([]errandtype.QueueStats, 0, len(byQueue))
	for _, q := range byQueue {
		q.Dead = q.Counts[errandtype.StateDead]
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b errandtype.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}
