package errand_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// orderingRace runs two claims of one PostgreSQL queue in the order that
// used to start two jobs of one ordering key at once: claimer Y picks j2,
// the key's later job, and is held inside its update (by a trigger that
// waits for an advisory lock) after its snapshot was taken; meanwhile
// waiting makes j1, the key's earlier job, claimable, and claimer X claims
// it. Then Y goes on. It returns the states of j1 and j2. setup enqueues
// j2 (and j1 if it is to be there before the claims); waiting runs
// between.
func orderingRace(t *testing.T, setup func(c *errand.Client[*sql.Tx], db *sql.DB), waiting func(c *errand.Client[*sql.Tx])) (j1, j2 *errandtype.Job) {
	t.Helper()
	url := pgtest.URL(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	v := s.SQL(nil)
	t.Cleanup(func() { v.Close() })
	c := newClient(t, v, &errand.Config{Kinds: kindsOf([]testKind{{Name: "k",
		Handler: errand.HandlerFunc(func(_ context.Context, j *errandtype.Job) error {
			return errand.Permanent(context.DeadlineExceeded)
		})}})})
	pool, schema := s.Pool(), s.Schema()
	if _, err := pool.Exec(ctx, `CREATE FUNCTION `+schema+`.hold_j2() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_lock(4242); PERFORM pg_advisory_unlock(4242); RETURN NEW; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TRIGGER hold_j2 BEFORE UPDATE ON `+schema+`.errand_jobs FOR EACH ROW
		WHEN (NEW.id = 'j2' AND NEW.state = 'running') EXECUTE FUNCTION `+schema+`.hold_j2()`); err != nil {
		t.Fatal(err)
	}
	setup(c, v.DB())
	lockConn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Release()
	if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	claim := func(owner string) ([]*errandtype.Job, error) {
		return s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1,
			Lease: time.Minute, Owner: owner})
	}
	type res struct {
		jobs []*errandtype.Job
		err  error
	}
	yDone := make(chan res, 1)
	go func() { jobs, err := claim("Y"); yDone <- res{jobs, err} }()
	for i := 0; ; i++ { // until Y waits for the lock, inside its update of j2
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if i > 500 {
			t.Fatal("claimer Y never reached j2")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waiting(c)
	xJobs, err := claim("X")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	y := <-yDone
	if y.err != nil {
		t.Fatalf("claimer Y: %v", y.err)
	}
	j1, j2 = getJob(t, c, "j1"), getJob(t, c, "j2")
	t.Logf("X claimed %d, Y claimed %d; j1 %s, j2 %s", len(xJobs), len(y.jobs), j1.State, j2.State)
	return j1, j2
}

// TestOrderingKeyOneRunningAfterReplayRace: a replay makes the key's dead
// first job waiting while another claim starts its next job; at most one
// of them runs.
func TestOrderingKeyOneRunningAfterReplayRace(t *testing.T) {
	j1, j2 := orderingRace(t, func(c *errand.Client[*sql.Tx], _ *sql.DB) {
		enqueue(t, c, "k", &errand.EnqueueOpts{ID: "j1", OrderingKey: "acct-7"})
		enqueue(t, c, "k", &errand.EnqueueOpts{ID: "j2", OrderingKey: "acct-7"})
		if r := workOne(t, c, nil); r.Result != errand.ResultDead || r.JobID == nil || *r.JobID != "j1" {
			t.Fatalf("j1's attempt: %+v; want j1 dead", r)
		}
	}, func(c *errand.Client[*sql.Tx]) {
		if _, err := c.Replay(context.Background(), "j1", &errand.ReplayOpts{Operator: "ops", Reason: "fixed"}); err != nil {
			t.Fatal(err)
		}
	})
	if j1.State == errandtype.StateRunning && j2.State == errandtype.StateRunning {
		t.Fatal("two jobs of ordering key acct-7 run at once: j1, replayed, and j2")
	}
	if j1.State != errandtype.StateRunning && j2.State != errandtype.StateRunning {
		t.Fatalf("neither job runs (j1 %s, j2 %s); want one of them claimed", j1.State, j2.State)
	}
}

// TestOrderingKeyOneRunningAfterLateEnqueue: the key's first job, whose
// enqueue took its seq first and committed last, and the next one are not
// started at once by two claims.
func TestOrderingKeyOneRunningAfterLateEnqueue(t *testing.T) {
	var tx1 *sql.Tx
	j1, j2 := orderingRace(t, func(c *errand.Client[*sql.Tx], db *sql.DB) {
		var err error
		if tx1, err = db.BeginTx(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueTx(context.Background(), tx1, errand.RawArgs{KindName: "k"}, &errand.EnqueueOpts{ID: "j1", OrderingKey: "acct-7"}); err != nil {
			t.Fatal(err)
		}
		enqueue(t, c, "k", &errand.EnqueueOpts{ID: "j2", OrderingKey: "acct-7"})
	}, func(*errand.Client[*sql.Tx]) {
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
	})
	if j1.State == errandtype.StateRunning && j2.State == errandtype.StateRunning {
		t.Fatal("two jobs of ordering key acct-7 run at once: j1, enqueued first and committed last, and j2")
	}
	if j1.State != errandtype.StateRunning && j2.State != errandtype.StateRunning {
		t.Fatalf("neither job runs (j1 %s, j2 %s); want one of them claimed", j1.State, j2.State)
	}
}
