package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestDebounceManyConcurrentEnqueues: 64 goroutines enqueue one debounce
// key at once through the client, half alone and half in a transaction
// of their own with one EnqueueManyTx that also enqueues another key, in
// either order (its locks are taken sorted, so they cannot deadlock): one
// job per key is pending, and it counts every other enqueue.
func TestDebounceManyConcurrentEnqueues(t *testing.T) {
	ctx := t.Context()
	st, c := anyKindClient(t)
	opts := func(key string) *errand.EnqueueOpts {
		return &errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: key, Window: time.Hour}}
	}
	const n = 64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			args := errand.RawArgs{KindName: "reindex", JSON: []byte(fmt.Sprintf(`{"n":%d}`, i))}
			if i%2 == 0 {
				if _, err := c.Enqueue(ctx, args, opts("user:42")); err != nil {
					t.Errorf("enqueue %d: %v", i, err)
				}
				return
			}
			keys := []string{"user:42", "user:7"}
			if i%4 == 1 {
				keys[0], keys[1] = keys[1], keys[0]
			}
			err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
				_, err := c.EnqueueManyTx(ctx, tx, []errand.EnqueueParams{{Args: args, Opts: opts(keys[0])}, {Args: args, Opts: opts(keys[1])}})
				return err
			})
			if err != nil {
				t.Errorf("enqueue %d in a transaction: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	js, err := c.List(ctx, &errand.ListOpts{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	absorbed := map[string]int{}
	for _, j := range js {
		absorbed[*j.DebounceKey] += j.Absorbed + 1
	}
	if len(js) != 2 || absorbed["user:42"] != n || absorbed["user:7"] != n/2 {
		t.Fatalf("%d jobs, enqueues per key %v; want one job per key, having taken %d and %d enqueues", len(js), absorbed, n, n/2)
	}
}

// anyKindClient opens a store on a fresh schema, closed when the test
// ends, and a client of it that enqueues jobs of any kind.
func anyKindClient(t *testing.T) (*postgres.Store, *errand.Client[pgx.Tx]) {
	t.Helper()
	url := pgtest.URL(t)
	st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgtest.Schema(t, url)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := errand.NewClient(st, &errand.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	return st, c
}
