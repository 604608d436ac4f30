package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestPaymentAndJobCommitTogether makes the receipt job's insert fail and
// checks that the payment rolls back with it: no debit, no payment, no
// stored idempotency key. With the insert allowed again, both commit.
func TestPaymentAndJobCommitTogether(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "atomic.sqlite")
	if _, err := runInProcess(t, "init", path); err != nil {
		t.Fatal(err)
	}
	a := openTestApp(t, path, nil)
	if _, err := a.db.Exec(`CREATE TRIGGER refuse_jobs BEFORE INSERT ON errand_jobs
		BEGIN SELECT RAISE(ABORT, 'job insert refused by the test'); END`); err != nil {
		t.Fatal(err)
	}

	_, err := runInProcess(t, "pay", path)
	if err == nil || !strings.Contains(err.Error(), "job insert refused by the test") {
		t.Fatalf("pay with the job insert failing: %v; want the insert's error", err)
	}
	if _, err := a.purchase(ctx, "document-8", "key-1"); err == nil {
		t.Fatal("purchase with the job insert failing succeeded")
	}
	checkNothingPaid := func() {
		t.Helper()
		if b, err := a.balance(ctx); err != nil || b != startingBalanceCent {
			t.Fatalf("balance = %d, %v; want %d, not debited", b, err, startingBalanceCent)
		}
		for _, table := range []string{"payments", "idempotency_keys", "errand_jobs"} {
			if n := count(t, a, `SELECT count(*) FROM `+table); n != 0 {
				t.Fatalf("%s holds %d rows; want none", table, n)
			}
		}
	}
	checkNothingPaid()

	if _, err := a.db.Exec(`DROP TRIGGER refuse_jobs`); err != nil {
		t.Fatal(err)
	}
	p, err := a.purchase(ctx, "document-8", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Replayed || p.Status != http.StatusCreated {
		t.Fatalf("purchase = %+v; want a new payment: the failed attempt stored no key", p)
	}
	j, err := a.client.Get(ctx, p.PaymentID)
	if err != nil {
		t.Fatalf("the payment's job: %v", err)
	}
	if j.Kind != receiptKind || j.State != errandtype.StateQueued || j.MaxAttempts != 3 ||
		time.Duration(j.BackoffBase) != 250*time.Millisecond || time.Duration(j.BackoffMax) != 30*time.Second {
		t.Fatalf("job = %+v; want a queued send_receipt job, 3 attempts, backoff 250ms..30s", j)
	}
	if b, _ := a.balance(ctx); b != startingBalanceCent-500 {
		t.Fatalf("balance = %d; want %d", b, startingBalanceCent-500)
	}
}

// TestInitTwiceKeepsBalance: init never resets money or purchases.
func TestInitTwiceKeepsBalance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "init.sqlite")
	if _, err := runInProcess(t, "init", path); err != nil {
		t.Fatal(err)
	}
	if _, err := runInProcess(t, "pay", path); err != nil {
		t.Fatal(err)
	}
	out, err := runInProcess(t, "init", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "9500 cents") {
		t.Fatalf("second init printed %q; want the kept balance, 9500 cents", out)
	}
	a := openTestApp(t, path, nil)
	if b, _ := a.balance(context.Background()); b != 9500 {
		t.Fatalf("balance = %d; want 9500", b)
	}
	if n := count(t, a, `SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments; want 1", n)
	}
	if n := count(t, a, `SELECT count(*) FROM documents`); n != 2 {
		t.Fatalf("%d documents; want 2", n)
	}
}

// TestReplayRefusals: replay refuses a job that is queued, retrying,
// running or succeeded, and an unknown id, each with a non-zero exit and one
// line, changing nothing. A cancelled job may be replayed, as errand allows.
func TestReplayRefusals(t *testing.T) {
	dir := t.TempDir()
	const db = "./replay.sqlite"
	mustRun(t, dir, "init", db)
	id := strings.TrimSpace(mustRun(t, dir, "pay", db))

	refuse := func(jobID, want string) {
		t.Helper()
		before := mustRun(t, dir, "jobs", db, "--json")
		out, errOut, err := fieldnotes(t, dir, "replay", db, jobID)
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("replay of a %s job: exit %d; want 1", want, code)
		}
		if out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
			t.Fatalf("replay of a %s job: stdout %q, stderr %q; want one line on stderr naming %q", want, out, errOut, want)
		}
		if after := mustRun(t, dir, "jobs", db, "--json"); after != before {
			t.Fatalf("replay of a %s job changed it: %s -> %s", want, before, after)
		}
	}

	refuse(id, "queued")
	checkWork(t, work(t, dir, db, "--unavailable"), errand.ResultRetrying, id, 1)
	refuse(id, "retrying")
	time.Sleep(300 * time.Millisecond)
	_, _, err := fieldnotes(t, dir, "work", db, "--crash-after-effect")
	checkKilled(t, err)
	refuse(id, "running")
	time.Sleep(time.Second)
	checkWork(t, work(t, dir, db), errand.ResultSucceeded, id, 3)
	refuse(id, "succeeded")
	refuse("pay_nosuchjob", "no such job")

	if _, _, err := fieldnotes(t, dir, "replay", db); exitCode(t, err) != 2 {
		t.Fatalf("replay without a job id: %v; want exit 2", err)
	}

	a := openTestApp(t, filepath.Join(dir, db), nil)
	if n := count(t, a, `SELECT count(*) FROM errand_audit`); n != 0 {
		t.Fatalf("%d replay audit entries after refusals; want 0", n)
	}
	if j := onlyJob(t, dir, db); j.State != errandtype.StateSucceeded || j.Replays != 0 || j.Receipts != 1 {
		t.Fatalf("job = %+v; want it succeeded, never replayed, one receipt", j)
	}

	// errand replays cancelled jobs too; fieldnotes follows it.
	p, err := a.purchase(context.Background(), "document-8", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.Cancel(context.Background(), p.PaymentID, &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dir, "replay", db, p.PaymentID, "--reason", "cancelled by mistake")
	j, err := a.client.Get(context.Background(), p.PaymentID)
	if err != nil || j.State != errandtype.StateQueued || j.Replays != 1 {
		t.Fatalf("cancelled job after replay: %+v, %v; want queued, replays 1", j, err)
	}
}
