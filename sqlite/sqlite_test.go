package sqlite_test

import (
	"database/sql"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/internal/sqlitetest"
	"github.com/errandhq/errand/sqlite"
	"github.com/errandhq/errand/storetest"
)

// TestStore runs the conformance suite on real database files.
func TestStore(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{
		Parallel: true,
		Open: func(t *testing.T, clock errandstore.Clock) errandstore.TxStore[*sql.Tx] {
			return open(t, sqlitetest.Path(t), clock)
		},
		OpenSecond: func(t *testing.T, first errandstore.TxStore[*sql.Tx], clock errandstore.Clock) errandstore.TxStore[*sql.Tx] {
			return open(t, first.(*sqlite.Store).Path(), clock)
		},
		RefuseJob: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id string) {
			refuseJob(t, s.(*sqlite.Store).Path(), id)
		},
		RawJob: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id string) string {
			return strings.Join(query(t, s.(*sqlite.Store).Path(), `SELECT json_array(args, output, progress, errors) FROM errand_jobs
				WHERE id = '`+strings.ReplaceAll(id, "'", "''")+`'`), "")
		},
		AddSignals: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id, name string, n int, at time.Time) {
			exec(t, s.(*sqlite.Store).Path(), fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
				INSERT INTO errand_signals (job_seq, name, value, sent_at)
				SELECT (SELECT seq FROM errand_jobs WHERE id = %s), %s, i, %d FROM n`, n, sqlText(id), sqlText(name), at.UnixMicro()))
		},
		SpoilJob: func(t *testing.T, s errandstore.TxStore[*sql.Tx], id string) {
			exec(t, s.(*sqlite.Store).Path(), `UPDATE errand_jobs SET errors = '{"x": 1}' WHERE id = `+sqlText(id))
		},
	})
}

// sqlText is s as an SQL string literal.
func sqlText(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// refuseJob has the database file at path refuse to insert a job with id
// id, through a trigger.
func refuseJob(t *testing.T, path, id string) {
	t.Helper()
	exec(t, path, `CREATE TRIGGER refuse_`+strconv.Itoa(int(crc32.ChecksumIEEE([]byte(id))))+` BEFORE INSERT ON errand_jobs
		WHEN NEW.id = '`+strings.ReplaceAll(id, "'", "''")+`' BEGIN SELECT RAISE(ABORT, 'job refused by the test'); END`)
}

func open(t *testing.T, path string, clock errandstore.Clock) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return s
}
