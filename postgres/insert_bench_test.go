package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/storetest"
)

// BenchmarkInsertMany is the bulk-enqueue benchmark every store runs
// (storetest/bench.go), on a fresh schema with a pool of 4:
//
//	ERRAND_TEST_POSTGRES_URL=... go test -run '^$' -bench InsertMany -count 6 ./postgres/
func BenchmarkInsertMany(b *testing.B) {
	storetest.BenchmarkInsertMany(b, func(tb testing.TB) errandstore.TxStore[pgx.Tx] {
		url := pgtest.URL(tb)
		s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgtest.Schema(tb, url), MaxConns: 4})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	})
}
