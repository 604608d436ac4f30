package errand_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// sealedHookClient returns a client whose kind "charge" dead-letters into a
// "refund" hook job carrying the dead job's card, with a codec of key k1
// when keyed.
func sealedHookClient(t *testing.T, st errandstore.TxStore[*sql.Tx], clock errand.TimeSource, keyed bool) *errand.Client[*sql.Tx] {
	t.Helper()
	ks := errand.NewKinds()
	ks.HandleRaw("charge", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), &errand.KindOpts{
		OnDead: func(job *errandtype.Job) (errand.JobArgs, *errand.EnqueueOpts) {
			var a struct{ Card string }
			_ = json.Unmarshal(job.Args, &a)
			return errand.RawArgs{KindName: "refund", JSON: json.RawMessage(`{"card":"` + a.Card + `"}`)}, nil
		}})
	ks.HandleRaw("refund", nil, nil)
	cfg := &errand.Config{Kinds: ks, Clock: clock}
	if keyed {
		codec, err := errand.AESGCM(errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Codec = codec
	}
	return newClient(t, st, cfg)
}

// TestOnDeadHookOfASweptJobReadsItsArgsOpened: a job swept to dead (its
// lease expired on the final attempt) has its hook fired by the scanner
// with its args opened; a scanner without the key fires nothing, and leaves
// the death to one that holds it.
func TestOnDeadHookOfASweptJobReadsItsArgsOpened(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		keyed := sealedHookClient(t, st, clock, true)
		blind := sealedHookClient(t, st, clock, false)
		if _, err := keyed.Enqueue(ctx, errand.RawArgs{KindName: "charge", JSON: json.RawMessage(`{"Card":"4111-SECRET"}`)},
			&errand.EnqueueOpts{ID: "swept", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		if js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 30 * time.Second, Owner: "crashed"}); err != nil || len(js) != 1 {
			t.Fatalf("claim: %v %v", js, err)
		}
		clock.Advance(31 * time.Second)
		if _, err := st.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil {
			t.Fatal(err)
		}
		hookID := errand.DeadHookJobID("swept", 0)
		if _, err := errand.ScanDeadHooks(ctx, blind); err != nil {
			t.Fatalf("scan without the key: %v", err)
		}
		noHook(t, keyed, "swept", 0)
		if _, err := errand.ScanDeadHooks(ctx, keyed); err != nil {
			t.Fatalf("scan with the key: %v", err)
		}
		h := getJob(t, keyed, hookID)
		if !bytes.Contains(h.Args, []byte(`"card":"4111-SECRET"`)) {
			t.Fatalf("hook job args = %s; want the card the dead job's opened args carry", h.Args)
		}
		if raw := getJob(t, blind, hookID).Args; bytes.Contains(raw, []byte("SECRET")) {
			t.Fatalf("hook job args at rest = %s; want them sealed", raw)
		}
	})
}
