package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/storetest"
	"github.com/jackc/pgx/v5"
)

// Through PgBouncer in transaction pooling mode: every statement may land on
// another server connection, so errand may rely on no session state. The
// pool uses pgx's cache_describe mode (unnamed statements), and LISTEN goes
// to the server itself through Options.ListenURL.

// pooledURL starts a PgBouncer in front of the test server and returns the
// URL an application behind it uses, and the server's own.
func pooledURL(t *testing.T) (pooled, direct string) {
	direct = pgtest.URL(t)
	pooled = pgtest.PgBouncer(t, direct)
	return pooled + "&default_query_exec_mode=cache_describe", direct
}

func openPooled(t *testing.T, pooled, direct, schema string, clock errandstore.Clock) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pooled, &postgres.Options{Schema: schema, Clock: clock, MaxConns: 4, ListenURL: direct})
	if err != nil {
		t.Fatalf("open schema %s through pgbouncer: %v", schema, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPgBouncerStoreSuite runs the store's conformance suite through the
// pooler.
func TestPgBouncerStoreSuite(t *testing.T) {
	pooled, direct := pooledURL(t)
	schemas := sync.Map{}
	storetest.Exercise(t, storetest.Harness[pgx.Tx]{
		Parallel: true,
		Open: func(t *testing.T, clock errandstore.Clock) errandstore.TxStore[pgx.Tx] {
			schema := pgschemas.Take(t, direct)
			s := openPooled(t, pooled, direct, schema, clock)
			schemas.Store(s, schema)
			return s
		},
		OpenSecond: func(t *testing.T, first errandstore.TxStore[pgx.Tx], clock errandstore.Clock) errandstore.TxStore[pgx.Tx] {
			schema, _ := schemas.Load(first)
			return openPooled(t, pooled, direct, schema.(string), clock)
		},
		RefuseJob: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id string) {
			schema, _ := schemas.Load(s)
			schemaOf.Store(s, schema)
			refuseJob(t, direct, s.(*postgres.Store), id)
		},
		AddSignals: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id, name string, n int, at time.Time) {
			schema, _ := schemas.Load(s)
			schemaOf.Store(s, schema)
			addSignals(t, direct, s.(*postgres.Store), id, name, n, at)
		},
		SpoilJob: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id string) {
			schema, _ := schemas.Load(s)
			schemaOf.Store(s, schema)
			spoilJob(t, direct, s.(*postgres.Store), id)
		},
	})
}

// poolerArgs is the job of the pooler's worker scenarios.
type poolerArgs struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"` // the first attempt fails
}

func (poolerArgs) Kind() string { return "pooled" }

// TestPgBouncerWorkers runs workers of two processes' stores through the
// pooler: every job runs to success once (those that fail first, twice),
// wake-ups arrive though the workers would not poll for an hour, one worker
// leads, and the other takes over when the leader drains.
func TestPgBouncerWorkers(t *testing.T) {
	pooled, direct := pooledURL(t)
	schema := pgtest.Schema(t, direct)
	ctx := t.Context()

	var mu sync.Mutex
	runs := map[int]int{}      // attempts per job
	succeeded := map[int]int{} // successful runs per job
	newWorker := func(owner string) (*errand.Client[pgx.Tx], *errand.Worker) {
		kinds := errand.NewKinds()
		errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, a poolerArgs) error {
			mu.Lock()
			defer mu.Unlock()
			runs[a.N]++
			if a.Fail && runs[a.N] == 1 {
				return errors.New("first attempt fails")
			}
			succeeded[a.N]++
			return nil
		}, &errand.KindOpts{MaxAttempts: 3, RetryPolicy: &errand.RetryPolicy{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond}})
		c, err := errand.NewClient(openPooled(t, pooled, direct, schema, nil), &errand.Config{Kinds: kinds})
		if err != nil {
			t.Fatal(err)
		}
		// An hour's poll: only the store's wake-ups (and the next-due
		// timer, for retries) start jobs in time.
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 8}, Owner: owner,
			PollInterval: time.Hour, LeaderTTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return c, w
	}
	_, wa := newWorker("pooled-a")
	cb, wb := newWorker("pooled-b")

	producer, err := errand.NewClient(openPooled(t, pooled, direct, schema, nil), &errand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 200
	ids := make([]string, jobs)
	for n := range jobs {
		r, err := producer.Enqueue(ctx, poolerArgs{N: n, Fail: n%5 == 0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = r.Job.ID
	}
	waitFor(t, "success of every job", func() bool {
		for _, id := range ids {
			j, err := producer.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != errandtype.StateSucceeded {
				return false
			}
		}
		return true
	})
	mu.Lock()
	for n := range jobs {
		want := 1
		if n%5 == 0 {
			want = 2
		}
		if runs[n] != want || succeeded[n] != 1 {
			t.Errorf("job %d: %d runs, %d successful; want %d and 1", n, runs[n], succeeded[n], want)
		}
	}
	mu.Unlock()

	// One leader; when it drains, the other worker leads.
	workers := map[string]*errand.Worker{"pooled-a": wa, "pooled-b": wb}
	var leader *errandtype.Leader
	waitFor(t, "leader", func() bool {
		leader, err = cb.Leader(ctx)
		return err == nil && leader != nil && workers[leader.Holder] != nil
	})
	if err := workers[leader.Holder].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	delete(workers, leader.Holder)
	for other := range workers {
		waitFor(t, "leadership of "+other, func() bool {
			leader, err = cb.Leader(ctx)
			return err == nil && leader != nil && leader.Holder == other
		})
		if err := workers[other].Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPgBouncerListenNeedsTheServer checks that a listener behind the pooler
// fails at once, saying what to set, rather than hear nothing.
func TestPgBouncerListenNeedsTheServer(t *testing.T) {
	pooled, direct := pooledURL(t)
	s, err := postgres.Open(t.Context(), pooled, &postgres.Options{Schema: pgtest.Schema(t, direct), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.ListenQueues(t.Context())
	if err == nil || !strings.Contains(err.Error(), "ListenURL") {
		t.Fatalf("ListenQueues through the pooler: %v; want an error naming ListenURL", err)
	}
}

// TestPgBouncerPollOnly runs a poll-only worker through the pooler, without
// a listening connection at all.
func TestPgBouncerPollOnly(t *testing.T) {
	pooled, direct := pooledURL(t)
	s, err := postgres.Open(t.Context(), pooled, &postgres.Options{Schema: pgtest.Schema(t, direct), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kinds := errand.NewKinds()
	done := make(chan int, 10)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, a poolerArgs) error {
		done <- a.N
		return nil
	}, nil)
	c, err := errand.NewClient(s, &errand.Config{Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 2}, PollOnly: true, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	for n := range 10 {
		if _, err := c.Enqueue(t.Context(), poolerArgs{N: n}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a poll-only worker behind the pooler did not run the jobs")
		}
	}
}
