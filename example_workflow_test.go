package errand_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// CardChargeArgs charge an order's card: the first step of the checkout
// workflow.
type CardChargeArgs struct {
	Order int `json:"order"`
}

func (CardChargeArgs) Kind() string { return "checkout_charge" }

// CardRefundArgs undo the charge. errand fills Workflow, which holds the
// outputs of the steps that succeeded: the charge's payment id.
type CardRefundArgs struct {
	Order    int                         `json:"order"`
	Workflow errandstore.WorkflowContext `json:"workflow"`
}

func (CardRefundArgs) Kind() string { return "checkout_refund" }

// StockReserveArgs reserve the order's items once the card is charged.
type StockReserveArgs struct {
	Order    int                         `json:"order"`
	Workflow errandstore.WorkflowContext `json:"workflow"`
}

func (StockReserveArgs) Kind() string { return "checkout_reserve" }

// StockReleaseArgs undo the reservation.
type StockReleaseArgs struct {
	Order int `json:"order"`
}

func (StockReleaseArgs) Kind() string { return "checkout_release" }

// ShipArgs hand the order to the courier, the last step.
type ShipArgs struct {
	Order int `json:"order"`
}

func (ShipArgs) Kind() string { return "checkout_ship" }

// Payment is the charge step's output.
type Payment struct {
	ID string `json:"id"`
}

// A workflow runs its steps as their dependencies succeed; a step reads its
// dependencies' outputs. When a step fails for good, the compensations of
// the steps that succeeded run, latest first, and the workflow ends failed.
func ExampleClient_EnqueueWorkflow() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args CardChargeArgs) error {
		fmt.Println("charge order", args.Order)
		return errand.SetOutput(ctx, Payment{ID: "pay-1001"}) // what the next steps read
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args StockReserveArgs) error {
		p, _, err := errand.StepOutput[Payment](args.Workflow, "charge")
		if err != nil {
			return err
		}
		fmt.Println("reserve stock, paid by", p.ID)
		return nil
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ShipArgs) error {
		fmt.Println("ship: the courier refuses the parcel")
		return errand.Permanent(errors.New("parcel too heavy"))
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args StockReleaseArgs) error {
		fmt.Println("release stock")
		return nil
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args CardRefundArgs) error {
		p, _, err := errand.StepOutput[Payment](args.Workflow, "charge")
		if err != nil {
			return err
		}
		fmt.Println("refund", p.ID)
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}

	_, err = client.EnqueueWorkflow(ctx, []errand.WorkflowStep{
		{Name: "charge", Args: CardChargeArgs{Order: 1001}, Compensate: CardRefundArgs{Order: 1001}},
		{Name: "reserve", Args: StockReserveArgs{Order: 1001}, DependsOn: []string{"charge"}, Compensate: StockReleaseArgs{Order: 1001}},
		{Name: "ship", Args: ShipArgs{Order: 1001}, DependsOn: []string{"reserve"}},
	}, &errand.WorkflowOpts{
		ID:   "checkout-1001", // a retried request finds the workflow instead of starting it twice
		Name: "checkout",
	})
	if err != nil {
		log.Fatal(err)
	}

	// A worker would run these; WorkOne runs one job at a time, until none
	// is left.
	for {
		r, err := client.WorkOne(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		if r.JobID == nil {
			break
		}
	}
	w, err := client.Workflow(ctx, "checkout-1001")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("workflow %s: %s at step %s\n", w.ID, w.State, *w.FailedStep)
	// Output:
	// charge order 1001
	// reserve stock, paid by pay-1001
	// ship: the courier refuses the parcel
	// release stock
	// refund pay-1001
	// workflow checkout-1001: failed at step ship
}
