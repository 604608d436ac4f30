package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// ResizeArgs are the args of one member of the example's batch.
type ResizeArgs struct {
	Image string `json:"image"`
}

func (ResizeArgs) Kind() string { return "resize_image" }

// AlbumReadyArgs are the args of the batch's callback. errand fills Batch
// with how the batch ended.
type AlbumReadyArgs struct {
	Album string                  `json:"album"`
	Batch errandstore.BatchResult `json:"batch"`
}

func (AlbumReadyArgs) Kind() string { return "album_ready" }

// A batch fans out: its jobs run on any worker, and once every one has
// finished (succeeded, dead or cancelled) its callback job is enqueued,
// exactly once, with the counts.
func ExampleClient_EnqueueBatch() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ResizeArgs) error {
		if args.Image == "broken.png" {
			return errand.Permanent(errors.New("not an image"))
		}
		return nil
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args AlbumReadyArgs) error {
		b := args.Batch
		fmt.Printf("album %s: %d of %d resized, %d failed\n", args.Album, b.Succeeded, b.Total, b.Dead)
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}

	var members []errand.EnqueueParams
	for _, img := range []string{"a.png", "b.png", "broken.png"} {
		members = append(members, errand.EnqueueParams{Args: ResizeArgs{Image: img}})
	}
	res, err := client.EnqueueBatch(ctx, members, &errand.BatchOpts{
		ID:       "album-7", // a retried request finds the batch instead of enqueueing it twice
		Callback: AlbumReadyArgs{Album: "holidays"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(res.Jobs), "jobs in batch", res.Batch.ID)

	// A worker would run these; WorkOne runs one job at a time. The last
	// member to finish enqueues the callback, which runs last.
	for range 4 {
		if _, err := client.WorkOne(ctx, nil); err != nil {
			log.Fatal(err)
		}
	}
	b, err := client.Batch(ctx, "album-7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("callback job:", *b.CallbackJobID)
	// Output:
	// 3 jobs in batch album-7
	// album holidays: 2 of 3 resized, 1 failed
	// callback job: album-7.callback
}

// ChargeArgs are the args of a payment capture in the on-dead example.
type ChargeArgs struct {
	PaymentID string `json:"payment_id"`
}

func (ChargeArgs) Kind() string { return "capture_payment" }

// ReleaseArgs are the args of the compensation.
type ReleaseArgs struct {
	PaymentID string `json:"payment_id"`
}

func (ReleaseArgs) Kind() string { return "release_authorization" }

// A kind's OnDead hook enqueues a job each time one of its jobs is
// dead-lettered, whatever killed it: here a compensation that releases the
// payment's authorization.
func ExampleKindOpts_onDead() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ChargeArgs) error {
		return errand.Permanent(errors.New("card declined"))
	}, &errand.KindOpts{OnDead: func(job *errandtype.Job) (errand.JobArgs, *errand.EnqueueOpts) {
		var a ChargeArgs
		if err := json.Unmarshal(job.Args, &a); err != nil {
			return nil, nil
		}
		return ReleaseArgs{PaymentID: a.PaymentID}, &errand.EnqueueOpts{Queue: "compensations"}
	}})
	errand.Declare[ReleaseArgs](kinds, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	job, err := client.Enqueue(ctx, ChargeArgs{PaymentID: "pay_9"}, &errand.EnqueueOpts{ID: "capture-pay_9"})
	if err != nil {
		log.Fatal(err)
	}
	r, err := client.WorkOne(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Job.ID, r.Result)
	hook, err := client.Get(ctx, errand.DeadHookJobID("capture-pay_9", 0))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(hook.ID, hook.Kind, hook.Queue, string(hook.Args))
	// Output:
	// capture-pay_9 dead
	// capture-pay_9.dead.0 release_authorization compensations {"payment_id":"pay_9"}
}
