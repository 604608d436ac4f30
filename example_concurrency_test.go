package errand_test

import (
	"context"
	"fmt"
	"log"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// WarehouseExportArgs are the args of a job that holds a scarce resource while it
// runs: a connection to a warehouse that takes two at a time.
type WarehouseExportArgs struct {
	Table string `json:"table"`
}

func (WarehouseExportArgs) Kind() string { return "warehouse_export" }

// A concurrency limit is counted in the database, so every worker of the
// cluster shares it. Here at most two exports run at once: the third
// waits, queued, its attempt unused, until one of them ends.
func ExampleConcurrencyLimit() {
	store, closeStore := openExampleStore()
	defer closeStore()

	started := make(chan string, 3)
	release := make(chan struct{})
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args WarehouseExportArgs) error {
		started <- args.Table
		<-release
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i, table := range []string{"orders", "users", "events"} {
		if _, err := client.Enqueue(ctx, WarehouseExportArgs{Table: table}, &errand.EnqueueOpts{ID: table, Priority: i}); err != nil {
			log.Fatal(err)
		}
	}

	limit, err := errand.ParseConcurrencyLimit("kind:warehouse_export=2") // as errand work --concurrency-limit takes it
	if err != nil {
		log.Fatal(err)
	}
	w, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 10},
		ConcurrencyLimits: []errand.ConcurrencyLimit{limit}})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-started
	<-started
	third, err := client.Get(ctx, "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(third.ID, third.State, "attempt", third.Attempt)
	limits, err := client.Limits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range limits {
		fmt.Printf("%s: %d running, %.0f free\n", l.Name, *l.Running, l.Tokens)
	}
	close(release) // the two end; the third takes a slot they freed
	fmt.Println(<-started, "started")
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// events queued attempt 0
	// concurrency:warehouse_export: 2 running, 0 free
	// events started
}
