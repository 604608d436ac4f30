package errandtest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

type RemindArgs struct{}

func (RemindArgs) Kind() string { return "remind" }

// A worker test that neither sleeps nor waits on the real clock: the store
// and the client share a fake clock, the test waits until the worker
// sleeps until a delayed job is due, and moves the clock there.
func Example() {
	ctx := context.Background()
	clock := errandtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	dir, err := os.MkdirTemp("", "errandtest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "errand.db"), &sqlite.Options{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ran := make(chan time.Time, 1)
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args RemindArgs) error {
		ran <- clock.Now()
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Clock: clock, Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := client.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer worker.Stop(ctx)

	res, err := client.Enqueue(ctx, RemindArgs{}, &errand.EnqueueOpts{Delay: 30 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	// The idle worker sleeps until the job is due, not a whole poll.
	if err := clock.BlockUntilAt(ctx, res.Job.AvailableAt, 1); err != nil {
		log.Fatal(err)
	}
	clock.Set(res.Job.AvailableAt)
	fmt.Println("ran at", (<-ran).Format(time.Kitchen))
	// Output: ran at 12:30PM
}
