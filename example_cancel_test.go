package errand_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

type importArgs struct {
	Rows  int `json:"rows"`
	Chunk int `json:"chunk"`
}

func (importArgs) Kind() string { return "import_rows" }

// importCheckpoint is where an import got to: the first row not yet
// imported.
type importCheckpoint struct {
	Next int `json:"next"`
}

// A job over many rows works in chunks and checkpoints after each; an
// attempt that fails (or whose worker crashes, times out or is drained)
// leaves the checkpoint for the next, which resumes from it. With a million
// rows in chunks of a thousand, a crash redoes at most a thousand rows.
func ExampleCheckpoint() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args importArgs) error {
		cp, _, err := errand.Checkpoint[importCheckpoint](job)
		if err != nil {
			return err
		}
		for from := cp.Next; from < args.Rows; from += args.Chunk {
			to := min(from+args.Chunk, args.Rows)
			if job.Attempt == 1 && from >= 6 {
				return errand.RetryAfter(time.Millisecond, errors.New("database went away"))
			}
			// Commit the chunk's rows here, then checkpoint past them.
			fmt.Printf("attempt %d: rows %d to %d\n", job.Attempt, from, to-1)
			if err := errand.SetProgress(ctx, importCheckpoint{Next: to}); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	r, err := client.Enqueue(ctx, importArgs{Rows: 10, Chunk: 3}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for {
		res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		if res.Result == errand.ResultSucceeded {
			break
		}
		if res.Result == errand.ResultRetrying {
			fmt.Println("attempt failed:", res.Error)
		}
		time.Sleep(5 * time.Millisecond) // until the retry is due
	}
	job, err := client.Get(ctx, r.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, string(job.Progress))
	// Output:
	// attempt 1: rows 0 to 2
	// attempt 1: rows 3 to 5
	// attempt failed: database went away
	// attempt 2: rows 6 to 8
	// attempt 2: rows 9 to 9
	// succeeded {"next":10}
}

// An operator cancels a job while it runs: the handler's context is
// cancelled with cause ErrJobCancelled, and the job ends cancelled.
func ExampleClient_Cancel_running() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	started := make(chan struct{})
	stopped := make(chan error, 1)
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args importArgs) error {
		close(started)
		<-ctx.Done() // a long import, checking its context between chunks
		stopped <- context.Cause(ctx)
		return context.Cause(ctx)
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := client.NewWorker(nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer worker.Stop(ctx)
	r, err := client.Enqueue(ctx, importArgs{Rows: 1_000_000, Chunk: 1_000}, nil)
	if err != nil {
		log.Fatal(err)
	}
	<-started
	job, err := client.Cancel(ctx, r.Job.ID, &errand.CancelOpts{Operator: "ana", Reason: "wrong file"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, "with a cancel request:", job.CancelPending())
	for job.State == errandtype.StateRunning {
		time.Sleep(10 * time.Millisecond)
		if job, err = client.Get(ctx, r.Job.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("handler stopped:", <-stopped)
	fmt.Println(job.State, job.LastError.Class)
	// Output:
	// running with a cancel request: true
	// handler stopped: job cancelled by an operator
	// cancelled cancelled
}
