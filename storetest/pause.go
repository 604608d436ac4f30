package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var pauseCases = []testCase{
	{"SetAndList", testPauseSetAndList},
	{"Refused", testPauseRefused},
}

// pauses returns e's store as a PauseStore, skipping the case for a store
// without pauses.
func (e *env) pauses() errandstore.PauseStore {
	e.t.Helper()
	ps, ok := e.s.(errandstore.PauseStore)
	if !ok {
		e.t.Skip("the store is not a PauseStore")
	}
	return ps
}

func (e *env) pauseSet(p errandstore.PauseSetParams) *errandstore.PauseSetResult {
	e.t.Helper()
	r, err := e.pauses().PauseSet(e.ctx, &p)
	if err != nil {
		e.t.Fatalf("PauseSet(%+v): %v", p, err)
	}
	return r
}

func (e *env) pauseList() []errandtype.Pause {
	e.t.Helper()
	ps, err := e.pauses().PauseList(e.ctx)
	if err != nil || ps == nil {
		e.t.Fatalf("PauseList: %v, %v; want a non-nil list", ps, err)
	}
	return ps
}

// testPauseSetAndList: a pause is kept with who, why and when, listed
// queues first; pausing what is paused keeps the first pause, resuming
// lifts it, resuming what is not paused changes nothing, and only the
// changes are audited.
func testPauseSetAndList(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	r := e.pauseSet(errandstore.PauseSetParams{Scope: errandtype.PauseQueue, Name: "emails", Paused: true, Operator: "ana", Reason: "provider down"})
	want := errandtype.Pause{Scope: errandtype.PauseQueue, Name: "emails", PausedAt: t0, Operator: "ana", Reason: "provider down"}
	if !r.Changed || r.Pause == nil || *r.Pause != want {
		t.Fatalf("pause: %+v (%+v), want changed and %+v", r, r.Pause, want)
	}
	e.clock.Advance(time.Minute)
	if r := e.pauseSet(errandstore.PauseSetParams{Scope: errandtype.PauseQueue, Name: "emails", Paused: true, Operator: "bo", Reason: "again"}); r.Changed || r.Pause == nil || *r.Pause != want {
		t.Fatalf("second pause: %+v (%+v), want unchanged and the first pause", r, r.Pause)
	}
	kind := e.pauseSet(errandstore.PauseSetParams{Scope: errandtype.PauseKind, Name: "emails", Paused: true, Operator: "bo", Reason: "bad deploy"})
	if !kind.Changed {
		t.Fatal("a kind of the queue's name is a pause of its own: want changed")
	}
	e.pauseSet(errandstore.PauseSetParams{Scope: errandtype.PauseQueue, Name: "alpha", Paused: true, Operator: "cy"})
	got := e.pauseList()
	if len(got) != 3 || got[0].Name != "alpha" || got[1] != want || got[2].Scope != errandtype.PauseKind || got[2].Reason != "bad deploy" {
		t.Fatalf("list: %+v", got)
	}
	if r := e.pauseSet(errandstore.PauseSetParams{Scope: errandtype.PauseQueue, Name: "emails", Operator: "ana", Reason: "back"}); !r.Changed || r.Pause != nil {
		t.Fatalf("resume: %+v, want changed and no pause", r)
	}
	if r := e.pauseSet(errandstore.PauseSetParams{Scope: errandtype.PauseQueue, Name: "emails", Operator: "ana"}); r.Changed {
		t.Fatalf("second resume: %+v, want unchanged", r)
	}
	if got := e.pauseList(); len(got) != 2 || got[0].Name != "alpha" || got[1].Scope != errandtype.PauseKind {
		t.Fatalf("list after resume: %+v", got)
	}
	var acts []string
	for _, a := range []errandtype.AuditAction{errandtype.AuditPause, errandtype.AuditResume} {
		for _, rec := range e.auditList(&errandstore.AuditListParams{Action: a}) {
			var d errandstore.PauseDetails
			if err := json.Unmarshal(rec.Details, &d); err != nil || rec.JobID != nil {
				t.Fatalf("audit record %+v: details %s (%v)", rec, rec.Details, err)
			}
			acts = append(acts, string(rec.Action)+" "+string(d.Scope)+" "+d.Name+" "+rec.Operator+" "+rec.Reason)
		}
	}
	wantActs := []string{"pause queue alpha cy ", "pause kind emails bo bad deploy", "pause queue emails ana provider down", "resume queue emails ana back"}
	if len(acts) != len(wantActs) {
		t.Fatalf("audit: %q, want %q", acts, wantActs)
	}
	for i := range acts {
		if acts[i] != wantActs[i] {
			t.Fatalf("audit: %q, want %q", acts, wantActs)
		}
	}
}

// testPauseRefused: an unknown scope or a name no queue or kind may have
// is an input error, and nothing is written.
func testPauseRefused(t *testing.T, h harness) {
	e := open(t, h)
	for _, p := range []errandstore.PauseSetParams{
		{Scope: "tenant", Name: "a", Paused: true},
		{Scope: errandtype.PauseQueue, Name: "", Paused: true},
		{Scope: errandtype.PauseKind, Name: "bad name\x00", Paused: true},
	} {
		_, err := e.pauses().PauseSet(e.ctx, &p)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("PauseSet(%+v): %v, want an input error", p, err)
		}
	}
	if got := e.pauseList(); len(got) != 0 {
		t.Fatalf("refused pauses were written: %+v", got)
	}
}
