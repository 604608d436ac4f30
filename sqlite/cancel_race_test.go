package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// TestTxCancelledMidway: transactions whose context ends at any moment,
// before, during or after their commit, fail or succeed and never crash
// the process. database/sql discards the connection of a transaction whose
// context ends before it commits, closing it from a goroutine of its own;
// reading the connection after the transaction raced with that close and
// could find it half closed (a nil-pointer panic in database/sql).
func TestTxCancelledMidway(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "errand.db"), nil)
	ctx := context.Background()
	deadline := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; time.Now().Before(deadline); i++ {
				cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(400))*time.Microsecond)
				if i%2 == 0 {
					s.JobInsertMany(cctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{
						ID: fmt.Sprintf("g%d-%d", g, i), Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3,
					}}})
				} else {
					s.JobClaimMany(cctx, &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 2, Lease: time.Minute, Owner: "w"})
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if _, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, Owner: "w"}); err != nil {
		t.Fatalf("a claim after the cancelled ones: %v", err)
	}
}
