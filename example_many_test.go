package errand_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/errandhq/errand"
)

type indexArgs struct {
	DocID string `json:"doc_id"`
}

func (indexArgs) Kind() string { return "index_doc" }

// A many handler indexes the jobs a worker claimed together in one bulk
// request, and says per job how it went: each job's outcome is its own.
func ExampleHandleMany() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	called := make(chan int, 1)
	kinds := errand.NewKinds()
	errand.HandleMany(kinds, func(ctx context.Context, jobs []*errand.ManyJob[indexArgs]) []error {
		errs := make([]error, len(jobs)) // one bulk request for every doc here
		for i, j := range jobs {
			if j.Args.DocID == "gone" {
				errs[i] = errand.Permanent(errors.New("no such document"))
			}
		}
		called <- len(jobs)
		return errs
	}, &errand.ManyOpts{Max: 100, Linger: 100 * time.Millisecond}) // a call waits a moment for jobs of later claims
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"a", "b", "gone"} {
		if _, err := client.Enqueue(ctx, indexArgs{DocID: id}, &errand.EnqueueOpts{ID: "index-" + id}); err != nil {
			log.Fatal(err)
		}
	}
	w, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 10}})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("one call of", <-called, "jobs")
	if err := w.Stop(ctx); err != nil { // waits for the outcomes
		log.Fatal(err)
	}
	for _, id := range []string{"a", "b", "gone"} {
		job, err := client.Get(ctx, "index-"+id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(job.ID, job.State)
	}
	// Output:
	// one call of 3 jobs
	// index-a succeeded
	// index-b succeeded
	// index-gone dead
}
