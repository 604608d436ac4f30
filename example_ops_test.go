package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

type receiptArgs struct {
	Email string `json:"email"`
}

func (receiptArgs) Kind() string { return "send_receipt" }

// An operator fixes what killed jobs and replays them: one with corrected
// args, the rest in bulk by the class of their last error, at a rate the
// recovering provider can take. Every action is in the audit, and finished
// jobs are pruned once old enough.
func ExampleClient_ReplayMany() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	providerUp := false
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args receiptArgs) error {
		switch {
		case args.Email == "ana@":
			return errand.Permanent(errand.WithClass("bad_address", errors.New("no domain in ana@")))
		case !providerUp:
			return errand.Permanent(errand.WithClass("provider_down", errors.New("503 from the mail provider")))
		}
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	for i, email := range []string{"ana@", "bo@example.com", "cy@example.com"} {
		if _, err := client.Enqueue(ctx, receiptArgs{Email: email}, &errand.EnqueueOpts{ID: fmt.Sprintf("receipt-%d", i+1)}); err != nil {
			log.Fatal(err)
		}
		if _, err := client.WorkOne(ctx, &errand.WorkOneOpts{}); err != nil {
			log.Fatal(err)
		}
	}
	providerUp = true

	// Fix the address and replay that one job.
	job, err := client.Replay(ctx, "receipt-1", &errand.ReplayOpts{Operator: "ana", Reason: "address typo",
		Args: json.RawMessage(`{"email": "ana@example.com"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s with %s\n", job.ID, job.State, job.Args)

	// Replay what the provider's outage killed, at most 10 a second.
	res, err := client.ReplayMany(ctx, &errand.ReplayManyOpts{
		Filter:   errandstore.DeadFilter{Class: "provider_down"},
		Rate:     10,
		Operator: "ana", Reason: "provider back up",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("bulk replayed", len(res.Jobs), "jobs")
	for range 3 {
		if _, err := client.WorkOne(ctx, &errand.WorkOneOpts{}); err != nil {
			log.Fatal(err)
		}
	}

	audit, err := client.Audit(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range audit {
		fmt.Printf("audit: %s %s by %s: %s\n", a.Action, *a.JobID, a.Operator, a.Reason)
	}

	// Nothing is a day old yet: a dry run finds nothing to prune.
	r, err := client.Prune(ctx, &errand.PruneOpts{SucceededAge: 24 * time.Hour, DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("would prune", r.Total(), "jobs")
	// Output:
	// receipt-1: queued with {"email":"ana@example.com"}
	// bulk replayed 2 jobs
	// audit: bulk_replay receipt-3 by ana: provider back up
	// audit: bulk_replay receipt-2 by ana: provider back up
	// audit: replay_args receipt-1 by ana: address typo
	// would prune 0 jobs
}
