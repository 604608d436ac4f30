package errandstore

import (
	"cmp"
	"slices"
	"sort"

	"github.com/errandhq/errand/errandtype"
)

// The fair-claim rule: a claim in a queue whose jobs carry fairness keys
// ([github.com/errandhq/errand.EnqueueOpts].FairnessKey) takes the keys in turn, so that one key's
// backlog does not delay another key's jobs. Within a priority, every key's
// first claimable job comes before any key's second, its second before any
// third, and so on. Among jobs of the same priority and rank, the key
// served longest ago goes first: each fair claim gives the keys it took
// jobs of the queue's next turn number, so keys alternate across claims
// too, and a worker claiming one job at a time serves them round-robin.
// Then the earlier available_at and the lower seq go first. Jobs without a
// key share one turn, as if they had one key of their own (stored as the
// key "", which no job can have). Priorities still come first, and the
// ordering-key rule ([OrderingFreeSQL]) still decides what is claimable.
//
// A key's rank is counted among its claimable jobs in claim order
// (priority, available_at, seq), so a key's first job at a lower priority
// is still its first: a tenant's urgent job goes before other tenants'
// ordinary ones, as priorities promise.
//
// Stores read each key's first Limit claimable jobs only (no claim takes
// more than Limit jobs of one key, so none further can be picked): the cost
// of a fair claim grows with the number of keys waiting in the queue and
// the limit, never with the size of one key's backlog.

// FairRankColumn is the name under which a fair claim's SQL ranks each
// candidate within its key.
const FairRankColumn = "fair_rank"

// FairTurnKey is the key under which a fair claim records the turn of the
// jobs without a fairness key.
const FairTurnKey = ""

// FairPickSQL renders the last step of a fair claim, common to the SQL
// stores: from candidates, a subquery of rows with the columns seq,
// priority, available_at and fairness_key (each key's first claimable jobs
// in claim order, and those without a key), it ranks each row within its
// key, looks up each key's last turn in turns (the fair-turns table, as
// the store's SQL names it) for the queue given by the SQL queue, and
// selects the seqs of the first limit rows in fair-claim order. limit is
// the SQL of the claim's limit parameter. Window functions, their NULL
// partition and this join work alike in SQLite and PostgreSQL.
func FairPickSQL(candidates, turns, queue, limit string) string {
	return `SELECT seq FROM (SELECT c.seq, c.priority, c.available_at, coalesce(t.turn, 0) AS fair_turn,
			row_number() OVER (PARTITION BY c.fairness_key ORDER BY c.priority, c.available_at, c.seq) AS ` + FairRankColumn + `
		FROM (` + candidates + `) c
		LEFT JOIN ` + turns + ` t ON t.queue = ` + queue + ` AND t.fairness_key = coalesce(c.fairness_key, '` + FairTurnKey + `')) fair_ranked
	ORDER BY priority, ` + FairRankColumn + `, fair_turn, available_at, seq
	LIMIT ` + limit
}

// FairTurnKeys returns the keys a fair claim served, as the fair-turns
// table records them (FairTurnKey for jobs without one), sorted and
// without repeats: the order in which a store writes their turns, so that
// two concurrent claims lock the rows in the same order.
func FairTurnKeys(jobs []*errandtype.Job) []string {
	keys := make([]string, 0, len(jobs))
	for _, j := range jobs {
		k := FairTurnKey
		if j.FairnessKey != nil {
			k = *j.FairnessKey
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// SortFairClaimOrder sorts what a fair claim returned by priority, then
// each job's rank within its key, then claim order, as [SortClaimOrder]
// does for a plain claim. Each job's rank is counted among the jobs given,
// which hold every job of a key that the claim took ahead of any later
// one. (Turns decide which jobs a claim takes; within one claim's result
// the keys of a rank follow claim order.)
func SortFairClaimOrder(jobs []*errandtype.Job) {
	SortClaimOrder(jobs)
	rank := make(map[string]int, len(jobs))
	ranks := make(map[*errandtype.Job]int, len(jobs))
	for _, j := range jobs {
		k := ""
		if j.FairnessKey != nil {
			k = "k:" + *j.FairnessKey
		}
		rank[k]++
		ranks[j] = rank[k]
	}
	sort.SliceStable(jobs, func(i, k int) bool {
		a, b := jobs[i], jobs[k]
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		return ranks[a] < ranks[b]
	})
}

// ValidateFairClaim checks a fair claim's parameters: those of any claim,
// and exactly one queue, since keys take turns within a queue.
func ValidateFairClaim(p *JobClaimParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if len(p.Queues) != 1 {
		return &errandtype.InputError{Field: "claim", Message: "a fair claim takes exactly one queue; claim each queue on its own"}
	}
	return nil
}

// DefaultFairnessKeysLimit is how many keys per queue
// [FairClaimer.FairnessKeysWaiting] returns when its Limit is zero.
const DefaultFairnessKeysLimit = 10

// TopFairnessKeys orders counts, one per queue and key, as
// FairnessKeysWaiting returns them: queues in name order, within a queue
// the most waiting jobs first, then by key, at most limit per queue (zero:
// DefaultFairnessKeysLimit). Stores count with one GROUP BY and leave the
// choice to it.
func TopFairnessKeys(counts []errandtype.FairnessKeyCount, limit int) []errandtype.FairnessKeyCount {
	if limit <= 0 {
		limit = DefaultFairnessKeysLimit
	}
	out := slices.Clone(counts)
	slices.SortFunc(out, func(a, b errandtype.FairnessKeyCount) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(b.Waiting, a.Waiting), cmp.Compare(a.Key, b.Key))
	})
	kept := out[:0]
	n, queue := 0, ""
	for _, c := range out {
		if c.Queue != queue {
			n, queue = 0, c.Queue
		}
		if n < limit {
			kept = append(kept, c)
		}
		n++
	}
	if kept == nil {
		kept = []errandtype.FairnessKeyCount{}
	}
	return kept
}
