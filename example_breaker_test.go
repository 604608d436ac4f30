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

// WelcomeArgs are the args of a send_welcome job, which calls the SMTP
// relay.
type WelcomeArgs struct {
	UserID string `json:"user_id"`
}

func (WelcomeArgs) Kind() string { return "send_welcome" }

// A kind names the dependency its jobs call. When the relay is down, the
// breaker opens after two failures in a row: the third job is not
// attempted, and the two that failed keep their remaining attempts. After
// the cool-down a probe job tests the relay; its success closes the
// breaker (or client.ResetBreaker closes it at once).
func ExampleKindOpts_dependency() {
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args WelcomeArgs) error {
		return errors.New("dial smtp: connection refused") // the relay is down
	}, &errand.KindOpts{Dependency: "smtp", MaxAttempts: 5})
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds,
		Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {Threshold: 2, Window: time.Minute, Cooldown: time.Hour}}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, user := range []string{"u1", "u2", "u3"} {
		if _, err := client.Enqueue(ctx, WelcomeArgs{UserID: user}, nil); err != nil {
			log.Fatal(err)
		}
	}
	w, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	var smtp *errandtype.BreakerRecord
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		bs, err := client.Breakers(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if len(bs) == 1 && bs[0].State == errandtype.BreakerOpen {
			smtp = bs[0]
			break
		}
	}
	time.Sleep(1500 * time.Millisecond) // the failed jobs' retries come due: they wait for the breaker
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(smtp.Dependency, smtp.State, smtp.Failures, smtp.LastError)
	jobs, err := client.List(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println(j.State, "attempt", j.Attempt, "of", j.MaxAttempts)
	}
	// Output:
	// smtp open 2 dial smtp: connection refused
	// retrying attempt 1 of 5
	// retrying attempt 1 of 5
	// queued attempt 0 of 5
}
