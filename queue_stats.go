package errand

import (
	"slices"
	"strings"
)

// QueueCount is one group of a store's queue statistics: the jobs of one
// queue, state and kind.
type QueueCount struct {
	Queue string
	State JobState
	Kind  string
	Jobs  int
	// OldestReadyAgeSeconds is how long the group's oldest claimable job
	// has been available (see [QueueStats]), or 0 when none is.
	OldestReadyAgeSeconds float64
}

// AssembleQueueStats sums a store's counts per queue, state and kind into
// one QueueStats per queue, ordered by name: every state in Counts (0 when
// it has no jobs), the waiting jobs per kind, the oldest ready age and the
// dead-letter size. Stores call it, so that they agree on everything but
// the query.
func AssembleQueueStats(counts []QueueCount) []QueueStats {
	byQueue := map[string]*QueueStats{}
	for _, c := range counts {
		q := byQueue[c.Queue]
		if q == nil {
			q = &QueueStats{Queue: c.Queue, Counts: make(map[JobState]int, len(JobStates)), WaitingByKind: map[string]int{},
				ReadyAgeByKind: map[string]float64{}}
			for _, st := range JobStates {
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
	out := make([]QueueStats, 0, len(byQueue))
	for _, q := range byQueue {
		q.Dead = q.Counts[StateDead]
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}

// unhandledKinds lists the kinds waiting in q that no worker of workers
// handles (see [KindHandled]), with how many jobs of each wait, by kind.
// sortHeldKinds orders held kinds by kind.
func sortHeldKinds(ks []BreakerHeldKind) {
	slices.SortFunc(ks, func(a, b BreakerHeldKind) int { return strings.Compare(a.Kind, b.Kind) })
}

func unhandledKinds(q *QueueStats, workers []*WorkerRecord) []KindCount {
	out := []KindCount{}
	for kind, n := range q.WaitingByKind {
		if n > 0 && !KindHandled(workers, q.Queue, kind) {
			out = append(out, KindCount{Kind: kind, Waiting: n})
		}
	}
	slices.SortFunc(out, func(a, b KindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}
