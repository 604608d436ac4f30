package errand_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// PartnerSyncArgs are the args of a job that calls a partner's rate-limited API.
type PartnerSyncArgs struct {
	Account string `json:"account"`
}

func (PartnerSyncArgs) Kind() string { return "partner_sync" }

// A rate limit is held in the database, so every worker of the cluster
// shares it. Here two jobs a minute may start: the third waits, queued,
// its attempt unused, until a token is due.
func ExampleRateLimit() {
	store, closeStore := openExampleStore()
	defer closeStore()

	started := make(chan string, 3)
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args PartnerSyncArgs) error {
		started <- args.Account
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i, account := range []string{"a-1", "a-2", "a-3"} {
		if _, err := client.Enqueue(ctx, PartnerSyncArgs{Account: account}, &errand.EnqueueOpts{ID: account, Priority: i}); err != nil {
			log.Fatal(err)
		}
	}

	limit, err := errand.ParseRateLimit("kind:partner_sync=2/m,burst=2") // as errand work --rate-limit takes it
	if err != nil {
		log.Fatal(err)
	}
	budget := errand.RetryBudget{Kind: "partner_sync", Ratio: 0.1} // retries <= 10 a minute + 10% of first attempts
	w, err := client.NewWorker(&errand.WorkerConfig{RateLimits: []errand.RateLimit{limit}, RetryBudgets: []errand.RetryBudget{budget}})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	first := []string{<-started, <-started}
	sort.Strings(first) // they run at once, in either order
	fmt.Println(first)
	time.Sleep(100 * time.Millisecond) // the third is not started
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	third, err := client.Get(ctx, "a-3")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(third.ID, third.State, "attempt", third.Attempt)

	limits, err := client.Limits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range limits {
		fmt.Printf("%s %s %.0f tokens\n", l.Name, l.Spec.Mode, l.Tokens)
	}
	// Output:
	// [a-1 a-2]
	// a-3 queued attempt 0
	// kind:partner_sync rate 0 tokens
	// retry:partner_sync retry_budget 10 tokens
}
