package errand

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/errandhq/errand/internal/ids"
)

// DefaultLease is how long a claim holds before it must be renewed.
const DefaultLease = 30 * time.Second

// claimTimeout bounds one claim. It is not the lease: a short lease must not
// make every claim on a slow database time out. A claim that returns after
// its lease ended is harmless, since every write about its jobs is fenced
// and the first heartbeat finds the lease gone. It runs on real time, not
// the client's clock: it bounds a call to the database, which a fake clock
// cannot slow down (see clock.go).
const claimTimeout = 30 * time.Second

// WorkOneOpts configure WorkOne.
type WorkOneOpts struct {
	// Queues to claim from. Default: DefaultQueue.
	Queues []string
	// Lease is the claim's lease, renewed every third of it while the
	// handler runs. Default: DefaultLease.
	Lease time.Duration
	// Owner names this worker in lease_owner. Default: a new DefaultOwner.
	Owner string
}

// WorkOne claims one job of a kind this client has a handler for, runs it
// under its lease, records the outcome while it still owns the job, and
// returns what happened. With nothing to claim it returns result "idle".
//
// A returned error means the claim or the outcome write failed; a job whose
// outcome could not be written keeps its lease until it expires, and is then
// claimed again.
func (c *Client[TTx]) WorkOne(ctx context.Context, o *WorkOneOpts) (*WorkResult, error) {
	var opts WorkOneOpts
	if o != nil {
		opts = *o
	}
	kinds := c.handlerKinds()
	if len(kinds) == 0 {
		return nil, &InputError{Field: "Kinds", Message: "no kind has a handler; declare at least one Kind with a Handler"}
	}
	if len(opts.Queues) == 0 {
		opts.Queues = []string{DefaultQueue}
	}
	for _, q := range opts.Queues {
		if err := checkName("queue", q); err != nil {
			return nil, err
		}
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	if err := checkLease("lease", opts.Lease); err != nil {
		return nil, err
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner()
	} else if err := checkIdentifier("owner", opts.Owner, MaxIDBytes); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claim job: %w", err)
	}
	// Once sent, the claim is not cancelled (see Worker.runQueue): its
	// jobs would be stranded until their leases expire.
	claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	claimSent := c.clock.Now() // the store's lease starts no earlier than this
	defer cancelClaim()
	jobs, err := c.store.JobClaimMany(claimCtx, &JobClaimParams{
		Queues: opts.Queues,
		Kinds:  kinds,
		Limit:  1,
		Lease:  opts.Lease,
		Owner:  opts.Owner,
	})
	if err != nil {
		return nil, fmt.Errorf("claim job: %w", err)
	}
	if len(jobs) == 0 {
		return &WorkResult{Result: ResultIdle}, nil
	}
	leases := c.newLeaseKeeper(opts.Lease)
	a := c.runAttempt(ctx, leases, jobs[0], opts.Lease, claimSent)
	leases.stop()
	defer a.waitHandler()
	return c.record(ctx, a, nil)
}

// DefaultOwner returns a new owner id, host:pid:random, for a worker or a
// claim that names none. The random part keeps two Workers in one process,
// or a pid reused after a restart, from sharing an id.
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d:%s", CleanText(host, MaxNameBytes), os.Getpid(), ids.NewToken()[:8])
}
