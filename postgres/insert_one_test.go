package postgres

import (
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqltx"
	"github.com/errandhq/errand/postgres/pgtest"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver for database/sql
)

// TestInsertOneMatchesInsertMany checks that a job inserted alone (one row
// of scalar parameters, insertOneSQL) is stored and returned as the same
// job inserted in a batch (unnested arrays, insertSQL), field by field
// apart from id and seq, for every column an application can set, through
// pgx and through database/sql; and that a lone duplicate is reported with
// the job that holds its id or key.
func TestInsertOneMatchesInsertMany(t *testing.T) {
	ctx := t.Context()
	s, clock := openClocked(t)
	jobs := func(prefix string) []*errandstore.JobInsertParams {
		ps := append(copyTestJobs(prefix+"-v", 8, clock.Now()), oneOfEachTestJobs(prefix+"-o", 70, clock.Now())...)
		for i, p := range ps[:4] {
			p.UniqueKey = fmt.Sprintf("%s-u%d", prefix, i)
			p.UniqueScope = errandtype.UniqueUntilFinished
			if i%2 == 1 {
				p.UniqueWindow = time.Hour
			}
		}
		return ps
	}
	batch, err := s.insert(ctx, pgxQuerier{s.pool}, s.own, jobs("many"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, p := range jobs("one") {
		var got []errandstore.JobInsertResult
		via := "pgx"
		if i%2 == 0 {
			got, err = s.insert(ctx, pgxQuerier{s.pool}, s.own, []*errandstore.JobInsertParams{p})
		} else {
			via = "database/sql"
			var tx *sql.Tx
			if tx, err = db.BeginTx(ctx, nil); err == nil {
				err = sqltx.Run(tx, func(tx *sql.Tx) error {
					got, err = s.insert(ctx, sqlQuerier{tx}, s.inTx, []*errandstore.JobInsertParams{p})
					return err
				})
			}
		}
		if err != nil {
			t.Fatalf("job %d through %s: %v", i, via, err)
		}
		if len(got) != 1 || got[0].Duplicate || got[0].Job.ID != p.ID {
			t.Fatalf("job %d through %s: %+v", i, via, got)
		}
		one, many := withoutArgs(got[0].Job), withoutArgs(batch[i].Job)
		one.ID, one.Seq, many.ID, many.Seq = "", 0, "", 0
		if many.UniqueKey != nil {
			k := "one" + (*many.UniqueKey)[len("many"):]
			many.UniqueKey = &k
		}
		if !sameArgs(got[0].Job.Args, batch[i].Job.Args) || !reflect.DeepEqual(one, many) {
			t.Errorf("job %d through %s: alone\n\t%+v\nin a batch\n\t%+v", i, via, one, many)
		}
		stored, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		stored.HeldBy = nil
		if !reflect.DeepEqual(withoutArgs(stored), withoutArgs(got[0].Job)) {
			t.Errorf("job %s: returned\n\t%+v\nbut stored\n\t%+v", p.ID, got[0].Job, stored)
		}
	}

	// A lone job whose id or unique key is taken writes nothing and is
	// answered with the job that holds it.
	for _, c := range []struct {
		name   string
		p      *errandstore.JobInsertParams
		holder string
	}{
		{"id", &errandstore.JobInsertParams{ID: "one-v-0005", Queue: errand.DefaultQueue, Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}, "one-v-0005"},
		{"key", &errandstore.JobInsertParams{ID: "fresh", Queue: errand.DefaultQueue, Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1,
			UniqueKey: "one-u2", UniqueScope: errandtype.UniqueUntilFinished}, "one-v-0002"},
	} {
		got, err := s.insert(ctx, pgxQuerier{s.pool}, s.own, []*errandstore.JobInsertParams{c.p})
		if err != nil {
			t.Fatalf("duplicate %s: %v", c.name, err)
		}
		if len(got) != 1 || !got[0].Duplicate || got[0].Job.ID != c.holder {
			t.Errorf("duplicate %s: got %+v, want a duplicate held by %s", c.name, got, c.holder)
		}
	}
	if _, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "fresh"}); err == nil {
		t.Error("the duplicate of a unique key was written")
	}
}
