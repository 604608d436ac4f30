package errand_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// CardArgs are the args of a charge_card job: what must not be readable at
// rest.
type CardArgs struct {
	Token string `json:"token"`
}

func (CardArgs) Kind() string { return "charge_card" }

// A codec seals args before they reach the store; the worker that holds the
// key opens them, and a reader without it sees which key they need.
func ExampleAESGCM() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	// Keys come from the application's secret store: the first seals, all
	// open, so that a new key goes first and the old ones stay a while.
	codec, err := errand.AESGCM(
		errand.CodecKey{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)},
		errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)},
	)
	if err != nil {
		log.Fatal(err)
	}
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args CardArgs) error {
		fmt.Println("the handler charges", args.Token)
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds, Codec: codec})
	if err != nil {
		log.Fatal(err)
	}
	r, err := client.Enqueue(ctx, CardArgs{Token: "tok_visa_4242"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	raw, err := store.JobGet(ctx, &errandstore.JobGetParams{ID: r.Job.ID})
	if err != nil {
		log.Fatal(err)
	}
	kid, _ := errand.SealedKeyID(raw.Args)
	fmt.Println("at rest: sealed with", kid, "token visible:", strings.Contains(string(raw.Args), "4242"))
	if _, err := client.WorkOne(ctx, nil); err != nil {
		log.Fatal(err)
	}
	// Output:
	// at rest: sealed with k2 token visible: false
	// the handler charges tok_visa_4242
}
