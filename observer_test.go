package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// recordingObserver keeps what a client's Observer was told.
type recordingObserver struct {
	mu       sync.Mutex
	enqueued []string // job ids
	started  []string // job ids
	finished []string // "id result class"
}

func (o *recordingObserver) JobsEnqueued(jobs []*errandtype.Job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, j := range jobs {
		o.enqueued = append(o.enqueued, j.ID)
	}
}

func (o *recordingObserver) JobStarted(job *errandtype.Job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = append(o.started, job.ID)
}

func (o *recordingObserver) JobFinished(job *errandtype.Job, res *errand.WorkResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = append(o.finished, job.ID+" "+string(res.Result)+" "+res.Class)
}

// An Observer hears of every job the client inserts (not duplicates, not a
// rolled-back InTx's) and of every attempt's start and result.
func TestObserver(t *testing.T) {
	ctx := t.Context()
	st := openStore(t, nil)
	obs := &recordingObserver{}
	c := newClient(t, st, &errand.Config{Observer: obs, Kinds: kindsOf([]testKind{
		{Name: "ok", Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })},
		{Name: "bad", Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
			return errand.WithClass("receipt_unavailable", errors.New("no receipt"))
		})},
	})})

	enqueue(t, c, "ok", &errand.EnqueueOpts{ID: "a"})
	enqueue(t, c, "ok", &errand.EnqueueOpts{ID: "a"}) // duplicate
	if err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "bad"}, &errand.EnqueueOpts{ID: "b"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "ok"}, &errand.EnqueueOpts{ID: "rolled_back"}); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("InTx returned nil for a failing fn")
	}
	if want := []string{"a", "b"}; !slices.Equal(obs.enqueued, want) {
		t.Fatalf("enqueued %v, want %v", obs.enqueued, want)
	}

	workOne(t, c, nil)
	workOne(t, c, nil)
	if want := []string{"a", "b"}; !slices.Equal(obs.started, want) {
		t.Errorf("started %v, want %v", obs.started, want)
	}
	if want := []string{"a succeeded ", "b retrying receipt_unavailable"}; !slices.Equal(obs.finished, want) {
		t.Errorf("finished %v, want %v", obs.finished, want)
	}
}
