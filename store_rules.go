package errand

import (
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The rules below are the same for every store. Each store calls them, or
// renders its SQL from them, so that the stores agree by construction and a
// new state, outcome or rule is written down once, here. A store holds
// only what its SQL dialect forces.

// TerminalStates are the states a job leaves only by an explicit replay.
var TerminalStates = errandtype.StatesWhere(errandtype.JobState.Terminal)

// CancelledByRequestMessage is the history message of an attempt ended by a
// cancel request, and CancelledBySweepMessage of a job whose worker stopped
// renewing its lease with a request pending.
const (
	CancelledByRequestMessage = "cancelled by an operator while running"
)

// The ordering-key rule: a job with an ordering key is claimable only while
// no other job of its key is running and none with a lower seq is waiting,
// or is dead and holds its key ([OrderingHoldOnDead]). Jobs of one key run
// one at a time, in seq order; a finished job holds nothing back, except a
// dead one that holds its key, until it is replayed (it then runs first,
// having the lowest seq) or cancelled. Within one claim the second job of a
// key sees the first still waiting, so a batch takes at most one job per
// key. Job.HeldBy names the job a held job waits for: the first of its key,
// in seq order, that is running or holds the key ahead of it.
//
// The functions below render the rule in SQL that every SQL store runs as
// it is. jobs is the jobs table's name as the store's SQL spells it; the
// candidate row is aliased j and the rows of its key o. The terms on o
// repeat the condition of the ordering index ([OrderingIndexSQL]) word for
// word: SQLite uses a partial index only when a query repeats its
// condition, and would otherwise read every unfinished job for each
// candidate.

// OrderingIndexSQL is the predicate of the ordering index
// errand_jobs_ordering on (ordering_key, seq), which every SQL store's
// migration spells out word for word: the rows that take part in the
// ordering-key rule.
func OrderingIndexSQL() string {
	return `ordering_key IS NOT NULL AND ` + errandstore.OrderingHoldsSQL("")
}
