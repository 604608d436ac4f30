package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// coreStore is a real store seen through the required interfaces alone:
// a store with none of the optional capabilities.
type coreStore struct {
	errandstore.TxStore[*sql.Tx]
}

// wantStoreError fails unless err is the *InputError on field "store" that
// says what the store does not keep.
func wantStoreError(t *testing.T, call string, err error, keeps string) {
	t.Helper()
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || ie.Field != "store" || !strings.Contains(ie.Message, "does not keep "+keeps) {
		t.Errorf("%s: error %v, want the store's *InputError saying it does not keep %s", call, err, keeps)
	}
}

// A store without batches or workflows answers every call that needs them
// with an error naming the store, before writing anything; the calls that
// read an optional capability's state answer empty.
func TestStoreWithoutCapabilities(t *testing.T) {
	ctx := context.Background()
	st := coreStore{openStore(t, nil)}
	var setOutputErr error
	c := handlerClient(t, st, func(ctx context.Context, _ *errandtype.Job) error {
		setOutputErr = errand.SetOutput(ctx, map[string]int{"n": 1})
		return nil
	})

	_, err := c.EnqueueBatch(ctx, nil, nil)
	wantStoreError(t, "EnqueueBatch", err, "batches")
	err = c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.EnqueueBatchTx(ctx, tx, nil, nil)
		wantStoreError(t, "EnqueueBatchTx", err, "batches")
		_, err = c.EnqueueWorkflowTx(ctx, tx, nil, nil)
		wantStoreError(t, "EnqueueWorkflowTx", err, "workflows")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Batch(ctx, "b1")
	wantStoreError(t, "Batch", err, "batches")
	_, err = c.Batches(ctx, nil)
	wantStoreError(t, "Batches", err, "batches")

	_, err = c.EnqueueWorkflow(ctx, nil, nil)
	wantStoreError(t, "EnqueueWorkflow", err, "workflows")
	_, err = c.Workflow(ctx, "w1")
	wantStoreError(t, "Workflow", err, "workflows")
	_, err = c.Workflows(ctx, nil)
	wantStoreError(t, "Workflows", err, "workflows")
	_, err = c.WorkflowCounts(ctx)
	wantStoreError(t, "WorkflowCounts", err, "workflows")
	_, err = c.RerunWorkflow(ctx, "w1", nil)
	wantStoreError(t, "RerunWorkflow", err, "workflows")
	err = c.SetJobOutput(ctx, "j1", "token", []byte(`1`))
	wantStoreError(t, "SetJobOutput", err, "workflows")
	if c.SupportsWorkflows() {
		t.Error("SupportsWorkflows is true for a store without workflows")
	}

	enqueue(t, c, "task", nil)
	if r := workOne(t, c, nil); r.JobID == nil {
		t.Fatalf("worked %+v, want the job", r)
	}
	wantStoreError(t, "SetOutput", setOutputErr, "workflows")

	if _, err := c.Schedules(ctx); err == nil || !strings.Contains(err.Error(), "keeps no schedules") {
		t.Errorf("Schedules: error %v, want one saying the store keeps no schedules", err)
	}
	if ls, err := c.Limits(ctx); err != nil || ls == nil || len(ls) != 0 {
		t.Errorf("Limits: %v, %v; want an empty list", ls, err)
	}
	if ks, err := c.FairnessKeys(ctx, nil); err != nil || ks == nil || len(ks) != 0 {
		t.Errorf("FairnessKeys: %v, %v; want an empty list", ks, err)
	}
	if h, err := c.BreakerHolds(ctx); err != nil || h.HeldBy("task") != nil {
		t.Errorf("BreakerHolds: %+v, %v; want none", h, err)
	}
}

// The stores errand ships have every capability the client looks for.
func TestStoreCapabilitiesFound(t *testing.T) {
	c := newClient(t, openStore(t, nil), nil)
	if !c.SupportsWorkflows() {
		t.Error("SupportsWorkflows is false for errand/sqlite")
	}
	if _, err := c.Batches(context.Background(), nil); err != nil {
		t.Errorf("Batches on errand/sqlite: %v", err)
	}
}
