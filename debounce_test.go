package errand_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestDebounceEnqueue: through the client, a burst of last-wins enqueues
// of one key leaves one job with the newest args, which a worker runs once,
// after the window; Enqueue reports each fold.
func TestDebounceEnqueue(t *testing.T) {
	clock := newTestClock()
	var ran []string
	c := handlerClient(t, openStore(t, clock), func(_ context.Context, j *errandtype.Job) error {
		ran = append(ran, string(j.Args))
		return nil
	})
	opts := &errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:42", Window: 5 * time.Second}}
	var first string
	for i := range 4 {
		r, err := c.Enqueue(t.Context(), rawArgs(t, "task", map[string]int{"n": i}), opts)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.Job.ID
		}
		if r.Absorbed != (i > 0) || r.Duplicate != (i > 0) || r.Job.ID != first || r.Job.Absorbed != i {
			t.Fatalf("enqueue %d: job %s absorbed %v (%d); want job %s, absorbed %v (%d)", i, r.Job.ID, r.Absorbed, r.Job.Absorbed, first, i > 0, i)
		}
		clock.Advance(time.Second)
	}
	clock.Advance(3 * time.Second) // 4s after the last enqueue, at 3s
	if res := workOne(t, c, nil); res.JobID != nil {
		t.Fatalf("job %s ran before its window passed", *res.JobID)
	}
	clock.Advance(time.Second) // 5s after it
	if res := workOne(t, c, nil); res.JobID == nil || *res.JobID != first {
		t.Fatalf("worked %+v; want job %s", res, first)
	}
	if len(ran) != 1 || ran[0] != `{"n":3}` {
		t.Fatalf("ran %v; want one run with the newest args", ran)
	}
}

// TestDebounceRefusals: a debounce that cannot fold is refused with what
// to change, and nothing is written.
func TestDebounceRefusals(t *testing.T) {
	c := handlerClient(t, openStore(t, newTestClock()), func(context.Context, *errandtype.Job) error { return nil })
	d := func() *errand.DebounceOpts { return &errand.DebounceOpts{Key: "k", Window: time.Second} }
	args := rawArgs(t, "task", map[string]int{"n": 1})
	for name, o := range map[string]*errand.EnqueueOpts{
		"id":           {ID: "mine", Debounce: d()},
		"unique":       {UniqueKey: "u", Debounce: d()},
		"eager":        {Eager: true, Debounce: d()},
		"delay":        {Delay: time.Minute, Debounce: d()},
		"no window":    {Debounce: &errand.DebounceOpts{Key: "k"}},
		"no key":       {Debounce: &errand.DebounceOpts{Window: time.Second}},
		"max wait fw":  {Debounce: &errand.DebounceOpts{Key: "k", Window: time.Second, Mode: errand.DebounceFirstWins, MaxWait: time.Minute}},
		"max wait low": {Debounce: &errand.DebounceOpts{Key: "k", Window: time.Minute, MaxWait: time.Second}},
	} {
		if _, err := c.Enqueue(t.Context(), args, o); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("%s: %v; want an *InputError", name, err)
		}
		if err := errand.CheckEnqueue(args, o); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("CheckEnqueue %s: %v; want an *InputError", name, err)
		}
	}
	if _, err := c.EnqueueBatch(t.Context(), []errand.EnqueueParams{{Args: args, Opts: &errand.EnqueueOpts{Debounce: d()}}}, nil); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("batch: %v; want an *InputError", err)
	}
	if _, err := c.EnqueueWorkflow(t.Context(), []errand.WorkflowStep{{Name: "a", Args: args, Opts: &errand.EnqueueOpts{Debounce: d()}}}, nil); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("workflow: %v; want an *InputError", err)
	}
	js, err := c.List(t.Context(), nil)
	if err != nil || len(js) != 0 {
		t.Fatalf("list: %d jobs, %v; want none", len(js), err)
	}
}
