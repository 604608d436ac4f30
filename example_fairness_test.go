package errand_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// ExportArgs are the args of a tenant's export job.
type ExportArgs struct {
	Tenant string `json:"tenant"`
	Part   int    `json:"part"`
}

func (ExportArgs) Kind() string { return "export" }

// One tenant's burst does not delay another tenant's job: with a
// FairnessKey on each job, a worker takes the keys in turn. The first claim
// is a plain one (the worker learns that the queue has keys from it); from
// then on the tenants alternate, although globex's job was enqueued behind
// all of acme's.
func ExampleEnqueueOpts_fairnessKey() {
	store, closeStore := openExampleStore()
	defer closeStore()

	ran := make(chan string, 8)
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ExportArgs) error {
		ran <- fmt.Sprintf("%s part %d", args.Tenant, args.Part)
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	enqueue := func(tenant string, part int) {
		if _, err := client.Enqueue(ctx, ExportArgs{Tenant: tenant, Part: part},
			&errand.EnqueueOpts{FairnessKey: "tenant:" + tenant}); err != nil {
			log.Fatal(err)
		}
	}
	for part := 1; part <= 4; part++ {
		enqueue("acme", part)
	}
	enqueue("globex", 1)

	// One job at a time, so that the order shows.
	w, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for range 5 {
		select {
		case r := <-ran:
			fmt.Println(r)
		case <-time.After(30 * time.Second):
			log.Fatal("the jobs did not run")
		}
	}
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// acme part 1
	// acme part 2
	// globex part 1
	// acme part 3
	// acme part 4
}

// A worker's MaxWorkers is shared among its queues by weight when they are
// all busy: here starts split 6:3:1 between critical, default and low, each
// queue within its own 20 slots, and a queue with nothing to do leaves its
// share to the others.
func ExampleWorkerConfig_queueWeights() {
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ExportArgs) error { return nil }, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.NewWorker(&errand.WorkerConfig{
		Queues:       map[string]int{"critical": 20, "default": 20, "low": 20},
		MaxWorkers:   20,
		QueueWeights: map[string]int{"critical": 6, "default": 3, "low": 1},
	})
	fmt.Println(err)
	_, err = client.NewWorker(&errand.WorkerConfig{
		Queues:       map[string]int{"critical": 20},
		QueueWeights: map[string]int{"critical": 6},
	})
	fmt.Println(err)
	// Output:
	// <nil>
	// QueueWeights: weights share MaxWorkers; set MaxWorkers too, e.g. 10
}
