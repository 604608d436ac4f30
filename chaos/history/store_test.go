package history_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/chaos/history"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

var vizFlag = flag.String("history.viz", "", "write the visualization of the checked history to this file (default: the test's temp dir)")

const (
	clients      = 6
	opsPerClient = 150
	lease        = 150 * time.Millisecond
	queue        = "history"
)

func TestHistorySQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	var stores []errandstore.Store
	for range 2 { // two handles on one file, as two processes would have
		s, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	exercise(t, stores)
}

func TestHistoryPostgres(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	var stores []errandstore.Store
	for range 2 {
		s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	exercise(t, stores)
}

// counts are what the clients saw, to show what the history exercised.
type counts struct {
	mu                          sync.Mutex
	stalls, leaseLost, unknown  int
	acked, failed, dup, claimed int
	renewed                     int
}

func (c *counts) add(f func(c *counts)) {
	c.mu.Lock()
	f(c)
	c.mu.Unlock()
}

// exercise runs concurrent clients against stores on one database, with
// real time and short leases, records their history and checks it.
func exercise(t *testing.T, stores []errandstore.Store) {
	rec := history.NewRecorder()
	var (
		mu    sync.Mutex
		known []string // jobs known to exist
		n     int
		cs    counts
	)
	ctx, stop := context.WithCancel(t.Context())
	sweeper := make(chan struct{})
	go func() {
		// The leader's sweeps: expired leases are retried between claims.
		defer close(sweeper)
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := stores[0].JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil && ctx.Err() == nil {
					t.Errorf("sweep: %v", err)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			st := stores[c%len(stores)]
			var held []history.Claim
			maxOf := map[string]int{}
			outcomes := 0
			// callCtx sometimes gives a call too little time, so that its
			// outcome is unknown: it may have committed or not.
			callCtx := func(mayCut bool) (context.Context, context.CancelFunc) {
				if mayCut && rng.IntN(12) == 0 {
					return context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
				}
				return context.WithCancel(ctx)
			}
			pick := func() string {
				mu.Lock()
				defer mu.Unlock()
				if len(known) == 0 {
					return ""
				}
				return known[rng.IntN(len(known))]
			}
			for range opsPerClient {
				cctx, cancel := callCtx(true)
				r := rng.IntN(16)
				if len(held) > 2 && r < 8 {
					r = 8 + r%4 // a worker with its hands full finishes what it holds
				}
				switch {
				case r < 4:
					mu.Lock()
					n++
					id := fmt.Sprintf("h%d", n)
					if len(known) > 0 && rng.IntN(5) == 0 {
						id = known[rng.IntN(len(known))]
					}
					mu.Unlock()
					maxA := 1 + rng.IntN(3)
					call := rec.Begin(c, history.Input{Op: history.OpEnqueue, JobID: id, MaxAttempts: maxA})
					rs, err := st.JobInsertMany(cctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{
						ID: id, Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: maxA,
					}}})
					switch {
					case err != nil:
						call.Unknown()
						cs.add(func(c *counts) { c.unknown++ })
					case rs[0].Duplicate:
						call.Done(history.Output{Result: history.Duplicate})
						cs.add(func(c *counts) { c.dup++ })
					default:
						call.Done(history.Output{Result: history.Ok})
						mu.Lock()
						known = append(known, id)
						mu.Unlock()
					}
				case r < 8:
					call := rec.Begin(c, history.Input{Op: history.OpClaim, Lease: lease})
					js, err := st.JobClaimMany(cctx, &errandstore.JobClaimParams{Queues: []string{queue}, Limit: 1 + rng.IntN(3), Lease: lease, Owner: fmt.Sprint("c", c)})
					if err != nil {
						call.Unknown()
						cs.add(func(c *counts) { c.unknown++ })
						break
					}
					var cl []history.Claim
					for _, j := range js {
						cl = append(cl, history.ClaimOf(j))
						maxOf[j.ID] = j.MaxAttempts
					}
					call.Claimed(cl)
					held = append(held, cl...)
					cs.add(func(c *counts) { c.claimed += len(cl) })
				case r < 12 && len(held) > 0:
					i := rng.IntN(len(held))
					h := held[i]
					held = append(held[:i], held[i+1:]...)
					outcomes++
					if outcomes%5 == 0 {
						// A stall past the lease: the outcome must be fenced off.
						cancel()
						time.Sleep(lease + time.Duration(rng.IntN(50))*time.Millisecond)
						cctx, cancel = callCtx(false)
						cs.add(func(c *counts) { c.stalls++ })
					}
					o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: h.JobID, LeaseToken: h.Token}, Kind: errandstore.OutcomeSucceeded}
					in := history.Input{Op: history.OpAck, JobID: h.JobID, Token: h.Token}
					if rng.IntN(2) == 0 {
						in.Op, in.Final = history.OpFail, h.Attempt >= maxOf[h.JobID]
						o.Kind = errandstore.OutcomeRetry
						if in.Final {
							o.Kind = errandstore.OutcomeDead
						}
						o.Error = &errandtype.AttemptError{Attempt: h.Attempt, Class: "error", Message: "failed"}
					}
					call := rec.Begin(c, in)
					rs, err := st.JobRecordOutcomes(cctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}})
					switch {
					case err != nil:
						call.Unknown()
						cs.add(func(c *counts) { c.unknown++ })
					case errors.Is(rs[0].Err, errandtype.ErrLeaseLost):
						call.Done(history.Output{Result: history.LeaseLost})
						cs.add(func(c *counts) { c.leaseLost++ })
					case rs[0].Err != nil:
						t.Errorf("outcome of %s: %v", h.JobID, rs[0].Err)
					default:
						call.Done(history.Output{Result: history.Ok, State: rs[0].State})
						cs.add(func(c *counts) {
							if in.Op == history.OpAck {
								c.acked++
							} else {
								c.failed++
							}
						})
					}
				case r >= 14 && len(held) > 0:
					h := held[rng.IntN(len(held))]
					call := rec.Begin(c, history.Input{Op: history.OpHeartbeat, JobID: h.JobID, Token: h.Token, Lease: lease})
					rs, err := st.JobHeartbeatMany(cctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{{ID: h.JobID, LeaseToken: h.Token}}, Lease: lease})
					switch {
					case err != nil:
						call.Unknown()
						cs.add(func(c *counts) { c.unknown++ })
					case rs[0].Err != nil:
						call.Err(rs[0].Err, "")
					default:
						call.Done(history.Output{Result: history.Ok, LeaseUntil: rs[0].LeaseUntil})
						cs.add(func(c *counts) { c.renewed++ })
					}
				case r < 13:
					id := pick()
					if id == "" {
						break
					}
					call := rec.Begin(c, history.Input{Op: history.OpReplay, JobID: id})
					j, err := st.JobReplay(cctx, &errandstore.JobReplayParams{ID: id, Operator: "history", Reason: "test"})
					record(call, j, err)
				default:
					id := pick()
					if id == "" {
						break
					}
					call := rec.Begin(c, history.Input{Op: history.OpCancel, JobID: id})
					j, err := st.JobCancel(cctx, &errandstore.JobCancelParams{ID: id, Operator: "history", Reason: "test"})
					record(call, j, err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	stop()
	<-sweeper
	h := rec.History()
	viz := *vizFlag
	if viz == "" {
		viz = filepath.Join(t.TempDir(), "history.html")
	}
	err := history.Check(h, history.Options{VisualizationPath: viz})
	t.Logf("%d operations: %d claimed, %d renewed, %d acked, %d failed, %d duplicates, %d stalls past the lease, %d leases lost, %d unknown; visualization %s",
		h.Len(), cs.claimed, cs.renewed, cs.acked, cs.failed, cs.dup, cs.stalls, cs.leaseLost, cs.unknown, viz)
	if err != nil {
		t.Fatal(err)
	}
	if cs.stalls > 0 && cs.leaseLost == 0 {
		t.Errorf("%d outcomes after a stall past the lease, none refused", cs.stalls)
	}
}

// record completes a replay's or a cancel's call.
func record(call *history.Call, j *errandtype.Job, err error) {
	var st errandtype.JobState
	if err == nil {
		st = j.State
	}
	call.Err(err, st)
}
