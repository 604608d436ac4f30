package storetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The codec cases run errand.Client over the store: what a store keeps of
// sealed values is what it is given, and a worker without the key gives a
// job back through the store's outcome write.
var codecCases = []testCase{
	{"SealedAtRest", testCodecSealedAtRest},
	{"RowHoldsNoPlainText", testCodecRawRow},
	{"StepReadBack", testCodecStepReadBack},
	{"Rotation", testCodecRotation},
	{"KeyMissingGivesBack", testCodecKeyMissing},
	{"TamperDetected", testCodecTamper},
	{"RemoteClaim", testCodecRemoteClaim},
	{"WorkflowOutputs", testCodecWorkflow},
	{"DuplicateIDComparesPlain", testCodecDuplicateID},
	{"ReplayArgsSealed", testCodecReplayArgs},
	{"CancelReturnsPlain", testCodecCancel},
}

// cardArgs carry what must not be readable at rest.
type cardArgs struct {
	Card string `json:"card"`
}

func (cardArgs) Kind() string { return "charge" }

// shipArgs are a workflow step after a charge, reading its output.
type shipArgs struct {
	Workflow errandstore.WorkflowContext `json:"workflow"`
}

func (shipArgs) Kind() string { return "ship" }

// secret is in every plain value the codec cases write.
const secret = "4111-1111-SECRET"

// codecKey returns a key of id whose bytes are all b.
func codecKey(id string, b byte) errand.CodecKey {
	return errand.CodecKey{ID: id, Secret: bytes.Repeat([]byte{b}, 32)}
}

// codecWorld is a case's store, and the arguments its charge handlers saw.
type codecWorld struct {
	*env
	seen     []string
	steps    int  // runs of the step's function
	failOnce bool // the next attempt fails after its step
}

// client returns a client over w's store with keys (none: no codec) and a
// handler for charge jobs that records their card, its checkpoint and its
// output.
func (w *codecWorld) client(keys ...errand.CodecKey) jobClient {
	w.t.Helper()
	ks := errand.NewKinds()
	errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a cardArgs) error {
		w.seen = append(w.seen, a.Card)
		if _, ok := w.s.(errandstore.StepStore); ok {
			tok, err := errand.Step(ctx, "tokenize", func(context.Context) (string, error) { w.steps++; return "tok-" + a.Card, nil })
			if err != nil || tok != "tok-"+a.Card {
				return fmt.Errorf("step tokenize = %q, %v", tok, err)
			}
			if w.failOnce {
				w.failOnce = false
				return errors.New("flaky after its step")
			}
		}
		if err := errand.SetProgress(ctx, map[string]string{"at": a.Card}); err != nil {
			return err
		}
		if _, ok := w.s.(errandstore.WorkflowStore); ok {
			return errand.SetOutput(ctx, map[string]string{"receipt": a.Card})
		}
		return nil
	}, nil)
	errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a shipArgs) error {
		out, ok, err := errand.StepOutput[map[string]string](a.Workflow, "charge")
		if err != nil || !ok {
			return fmt.Errorf("output of charge: %v, %v", ok, err)
		}
		w.seen = append(w.seen, "ship "+out["receipt"])
		return nil
	}, nil)
	cfg := &errand.Config{Kinds: ks, Clock: w.clock}
	if len(keys) > 0 {
		codec, err := errand.AESGCM(keys...)
		if err != nil {
			w.t.Fatalf("AESGCM: %v", err)
		}
		cfg.Codec = codec
	}
	c, err := w.h.client(w.s, cfg)
	if err != nil {
		w.t.Fatalf("NewClient: %v", err)
	}
	w.t.Cleanup(func() { c.Close() })
	return c
}

func (w *codecWorld) enqueue(c jobClient, card string, opts *errand.EnqueueOpts) *errandtype.Job {
	w.t.Helper()
	r, err := c.Enqueue(w.ctx, cardArgs{Card: card}, opts)
	if err != nil {
		w.t.Fatalf("Enqueue: %v", err)
	}
	return r.Job
}

func (w *codecWorld) workOne(c jobClient) *errand.WorkResult {
	w.t.Helper()
	r, err := c.WorkOne(w.ctx, &errand.WorkOneOpts{Owner: owner})
	if err != nil {
		w.t.Fatalf("WorkOne: %v", err)
	}
	return r
}

// wantSealed checks that raw, a value as the store keeps it, is sealed with
// key kid and holds no plain text of secret.
func wantSealed(t *testing.T, what string, raw json.RawMessage, kid string) {
	t.Helper()
	if strings.Contains(string(raw), "SECRET") {
		t.Fatalf("%s at rest = %s; holds the plain text", what, raw)
	}
	if got, ok := errand.SealedKeyID(raw); !ok || got != kid {
		t.Fatalf("%s at rest = %s; want sealed with key %s", what, raw, kid)
	}
}

func testCodecSealedAtRest(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	c := w.client(codecKey("k1", 1))
	j := w.enqueue(c, secret, nil)
	wantSealed(t, "args", w.get(j.ID).Args, "k1")

	if r := w.workOne(c); r.Result != errand.ResultSucceeded {
		t.Fatalf("WorkOne = %+v; want succeeded", r)
	}
	if len(w.seen) != 1 || w.seen[0] != secret {
		t.Fatalf("the handler saw %q; want the plain card", w.seen)
	}
	raw := w.get(j.ID)
	wantSealed(t, "args", raw.Args, "k1")
	wantSealed(t, "progress", raw.Progress, "k1")
	if _, ok := w.s.(errandstore.WorkflowStore); ok {
		wantSealed(t, "output", raw.Output, "k1")
	}
	if ss, ok := w.s.(errandstore.StepStore); ok {
		steps, err := ss.JobSteps(w.ctx, &errandstore.JobStepsParams{ID: j.ID})
		if err != nil || len(steps) != 1 {
			t.Fatalf("JobSteps = %v, %v; want the one step", steps, err)
		}
		wantSealed(t, "step result", steps[0].Result, "k1")
	}

	// A reader with the key reads the plain values; one without, the
	// sealed ones, as the store keeps them.
	got, err := c.Get(w.ctx, j.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !sameJSON(got.Args, []byte(`{"card":"`+secret+`"}`)) || !sameJSON(got.Progress, []byte(`{"at":"`+secret+`"}`)) {
		t.Fatalf("Get with the key: args %s, progress %s; want them plain", got.Args, got.Progress)
	}
	if _, ok := w.s.(errandstore.WorkflowStore); ok && !sameJSON(got.Output, []byte(`{"receipt":"`+secret+`"}`)) {
		t.Fatalf("Get with the key: output %s; want it plain", got.Output)
	}
	blind, err := w.client().Get(w.ctx, j.ID)
	if err != nil {
		t.Fatalf("Get without the key: %v", err)
	}
	wantSealed(t, "args read without the key", blind.Args, "k1")
}

func testCodecRotation(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	old := w.client(codecKey("k1", 1))
	a := w.enqueue(old, "old-card", nil)
	rotated := w.client(codecKey("k2", 2), codecKey("k1", 1))
	b := w.enqueue(rotated, "new-card", nil)
	wantSealed(t, "args sealed before the rotation", w.get(a.ID).Args, "k1")
	wantSealed(t, "args sealed after the rotation", w.get(b.ID).Args, "k2")

	for range 2 {
		if r := w.workOne(rotated); r.Result != errand.ResultSucceeded {
			t.Fatalf("WorkOne = %+v; want succeeded", r)
		}
	}
	if strings.Join(w.seen, ",") != "old-card,new-card" {
		t.Fatalf("the rotated worker saw %q; want both cards, oldest first", w.seen)
	}
	// What the rotated worker wrote of the old job is sealed with the new key.
	wantSealed(t, "progress of the old job", w.get(a.ID).Progress, "k2")
}

// wantGivenBack checks that a worker's attempt at job id gave it back
// untouched: queued again after CodecRetryDelay, its attempt not counted,
// its args as they were, and the reason in its history under class.
func (w *codecWorld) wantGivenBack(r *errand.WorkResult, before *errandtype.Job, class string) {
	w.t.Helper()
	if r.Result != errand.ResultInterrupted || r.Class != class {
		w.t.Fatalf("WorkOne = %+v; want interrupted with class %s", r, class)
	}
	j := w.get(before.ID)
	if j.State != errandtype.StateQueued || j.Attempt != 0 || !j.AvailableAt.Equal(w.now().Add(errand.CodecRetryDelay)) {
		w.t.Fatalf("job after the give-back: state %s, attempt %d, available %s; want queued, 0, %s",
			j.State, j.Attempt, j.AvailableAt, w.now().Add(errand.CodecRetryDelay))
	}
	if !bytes.Equal(j.Args, before.Args) {
		w.t.Fatalf("args after the give-back = %s; want them unchanged, %s", j.Args, before.Args)
	}
	if j.LastError == nil || j.LastError.Class != class || !strings.Contains(j.LastError.Message, "key k1") {
		w.t.Fatalf("last error = %+v; want class %s naming key k1", j.LastError, class)
	}
	if len(w.seen) != 0 {
		w.t.Fatalf("the handler ran on %q; want it not run", w.seen)
	}
}

func testCodecKeyMissing(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	owner := w.client(codecKey("k1", 1))
	j := w.get(w.enqueue(owner, secret, nil).ID)

	w.wantGivenBack(w.workOne(w.client()), j, errand.ClassCodecKeyMissing)
	w.clock.Advance(errand.CodecRetryDelay)
	w.wantGivenBack(w.workOne(w.client(codecKey("k2", 2))), w.get(j.ID), errand.ClassCodecKeyMissing)

	// Nothing was lost: a worker with the key runs it on its first attempt.
	w.clock.Advance(errand.CodecRetryDelay)
	if r := w.workOne(owner); r.Result != errand.ResultSucceeded || r.Attempt != 1 {
		t.Fatalf("WorkOne with the key = %+v; want succeeded on attempt 1", r)
	}
}

func testCodecTamper(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	c := w.client(codecKey("k1", 1))
	sealed := w.get(w.enqueue(c, secret, &errand.EnqueueOpts{RunAt: T0.Add(24 * time.Hour)}).ID).Args
	var env map[string]any
	if err := json.Unmarshal(sealed, &env); err != nil {
		t.Fatal(err)
	}
	ct, err := base64.StdEncoding.DecodeString(env["ct"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ct[len(ct)-1] ^= 1
	env["ct"] = base64.StdEncoding.EncodeToString(ct)
	altered, _ := json.Marshal(env)
	p := newJob("altered")
	p.Kind, p.Args = "charge", altered
	j := w.insert(p)[0]

	w.wantGivenBack(w.workOne(c), j, errand.ClassSealBroken)
	// A key under the same id with other bytes cannot tell them apart.
	w.clock.Advance(errand.CodecRetryDelay)
	w.wantGivenBack(w.workOne(w.client(codecKey("k1", 9))), w.get(j.ID), errand.ClassSealBroken)
}

func testCodecRemoteClaim(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	server := w.client(codecKey("k1", 1))
	w.enqueue(server, secret, nil)
	w.enqueue(server, secret, nil)
	claim := func(c jobClient) json.RawMessage {
		js, err := c.Claim(w.ctx, &errand.ClaimOpts{Queue: errand.DefaultQueue, Kinds: []string{"charge"}, Limit: 1, Lease: lease, Owner: owner})
		if err != nil || len(js) != 1 {
			t.Fatalf("Claim = %v, %v; want one job", js, err)
		}
		return js[0].Args
	}
	if got := claim(server); !sameJSON(got, []byte(`{"card":"`+secret+`"}`)) {
		t.Fatalf("args claimed through a client with the key = %s; want them plain", got)
	}
	wantSealed(t, "args claimed through a client without the key", claim(w.client()), "k1")
}

func testCodecDuplicateID(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	c := w.client(codecKey("k1", 1))
	w.enqueue(c, secret, &errand.EnqueueOpts{ID: "pay-1"})
	r, err := c.Enqueue(w.ctx, cardArgs{Card: secret}, &errand.EnqueueOpts{ID: "pay-1"})
	if err != nil || !r.Duplicate {
		t.Fatalf("the same enqueue again = %+v, %v; want the duplicate, whose args seal to other bytes", r, err)
	}
	_, err = c.Enqueue(w.ctx, cardArgs{Card: "other"}, &errand.EnqueueOpts{ID: "pay-1"})
	var ce *errand.IDConflictError
	if !errors.As(err, &ce) || strings.Join(ce.Fields, ",") != "args" {
		t.Fatalf("another card under the id = %v; want an *IDConflictError naming args", err)
	}
	if _, ok := w.s.(errandstore.BatchStore); !ok {
		return
	}
	batch := func() (*errandstore.BatchInsertResult, error) {
		return c.EnqueueBatch(w.ctx, []errand.EnqueueParams{{Args: cardArgs{Card: secret}, Opts: &errand.EnqueueOpts{ID: "b-1-card"}}}, &errand.BatchOpts{ID: "b-1"})
	}
	if _, err := batch(); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if r, err := batch(); err != nil || !r.Duplicate {
		t.Fatalf("the same batch again = %+v, %v; want the duplicate", r, err)
	}
}

func testCodecReplayArgs(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	c := w.client(codecKey("k1", 1))
	j := w.enqueue(c, "bad-card", &errand.EnqueueOpts{MaxAttempts: 1})
	claimed := w.claim(1)[0]
	w.recordOK(&errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: claimed.ID, LeaseToken: token(claimed)}, Kind: errandstore.OutcomeDead,
		Error: &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "declined"}})
	replayed, err := c.Replay(w.ctx, j.ID, &errand.ReplayOpts{Operator: "ana", Reason: "fixed card", Args: json.RawMessage(`{"card":"` + secret + `"}`)})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if !sameJSON(replayed.Args, []byte(`{"card":"`+secret+`"}`)) {
		t.Fatalf("the job Replay returned has args %s; want them plain", replayed.Args)
	}
	wantSealed(t, "replayed args", w.get(j.ID).Args, "k1")
	if r := w.workOne(c); r.Result != errand.ResultSucceeded || len(w.seen) != 1 || w.seen[0] != secret {
		t.Fatalf("WorkOne after the replay = %+v, saw %q; want the corrected card", r, w.seen)
	}

	// The audit keeps both args sealed; a reader with the key reads them
	// plain, one without gets them as kept.
	details := func(c jobClient) (oldArgs, newArgs json.RawMessage) {
		t.Helper()
		rs, err := c.Audit(w.ctx, &errand.AuditOpts{JobID: j.ID, Action: errandtype.AuditReplayArgs})
		if err != nil || len(rs) != 1 {
			t.Fatalf("Audit = %v, %v; want the replay's record", rs, err)
		}
		var d struct {
			OldArgs json.RawMessage `json:"old_args"`
			NewArgs json.RawMessage `json:"new_args"`
		}
		if err := json.Unmarshal(rs[0].Details, &d); err != nil {
			t.Fatalf("details %s: %v", rs[0].Details, err)
		}
		return d.OldArgs, d.NewArgs
	}
	if o, n := details(c); !sameJSON(o, []byte(`{"card":"bad-card"}`)) || !sameJSON(n, []byte(`{"card":"`+secret+`"}`)) {
		t.Fatalf("audit with the key: old args %s, new %s; want both plain", o, n)
	}
	o, n := details(w.client())
	wantSealed(t, "old args in the audit", o, "k1")
	wantSealed(t, "new args in the audit", n, "k1")
}

func testCodecCancel(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	c := w.client(codecKey("k1", 1))
	j := w.enqueue(c, secret, nil)
	if !sameJSON(j.Args, []byte(`{"card":"`+secret+`"}`)) {
		t.Fatalf("Enqueue returned args %s; want them plain", j.Args)
	}
	got, err := c.Cancel(w.ctx, j.ID, &errand.CancelOpts{Operator: "ana", Reason: "not needed"})
	if err != nil || !sameJSON(got.Args, []byte(`{"card":"`+secret+`"}`)) {
		t.Fatalf("Cancel = %+v, %v; want the job with its args plain", got, err)
	}
}

func testCodecRawRow(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	if h.rawJob == nil {
		t.Skip("Harness.RawJob is nil")
	}
	c := w.client(codecKey("k1", 1))
	j := w.enqueue(c, secret, nil)
	if r := w.workOne(c); r.Result != errand.ResultSucceeded {
		t.Fatalf("WorkOne = %+v; want succeeded", r)
	}
	row := h.rawJob(t, w.s, j.ID)
	if !strings.Contains(row, "kid") || strings.Contains(row, "SECRET") {
		t.Fatalf("the job's row at rest = %s; want sealed values and no plain text", row)
	}
}

func testCodecStepReadBack(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h), failOnce: true}
	if _, ok := w.s.(errandstore.StepStore); !ok {
		t.Skip("the store keeps no steps")
	}
	c := w.client(codecKey("k1", 1))
	j := w.enqueue(c, secret, nil)
	if r := w.workOne(c); r.Result != errand.ResultRetrying {
		t.Fatalf("first WorkOne = %+v; want retrying", r)
	}
	w.clock.Advance(errand.DefaultBackoffMax)
	if r := w.workOne(c); r.Result != errand.ResultSucceeded || w.steps != 1 {
		t.Fatalf("second WorkOne = %+v, step run %d times; want succeeded, its sealed step read back, not run again", r, w.steps)
	}
	steps, err := c.Steps(w.ctx, j.ID)
	if err != nil || len(steps) != 1 || !sameJSON(steps[0].Result, []byte(`"tok-`+secret+`"`)) {
		t.Fatalf("Steps with the key = %+v, %v; want the step's result plain", steps, err)
	}
	if steps, err = w.client().Steps(w.ctx, j.ID); err != nil || len(steps) != 1 {
		t.Fatalf("Steps without the key = %+v, %v", steps, err)
	}
	wantSealed(t, "step result read without the key", steps[0].Result, "k1")
}

func testCodecWorkflow(t *testing.T, h harness) {
	w := &codecWorld{env: open(t, h)}
	if _, ok := w.s.(errandstore.WorkflowStore); !ok {
		t.Skip("the store keeps no workflows")
	}
	c := w.client(codecKey("k1", 1))
	if _, err := c.EnqueueWorkflow(w.ctx, []errand.WorkflowStep{
		{Name: "charge", Args: cardArgs{Card: secret}},
		{Name: "ship", Args: shipArgs{}, DependsOn: []string{"charge"}},
	}, &errand.WorkflowOpts{ID: "order-1"}); err != nil {
		t.Fatalf("EnqueueWorkflow: %v", err)
	}
	for range 2 {
		if r := w.workOne(c); r.Result != errand.ResultSucceeded {
			t.Fatalf("WorkOne = %+v; want succeeded", r)
		}
	}
	if strings.Join(w.seen, ",") != secret+",ship "+secret {
		t.Fatalf("the handlers saw %q; want the card, then its receipt from the charge's output", w.seen)
	}
	// The store set the sealed output beside the sealed args of the step.
	ship := w.get(errandstore.WorkflowStepJobID("order-1", "ship")).Args
	wantSealed(t, "args of a step with its dependency's output", ship, "k1")
	wf, err := c.Workflow(w.ctx, "order-1")
	if err != nil || !sameJSON(wf.Steps[0].Output, []byte(`{"receipt":"`+secret+`"}`)) {
		t.Fatalf("Workflow with the key = %+v, %v; want the charge's output plain", wf, err)
	}
}
