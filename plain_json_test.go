package errand_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// compact removes the spaces PostgreSQL's jsonb writes between values.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestPlainJSONNumbers: numbers jsonb would write otherwise than as given
// (an exponent, a negative zero) are written as jsonb writes them, on both
// stores, so both keep the same text; strings that look like numbers stay.
func TestPlainJSONNumbers(t *testing.T) {
	const given = `[1e2,1.5e-1,1E-7,-0.0e5,0e-3,12.340e1,-0,-0.00,-1.5e1,2.50e1,1e+2,0.0,-0.0,1.5,-7,"1e2",{"k":-2E0}]`
	// As PostgreSQL 15 wrote it: select '...'::jsonb.
	const want = `[100,0.15,0.0000001,0,0.000,123.40,0,0.00,-15,25.0,100,0.0,0.0,1.5,-7,"1e2",{"k":-2}]`
	got, err := errand.PlainJSON(json.RawMessage(given), 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("PlainJSON(%s) =\n  %s\nwant\n  %s", given, got, want)
	}
	if _, err := errand.PlainJSON(json.RawMessage(`{"a":"a long string"}`), 10); err == nil || !strings.Contains(err.Error(), "use at most 10") || strings.Contains(err.Error(), "digits") {
		t.Errorf("PlainJSON of 21 bytes with no number, at most 10: %v; want the size refused, with no word of numbers", err)
	}
	plain := json.RawMessage(`{"a":[1,2.5,"x"]}`)
	if got, _ := errand.PlainJSON(plain, 0); &got[0] != &plain[0] {
		t.Error("PlainJSON copied a document it had nothing to change in")
	}
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c := newClient(t, st, &errand.Config{Clock: clock})
		r, err := c.Enqueue(t.Context(), errand.RawArgs{KindName: "nums", JSON: json.RawMessage(given)}, &errand.EnqueueOpts{ID: "n"})
		if err != nil {
			t.Fatal(err)
		}
		if got := compact(t, r.Job.Args); got != want {
			t.Errorf("enqueue returned args %s, want %s", got, want)
		}
		if got := compact(t, getJob(t, c, "n").Args); got != want {
			t.Errorf("stored args %s, want %s", got, want)
		}
	})
}

type plainNumArgs struct {
	N int `json:"n"`
}

func (plainNumArgs) Kind() string { return "num" }

// TestExponentArgsDecodeAlikeOnBothStores: args a producer that does not
// know the kind enqueued as {"n": 1e2} reach a typed handler as 100 on
// either store; jsonb rewrote them, SQLite kept them, and the handler's
// int could not take 1e2.
func TestExponentArgsDecodeAlikeOnBothStores(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		producer := newClient(t, st, &errand.Config{Clock: clock})
		if _, err := producer.Enqueue(t.Context(), errand.RawArgs{KindName: "num", JSON: json.RawMessage(`{"n": 1e2}`)}, &errand.EnqueueOpts{ID: "n1"}); err != nil {
			t.Fatal(err)
		}
		ks := errand.NewKinds()
		var got int
		errand.Handle(ks, func(ctx context.Context, j *errandtype.Job, a plainNumArgs) error { got = a.N; return nil }, nil)
		worker := newClient(t, st, &errand.Config{Clock: clock, Kinds: ks})
		res := workOne(t, worker, &errand.WorkOneOpts{})
		if res.Result != errand.ResultSucceeded || got != 100 {
			t.Fatalf("job with args {\"n\": 1e2}: %s (%s: %s), handler got %d; want succeeded with 100", res.Result, res.Class, res.Error, got)
		}
	})
}

// TestNumbersWrittenOutMustFit: a document whose numbers, written out in
// full as PostgreSQL keeps them, pass the field's bound is refused alike
// on both stores, through every way in, and nothing is written: 8 bytes of
// 1e131071 are 131072 digits, and PostgreSQL ran out of memory enqueueing
// 75 KB of them, or, through COPY, stored them and then failed every claim
// of the queue.
func TestNumbersWrittenOutMustFit(t *testing.T) {
	many := json.RawMessage("[" + strings.Repeat("1e131071,", 8299) + "1e131071]") // 75 KB given, about 1 GB written out
	few := json.RawMessage("[" + strings.Repeat("1e131071,", 7) + "1e131071]")     // about 1 MB written out
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		var progressErr, outputErr error
		ks := errand.NewKinds()
		ks.HandleRaw("task", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			progressErr = errand.SetProgress(ctx, many)
			outputErr = errand.SetOutput(ctx, few)
			return nil
		}), nil)
		c := newClient(t, st, &errand.Config{Clock: clock, Kinds: ks, AllowUnknownKinds: true})
		wantRefused := func(what string, err error) {
			t.Helper()
			var ie *errandtype.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), "written out in full") {
				t.Errorf("%s: %v; want an *InputError about the numbers written out", what, err)
			}
		}
		_, err := c.Enqueue(ctx, errand.RawArgs{KindName: "task", JSON: many}, &errand.EnqueueOpts{ID: "many"})
		wantRefused("Enqueue", err)
		_, err = c.Enqueue(ctx, errand.RawArgs{KindName: "task", JSON: few}, &errand.EnqueueOpts{ID: "few"})
		wantRefused("Enqueue of 9 such numbers", err)
		// 64 jobs or more take PostgreSQL's COPY.
		ps := []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "task", JSON: many}, Opts: &errand.EnqueueOpts{ID: "poison"}}}
		for range 63 {
			ps = append(ps, errand.EnqueueParams{Args: errand.RawArgs{KindName: "task", JSON: json.RawMessage(`{}`)}})
		}
		_, err = c.EnqueueMany(ctx, ps)
		wantRefused("EnqueueMany", err)
		if _, err := st.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{ID: "direct", Queue: errand.DefaultQueue, Kind: "task", Args: many, MaxAttempts: 1}}}); err == nil {
			t.Error("the store inserted args of 1 GB written out")
		}
		if js, err := c.List(ctx, &errand.ListOpts{Limit: 10}); err != nil || len(js) != 0 {
			t.Fatalf("after refused enqueues: %d jobs (%v); want none written", len(js), err)
		}
		// A handler's checkpoint and output.
		enqueue(t, c, "task", &errand.EnqueueOpts{ID: "p"})
		if res := workOne(t, c, &errand.WorkOneOpts{}); res.Result != errand.ResultSucceeded {
			t.Fatalf("job p: %s %s", res.Result, res.Error)
		}
		wantRefused("SetProgress", progressErr)
		wantRefused("SetOutput", outputErr)
		if j := getJob(t, c, "p"); j.Progress != nil {
			t.Errorf("progress %d bytes written", len(j.Progress))
		}
	})
}

// TestProgressKeptAsPlainNumbers: a checkpoint with an exponent reads back
// the same on both stores, and the job resumes from it.
func TestProgressKeptAsPlainNumbers(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var seen []string
		ks := errand.NewKinds()
		ks.HandleRaw("task", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			seen = append(seen, string(j.Progress))
			if j.Progress == nil {
				if err := errand.SetProgress(ctx, json.RawMessage(`{"at":[1e3,2.5e-3]}`)); err != nil {
					return err
				}
				return errand.Snooze(time.Second)
			}
			return nil
		}), nil)
		c := newClient(t, st, &errand.Config{Clock: clock, Kinds: ks})
		enqueue(t, c, "task", &errand.EnqueueOpts{ID: "p"})
		workOne(t, c, &errand.WorkOneOpts{})
		clock.Advance(2 * time.Second)
		if res := workOne(t, c, &errand.WorkOneOpts{}); res.Result != errand.ResultSucceeded {
			t.Fatalf("resumed attempt: %s %s", res.Result, res.Error)
		}
		if len(seen) != 2 || compact(t, []byte(seen[1])) != `{"at":[1000,0.0025]}` {
			t.Fatalf("attempts saw progress %q; want none, then {\"at\":[1000,0.0025]}", seen)
		}
	})
}
