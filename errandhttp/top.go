package errandhttp

import (
	"cmp"
	"maps"
	"slices"

	"github.com/errandhq/errand/errandtype"
)

// Queue and kind names are the application's, and a system with thousands
// of queues would otherwise give /metrics a series per queue, state and kind,
// and the overview a row each. Both show the busiest by name and the rest
// together.
const (
	// DefaultTopN is how many queues, and queue and kind pairs, /metrics
	// and the dashboard's overview show by name by default.
	DefaultTopN = 100
	// OtherLabel names the sum of the queues or kinds past the top N in
	// /metrics. A queue or kind of that name is counted in it too.
	OtherLabel = "(other)"
)

// depth ranks a queue: its jobs that are not finished well (waiting,
// running, dead), what an operator looks at first.
func depth(s errandtype.QueueStats) int {
	n := 0
	for st, c := range s.Counts {
		if st != errandtype.StateSucceeded && st != errandtype.StateCancelled {
			n += c
		}
	}
	return n
}

// rankQueues returns stats deepest first, by name among equals.
func rankQueues(stats []errandtype.QueueStats) []errandtype.QueueStats {
	out := slices.Clone(stats)
	slices.SortStableFunc(out, func(a, b errandtype.QueueStats) int {
		return cmp.Or(cmp.Compare(depth(b), depth(a)), cmp.Compare(a.Queue, b.Queue))
	})
	return out
}

// foldQueues keeps the n deepest queues of stats and sums the others into
// one named OtherLabel: counts added, the oldest ready age the largest.
func foldQueues(stats []errandtype.QueueStats, n int) []errandtype.QueueStats {
	ranked := rankQueues(stats)
	var kept []errandtype.QueueStats
	other := errandtype.QueueStats{Queue: OtherLabel, Counts: map[errandtype.JobState]int{}}
	folded := false
	for _, s := range ranked {
		if len(kept) < n && s.Queue != OtherLabel {
			kept = append(kept, s)
			continue
		}
		folded = true
		for st, c := range s.Counts {
			other.Counts[st] += c
		}
		other.Dead += s.Dead
		if s.Paused != nil {
			other.Paused = s.Paused // one of them is paused
		}
		other.OldestReadyAgeSeconds = max(other.OldestReadyAgeSeconds, s.OldestReadyAgeSeconds)
	}
	if folded {
		kept = append(kept, other)
	}
	return kept
}

// queueKindCount is a count of one kind in one queue.
type queueKindCount struct {
	queue, kind string
	n           int
}

// foldKinds keeps the n largest counts and sums the others into one of
// queue and kind OtherLabel, adding counts that share a queue and kind.
func foldKinds(counts []queueKindCount, n int) []queueKindCount {
	byKey := map[[2]string]int{}
	for _, c := range counts {
		byKey[[2]string{c.queue, c.kind}] += c.n
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(byKey[b], byKey[a]), cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	var out []queueKindCount
	other := queueKindCount{queue: OtherLabel, kind: OtherLabel}
	for _, k := range keys {
		if len(out) < n && k[0] != OtherLabel && k[1] != OtherLabel {
			out = append(out, queueKindCount{k[0], k[1], byKey[k]})
		} else {
			other.n += byKey[k]
		}
	}
	if len(out) < len(keys) {
		out = append(out, other)
	}
	return out
}
