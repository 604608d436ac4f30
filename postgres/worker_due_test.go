package postgres_test

import (
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres/pgtest"
)

// TestIdleWorkerWakesWhenDue checks that an idle worker, which asks when
// its queue's next job comes due in the claim's own round trip, starts a
// scheduled job when it comes due, not at its hourly poll: the enqueue's
// notification wakes it, its claim finds nothing ready and answers when
// the job is due, and it sleeps until then.
func TestIdleWorkerWakesWhenDue(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	workerStore, producerStore := openForWorker(t, url, schema), openForWorker(t, url, schema)
	ran := make(chan string, 1)
	w := startWorker(t, countingClient(t, workerStore, ran), errand.WorkerConfig{PollInterval: time.Hour})
	producer := countingClient(t, producerStore, nil)
	claims := w.Stats().Claims
	r, err := producer.Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Delay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != r.Job.ID {
			t.Errorf("ran %s, want %s", id, r.Job.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("scheduled job not started 10s after it came due; the worker polls hourly, so it slept past it")
	}
	if got := w.Stats().Claims - claims; got < 2 {
		t.Errorf("%d claims, want the woken one that found nothing and the one at the due time", got)
	}
}
