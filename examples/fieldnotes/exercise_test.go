package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestWorkerCrashExercise runs the first exercise of the README through the
// binary: the worker dies by SIGKILL after the receipt committed and before
// the acknowledgment; the next worker finds the lease expired, runs attempt
// 2, finds the receipt in the ledger and acknowledges. One receipt.
func TestWorkerCrashExercise(t *testing.T) {
	dir := t.TempDir()
	const db = "./worker-crash.sqlite"
	mustRun(t, dir, "init", db)
	id := strings.TrimSpace(mustRun(t, dir, "pay", db))
	if !strings.HasPrefix(id, "pay_") {
		t.Fatalf("pay printed %q; want a payment id", id)
	}

	out, _, err := fieldnotes(t, dir, "work", db, "--crash-after-effect")
	checkKilled(t, err)
	if out != "" {
		t.Fatalf("killed worker printed %q; it must die before printing", out)
	}
	if rs := listReceipts(t, dir, db); len(rs) != 1 {
		t.Fatalf("after the crash: receipts = %+v; want the one committed before the kill", rs)
	}
	if j := onlyJob(t, dir, db); j.State != errandtype.StateRunning || j.Attempt != 1 {
		t.Fatalf("after the crash: job = %+v; want running (unacknowledged), attempt 1", j)
	}

	time.Sleep(time.Second)
	checkWork(t, work(t, dir, db), errand.ResultSucceeded, id, 2)

	j := onlyJob(t, dir, db)
	if j.ID != id || j.State != errandtype.StateSucceeded || j.Attempt != 2 || j.MaxAttempts != 3 || j.Replays != 0 || j.Receipts != 1 {
		t.Fatalf("job = %+v; want %s succeeded, attempt 2 of 3, one receipt", j, id)
	}
	if j.LastError == nil || j.LastError.Class != errandstore.ClassLeaseExpired {
		t.Fatalf("job last_error = %+v; want lease_expired from the killed attempt", j.LastError)
	}
	table := mustRun(t, dir, "jobs", db)
	if !strings.Contains(table, id) || !strings.Contains(table, "succeeded") {
		t.Fatalf("jobs printed:\n%s\nwant the job, succeeded", table)
	}
	rs := listReceipts(t, dir, db)
	if len(rs) != 1 || rs[0].JobID != id || rs[0].PaymentID != id || rs[0].Attempt != 1 || rs[0].AmountCents != 500 {
		t.Fatalf("receipts = %+v; want one, written by attempt 1 of %s", rs, id)
	}
	a := openTestApp(t, filepath.Join(dir, db), nil)
	e, err := a.store.EffectGet(context.Background(), &errandstore.EffectGetParams{Key: id})
	if err != nil || e.JobID != id || e.State != errandtype.EffectCompleted {
		t.Fatalf("effect ledger entry for %s: %+v, %v; want it completed, keyed by the job id", id, e, err)
	}
}

// TestOutageExercise runs the second exercise: three failed deliveries
// dead-letter the job with its class, a worker then finds nothing to do,
// and an explicit replay delivers the receipt once.
func TestOutageExercise(t *testing.T) {
	dir := t.TempDir()
	const db = "./outage.sqlite"
	mustRun(t, dir, "init", db)
	id := strings.TrimSpace(mustRun(t, dir, "pay", db))

	for attempt, want := range []errand.Result{errand.ResultRetrying, errand.ResultRetrying, errand.ResultDead} {
		checkWork(t, work(t, dir, db, "--unavailable"), want, id, attempt+1)
		time.Sleep(time.Second)
	}
	j := onlyJob(t, dir, db)
	if j.State != errandtype.StateDead || j.Attempt != 3 || j.LastError == nil || j.LastError.Class != "receipt_unavailable" {
		t.Fatalf("job = %+v; want dead, attempt 3, class receipt_unavailable", j)
	}
	if table := mustRun(t, dir, "jobs", db); !strings.Contains(table, "dead") || !strings.Contains(table, "receipt_unavailable") {
		t.Fatalf("jobs printed:\n%s\nwant dead and receipt_unavailable", table)
	}

	checkWork(t, work(t, dir, db), errand.ResultIdle, "<null>", 0)
	out := mustRun(t, dir, "replay", db, id)
	if !strings.Contains(out, id) {
		t.Fatalf("replay printed %q; want it to name %s", out, id)
	}
	checkWork(t, work(t, dir, db), errand.ResultSucceeded, id, 1)

	if rs := listReceipts(t, dir, db); len(rs) != 1 || rs[0].JobID != id {
		t.Fatalf("receipts = %+v; want one for %s", rs, id)
	}
	j = onlyJob(t, dir, db)
	if j.State != errandtype.StateSucceeded || j.Attempt != 1 || j.Replays != 1 {
		t.Fatalf("job = %+v; want succeeded on attempt 1 after one replay", j)
	}

	a := openTestApp(t, filepath.Join(dir, db), nil)
	audit, err := a.client.ReplayAudit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Operator != operator() || audit[0].Reason != "manual replay" || audit[0].PriorState != errandtype.StateDead {
		t.Fatalf("replay audit = %+v; want one entry by %s, reason \"manual replay\", from dead", audit, operator())
	}
}

// TestFinalAttemptCrashIsDeadLettered kills the worker on the final attempt
// after the receipt committed: the next claim's sweep dead-letters the job
// with class lease_expired instead of running it a fourth time. A replay
// then acknowledges without a second receipt.
func TestFinalAttemptCrashIsDeadLettered(t *testing.T) {
	dir := t.TempDir()
	const db = "./final.sqlite"
	mustRun(t, dir, "init", db)
	id := strings.TrimSpace(mustRun(t, dir, "pay", db))
	for attempt := 1; attempt <= 2; attempt++ {
		checkWork(t, work(t, dir, db, "--unavailable"), errand.ResultRetrying, id, attempt)
		time.Sleep(time.Second)
	}
	_, _, err := fieldnotes(t, dir, "work", db, "--crash-after-effect")
	checkKilled(t, err)
	time.Sleep(time.Second)

	checkWork(t, work(t, dir, db), errand.ResultIdle, "<null>", 0)
	j := onlyJob(t, dir, db)
	if j.State != errandtype.StateDead || j.Attempt != 3 || j.LastError == nil || j.LastError.Class != errandstore.ClassLeaseExpired || j.Receipts != 1 {
		t.Fatalf("job = %+v; want dead on attempt 3 with class lease_expired, its receipt delivered", j)
	}

	mustRun(t, dir, "replay", db, id, "--reason", "worker died on the final attempt")
	checkWork(t, work(t, dir, db), errand.ResultSucceeded, id, 1)
	if rs := listReceipts(t, dir, db); len(rs) != 1 || rs[0].Attempt != 3 {
		t.Fatalf("receipts = %+v; want the one receipt of attempt 3", rs)
	}
}
