package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

const createSink = `CREATE TABLE receipts (job_id TEXT NOT NULL, attempt INTEGER NOT NULL)`

// sendReceipt is an application effect in the queue's database: a row in
// receipts, recorded through Once in the application's own transaction.
// commit decides whether that transaction commits.
func sendReceipt(ctx context.Context, c *errand.Client[*sql.Tx], db *sql.DB, job *errandtype.Job, commit bool) (ran bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // a no-op after Commit
	ran, err = errand.Once(ctx, tx, job, "", func() error {
		_, err := tx.ExecContext(ctx, `INSERT INTO receipts (job_id, attempt) VALUES (?, ?)`, job.ID, job.Attempt)
		return err
	})
	if err != nil || !commit {
		return ran, err
	}
	return ran, tx.Commit()
}

func TestOnceSkipsTheEffectOnARepeatedDelivery(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	mustExec(t, st.DB(), createSink)
	var c *errand.Client[*sql.Tx]
	var ranLog []bool
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		ran, err := sendReceipt(ctx, c, st.DB(), j, true)
		if err != nil {
			return err
		}
		ranLog = append(ranLog, ran)
		if j.Attempt == 1 {
			return errors.New("crashed between the effect and the acknowledgment")
		}
		return nil
	})
	job := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	clock.Advance(time.Hour)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded || r.Attempt != 2 {
		t.Fatalf("second delivery: %+v, want succeeded on attempt 2", r)
	}
	if len(ranLog) != 2 || !ranLog[0] || ranLog[1] {
		t.Fatalf("Once ran the effect %v on the two deliveries, want [true false]", ranLog)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM receipts`); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM receipts WHERE job_id = ? AND attempt = 1`, job.ID); n != 1 {
		t.Fatalf("the receipt is not the first delivery's")
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_effects WHERE key = ? AND job_id = ?`, job.ID, job.ID); n != 1 {
		t.Fatalf("ledger has %d entries keyed by the job id, want 1", n)
	}
}

func TestOnceKeysAreIndependent(t *testing.T) {
	st := openStore(t, newTestClock())
	mustExec(t, st.DB(), createSink)
	var c *errand.Client[*sql.Tx]
	var ran []bool
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		for _, key := range []string{"receipt:" + j.ID, "ledger:" + j.ID, "receipt:" + j.ID} {
			r, err := errand.Once(ctx, tx, j, key, func() error { return nil })
			if err != nil {
				return err
			}
			ran = append(ran, r)
		}
		return tx.Commit()
	})
	enqueue(t, c, "task", nil)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded {
		t.Fatalf("%+v", r)
	}
	if len(ran) != 3 || !ran[0] || !ran[1] || ran[2] {
		t.Fatalf("ran %v, want [true true false]: a key runs once, another key is another effect", ran)
	}
}

func TestOnceRolledBackLeavesNoRecord(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	mustExec(t, st.DB(), createSink)
	var c *errand.Client[*sql.Tx]
	var ranLog []bool
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		commit := j.Attempt > 1 // the first delivery's transaction rolls back
		ran, err := sendReceipt(ctx, c, st.DB(), j, commit)
		if err != nil {
			return err
		}
		ranLog = append(ranLog, ran)
		if !commit {
			return errors.New("rolled back")
		}
		return nil
	})
	job := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_effects`); n != 0 {
		t.Fatalf("%d ledger entries after a rollback, want 0", n)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM receipts`); n != 0 {
		t.Fatalf("%d receipts after a rollback, want 0", n)
	}
	clock.Advance(time.Hour)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded {
		t.Fatalf("second delivery: %+v", r)
	}
	if len(ranLog) != 2 || !ranLog[0] || !ranLog[1] {
		t.Fatalf("Once ran %v, want [true true]: a rolled-back effect did not happen", ranLog)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM receipts WHERE job_id = ? AND attempt = 2`, job.ID); n != 1 {
		t.Fatalf("want exactly the second delivery's receipt")
	}
}

func TestOnceWithAStaleLeaseIsLeaseLost(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	mustExec(t, st.DB(), createSink)
	var c *errand.Client[*sql.Tx]
	var onceErr error
	fnRan := false
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		clock.Advance(time.Minute) // the lease runs out mid-handler
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		_, onceErr = errand.Once(ctx, tx, j, "", func() error {
			fnRan = true
			_, err := tx.ExecContext(ctx, `INSERT INTO receipts (job_id, attempt) VALUES (?, ?)`, j.ID, j.Attempt)
			return err
		})
		if onceErr != nil {
			return onceErr
		}
		return tx.Commit()
	})
	enqueue(t, c, "task", nil)
	if r := workOne(t, c, &errand.WorkOneOpts{Lease: time.Minute}); r.Result != errand.ResultLeaseLost {
		t.Fatalf("result %+v, want lease_lost", r)
	}
	if !errors.Is(onceErr, errandtype.ErrLeaseLost) || fnRan {
		t.Fatalf("Once with an expired lease: error %v, fn ran %v; want ErrLeaseLost and fn not called", onceErr, fnRan)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_effects`) + count(t, st.DB(), `SELECT count(*) FROM receipts`); n != 0 {
		t.Fatalf("%d rows written by a stale delivery", n)
	}
}

func TestRemoteEffectCompletedIsSkipped(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	var c *errand.Client[*sql.Tx]
	calls := 0
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		err := errand.RemoteEffect(ctx, j, "", func(ctx context.Context, status errandtype.EffectStatus) error {
			calls++
			if status != errandtype.EffectBegun {
				t.Errorf("first try has status %q, want begun", status)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if j.Attempt == 1 {
			return errors.New("crashed after the provider charged")
		}
		return nil
	})
	job := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	clock.Advance(time.Hour)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded || r.Attempt != 2 {
		t.Fatalf("second delivery: %+v", r)
	}
	if calls != 1 {
		t.Fatalf("remote effect ran %d times, want once", calls)
	}
	e, err := st.EffectGet(context.Background(), &errandstore.EffectGetParams{Key: errand.RemoteEffectKeyPrefix + job.ID})
	if err != nil || e.State != errandtype.EffectCompleted || e.JobID != job.ID {
		t.Fatalf("ledger entry %+v, %v; want completed for job %s", e, err, job.ID)
	}
}

func TestRemoteEffectFailureIsRetaken(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	var c *errand.Client[*sql.Tx]
	var statuses []errandtype.EffectStatus
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		return errand.RemoteEffect(ctx, j, "charge:"+j.ID, func(ctx context.Context, status errandtype.EffectStatus) error {
			statuses = append(statuses, status)
			if j.Attempt == 1 {
				return errand.WithClass("provider_down", errors.New("503 from provider"))
			}
			return nil
		})
	})
	job := enqueue(t, c, "task", nil)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultRetrying || r.Class != "provider_down" {
		t.Fatalf("first delivery: %+v, want retrying with the handler's class", r)
	}
	e, err := st.EffectGet(context.Background(), &errandstore.EffectGetParams{Key: "charge:" + job.ID})
	if err != nil || e.State != errandtype.EffectFailed || e.Message != "503 from provider" {
		t.Fatalf("after a failure: %+v, %v; want failed with the message", e, err)
	}
	clock.Advance(time.Hour)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded {
		t.Fatalf("second delivery: %+v", r)
	}
	if len(statuses) != 2 || statuses[0] != errandtype.EffectBegun || statuses[1] != errandtype.EffectRetaken {
		t.Fatalf("statuses %v, want [begun retaken]", statuses)
	}
	if e, _ := st.EffectGet(context.Background(), &errandstore.EffectGetParams{Key: "charge:" + job.ID}); e.State != errandtype.EffectCompleted {
		t.Fatalf("after the retake: %s, want completed", e.State)
	}
}

func TestRemoteEffectAbandonedByALostLease(t *testing.T) {
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "errand.db")
	started, release := make(chan struct{}), make(chan struct{})
	var first, second *errand.Client[*sql.Tx]
	var firstErr error
	first = handlerClient(t, openStoreAt(t, path, clock), func(ctx context.Context, j *errandtype.Job) error {
		firstErr = errand.RemoteEffect(ctx, j, "", func(context.Context, errandtype.EffectStatus) error {
			close(started)
			<-release // the request to the provider hangs past the lease
			return nil
		})
		return firstErr
	})
	var secondStatus errandtype.EffectStatus
	secondStore := openStoreAt(t, path, clock)
	second = handlerClient(t, secondStore, func(ctx context.Context, j *errandtype.Job) error {
		return errand.RemoteEffect(ctx, j, "", func(_ context.Context, status errandtype.EffectStatus) error {
			secondStatus = status
			return nil
		})
	})
	job := enqueue(t, first, "task", nil)

	done := make(chan *errand.WorkResult, 1)
	go func() {
		r, err := first.WorkOne(context.Background(), &errand.WorkOneOpts{Lease: time.Minute})
		if err != nil {
			t.Errorf("first worker: %v", err)
		}
		done <- r
	}()
	<-started
	clock.Advance(time.Minute)
	if r := workOne(t, second, &errand.WorkOneOpts{Lease: time.Minute}); r.Result != errand.ResultSucceeded || r.Attempt != 2 {
		t.Fatalf("second worker: %+v, want succeeded on attempt 2", r)
	}
	if secondStatus != errandtype.EffectAbandoned {
		t.Fatalf("second delivery saw %q, want abandoned: the first began and lost its lease", secondStatus)
	}
	close(release)
	if r := <-done; r == nil || r.Result != errand.ResultLeaseLost {
		t.Fatalf("first worker: %+v, want lease_lost", r)
	}
	if !errors.Is(firstErr, errandtype.ErrLeaseLost) {
		t.Fatalf("first delivery's RemoteEffect: %v, want ErrLeaseLost", firstErr)
	}
	e, err := secondStore.EffectGet(context.Background(), &errandstore.EffectGetParams{Key: errand.RemoteEffectKeyPrefix + job.ID})
	if err != nil || e.State != errandtype.EffectCompleted {
		t.Fatalf("ledger %+v, %v; want the second delivery's completion to stand", e, err)
	}
	if j := getJob(t, second, job.ID); j.State != errandtype.StateSucceeded || j.Attempt != 2 {
		t.Fatalf("job %s attempt %d, want succeeded on attempt 2", j.State, j.Attempt)
	}
}

func TestRemoteEffectHeldByAnotherJob(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	started, release := make(chan struct{}), make(chan struct{})
	var c *errand.Client[*sql.Tx]
	c = handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		// Both jobs act on one remote object under one key.
		return errand.RemoteEffect(ctx, j, "refund:order-9", func(context.Context, errandtype.EffectStatus) error {
			if j.ID == "holder" {
				close(started)
				<-release
			}
			return nil
		})
	})
	enqueue(t, c, "task", &errand.EnqueueOpts{ID: "holder"})
	enqueue(t, c, "task", &errand.EnqueueOpts{ID: "waiter"})
	var wg sync.WaitGroup
	wg.Go(func() {
		if r, err := c.WorkOne(context.Background(), &errand.WorkOneOpts{}); err != nil || r.Result != errand.ResultSucceeded {
			t.Errorf("holder: %+v, %v; want succeeded", r, err)
		}
	})
	<-started
	r := workOne(t, c, &errand.WorkOneOpts{})
	close(release)
	wg.Wait()
	if *r.JobID != "waiter" || r.Result != errand.ResultRetrying || r.Class != "effect_held" {
		t.Fatalf("waiter: %+v, want retrying with class effect_held", r)
	}
}

// A handler may record a local effect with Once and perform a remote one with
// RemoteEffect, both with default keys: neither takes the other's ledger
// entry for its own.
func TestOnceAndRemoteEffectDefaultsDoNotCollide(t *testing.T) {
	st := openStore(t, nil)
	mustExec(t, st.DB(), `CREATE TABLE receipts (job_id TEXT PRIMARY KEY)`)
	local, remote := 0, 0
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := errand.Once(ctx, tx, j, "", func() error {
			local++
			_, err := tx.ExecContext(ctx, `INSERT INTO receipts (job_id) VALUES (?)`, j.ID)
			return err
		}); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		return errand.RemoteEffect(ctx, j, "", func(context.Context, errandtype.EffectStatus) error {
			remote++
			return nil
		})
	})
	enqueue(t, c, "task", nil)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded {
		t.Fatalf("result %+v, want succeeded", r)
	}
	if local != 1 || remote != 1 {
		t.Fatalf("local effect ran %d times, remote %d; want each once", local, remote)
	}
}

// Once takes only the transaction type of the handler's store: another is
// an error wrapping ErrUnsupportedTx, and nothing is recorded.
func TestOnceRefusesAnotherTransactionType(t *testing.T) {
	st := openStore(t, nil)
	type otherTx struct{}
	var onceErr error
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		_, onceErr = errand.Once(ctx, otherTx{}, j, "", func() error { return nil })
		return nil
	})
	job := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	if !errors.Is(onceErr, errand.ErrUnsupportedTx) {
		t.Fatalf("Once with another transaction type: %v, want ErrUnsupportedTx", onceErr)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_effects WHERE job_id = ?`, job.ID); n != 0 {
		t.Fatalf("%d ledger entries, want none", n)
	}
}
