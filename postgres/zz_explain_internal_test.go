package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres/pgtest"
)

func TestZZClaimVariants(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(t, url)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 100; i++ {
		ps := make([]*errandstore.JobInsertParams, 1000)
		for j := range ps {
			ps[j] = &errandstore.JobInsertParams{ID: fmt.Sprintf("j%d-%d", i, j), Queue: "default", Kind: "noop", Args: []byte(`{}`), MaxAttempts: 3, ArgsVersion: 1}
		}
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: ps}); err != nil {
			t.Fatal(err)
		}
	}
	ctidQ := claimOneSQL
	seqQ := replacePick(claimSQL, strings.Replace(claimOneQueue, "SELECT c.ctid FROM", "SELECT c.seq FROM", 1))
	variants := map[string]string{"seq": seqQ, "ctid": ctidQ}
	names := []string{"seq", "ctid"}
	times := map[string][]float64{}
	for rep := 0; rep < 160; rep++ {
		n := names[rep%2]
		q := s.sql(variants[n])
		conn, _ := s.pool.Acquire(ctx)
		conn.Exec(ctx, "SET jit = off")
		rows, err := conn.Conn().Query(ctx, "EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) "+q, nil, int64(60_000_000), "me", "default", nil, 500)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			rows.Scan(&l)
			var ms float64
			if _, err := fmt.Sscanf(l, "Execution Time: %f ms", &ms); err == nil {
				times[n] = append(times[n], ms)
			}
			if rep < 2 && strings.Contains(l, "Scan on errand_jobs ") {
				fmt.Println(n, l)
			}
		}
		rows.Close()
		conn.Release()
	}
	for _, n := range names {
		ts := times[n]
		sort.Float64s(ts)
		fmt.Printf("%s n=%d p25 %.2f p50 %.2f p75 %.2f\n", n, len(ts), ts[len(ts)/4], ts[len(ts)/2], ts[3*len(ts)/4])
	}
}
