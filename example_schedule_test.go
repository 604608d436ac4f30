package errand_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// DigestArgs are the args of the daily digest job.
type DigestArgs struct {
	List string `json:"list"`
}

func (DigestArgs) Kind() string { return "send_digest" }

// A schedule enqueues a job on every tick of its spec. Every worker given
// the schedule runs it, and each tick still enqueues one job: the store
// keeps the next fire time and the tick's job has a unique key.
func ExampleNewSchedule() {
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args DigestArgs) error {
		return nil // send the digest of args.List
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}

	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	digest, err := errand.NewSchedule("daily_digest", "0 9 * * MON-FRI", DigestArgs{List: "customers"},
		&errand.ScheduleOpts{Location: paris, Missed: errandtype.MissedCatchUp})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(digest.Spec())
	fmt.Println(digest.Next(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)).UTC()) // a Friday

	w, err := client.NewWorker(&errand.WorkerConfig{Schedules: []*errand.Schedule{digest}})
	if err != nil {
		log.Fatal(err)
	}
	_ = w // w.Start(context.Background()) runs the schedule with the jobs; client.Schedules(ctx) lists it
	// Output:
	// CRON_TZ=Europe/Paris 0 9 * * MON-FRI
	// 2026-11-30 08:00:00 +0000 UTC
}
