package errand_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// TestClaimSweepsOneOfConcurrentClaims checks that of many claims that find
// a sweep due at once, exactly one sweeps.
func TestClaimSweepsOneOfConcurrentClaims(t *testing.T) {
	var sweeps errandstore.ClaimSweeps
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 3 {
		now := t0.Add(time.Duration(round) * errandstore.ClaimSweepInterval)
		var swept atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if sweeps.Due(now) {
					swept.Add(1)
				}
			})
		}
		wg.Wait()
		if n := swept.Load(); n != 1 {
			t.Errorf("round %d: %d of 16 concurrent claims swept, want 1", round, n)
		}
	}
}

// TestClaimSweepsClockBack checks that a clock that moved back makes the
// next claim sweep rather than wait for the old time to come round again.
func TestClaimSweepsClockBack(t *testing.T) {
	var sweeps errandstore.ClaimSweeps
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sweeps.Due(t0)
	if !sweeps.Due(t0.Add(-time.Millisecond)) {
		t.Error("a claim after the clock moved back did not sweep")
	}
	if sweeps.Due(t0) {
		t.Error("a claim a millisecond after the last sweep swept again")
	}
}
