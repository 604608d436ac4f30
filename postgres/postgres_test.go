package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strconv"
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
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

func open(t *testing.T, url, schema string, clock errandstore.Clock) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, &postgres.Options{Clock: clock, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatalf("open schema %s: %v", schema, err)
	}
	return s
}

// schemaOf maps each store the harness opened to its schema's name.
var schemaOf sync.Map

// TestStore runs the conformance suite, each case on a schema of its own.
func TestStore(t *testing.T) {
	url := pgtest.URL(t)
	storetest.Exercise(t, storetest.Harness[pgx.Tx]{
		Parallel: true,
		Open: func(t *testing.T, clock errandstore.Clock) errandstore.TxStore[pgx.Tx] {
			return openSchema(t, url, clock)
		},
		OpenSecond: func(t *testing.T, first errandstore.TxStore[pgx.Tx], clock errandstore.Clock) errandstore.TxStore[pgx.Tx] {
			return openSecond(t, url, first.(*postgres.Store), clock)
		},
		RefuseJob: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id string) {
			refuseJob(t, url, s.(*postgres.Store), id)
		},
		RawJob: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id string) string {
			return rawJob(t, url, s.(*postgres.Store), id)
		},
		AddSignals: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id, name string, n int, at time.Time) {
			addSignals(t, url, s.(*postgres.Store), id, name, n, at)
		},
		SpoilJob: func(t *testing.T, s errandstore.TxStore[pgx.Tx], id string) {
			spoilJob(t, url, s.(*postgres.Store), id)
		},
	})
}

// rawJob returns the row of job id in the schema of s, read through a
// connection of the test's own.
func rawJob(t *testing.T, url string, s *postgres.Store, id string) string {
	t.Helper()
	conn, sch := schemaConn(t, url, s)
	var row string
	q := `SELECT j::text FROM ` + sch + `.errand_jobs j WHERE id = $1`
	if err := conn.QueryRow(t.Context(), q, id).Scan(&row); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return row
}

// addSignals writes n signals named name, sent at at, to job id in the
// schema of s.
func addSignals(t *testing.T, url string, s *postgres.Store, id, name string, n int, at time.Time) {
	t.Helper()
	conn, sch := schemaConn(t, url, s)
	q := `INSERT INTO ` + sch + `.errand_signals (job_seq, name, value, sent_at)
		SELECT j.seq, $2, to_jsonb(i), $3 FROM ` + sch + `.errand_jobs j, generate_series(1, $4::int) AS i WHERE j.id = $1`
	if _, err := conn.Exec(t.Context(), q, id, name, at, n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// spoilJob makes job id's history in the schema of s a JSON object, which
// errand cannot read, through a connection of the test's own.
func spoilJob(t *testing.T, url string, s *postgres.Store, id string) {
	t.Helper()
	conn, sch := schemaConn(t, url, s)
	q := `UPDATE ` + sch + `.errand_jobs SET errors = '{"x": 1}'::jsonb WHERE id = $1`
	if _, err := conn.Exec(t.Context(), q, id); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// schemaConn returns a connection of the test's own, closed when it ends,
// and the quoted name of the schema of s, which the harness opened.
func schemaConn(t *testing.T, url string, s *postgres.Store) (*pgx.Conn, string) {
	t.Helper()
	schema, ok := schemaOf.Load(s)
	if !ok {
		t.Fatal("the store was not opened by this harness")
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, pgx.Identifier{schema.(string)}.Sanitize()
}

// TestSQLStore runs the conformance suite on the database/sql view, whose
// transactions are *sql.Tx of the pgx driver.
func TestSQLStore(t *testing.T) {
	url := pgtest.URL(t)
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{
		Parallel: true,
		Open: func(t *testing.T, clock errandstore.Clock) errandstore.TxStore[*sql.Tx] {
			return openSchema(t, url, clock).SQL(nil)
		},
		OpenSecond: func(t *testing.T, first errandstore.TxStore[*sql.Tx], clock errandstore.Clock) errandstore.TxStore[*sql.Tx] {
			return openSecond(t, url, first.(*postgres.SQLStore).Store, clock).SQL(nil)
		},
		RefuseJob: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id string) {
			refuseJob(t, url, s.(*postgres.SQLStore).Store, id)
		},
		RawJob: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id string) string {
			return rawJob(t, url, s.(*postgres.SQLStore).Store, id)
		},
		AddSignals: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id, name string, n int, at time.Time) {
			addSignals(t, url, s.(*postgres.SQLStore).Store, id, name, n, at)
		},
		SpoilJob: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id string) {
			spoilJob(t, url, s.(*postgres.SQLStore).Store, id)
		},
	})
}

// refuseJob has the schema of s refuse to insert a job with id id, through
// a trigger.
func refuseJob(t *testing.T, url string, s *postgres.Store, id string) {
	t.Helper()
	conn, sch := schemaConn(t, url, s)
	lit := "'" + strings.ReplaceAll(id, "'", "''") + "'"
	name := pgx.Identifier{"refuse_" + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(id))), 10)}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + sch + `.` + name + `() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'job refused by the test'; END $$`,
		`CREATE TRIGGER ` + name + ` BEFORE INSERT ON ` + sch + `.errand_jobs
			FOR EACH ROW WHEN (NEW.id = ` + lit + `) EXECUTE FUNCTION ` + sch + `.` + name + `()`,
	} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// openSchema opens a store on a new schema of its own.
func openSchema(t *testing.T, url string, clock errandstore.Clock) *postgres.Store {
	schema := pgschemas.Take(t, url)
	s := open(t, url, schema, clock)
	schemaOf.Store(s, schema)
	return s
}

// openSecond opens another store on first's schema.
func openSecond(t *testing.T, url string, first *postgres.Store, clock errandstore.Clock) *postgres.Store {
	schema, ok := schemaOf.Load(first)
	if !ok {
		t.Fatal("OpenSecond: the first store was not opened by this harness")
	}
	return open(t, url, schema.(string), clock)
}

func job(id string) *errandstore.JobInsertParams {
	return &errandstore.JobInsertParams{ID: id, Queue: errand.DefaultQueue, Kind: "email",
		Args: json.RawMessage(`{"n":1}`), ArgsVersion: 1, MaxAttempts: 3}
}

// TestInsertSQLTx checks that the database/sql view's JobInsertManyTx joins
// a transaction of the application's own handle, opened with the pgx stdlib
// driver: the job exists iff it commits.
func TestInsertSQLTx(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url, pgtest.Schema(t, url), nil)
	defer s.Close()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v := s.SQL(db)
	ctx := t.Context()
	for _, commit := range []bool{true, false} {
		id := fmt.Sprintf("sql-tx-%v", commit)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := v.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{job(id), job(id)}})
		if err != nil {
			_ = tx.Rollback()
			t.Fatalf("JobInsertManyTx(*sql.Tx): %v", err)
		}
		if len(rs) != 2 || rs[0].Duplicate || !rs[1].Duplicate || rs[1].Job.ID != id || rs[0].Job.State != errandtype.StateQueued {
			t.Errorf("results %+v: want %s new and queued, then a duplicate of it", rs, id)
		}
		if _, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: id}); !errors.Is(err, errandtype.ErrNotFound) {
			t.Errorf("job %s visible before its transaction ended: %v", id, err)
		}
		// The effect ledger joins the same transaction.
		if first, err := v.EffectRecordTx(ctx, tx, &errandstore.EffectRecordParams{Key: "effect-" + id, JobID: id, LeaseToken: ""}); err != nil || !first {
			t.Errorf("EffectRecordTx(*sql.Tx) = %v, %v; want true", first, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		j, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: id})
		_, effErr := s.EffectGet(ctx, &errandstore.EffectGetParams{Key: "effect-" + id})
		switch {
		case commit && (err != nil || j.ID != id || effErr != nil):
			t.Errorf("after commit: job %v, %v; effect %v", j, err, effErr)
		case !commit && (!errors.Is(err, errandtype.ErrNotFound) || !errors.Is(effErr, errandtype.ErrNotFound)):
			t.Errorf("after rollback: job %v, %v; effect %v; want neither", j, err, effErr)
		}
	}
}

// TestConcurrentOpen checks that processes opening a fresh schema at once
// all succeed and apply each migration exactly once.
func TestConcurrentOpen(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 4)
	errs := make([]error, 4)
	start := make(chan struct{})
	for i := range stores {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	ctx := t.Context()
	rows, err := stores[0].Pool().Query(ctx, `SELECT version, count(*) FROM `+
		pgx.Identifier{schema, "errand_migrations"}.Sanitize()+` GROUP BY version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var version, n int
	var versions []int
	if _, err := pgx.ForEachRow(rows, []any{&version, &n}, func() error {
		if n != 1 {
			t.Errorf("migration %d recorded %d times", version, n)
		}
		versions = append(versions, version)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The numbers may leave gaps; every migration file is applied once.
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	slices.Sort(want)
	if !slices.Equal(versions, want) || len(want) < 3 {
		t.Errorf("applied migrations %v, want %v", versions, want)
	}
	// Every store works on the result.
	for i, s := range stores {
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{job(fmt.Sprintf("j%d", i))}}); err != nil {
			t.Errorf("insert through store %d: %v", i, err)
		}
	}
}

// TestNewerSchemaRefused checks that a store refuses a schema migrated by a
// newer errand instead of running against tables it does not know.
func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s := open(t, url, schema, nil)
	defer s.Close()
	if _, err := s.Pool().Exec(t.Context(), `INSERT INTO `+pgx.Identifier{schema, "errand_migrations"}.Sanitize()+
		` (version, name) VALUES (999, '999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	s2, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err == nil {
		s2.Close()
		t.Fatal("Open on a schema at version 999 succeeded")
	}
	t.Logf("refused as expected: %v", err)
}

// TestDatabaseClock runs a job's life without an injected clock, so that
// every decision is the database's now(): claim, renew, retry, sweep, the
// registry's clock skew and leadership.
func TestDatabaseClock(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s := open(t, url, schema, nil)
	defer s.Close()
	ctx := t.Context()
	now := func() time.Time {
		t.Helper()
		n, err := s.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	between := func(what string, got, lo, hi time.Time) {
		t.Helper()
		if got.Before(lo) || got.After(hi) {
			t.Errorf("%s %v: want between %v and %v", what, got, lo, hi)
		}
	}
	claim := func(lease time.Duration) []*errandtype.Job {
		t.Helper()
		js, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 10, Lease: lease, Owner: "w"})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}

	t0 := now()
	delayed := job("later")
	delayed.Delay = time.Hour
	rs, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{job("a"), delayed}})
	if err != nil {
		t.Fatal(err)
	}
	t1 := now()
	between("created_at", rs[0].Job.CreatedAt, t0, t1)
	if !rs[1].Job.AvailableAt.Equal(rs[1].Job.CreatedAt.Add(time.Hour)) {
		t.Errorf("delayed job available at %v, created %v; want an hour later", rs[1].Job.AvailableAt, rs[1].Job.CreatedAt)
	}

	js := claim(time.Minute)
	t2 := now()
	if len(js) != 1 || js[0].ID != "a" {
		t.Fatalf("claim: %v, want only a (later is an hour away)", js)
	}
	a := js[0]
	between("attempted_at", *a.AttemptedAt, t1, t2)
	if !a.LeaseUntil.Equal(a.AttemptedAt.Add(time.Minute)) {
		t.Errorf("lease_until %v, want a minute after attempted_at %v", a.LeaseUntil, a.AttemptedAt)
	}
	hb, err := s.JobHeartbeatMany(ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{{ID: "a", LeaseToken: *a.LeaseToken}}, Lease: time.Hour})
	if err != nil || hb[0].Err != nil {
		t.Fatalf("heartbeat: %v, %v", hb, err)
	}
	between("renewed lease", hb[0].LeaseUntil, t2.Add(time.Hour), now().Add(time.Hour))

	out, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{JobLease: errandstore.JobLease{ID: "a", LeaseToken: *a.LeaseToken},
		Kind: errandstore.OutcomeRetry, Error: &errandtype.AttemptError{Attempt: 1, Class: "error", Message: "boom"}}}})
	if err != nil || out[0].Err != nil || out[0].State != errandtype.StateRetrying {
		t.Fatalf("retry outcome: %+v, %v", out, err)
	}
	got, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Errors) != 1 || !got.Errors[0].At.Equal(got.AvailableAt) || !got.LastError.At.Equal(got.AvailableAt) {
		t.Errorf("history %+v, last_error %+v, available_at %v: want the entry at the retry's time", got.Errors, got.LastError, got.AvailableAt)
	}
	// The history's time is written as Go writes RFC 3339 times.
	var raw string
	if err := s.Pool().QueryRow(ctx, `SELECT errors->0->>'at' FROM `+pgx.Identifier{schema, "errand_jobs"}.Sanitize()+` WHERE id = 'a'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if want := got.Errors[0].At.UTC().Format(time.RFC3339Nano); raw != want {
		t.Errorf("history time stored as %q, want %q", raw, want)
	}

	// A short lease expires on the database's clock: a sweep ends it (a
	// claim sweeps only once a second, and the last claim just did), and a
	// claim takes the job again.
	js = claim(time.Hour)
	if len(js) != 1 || js[0].Attempt != 2 {
		t.Fatalf("second claim: %v", js)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE `+pgx.Identifier{schema, "errand_jobs"}.Sanitize()+
		` SET lease_until = now() - interval '1 second' WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	if r, err := s.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil || r.Retried != 1 {
		t.Fatalf("sweep after the lease expired: %+v, %v", r, err)
	}
	js = claim(time.Minute)
	if len(js) != 1 || js[0].Attempt != 3 || len(js[0].Errors) != 2 || js[0].Errors[1].Class != errandstore.ClassLeaseExpired {
		t.Fatalf("claim after the lease expired: %+v", js)
	}

	// The registry measures the worker's clock against the database's.
	if _, err := s.WorkerRegister(ctx, &errandstore.WorkerRegisterParams{ID: "w", HeartbeatInterval: time.Second}); err != nil {
		t.Fatal(err)
	}
	w, err := s.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: "w", Stats: errandstore.WorkerStats{SentAt: now().Add(-time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if w.ClockSkewMS < 3600000 || w.ClockSkewMS > 3600000+5000 {
		t.Errorf("worker an hour behind: clock_skew_ms %d, want about 3600000", w.ClockSkewMS)
	}
	skew := w.ClockSkewMS
	w, err = s.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: "w", Stats: errandstore.WorkerStats{}})
	if err != nil || w.ClockSkewMS != skew {
		t.Errorf("heartbeat without SentAt: %+v, %v; want the last skew, %d, kept", w, err, skew)
	}

	l, err := s.LeaderElect(ctx, &errandstore.LeaderElectParams{Name: "errand", Holder: "w", TTL: time.Minute})
	if err != nil || !l.Leading {
		t.Fatalf("elect: %+v, %v", l, err)
	}
	between("leader until", l.Until, t2.Add(time.Minute), now().Add(time.Minute))
}

// TestOutcomeBatchFirstWins checks that when a batch names one lease twice
// with different outcomes, the first applies and the second finds the lease
// ended, as the SQLite store applies them one after another.
func TestOutcomeBatchFirstWins(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url, pgtest.Schema(t, url), nil)
	defer s.Close()
	ctx := t.Context()
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{job("b"), job("a")}}); err != nil {
		t.Fatal(err)
	}
	js, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 2, Lease: time.Minute, Owner: "w"})
	if err != nil || len(js) != 2 {
		t.Fatalf("claim: %v, %v", js, err)
	}
	lease := func(id string) errandstore.JobLease {
		for _, j := range js {
			if j.ID == id {
				return errandstore.JobLease{ID: id, LeaseToken: *j.LeaseToken}
			}
		}
		t.Fatalf("job %s not claimed", id)
		return errandstore.JobLease{}
	}
	fail := &errandtype.AttemptError{Attempt: 1, Class: "error", Message: "boom"}
	rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{
		{JobLease: lease("b"), Kind: errandstore.OutcomeSucceeded},
		{JobLease: lease("a"), Kind: errandstore.OutcomeRetry, Error: fail},
		{JobLease: lease("a"), Kind: errandstore.OutcomeDead, Error: fail},
		{JobLease: errandstore.JobLease{ID: "a", LeaseToken: "stale"}, Kind: errandstore.OutcomeSucceeded},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []errandtype.JobState{errandtype.StateSucceeded, errandtype.StateRetrying, "", ""}
	for i, r := range rs {
		if r.State != want[i] || (want[i] == "") != errors.Is(r.Err, errandtype.ErrLeaseLost) {
			t.Errorf("outcome %d: state %q err %v; want state %q", i, r.State, r.Err, want[i])
		}
	}
	if a, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "a"}); err != nil || a.State != errandtype.StateRetrying || len(a.Errors) != 1 {
		t.Errorf("job a: %+v, %v; want retrying with one history entry", a, err)
	}
}

// testKind is one kind of a test's client, by name, run by Handler.
type testKind struct {
	Name    string
	Handler errand.Handler
}

// kindsOf builds a client's Kinds from ks.
func kindsOf(ks []testKind) *errand.Kinds {
	kinds := errand.NewKinds()
	for _, k := range ks {
		kinds.HandleRaw(k.Name, k.Handler, nil)
	}
	return kinds
}
