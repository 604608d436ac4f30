package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/errandhq/errand"
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
		jobs := make([]*errand.JobInsertParams, n)
		for i := range jobs {
			jobs[i] = job(fmt.Sprintf("good-%d-%d", n, i))
		}
		jobs[n-1] = job(fmt.Sprintf("bad-%d", n))
		if _, err := s.JobInsertMany(ctx, &errand.JobInsertManyParams{Jobs: jobs}); err == nil || !strings.Contains(err.Error(), "refused") {
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
