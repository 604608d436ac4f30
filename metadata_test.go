package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestEnqueueMetadata: EnqueueOpts.Metadata is kept with the job, on a plain enqueue, an eager one and a batch's
// callback; null and {} are none; it is not part of the job's identity;
// anything but an object is refused and nothing is written.
func TestEnqueueMetadata(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		ks := errand.NewKinds()
		errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a memberArgs) error { return nil }, nil)
		errand.Declare[doneArgs](ks, nil)
		c := newClient(t, st, &errand.Config{Kinds: ks, Clock: clock, AllowUnknownKinds: true})
		meta := json.RawMessage("{\n  \"traceparent\": \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\", \"n\": 1.50}")
		const want = `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","n":1.50}`
		wantMeta := func(what string, j *errandtype.Job) {
			t.Helper()
			var got, w map[string]any
			if json.Unmarshal(j.Metadata, &got) != nil || json.Unmarshal([]byte(want), &w) != nil || len(got) != 2 ||
				got["traceparent"] != w["traceparent"] || got["n"] != w["n"] {
				t.Errorf("%s: metadata %s, want %s", what, j.Metadata, want)
			}
		}

		j := enqueue(t, c, "plain", &errand.EnqueueOpts{ID: "a", Metadata: meta})
		wantMeta("enqueued", j)
		wantMeta("read", getJob(t, c, "a"))
		for _, none := range []string{"", "null", " {} "} {
			if j := enqueue(t, c, "plain", &errand.EnqueueOpts{Metadata: json.RawMessage(none)}); j.Metadata != nil {
				t.Errorf("metadata %q kept as %s, want none", none, j.Metadata)
			}
		}

		// Another trace context on a retried request is the same job.
		r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "plain"}, &errand.EnqueueOpts{ID: "a", Metadata: json.RawMessage(`{"traceparent":"other"}`)})
		if err != nil || !r.Duplicate {
			t.Fatalf("a duplicate id with other metadata: %+v, %v; want the existing job", r, err)
		}
		wantMeta("duplicate", r.Job)

		idleWorker(t, c, clock, errand.WorkerConfig{Queues: map[string]int{"eager": 1}})
		r, err = c.Enqueue(ctx, memberArgs{N: 1}, &errand.EnqueueOpts{Queue: "eager", Eager: true, Metadata: meta})
		if err != nil || r.Job.State != errandtype.StateRunning {
			t.Fatalf("eager enqueue: %+v, %v; want a running job", r, err)
		}
		wantMeta("eager", r.Job)

		if _, err := c.EnqueueBatch(ctx, memberParams(1), &errand.BatchOpts{ID: "b", Callback: doneArgs{Import: 1},
			CallbackOpts: &errand.EnqueueOpts{Metadata: meta}}); err != nil {
			t.Fatal(err)
		}
		workOne(t, c, nil)
		wantMeta("batch callback", getJob(t, c, errandstore.BatchCallbackJobID("b")))

		for _, bad := range []string{`[1]`, `"x"`, `{"a":`} {
			_, err := c.Enqueue(ctx, errand.RawArgs{KindName: "plain"}, &errand.EnqueueOpts{ID: "bad", Metadata: json.RawMessage(bad)})
			var ie *errandtype.InputError
			if !errors.As(err, &ie) || ie.Field != "metadata" {
				t.Errorf("metadata %s: %v, want an input error on metadata", bad, err)
			}
			if _, err := c.Get(ctx, "bad"); !errors.Is(err, errandtype.ErrNotFound) {
				t.Errorf("metadata %s: the job was written (%v)", bad, err)
			}
		}
	})
}
