package errand_test

import (
	"context"
	"errors"
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

// OrderArgs start an order flow.
type OrderArgs struct {
	Order int `json:"order"`
	Cents int `json:"cents"`
}

func (OrderArgs) Kind() string { return "order_flow" }

// Approval is the signal a person sends.
type Approval struct {
	OK bool   `json:"ok"`
	By string `json:"by"`
}

// An order flow as ordinary Go code: a payment step, a durable sleep, a
// person's approval by signal, and a refund (the compensation) when it is
// refused. Each attempt runs the handler from the top; recorded steps
// return their results without running again, and the sleep and the wait
// free the worker. The clock is injected, so the day's sleep takes no time.
func ExampleStep() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "errand-example-")
	defer os.RemoveAll(dir)
	clock := errandtest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	store, err := sqlite.Open(ctx, filepath.Join(dir, "orders.db"), &sqlite.Options{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args OrderArgs) error {
		charge, err := errand.Step(ctx, "charge", func(ctx context.Context) (string, error) {
			fmt.Println("charging", args.Cents, "cents") // printed once, whatever follows
			return fmt.Sprintf("ch_%d", args.Order), nil
		})
		if err != nil {
			return err
		}
		// Give the customer a day to change their mind.
		if err := errand.Sleep(ctx, 24*time.Hour); err != nil {
			return err
		}
		ok, err := errand.WaitFor[Approval](ctx, "approval", 72*time.Hour)
		if err != nil && !errors.Is(err, errand.ErrWaitTimedOut) {
			return err
		}
		if !ok.OK {
			_, err := errand.Step(ctx, "refund", func(ctx context.Context) (bool, error) {
				fmt.Println("refunding", charge)
				return true, nil
			})
			return err
		}
		_, err = errand.Step(ctx, "ship", func(ctx context.Context) (bool, error) {
			fmt.Println("shipping order", args.Order, "approved by", ok.By)
			return true, nil
		})
		return err
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	work := func() {
		r, err := client.WorkOne(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("attempt:", r.Result)
	}

	for _, o := range []OrderArgs{{Order: 7, Cents: 1250}, {Order: 8, Cents: 990}} {
		if _, err := client.Enqueue(ctx, o, &errand.EnqueueOpts{ID: fmt.Sprint("order-", o.Order)}); err != nil {
			log.Fatal(err)
		}
		work() // charges, then sleeps a day
	}
	clock.Advance(24 * time.Hour)
	work() // order 7 wakes and waits for its approval
	work() // order 8 too
	if err := client.Signal(ctx, "order-7", "approval", Approval{OK: true, By: "ana"}); err != nil {
		log.Fatal(err)
	}
	if err := client.Signal(ctx, "order-8", "approval", Approval{OK: false, By: "bo"}); err != nil {
		log.Fatal(err)
	}
	work()
	work()
	// Output:
	// charging 1250 cents
	// attempt: snoozed
	// charging 990 cents
	// attempt: snoozed
	// attempt: snoozed
	// attempt: snoozed
	// shipping order 7 approved by ana
	// attempt: succeeded
	// refunding ch_8
	// attempt: succeeded
}
