package sqlite_test

import (
	"database/sql"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/storetest"
)

// BenchmarkInsertMany is the bulk-enqueue benchmark every store runs
// (storetest/bench.go):
//
//	go test -run '^$' -bench InsertMany -count 6 ./sqlite/
func BenchmarkInsertMany(b *testing.B) {
	storetest.BenchmarkInsertMany(b, func(tb testing.TB) errandstore.TxStore[*sql.Tx] { return openBench(tb) })
}
