package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestInsertAllOrNothingOnTheServer checks that a batch the server refuses
// part of leaves nothing behind, on the single-statement path (no explicit
// transaction) and on the COPY path alike: a trigger refuses the batch's
// last job after the others were written. (100 jobs go through COPY, whose
// threshold is 64.)
func TestInsertAllOrNothingOnTheServer(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s := open(t, url, schema, nil)
	defer s.Close()
	ctx := t.Context()
	table := pgx.Identifier{schema, "errand_jobs"}.Sanitize()
	if _, err := s.Pool().Exec(ctx, `CREATE FUNCTION `+pgx.Identifier{schema, "refuse_bad"}.Sanitize()+`() RETURNS trigger
		LANGUAGE plpgsql AS $$ BEGIN
			IF NEW.id LIKE 'bad%' THEN RAISE EXCEPTION 'refused %', NEW.id; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_bad BEFORE INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+
		pgx.Identifier{schema, "refuse_bad"}.Sanitize()+`()`); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 100} {
		jobs := make([]*errandstore.JobInsertParams, n)
		for i := range jobs {
			jobs[i] = job(fmt.Sprintf("good-%d-%d", n, i))
		}
		jobs[n-1] = job(fmt.Sprintf("bad-%d", n))
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: jobs}); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("batch of %d with a refused job: %v, want the trigger's error", n, err)
		}
		var left int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("batch of %d with a refused job left %d jobs, want none", n, left)
		}
	}
}

// TestCopyConflictOwnTx checks a bulk insert of the store's own whose COPY
// meets a taken id: the batch is inserted after all, the taken id reported
// as a duplicate, and the one connection of the pool is left usable, out
// of the aborted transaction.
func TestCopyConflictOwnTx(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{job("taken")}}); err != nil {
		t.Fatal(err)
	}
	jobs := make([]*errandstore.JobInsertParams, 100) // COPY's threshold is 64
	for i := range jobs {
		jobs[i] = job(fmt.Sprintf("bulk-%03d", i))
	}
	jobs[50] = job("taken")
	rs, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatalf("bulk insert meeting a taken id: %v", err)
	}
	for i, r := range rs {
		if r.Duplicate != (i == 50) || r.Job.ID != jobs[i].ID {
			t.Errorf("result %d: %s duplicate %v; want %s, duplicate only at 50", i, r.Job.ID, r.Duplicate, jobs[i].ID)
		}
	}
	js, err := s.JobList(ctx, &errandstore.JobListParams{Limit: 200})
	if err != nil {
		t.Fatalf("list after the conflict, on the pool's one connection: %v", err)
	}
	if len(js) != 100 {
		t.Errorf("%d jobs after the bulk insert, want 100", len(js))
	}
}
