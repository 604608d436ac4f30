package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestCompetingWorkers starts four worker processes together over five
// receipt jobs; each loops "work" until it finds nothing to claim. Every job
// is delivered once, on its first attempt: no two processes claim the same
// job.
func TestCompetingWorkers(t *testing.T) {
	dir := t.TempDir()
	const db = "./competing.sqlite"
	mustRun(t, dir, "init", db)
	a := openTestApp(t, filepath.Join(dir, db), nil)
	for i := 1; i <= 3; i++ {
		if _, err := a.db.Exec(`INSERT INTO documents (id, title, price_cents) VALUES (?, ?, 500)`,
			fmt.Sprintf("document-c%d", i), fmt.Sprintf("Competition %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]bool{}
	for _, doc := range []string{"document-7", "document-8", "document-c1", "document-c2", "document-c3"} {
		ids[strings.TrimSpace(mustRun(t, dir, "pay", db, "--document", doc))] = true
	}

	start := make(chan struct{})
	var mu sync.Mutex
	var done []workLine
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			<-start
			for {
				out, errOut, err := fieldnotes(t, dir, "work", db)
				if err != nil {
					t.Errorf("work: %v: %s", err, errOut)
					return
				}
				var l workLine
				if err := json.Unmarshal([]byte(out), &l); err != nil {
					t.Errorf("work printed %q: %v", out, err)
					return
				}
				if l.Result == errand.ResultIdle {
					return
				}
				mu.Lock()
				done = append(done, l)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()

	seen := map[string]bool{}
	for _, l := range done {
		if l.Result != errand.ResultSucceeded || l.Attempt == nil || *l.Attempt != 1 || !l.Acknowledged || l.JobID == nil || !ids[*l.JobID] || seen[*l.JobID] {
			t.Errorf("work = %+v; want each job succeeded once, on attempt 1", l)
			continue
		}
		seen[*l.JobID] = true
	}
	if len(seen) != len(ids) {
		t.Errorf("%d jobs delivered; want %d", len(seen), len(ids))
	}
	for _, j := range listJobs(t, dir, db) {
		if j.State != errandtype.StateSucceeded || j.Attempt != 1 || j.Receipts != 1 {
			t.Errorf("job = %+v; want succeeded on attempt 1 with one receipt", j)
		}
	}
	if rs := listReceipts(t, dir, db); len(rs) != len(ids) {
		t.Errorf("%d receipts; want %d", len(rs), len(ids))
	}
}

// TestScheduledRetryEligibility checks that a failed delivery is not
// claimed before its backoff ends and is claimed once it does, with the
// policy's delay: equal jitter from 250ms, so the first is in [125ms, 250ms).
func TestScheduledRetryEligibility(t *testing.T) {
	ctx := context.Background()
	clk := newTestClock()
	a := openTestApp(t, filepath.Join(t.TempDir(), "retry.sqlite"), clk)
	p, err := a.purchase(ctx, "document-7", "")
	if err != nil {
		t.Fatal(err)
	}
	failing := receiptWorker(t, a, &deliverer{unavailable: true})
	working := receiptWorker(t, a, &deliverer{})

	l, err := workOne(ctx, failing)
	if err != nil {
		t.Fatal(err)
	}
	checkWork(t, *l, errand.ResultRetrying, p.PaymentID, 1)
	j, err := a.client.Get(ctx, p.PaymentID)
	if err != nil {
		t.Fatal(err)
	}
	delay := j.AvailableAt.Sub(clk.Now())
	if j.State != errandtype.StateRetrying || delay < 125*time.Millisecond || delay >= 250*time.Millisecond {
		t.Fatalf("job %s, available in %s; want retrying, available in [125ms, 250ms)", j.State, delay)
	}

	clk.Set(j.AvailableAt.Add(-time.Millisecond))
	if l, err = workOne(ctx, working); err != nil {
		t.Fatal(err)
	}
	checkWork(t, *l, errand.ResultIdle, "<null>", 0)

	clk.Set(j.AvailableAt)
	if l, err = workOne(ctx, working); err != nil {
		t.Fatal(err)
	}
	checkWork(t, *l, errand.ResultSucceeded, p.PaymentID, 2)
}

// staleSetup returns two apps on one database and clock, standing for two
// worker processes, and a paid-for receipt job.
func staleSetup(t *testing.T) (a, b *app, clk *testClock, jobID string) {
	t.Helper()
	clk = newTestClock()
	path := filepath.Join(t.TempDir(), "stale.sqlite")
	a = openTestApp(t, path, clk)
	b = openTestApp(t, path, clk)
	p, err := a.purchase(context.Background(), "document-7", "")
	if err != nil {
		t.Fatal(err)
	}
	return a, b, clk, p.PaymentID
}

// takeOver lets worker a's lease expire and has worker b claim and deliver
// the job, as a second process would.
func takeOver(t *testing.T, b *app, clk *testClock, jobID string) {
	clk.Add(2 * receiptLease)
	l, err := workOne(context.Background(), receiptWorker(t, b, &deliverer{}))
	if err != nil {
		t.Error(err)
		return
	}
	if l.Result != errand.ResultSucceeded || l.Attempt == nil || *l.Attempt != 2 || l.JobID == nil || *l.JobID != jobID {
		t.Errorf("second worker: %+v; want %s succeeded on attempt 2", l, jobID)
	}
}

// TestStaleAcknowledgment: a worker delivers the receipt, then loses its
// lease before acknowledging; another worker takes the job over. The first
// worker's acknowledgment is fenced off (lease_lost), and the receipt stays
// single.
func TestStaleAcknowledgment(t *testing.T) {
	ctx := context.Background()
	a, b, clk, id := staleSetup(t)
	first := receiptWorker(t, a, &deliverer{afterEffect: func() { takeOver(t, b, clk, id) }})
	l, err := workOne(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	checkWork(t, *l, errand.ResultLeaseLost, id, 1)

	j, err := a.client.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != errandtype.StateSucceeded || j.Attempt != 2 {
		t.Fatalf("job %s attempt %d; want succeeded by the second worker, attempt 2", j.State, j.Attempt)
	}
	if n := count(t, a, `SELECT count(*) FROM receipts WHERE job_id = ?`, id); n != 1 {
		t.Fatalf("%d receipts; want 1", n)
	}
}

// TestStaleFailure: a worker loses its lease while delivery fails; another
// worker takes the job over and delivers. The first worker's failure is
// fenced off: it neither reopens the succeeded job nor enters its history.
func TestStaleFailure(t *testing.T) {
	ctx := context.Background()
	a, b, clk, id := staleSetup(t)
	failing := &deliverer{unavailable: true}
	receiptWorker(t, a, failing)
	wrapped, err := newReceiptClient(a.store, &deliverer{unavailable: true, beforeDelivery: func() { takeOver(t, b, clk, id) }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := workOne(ctx, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	checkWork(t, *l, errand.ResultLeaseLost, id, 1)

	j, err := a.client.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != errandtype.StateSucceeded || j.Attempt != 2 {
		t.Fatalf("job %s attempt %d; want succeeded by the second worker, attempt 2", j.State, j.Attempt)
	}
	for _, e := range j.Errors {
		if e.Class == "receipt_unavailable" {
			t.Fatalf("history %+v holds the stale worker's failure", j.Errors)
		}
	}
}

// TestStaleEffect: a worker that lost its lease cannot record the effect:
// the ledger write is fenced, so it rolls back and reports lease_lost.
func TestStaleEffect(t *testing.T) {
	ctx := context.Background()
	a, _, clk, id := staleSetup(t)
	var deliverErr error
	d := &deliverer{
		beforeDelivery: func() { clk.Add(2 * receiptLease) },
		delivered:      func(err error) { deliverErr = err },
	}
	c := receiptWorker(t, a, d)
	l, err := workOne(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	checkWork(t, *l, errand.ResultLeaseLost, id, 1)
	if !errors.Is(deliverErr, errandtype.ErrLeaseLost) {
		t.Fatalf("delivery after the lease expired: %v; want ErrLeaseLost", deliverErr)
	}
	if n := count(t, a, `SELECT count(*) FROM receipts`); n != 0 {
		t.Fatalf("%d receipts; the stale delivery must roll back", n)
	}
}
