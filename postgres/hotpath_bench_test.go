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

// The hot-path benchmarks every store runs (storetest/bench.go), each
// reporting jobs/s beside ns/op for benchstat. Each runs in a fresh schema
// of the database ERRAND_TEST_POSTGRES_URL names:
//
//	ERRAND_TEST_POSTGRES_URL=... go test -run '^$' -bench 'EnqueueOne|ClaimOnly|AckOnly' -count 6 ./postgres/ > new.txt
//	benchstat old.txt new.txt

func BenchmarkEnqueueOne(b *testing.B) {
	storetest.BenchmarkEnqueueOne(b, func(tb testing.TB) errandstore.TxStore[pgx.Tx] { return openBench(tb) })
}

func BenchmarkClaimOnly(b *testing.B) { storetest.BenchmarkClaimOnly(b, openBench) }

func BenchmarkAckOnly(b *testing.B) { storetest.BenchmarkAckOnly(b, openBench) }

func BenchmarkInsertClaim(b *testing.B) { storetest.BenchmarkInsertClaim(b, openBench) }

// openBench opens the store on a fresh schema, dropped when tb ends.
func openBench(tb testing.TB) *postgres.Store {
	tb.Helper()
	url := pgtest.URL(tb)
	s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgtest.Schema(tb, url)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkClaimFair is a fair claim behind one key's backlog of 10,000.
func BenchmarkClaimFair(b *testing.B) { storetest.BenchmarkClaimFair(b, openBench) }
