package errand_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// SyncArgs are the args of a sync_account job.
type SyncArgs struct {
	Account int `json:"account"`
}

func (SyncArgs) Kind() string { return "sync_account" }

// A unique key with the until-finished scope allows one pending sync per
// account: a second enqueue while it waits returns the first job, and once
// the sync succeeded the key enqueues again.
func ExampleUniqueOpts() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args SyncArgs) error { return nil }, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	opts := &errand.EnqueueOpts{Unique: &errand.UniqueOpts{Key: "sync:acct-7", Scope: errandtype.UniqueUntilFinished}}

	first, err := client.Enqueue(ctx, SyncArgs{Account: 7}, opts)
	if err != nil {
		log.Fatal(err)
	}
	again, err := client.Enqueue(ctx, SyncArgs{Account: 7}, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("while it waits: duplicate", again.Duplicate, "same job", again.Job.ID == first.Job.ID)
	fmt.Println("scope:", *first.Job.UniqueScope)

	if _, err := client.WorkOne(ctx, nil); err != nil {
		log.Fatal(err)
	}
	after, err := client.Enqueue(ctx, SyncArgs{Account: 7}, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after it succeeded: duplicate", after.Duplicate, "same job", after.Job.ID == first.Job.ID)

	// With the default scope, a plain UniqueKey, the key stays taken.
	once := &errand.EnqueueOpts{UniqueKey: "welcome:acct-7"}
	w, _ := client.Enqueue(ctx, SyncArgs{Account: 7}, once)
	if _, err := client.WorkOne(ctx, nil); err != nil {
		log.Fatal(err)
	}
	w2, _ := client.Enqueue(ctx, SyncArgs{Account: 7}, once)
	fmt.Println("always scope after success: duplicate", w2.Duplicate, "same job", w2.Job.ID == w.Job.ID)
	// Output:
	// while it waits: duplicate true same job true
	// scope: until_finished
	// after it succeeded: duplicate false same job false
	// always scope after success: duplicate true same job true
}

// A dead job of a kind that holds its ordering key keeps the rest of the
// key waiting until an operator replays it (it then runs first) or cancels
// it.
func ExampleOrderingOnDead() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args SyncArgs) error {
		if job.Replays == 0 && args.Account == 1 {
			return errand.Permanent(errors.New("ledger entry rejected"))
		}
		fmt.Println("applied entry", args.Account)
		return nil
	}, &errand.KindOpts{OrderingOnDead: errand.OrderingHoldOnDead})
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	var ids []string
	for _, entry := range []int{1, 2} {
		r, err := client.Enqueue(ctx, SyncArgs{Account: entry}, &errand.EnqueueOpts{OrderingKey: "ledger:acct-7"})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	for range 2 {
		r, err := client.WorkOne(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Result)
	}
	held, _ := client.Get(ctx, ids[1])
	fmt.Println("entry 2 held by entry 1:", held.HeldBy != nil && *held.HeldBy == ids[0])

	if _, err := client.Replay(ctx, ids[0], &errand.ReplayOpts{Operator: "ana", Reason: "entry corrected"}); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		if _, err := client.WorkOne(ctx, nil); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// dead
	// idle
	// entry 2 held by entry 1: true
	// applied entry 1
	// applied entry 2
}
