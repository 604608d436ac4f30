package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// testBatchList checks BatchList: newest first with ties broken by id,
// the open and completed filters, the limit, and each batch as BatchGet
// returns it.
func testBatchList(t *testing.T, h harness) {
	e := open(t, h)
	if got := e.listBatches(&errandstore.BatchListParams{}); len(got) != 0 {
		t.Fatalf("list of none = %v", got)
	}
	e.insertBatch(batchParams("b1", 2))
	e.clock.Advance(time.Second)
	e.insertBatch(batchParams("b2", 1))
	e.clock.Advance(time.Second)
	e.insertBatch(batchParams("b4", 1))
	e.insertBatch(batchParams("b3", 1)) // at b4's time: the id orders them

	// b1's members finish and it completes; b2's member runs.
	js := e.claim(3)
	if len(js) != 3 || *js[0].BatchID != "b1" || *js[1].BatchID != "b1" || *js[2].BatchID != "b2" {
		t.Fatalf("claimed %v, want b1's members then b2's", ids(js))
	}
	e.recordOK(succeeded(js[0]))
	e.recordOK(dead(js[1]))
	if done := e.completeBatches("b1"); len(done) != 1 {
		t.Fatalf("BatchComplete(b1) completed %d batches, want 1", len(done))
	}
	e.wantBatchListOrderAndFilters()
	e.wantListedBatchStates()
	var ie *errandtype.InputError
	if _, err := e.batches().BatchList(e.ctx, &errandstore.BatchListParams{State: "done"}); !errors.As(err, &ie) {
		t.Errorf("BatchList(state done) = %v, want an *InputError", err)
	}
	if _, err := e.batches().BatchList(e.ctx, &errandstore.BatchListParams{Before: &errandtype.ListCursor{CreatedAt: T0}}); !errors.As(err, &ie) {
		t.Errorf("BatchList(a cursor without an id) = %v, want an *InputError", err)
	}
}

// listBatches returns the ids of the batches BatchList(p) lists, in its
// order, and checks that it lists none as nil and each as BatchGet
// returns it.
func (e *env) listBatches(p *errandstore.BatchListParams) []string {
	t := e.t
	t.Helper()
	bs, err := e.batches().BatchList(e.ctx, p)
	if err != nil {
		t.Fatalf("BatchList(%+v): %v", *p, err)
	}
	if bs == nil {
		t.Fatalf("BatchList(%+v) = nil, want an empty list", *p)
	}
	out := []string{}
	for _, b := range bs {
		if got := e.batch(b.ID); !reflect.DeepEqual(got, b) {
			t.Errorf("listed %s =\n  %+v\nBatchGet\n  %+v", b.ID, b, got)
		}
		out = append(out, b.ID)
	}
	return out
}

// wantBatchListOrderAndFilters checks, on testBatchList's batches, the
// order (newest first, ties by id), the state filters, the limit and the
// pages.
func (e *env) wantBatchListOrderAndFilters() {
	e.t.Helper()
	for _, c := range []struct {
		p    errandstore.BatchListParams
		want []string
	}{
		{errandstore.BatchListParams{}, []string{"b4", "b3", "b2", "b1"}},
		{errandstore.BatchListParams{Limit: 2}, []string{"b4", "b3"}},
		{errandstore.BatchListParams{State: errandtype.BatchOpen}, []string{"b4", "b3", "b2"}},
		{errandstore.BatchListParams{State: errandtype.BatchOpen, Limit: 1}, []string{"b4"}},
		{errandstore.BatchListParams{State: errandtype.BatchCompleted}, []string{"b1"}},
		// Pages: after b4 (its time and id), after b3, and after a
		// position between them whose batch does not exist.
		{errandstore.BatchListParams{Limit: 2, Before: cursorOf(e.batch("b4").CreatedAt, "b4")}, []string{"b3", "b2"}},
		{errandstore.BatchListParams{Limit: 2, Before: cursorOf(e.batch("b3").CreatedAt, "b3")}, []string{"b2", "b1"}},
		{errandstore.BatchListParams{Before: cursorOf(e.batch("b4").CreatedAt, "b35")}, []string{"b3", "b2", "b1"}},
		{errandstore.BatchListParams{Before: cursorOf(e.batch("b1").CreatedAt, "b1")}, []string{}},
		{errandstore.BatchListParams{State: errandtype.BatchOpen, Before: cursorOf(e.batch("b4").CreatedAt, "b4")}, []string{"b3", "b2"}},
	} {
		if got := e.listBatches(&c.p); !slices.Equal(got, c.want) {
			e.t.Errorf("BatchList(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
}

// wantListedBatchStates checks how BatchList lists testBatchList's
// completed b1 (its result and callback job) and open b2 (its member
// running).
func (e *env) wantListedBatchStates() {
	t := e.t
	t.Helper()
	bs, err := e.batches().BatchList(e.ctx, &errandstore.BatchListParams{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*errandstore.Batch{}
	for _, b := range bs {
		byID[b.ID] = b
	}
	if b := byID["b1"]; b.Final == nil || b.Final.Succeeded != 1 || b.Final.Dead != 1 || b.CallbackJobID == nil ||
		!reflect.DeepEqual(b.Counts, counts(errandtype.StateSucceeded, 1, errandtype.StateDead, 1)) {
		t.Errorf("listed completed b1 = %+v, want 1 succeeded, 1 dead and its callback job", b)
	}
	if b := byID["b2"]; b.Final != nil || b.CompletedAt != nil || !reflect.DeepEqual(b.Counts, counts(errandtype.StateRunning, 1)) {
		t.Errorf("listed open b2 = %+v, want its member running", b)
	}
}
