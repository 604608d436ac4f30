package errand_test

import (
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// A store paces the sweeps of its claims with a ClaimSweeps: the first
// claim sweeps, the next ones within ClaimSweepInterval do not, a JobSweep
// counts as a sweep, and a claim that swept but failed lets the next one
// sweep again.
func ExampleClaimSweeps() {
	var sweeps errandstore.ClaimSweeps
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fmt.Println("first claim sweeps:", sweeps.Due(t0))
	fmt.Println("claim 100ms later sweeps:", sweeps.Due(t0.Add(100*time.Millisecond)))
	fmt.Println("claim an interval later sweeps:", sweeps.Due(t0.Add(errandstore.ClaimSweepInterval)))
	sweeps.Swept(t0.Add(1500 * time.Millisecond)) // a JobSweep, by the leader say
	fmt.Println("claim after the JobSweep sweeps:", sweeps.Due(t0.Add(2*errandstore.ClaimSweepInterval)))
	sweeps.Failed() // that claim did not commit
	fmt.Println("claim after a failed one sweeps:", sweeps.Due(t0.Add(2*errandstore.ClaimSweepInterval)))
	// Output:
	// first claim sweeps: true
	// claim 100ms later sweeps: false
	// claim an interval later sweeps: true
	// claim after the JobSweep sweeps: false
	// claim after a failed one sweeps: true
}
