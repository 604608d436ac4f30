package errand_test

import (
	"errors"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestClientBatches lists batches through the client: newest first, each
// with its counts, filtered by state; a bad state or limit is an
// *InputError.
func TestClientBatches(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, nil)
	ctx := t.Context()
	if bs, err := c.Batches(ctx, nil); err != nil || len(bs) != 0 {
		t.Fatalf("Batches of none = %v (%v)", bs, err)
	}
	for _, id := range []string{"b1", "b2"} {
		if _, err := c.EnqueueBatch(ctx, memberParams(2), &errand.BatchOpts{ID: id}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(1e9)
	}
	js, err := c.List(ctx, &errand.ListOpts{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if *j.BatchID == "b1" {
			if _, err := c.Cancel(ctx, j.ID, &errand.CancelOpts{Operator: "ops", Reason: "test"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range []struct {
		p    *errandstore.BatchListParams
		want []string
	}{
		{nil, []string{"b2", "b1"}},
		{&errandstore.BatchListParams{Limit: 1}, []string{"b2"}},
		{&errandstore.BatchListParams{State: errandtype.BatchOpen}, []string{"b2"}},
		{&errandstore.BatchListParams{State: errandtype.BatchCompleted}, []string{"b1"}},
	} {
		bs, err := c.Batches(ctx, tt.p)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range bs {
			got = append(got, b.ID)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) || (len(got) > 1 && got[1] != tt.want[1]) {
			t.Errorf("Batches(%+v) = %v, want %v", tt.p, got, tt.want)
		}
		for _, b := range bs {
			if b.ID == "b1" && (b.Final == nil || b.Final.Cancelled != 2 || b.Counts[errandtype.StateCancelled] != 2) {
				t.Errorf("listed b1 = %+v, want its two members cancelled", b)
			}
			if b.ID == "b2" && b.Pending() != 2 {
				t.Errorf("listed b2 = %+v, want its two members pending", b)
			}
		}
	}
	var ie *errandtype.InputError
	for _, p := range []*errandstore.BatchListParams{{State: "done"}, {Limit: -1}} {
		if _, err := c.Batches(ctx, p); !errors.As(err, &ie) {
			t.Errorf("Batches(%+v) = %v, want an *InputError", p, err)
		}
	}
	if _, err := errand.ParseBatchState("running"); !errors.As(err, &ie) {
		t.Errorf("ParseBatchState(running) = %v, want an *InputError", err)
	}
}
