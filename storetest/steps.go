package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// stepCases check the steps of durable handlers: recorded in order under
// the lease, read back exactly, refused without it, and tied to one job
// record.
var stepCases = []testCase{
	{"RecordAndRead", testStepsRecordAndRead},
	{"Fenced", testStepsFenced},
	{"IndexTaken", testStepsIndexTaken},
	{"BadInput", testStepsBadInput},
	{"ClearedByRestart", testStepsClearedByRestart},
	{"NotInheritedByID", testStepsNotInheritedByID},
	{"RecordMany", testStepsRecordMany},
}

func (e *env) stepStore() errandstore.StepStore {
	e.t.Helper()
	ss, ok := e.s.(errandstore.StepStore)
	if !ok {
		e.t.Skip("the store is not an errandstore.StepStore")
	}
	return ss
}

func (e *env) recordStep(j *errandtype.Job, tok string, st errandtype.Step) error {
	return errandstore.RecordStep(e.ctx, e.stepStore(), &errandstore.JobStepRecordParams{
		JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: tok}, Step: st})
}

func (e *env) steps(id string) []errandtype.Step {
	e.t.Helper()
	got, err := e.stepStore().JobSteps(e.ctx, &errandstore.JobStepsParams{ID: id})
	if err != nil {
		e.t.Fatalf("JobSteps(%s): %v", id, err)
	}
	return got
}

func (e *env) wantSteps(what, id string, want []errandtype.Step) {
	e.t.Helper()
	got := e.steps(id)
	if got == nil {
		e.t.Fatalf("%s: JobSteps returned nil; want an empty list for none", what)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("%s: steps\n%+v\nwant\n%+v", what, got, want)
	}
}

func testStepsRecordAndRead(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	e.wantSteps("before any step", "a", nil)
	if _, err := e.stepStore().JobSteps(e.ctx, &errandstore.JobStepsParams{ID: "nope"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("JobSteps of an unknown job: %v, want ErrNotFound", err)
	}
	j := e.claimOne("a")
	at0 := e.now()
	if err := e.recordStep(j, token(j), errandtype.Step{Index: 0, Name: "charge", Result: json.RawMessage(`{"charge":"ch_1","cents":1250}`)}); err != nil {
		t.Fatal(err)
	}
	at1 := e.clock.Advance(time.Second)
	if err := e.recordStep(j, token(j), errandtype.Step{Index: 1, Name: "mail", Error: "mailbox gone"}); err != nil {
		t.Fatal(err)
	}
	want := []errandtype.Step{
		{Index: 0, Name: "charge", Result: json.RawMessage(`{"cents": 1250, "charge": "ch_1"}`), Attempt: 1, At: at0},
		{Index: 1, Name: "mail", Error: "mailbox gone", Attempt: 1, At: at1},
	}
	got := e.steps("a")
	if len(got) != 2 {
		t.Fatalf("steps %+v, want 2", got)
	}
	// A store may keep JSON in its own spelling: compare values.
	if !sameJSON(got[0].Result, want[0].Result) {
		t.Errorf("step 0 result %s, want %s", got[0].Result, want[0].Result)
	}
	got[0].Result = want[0].Result
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want)
	}

	// The next attempt appends after them and reads them all.
	e.recordOK(retry(j, 0))
	e.clock.Advance(time.Second)
	j2 := e.claimOne("a")
	if err := e.recordStep(j2, token(j2), errandtype.Step{Index: 2, Name: "receipt", Result: json.RawMessage(`7`)}); err != nil {
		t.Fatal(err)
	}
	got = e.steps("a")
	if len(got) != 3 || got[2].Attempt != 2 || got[2].Name != "receipt" || string(got[2].Result) != "7" || !got[2].At.Equal(e.now()) {
		t.Errorf("after the second attempt: %+v", got)
	}
	e.insertIDs("b")
	e.wantSteps("another job", "b", nil)
}

func testStepsFenced(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	st := errandtype.Step{Index: 0, Name: "charge", Result: json.RawMessage(`1`)}
	for what, write := range map[string]func() error{
		"a stale token":      func() error { return e.recordStep(j, "stale", st) },
		"an unknown job":     func() error { return e.recordStep(&errandtype.Job{ID: "nope"}, token(j), st) },
		"an unclaimed token": func() error { return e.recordStep(j, "", st) },
	} {
		if err := write(); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("step with %s: %v, want ErrLeaseLost", what, err)
		}
	}
	e.clock.Advance(lease + time.Second)
	if err := e.recordStep(j, token(j), st); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("step after the lease expired: %v, want ErrLeaseLost", err)
	}
	e.wantSteps("after fenced writes", "a", nil)

	e = open(t, h)
	e.insertIDs("b")
	b := e.claimOne("b")
	e.recordOK(succeeded(b))
	if err := e.recordStep(b, token(b), st); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("step after the job succeeded: %v, want ErrLeaseLost", err)
	}
	e.wantSteps("after the job succeeded", "b", nil)
}

func testStepsIndexTaken(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	first := errandtype.Step{Index: 0, Name: "charge", Result: json.RawMessage(`1`)}
	if err := e.recordStep(j, token(j), first); err != nil {
		t.Fatal(err)
	}
	if err := e.recordStep(j, token(j), errandtype.Step{Index: 0, Name: "other", Result: json.RawMessage(`2`)}); !errors.Is(err, errandstore.ErrStepRecorded) {
		t.Fatalf("a second step 0: %v, want ErrStepRecorded", err)
	}
	first.Attempt, first.At = 1, e.now()
	e.wantSteps("after a taken index", "a", []errandtype.Step{first})
}

func testStepsBadInput(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	for what, st := range map[string]errandtype.Step{
		"no name":                 {Index: 0, Result: json.RawMessage(`1`)},
		"a long name":             {Index: 0, Name: strings.Repeat("n", errandstore.MaxJobStepNameBytes+1), Result: json.RawMessage(`1`)},
		"a name with NUL":         {Index: 0, Name: "a\x00b", Result: json.RawMessage(`1`)},
		"a negative index":        {Index: -1, Name: "x", Result: json.RawMessage(`1`)},
		"an index past the limit": {Index: errandstore.MaxJobSteps, Name: "x", Result: json.RawMessage(`1`)},
		"no result":               {Index: 0, Name: "x"},
		"invalid JSON":            {Index: 0, Name: "x", Result: json.RawMessage(`{`)},
		"result and error":        {Index: 0, Name: "x", Result: json.RawMessage(`1`), Error: "e"},
		"an oversize error":       {Index: 0, Name: "x", Error: strings.Repeat("e", errandstore.MaxMessageBytes+1)},
		"an oversize result": {Index: 0, Name: "x",
			Result: json.RawMessage(`"` + strings.Repeat("r", errandstore.MaxArgsBytes) + `"`)},
	} {
		var ie *errandtype.InputError
		if err := e.recordStep(j, token(j), st); !errors.As(err, &ie) {
			t.Errorf("step with %s: %v, want an *InputError", what, err)
		}
	}
	e.wantSteps("after refused steps", "a", nil)
}

func testStepsClearedByRestart(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	for _, clear := range []bool{false, true} {
		j := e.claimOne("a")
		if err := e.recordStep(j, token(j), errandtype.Step{Index: len(e.steps("a")), Name: "s", Result: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		e.recordOK(dead(j))
		before := len(e.steps("a"))
		if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "again", ClearProgress: clear}); err != nil {
			t.Fatal(err)
		}
		after := len(e.steps("a"))
		if clear && after != 0 || !clear && after != before {
			t.Errorf("replay with ClearProgress %t: %d steps before, %d after", clear, before, after)
		}
	}
}

func testStepsNotInheritedByID(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	if err := e.recordStep(j, token(j), errandtype.Step{Index: 0, Name: "s", Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	o := succeeded(j)
	o.Delete = true
	e.recordOK(o)
	e.prune(pruneParams(time.Hour, time.Hour))
	e.insertIDs("a")
	e.wantSteps("a new job with the id of a deleted one", "a", nil)
}

// signalCases check signals: kept in order for the job until a wait takes
// them, refused for a finished job, waking a job that waits for them and
// no other.
var signalCases = []testCase{
	{"KeptInOrder", testSignalsKeptInOrder},
	{"WakeTheirWait", testSignalsWakeTheirWait},
	{"RefusedWhenFinished", testSignalsRefusedWhenFinished},
	{"Bounded", testSignalsBounded},
	{"Wake", testJobWake},
}

func (e *env) signal(id, name, value string) (*errandstore.SignalResult, error) {
	return e.stepStore().JobSignal(e.ctx, &errandstore.JobSignalParams{ID: id, Name: name, Value: json.RawMessage(value)})
}

func (e *env) signals(id, name string) []string {
	e.t.Helper()
	sigs, err := e.stepStore().JobSignals(e.ctx, &errandstore.JobSignalsParams{ID: id, Name: name})
	if err != nil {
		e.t.Fatalf("JobSignals(%s, %s): %v", id, name, err)
	}
	var vs []string
	for _, s := range sigs {
		if s.Name != name || !s.SentAt.Equal(e.now()) {
			e.t.Errorf("signal %+v: want name %s sent at %s", s, name, e.now())
		}
		vs = append(vs, string(s.Value))
	}
	return vs
}

func testSignalsKeptInOrder(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b")
	for _, v := range []string{`"yes"`, `{"by": "ana"}`, `3`} {
		r, err := e.signal("a", "approval", v)
		if err != nil || r.Woke || r.Queue != "default" {
			t.Fatalf("JobSignal: %+v, %v; want recorded in queue default, no wait woken", r, err)
		}
	}
	if _, err := e.signal("a", "other", `1`); err != nil {
		t.Fatal(err)
	}
	got := e.signals("a", "approval")
	if len(got) != 3 || got[0] != `"yes"` || !sameJSON([]byte(got[1]), []byte(`{"by":"ana"}`)) || got[2] != `3` {
		t.Errorf("signals %q, want yes, {by: ana}, 3 in order", got)
	}
	if got := e.signals("b", "approval"); len(got) != 0 {
		t.Errorf("another job's signals %q", got)
	}
	if got := e.signals("nope", "approval"); len(got) != 0 {
		t.Errorf("an unknown job's signals %q", got)
	}
	if _, err := e.signal("nope", "approval", `1`); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("a signal to an unknown job: %v, want ErrNotFound", err)
	}
	for what, p := range map[string]errandstore.JobSignalParams{
		"no name":           {ID: "a", Value: json.RawMessage(`1`)},
		"invalid JSON":      {ID: "a", Name: "x", Value: json.RawMessage(`{`)},
		"no value":          {ID: "a", Name: "x"},
		"an oversize value": {ID: "a", Name: "x", Value: json.RawMessage(`"` + strings.Repeat("v", errandstore.MaxArgsBytes) + `"`)},
	} {
		var ie *errandtype.InputError
		if _, err := e.stepStore().JobSignal(e.ctx, &p); !errors.As(err, &ie) {
			t.Errorf("a signal with %s: %v, want an *InputError", what, err)
		}
	}
	if got := e.signals("a", "x"); len(got) != 0 {
		t.Errorf("refused signals were kept: %q", got)
	}
	// A restart clears them with the steps.
	j := e.claimOne("a")
	e.recordOK(dead(j))
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "again", ClearProgress: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.signals("a", "approval"); len(got) != 0 {
		t.Errorf("signals after a restart: %q", got)
	}
}

// waitFor leaves job id waiting in its queue for signal name until an
// hour from now, as errand.WaitFor does: its last step a wait, snoozed.
func (e *env) waitFor(id, name string) {
	e.t.Helper()
	j := e.claimOne(id)
	if err := e.recordStep(j, token(j), errandtype.Step{Index: len(e.steps(id)), Name: errandstore.WaitStepName,
		Result: json.RawMessage(`{"signal":"` + name + `"}`)}); err != nil {
		e.t.Fatal(err)
	}
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeSnooze, Delay: time.Hour})
}

func testSignalsWakeTheirWait(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	e.waitFor("a", "approval")
	later := e.get("a")
	if r, err := e.signal("a", "other", `1`); err != nil || r.Woke {
		t.Fatalf("a signal the job does not wait for: %+v, %v; want no wake", r, err)
	}
	e.unchanged("after a signal it does not wait for", later)
	e.clock.Advance(time.Second)
	r, err := e.signal("a", "approval", `true`)
	if err != nil || !r.Woke {
		t.Fatalf("the signal the job waits for: %+v, %v; want it woken", r, err)
	}
	if j := e.get("a"); j.State != errandtype.StateQueued || !j.AvailableAt.Equal(e.now()) {
		t.Errorf("woken job: %s, available at %s; want queued, available now (%s)", j.State, j.AvailableAt, e.now())
	}
	// Awake, or running, it is not woken again: the signal is kept.
	if r, err := e.signal("a", "approval", `false`); err != nil || r.Woke {
		t.Errorf("a second signal: %+v, %v; want kept, no wake", r, err)
	}
	e.claimOne("a")
	if r, err := e.signal("a", "approval", `0`); err != nil || r.Woke {
		t.Errorf("a signal to the running job: %+v, %v; want kept, no wake", r, err)
	}
	if got := e.signals("a", "approval"); len(got) != 3 {
		t.Errorf("signals %q, want 3", got)
	}
}

// testSignalsBounded: a job holds at most MaxJobSignals signals; one more
// is bad input naming the bound, and nothing is written. Senders racing
// for the last room take exactly that room: the bound is checked under
// the job's lock.
func testSignalsBounded(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	const racing, room = 32, 16
	if h.addSignals != nil {
		h.addSignals(t, e.s, "a", "tick", errandstore.MaxJobSignals-room, e.now())
	} else {
		for i := range errandstore.MaxJobSignals - room {
			if _, err := e.signal("a", "tick", strconv.Itoa(i)); err != nil {
				t.Fatalf("signal %d: %v", i, err)
			}
		}
	}
	var wg sync.WaitGroup
	var sent, refused atomic.Int64
	for w := range racing {
		wg.Go(func() {
			_, err := e.signal("a", "tick", strconv.Itoa(-w))
			var ie *errandtype.InputError
			switch {
			case err == nil:
				sent.Add(1)
			case errors.As(err, &ie) && strings.Contains(err.Error(), "MaxJobSignals"):
				refused.Add(1)
			default:
				t.Errorf("signal %d at the bound: %v, want it kept or an *InputError naming MaxJobSignals", w, err)
			}
		})
	}
	wg.Wait()
	if sent.Load() != room || refused.Load() != racing-room {
		t.Errorf("%d senders racing for room for %d: %d kept, %d refused; want %d and %d",
			racing, room, sent.Load(), refused.Load(), room, racing-room)
	}
	var ie *errandtype.InputError
	if _, err := e.signal("a", "tick", `-1`); !errors.As(err, &ie) || !strings.Contains(err.Error(), "MaxJobSignals") {
		t.Errorf("a signal past the bound: %v, want an *InputError naming MaxJobSignals", err)
	}
	if got := len(e.signals("a", "tick")); got != errandstore.MaxJobSignals {
		t.Errorf("%d signals kept, want %d", got, errandstore.MaxJobSignals)
	}
}

func testSignalsRefusedWhenFinished(t *testing.T, h harness) {
	e := open(t, h)
	e.succeed("a")
	before := e.get("a")
	if _, err := e.signal("a", "approval", `1`); !errors.Is(err, errandtype.ErrWrongState) {
		t.Fatalf("a signal to a succeeded job: %v, want ErrWrongState", err)
	}
	e.unchanged("after a refused signal", before)
	if got := e.signals("a", "approval"); len(got) != 0 {
		t.Errorf("a refused signal was kept: %q", got)
	}
}

func testJobWake(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b")
	e.waitFor("a", "approval")
	e.clock.Advance(time.Second)
	woke, err := e.stepStore().JobWake(e.ctx, &errandstore.JobWakeParams{ID: "a"})
	if err != nil || !woke {
		t.Fatalf("JobWake of a waiting job: %t, %v", woke, err)
	}
	if j := e.get("a"); !j.AvailableAt.Equal(e.now()) {
		t.Errorf("woken job available at %s, want now", j.AvailableAt)
	}
	b := e.get("b")
	for _, id := range []string{"a", "b", "nope"} {
		if woke, err := e.stepStore().JobWake(e.ctx, &errandstore.JobWakeParams{ID: id}); err != nil || woke {
			t.Errorf("JobWake(%s) of a job available already, or unknown: %t, %v", id, woke, err)
		}
	}
	e.unchanged("job b after a wake", b)
}

// eventCases check events: published under the lease, the last value of a
// key kept, read by job and key.
var eventCases = []testCase{
	{"SetAndRead", testEventsSetAndRead},
}

func testEventsSetAndRead(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	ss := e.stepStore()
	set := func(tok, key, value string) error {
		return ss.JobSetEvent(e.ctx, &errandstore.JobSetEventParams{JobLease: errandstore.JobLease{ID: "a", LeaseToken: tok}, Key: key, Value: json.RawMessage(value)})
	}
	get := func(key string) (*errandtype.Event, error) {
		return ss.JobEvent(e.ctx, &errandstore.JobEventParams{ID: "a", Key: key})
	}
	if _, err := get("progress"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("an event not published: %v, want ErrNotFound", err)
	}
	if err := set(token(j), "progress", `10`); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if err := set(token(j), "progress", `{"done": 20}`); err != nil {
		t.Fatal(err)
	}
	ev, err := get("progress")
	if err != nil || ev.Key != "progress" || !sameJSON(ev.Value, []byte(`{"done":20}`)) || !ev.SetAt.Equal(e.now()) {
		t.Fatalf("event: %+v, %v; want the last value, set now", ev, err)
	}
	if err := set("stale", "progress", `1`); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("an event under a stale token: %v, want ErrLeaseLost", err)
	}
	var ie *errandtype.InputError
	for what, v := range map[string][2]string{"no key": {"", `1`}, "invalid JSON": {"k", `{`}} {
		if err := set(token(j), v[0], v[1]); !errors.As(err, &ie) {
			t.Errorf("an event with %s: %v, want an *InputError", what, err)
		}
	}
	if _, err := ss.JobEvent(e.ctx, &errandstore.JobEventParams{ID: "nope", Key: "progress"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("an unknown job's event: %v", err)
	}
	// Readable after the job ends; an event after the lease is refused.
	e.recordOK(succeeded(j))
	if err := set(token(j), "progress", `2`); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("an event after the job succeeded: %v, want ErrLeaseLost", err)
	}
	if ev, err := get("progress"); err != nil || !sameJSON(ev.Value, []byte(`{"done":20}`)) {
		t.Errorf("event after the job ended: %+v, %v", ev, err)
	}
}

// streamCases check a job's output stream: chunks appended in order under
// the lease, read after an index with the job's state, bounded.
var streamCases = []testCase{
	{"AppendAndRead", testStreamAppendAndRead},
	{"Bounded", testStreamBounded},
	{"ConcurrentAppends", testStreamConcurrentAppends},
}

func (e *env) appendChunk(j *errandtype.Job, tok, data string) (int, error) {
	return e.stepStore().JobStreamAppend(e.ctx, &errandstore.JobStreamAppendParams{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: tok}, Data: data})
}

func (e *env) stream(id string, after, limit int) *errandstore.StreamPage {
	e.t.Helper()
	p, err := e.stepStore().JobStream(e.ctx, &errandstore.JobStreamParams{ID: id, After: after, Limit: limit})
	if err != nil {
		e.t.Fatalf("JobStream(%s): %v", id, err)
	}
	return p
}

func testStreamAppendAndRead(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	if p := e.stream("a", -1, 10); len(p.Chunks) != 0 || p.State != errandtype.StateQueued {
		t.Fatalf("a job without a stream: %+v", p)
	}
	if _, err := e.stepStore().JobStream(e.ctx, &errandstore.JobStreamParams{ID: "nope", After: -1, Limit: 10}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("an unknown job's stream: %v", err)
	}
	j := e.claimOne("a")
	for i, data := range []string{"hello ", "wörld\n", "line two"} {
		idx, err := e.appendChunk(j, token(j), data)
		if err != nil || idx != i {
			t.Fatalf("append %d: %d, %v", i, idx, err)
		}
	}
	if _, err := e.appendChunk(j, "stale", "x"); !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Errorf("append under a stale token: %v, want ErrLeaseLost", err)
	}
	var ie *errandtype.InputError
	if _, err := e.appendChunk(j, token(j), ""); !errors.As(err, &ie) {
		t.Errorf("an empty chunk: %v, want an *InputError", err)
	}
	if _, err := e.appendChunk(j, token(j), "a\x00b"); !errors.As(err, &ie) {
		t.Errorf("a chunk with NUL: %v, want an *InputError", err)
	}
	p := e.stream("a", -1, 10)
	var all string
	for i, c := range p.Chunks {
		if c.Index != i || !c.At.Equal(e.now()) {
			t.Errorf("chunk %+v, want index %d at %s", c, i, e.now())
		}
		all += c.Data
	}
	if all != "hello wörld\nline two" || p.State != errandtype.StateRunning {
		t.Errorf("stream %q while %s", all, p.State)
	}
	if p := e.stream("a", 0, 1); len(p.Chunks) != 1 || p.Chunks[0].Index != 1 {
		t.Errorf("a page of one after chunk 0: %+v", p.Chunks)
	}
	e.recordOK(succeeded(j))
	if p := e.stream("a", 2, 10); len(p.Chunks) != 0 || p.State != errandtype.StateSucceeded {
		t.Errorf("the end of a finished job's stream: %+v", p)
	}
}

func testStreamBounded(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	var ie *errandtype.InputError
	if _, err := e.appendChunk(j, token(j), strings.Repeat("x", errandstore.MaxStreamChunkBytes+1)); !errors.As(err, &ie) {
		t.Errorf("an oversize chunk: %v, want an *InputError", err)
	}
	big := strings.Repeat("x", errandstore.MaxStreamChunkBytes)
	for i := range errandstore.MaxStreamBytes / errandstore.MaxStreamChunkBytes {
		if _, err := e.appendChunk(j, token(j), big); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if _, err := e.appendChunk(j, token(j), "x"); !errors.As(err, &ie) || !strings.Contains(err.Error(), "MaxStreamBytes") {
		t.Errorf("a chunk past the stream's bytes: %v, want an *InputError naming the bound", err)
	}
	if p := e.stream("a", -1, 100); len(p.Chunks) != errandstore.MaxStreamBytes/errandstore.MaxStreamChunkBytes {
		t.Errorf("%d chunks kept, want %d", len(p.Chunks), errandstore.MaxStreamBytes/errandstore.MaxStreamChunkBytes)
	}
}

// testStreamConcurrentAppends: appends under one lease from many goroutines
// (a handler's writers, or a remote worker's requests) each take an index
// of their own, with none skipped.
func testStreamConcurrentAppends(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	const writers = 16
	var wg sync.WaitGroup
	got := make([]int, writers)
	for w := range writers {
		wg.Go(func() {
			idx, err := e.appendChunk(j, token(j), strconv.Itoa(w))
			if err != nil {
				t.Errorf("append %d: %v", w, err)
			}
			got[w] = idx
		})
	}
	wg.Wait()
	slices.Sort(got)
	for i, idx := range got {
		if idx != i {
			t.Fatalf("indexes %v, want 0 to %d, each once", got, writers-1)
		}
	}
	if p := e.stream("a", -1, 100); len(p.Chunks) != writers {
		t.Errorf("%d chunks kept, want %d", len(p.Chunks), writers)
	}
}

// testStepsRecordMany: steps of several jobs in one call, each with its own
// answer: written, a stale lease, an index taken, bad input.
func testStepsRecordMany(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b", "c", "d")
	a, b, c, d := e.claimOne("a"), e.claimOne("b"), e.claimOne("c"), e.claimOne("d")
	if err := e.recordStep(c, token(c), errandtype.Step{Index: 0, Name: "first", Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	p := func(j *errandtype.Job, tok string, st errandtype.Step) *errandstore.JobStepRecordParams {
		return &errandstore.JobStepRecordParams{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: tok}, Step: st}
	}
	errs, err := e.stepStore().JobStepRecordMany(e.ctx, []*errandstore.JobStepRecordParams{
		p(a, token(a), errandtype.Step{Index: 0, Name: "charge", Result: json.RawMessage(`{"id": 1}`)}),
		p(b, "stale", errandtype.Step{Index: 0, Name: "charge", Result: json.RawMessage(`2`)}),
		p(c, token(c), errandtype.Step{Index: 0, Name: "again", Result: json.RawMessage(`3`)}),
		p(d, token(d), errandtype.Step{Index: 0, Name: "", Result: json.RawMessage(`4`)}),
		p(d, token(d), errandtype.Step{Index: 0, Name: "mail", Error: "bounced"}),
	})
	if err != nil || len(errs) != 5 {
		t.Fatalf("JobStepRecordMany: %v, %v", errs, err)
	}
	var ie *errandtype.InputError
	if errs[0] != nil || !errors.Is(errs[1], errandtype.ErrLeaseLost) || !errors.Is(errs[2], errandstore.ErrStepRecorded) || !errors.As(errs[3], &ie) || errs[4] != nil {
		t.Errorf("answers %v; want written, lease lost, step recorded, input error, written", errs)
	}
	if got := e.steps("a"); len(got) != 1 || got[0].Name != "charge" || !sameJSON(got[0].Result, []byte(`{"id":1}`)) {
		t.Errorf("a's steps %+v", got)
	}
	if got := e.steps("b"); len(got) != 0 {
		t.Errorf("b's steps under a stale lease: %+v", got)
	}
	if got := e.steps("c"); len(got) != 1 || got[0].Name != "first" {
		t.Errorf("c's steps %+v; want the first kept", got)
	}
	if got := e.steps("d"); len(got) != 1 || got[0].Error != "bounced" {
		t.Errorf("d's steps %+v", got)
	}
}
