package errand

import (
	"slices"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// sortHeldKinds orders held kinds by kind.
func sortHeldKinds(ks []errandtype.BreakerHeldKind) {
	slices.SortFunc(ks, func(a, b errandtype.BreakerHeldKind) int { return strings.Compare(a.Kind, b.Kind) })
}

// unhandledKinds lists the kinds waiting in q that no worker of workers
// handles (see [KindHandled]), with how many jobs of each wait, by kind.
func unhandledKinds(q *errandtype.QueueStats, workers []*errandtype.WorkerRecord) []errandtype.KindCount {
	out := []errandtype.KindCount{}
	for kind, n := range q.WaitingByKind {
		if n > 0 && !KindHandled(workers, q.Queue, kind) {
			out = append(out, errandtype.KindCount{Kind: kind, Waiting: n})
		}
	}
	slices.SortFunc(out, func(a, b errandtype.KindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}
