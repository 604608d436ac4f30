package sqlite_test

import (
	"database/sql"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/storetest"
)

// The hot-path benchmarks every store runs (storetest/bench.go), each
// reporting jobs/s beside ns/op for benchstat:
//
//	go test -run '^$' -bench 'EnqueueOne|ClaimOnly|AckOnly' -count 6 ./sqlite/ > new.txt
//	benchstat old.txt new.txt

func BenchmarkEnqueueOne(b *testing.B) {
	storetest.BenchmarkEnqueueOne(b, func(tb testing.TB) errandstore.TxStore[*sql.Tx] { return openBench(tb) })
}

func BenchmarkClaimOnly(b *testing.B) { storetest.BenchmarkClaimOnly(b, openBench) }

func BenchmarkAckOnly(b *testing.B) { storetest.BenchmarkAckOnly(b, openBench) }

func BenchmarkInsertClaim(b *testing.B) { storetest.BenchmarkInsertClaim(b, openBench) }

// BenchmarkClaimFair is a fair claim behind one key's backlog of 10,000.
func BenchmarkClaimFair(b *testing.B) { storetest.BenchmarkClaimFair(b, openBench) }
