package errandstore

import (
	"sync/atomic"
	"time"
)

// ClaimSweepInterval is how often, at most, the claims made through one
// store handle sweep (see [JobStore.JobClaimMany]). A busy worker claims
// many times a second, and sweeping in every claim cost every claim the
// sweep's statements while they almost never found anything; once a
// second still recovers a dead worker's jobs within about a second of
// their lease expiring, with or without a leader (whose sweeps, through
// JobSweep, count as well).
const ClaimSweepInterval = time.Second

// ClaimSweeps paces the sweeps of one store handle's claims: a claim sweeps
// when the handle has not swept for [ClaimSweepInterval], read on the
// store's clock (the process clock when the store reads time in SQL: the
// pace is this process's, not a lease decision). A clock that moved back
// makes the next claim sweep. The zero value is ready, and its first claim
// sweeps. It is safe for concurrent use: of several claims that find a
// sweep due, one sweeps.
//
// A store calls Due in each claim, Failed when the claim that swept did not
// commit, and Swept after a JobSweep.
type ClaimSweeps struct {
	last atomic.Int64 // UnixNano of the last sweep; 0: none yet
}

// Due reports whether a claim at now sweeps; if so, it counts the sweep as
// done at now.
func (g *ClaimSweeps) Due(now time.Time) bool {
	n := now.UnixNano()
	for {
		last := g.last.Load()
		if last != 0 && n >= last && n-last < int64(ClaimSweepInterval) {
			return false
		}
		if g.last.CompareAndSwap(last, n) {
			return true
		}
	}
}

// Swept records a sweep done at now outside a claim.
func (g *ClaimSweeps) Swept(now time.Time) { g.last.Store(now.UnixNano()) }

// Failed forgets the last sweep, so that the next claim sweeps: the claim
// or sweep that Due or Swept counted did not commit.
func (g *ClaimSweeps) Failed() { g.last.Store(0) }
