package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var workerCases = []testCase{
	{"Register", testWorkerRegister},
	{"RegisterAgain", testWorkerRegisterAgain},
	{"Heartbeat", testWorkerHeartbeat},
	{"HeartbeatUnknown", testWorkerHeartbeatUnknown},
	{"GoneAfterMissedHeartbeats", testWorkerGone},
	{"StaleAfter", testWorkerStaleAfter},
	{"Stop", testWorkerStop},
	{"Draining", testWorkerDraining},
	{"ListOrder", testWorkerListOrder},
	{"Prune", testWorkerPrune},
	{"InvalidParams", testWorkerInvalidParams},
	{"JSON", testWorkerJSON},
	{"SecondStore", testWorkerSecondStore},
}

const beat = 5 * time.Second

func registerParams(id string) *errandstore.WorkerRegisterParams {
	return &errandstore.WorkerRegisterParams{
		ID:                id,
		Host:              "host-7",
		PID:               4242,
		Queues:            []errandtype.WorkerQueue{{Name: "default", Concurrency: 10}, {Name: "reports", Concurrency: 2}},
		Kinds:             []string{"send_receipt", "build_report"},
		HeartbeatInterval: beat,
	}
}

// registered is the record a registration of p at now should return.
func registered(p *errandstore.WorkerRegisterParams, now time.Time) *errandtype.WorkerRecord {
	qs := slices.Clone(p.Queues)
	if qs == nil {
		qs = []errandtype.WorkerQueue{}
	}
	ks := slices.Clone(p.Kinds)
	if ks == nil {
		ks = []string{}
	}
	return &errandtype.WorkerRecord{
		ID: p.ID, Host: p.Host, PID: p.PID, Queues: qs, Kinds: ks,
		HeartbeatInterval: errandtype.Duration(p.HeartbeatInterval),
		StartedAt:         now, HeartbeatAt: now,
		Status: errandtype.WorkerAlive,
	}
}

func (e *env) register(p *errandstore.WorkerRegisterParams) *errandtype.WorkerRecord {
	e.t.Helper()
	w, err := e.s.WorkerRegister(e.ctx, p)
	if err != nil {
		e.t.Fatalf("WorkerRegister(%s): %v", p.ID, err)
	}
	return w
}

// stats returns heartbeat stats sent at the store's now, so that a store
// that measures clock skew measures 0.
func (e *env) stats(running int, completed int64, ago time.Duration) errandstore.WorkerStats {
	return errandstore.WorkerStats{JobsRunning: running, JobsCompleted: completed, LastCompletedAgo: ago, SentAt: e.now()}
}

// draining returns st with Draining set.
func (e *env) draining(st errandstore.WorkerStats) errandstore.WorkerStats {
	st.Draining = true
	return st
}

func (e *env) workerBeat(id string, st errandstore.WorkerStats) *errandtype.WorkerRecord {
	e.t.Helper()
	w, err := e.s.WorkerHeartbeat(e.ctx, &errandstore.WorkerHeartbeatParams{ID: id, Stats: st})
	if err != nil {
		e.t.Fatalf("WorkerHeartbeat(%s): %v", id, err)
	}
	return w
}

func (e *env) workerStop(id string) {
	e.t.Helper()
	if err := e.s.WorkerStop(e.ctx, &errandstore.WorkerStopParams{ID: id}); err != nil {
		e.t.Fatalf("WorkerStop(%s): %v", id, err)
	}
}

func (e *env) workersWith(p *errandstore.WorkerListParams) []*errandtype.WorkerRecord {
	e.t.Helper()
	ws, err := e.s.WorkerList(e.ctx, p)
	if err != nil {
		e.t.Fatalf("WorkerList: %v", err)
	}
	return ws
}

func (e *env) workers() []*errandtype.WorkerRecord {
	e.t.Helper()
	return e.workersWith(&errandstore.WorkerListParams{})
}

// worker returns the listed record of worker id.
func (e *env) worker(id string) *errandtype.WorkerRecord {
	e.t.Helper()
	for _, w := range e.workers() {
		if w.ID == id {
			return w
		}
	}
	e.t.Fatalf("WorkerList: no worker %s", id)
	return nil
}

// status returns the listed status of every worker, by id.
func (e *env) statuses(p *errandstore.WorkerListParams) map[string]errandtype.WorkerStatus {
	e.t.Helper()
	m := map[string]errandtype.WorkerStatus{}
	for _, w := range e.workersWith(p) {
		m[w.ID] = w.Status
	}
	return m
}

func workerIDs(ws []*errandtype.WorkerRecord) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

// sameWorker fails the test when got differs from want in any field. Times
// compare as instants.
func sameWorker(t *testing.T, what string, want, got *errandtype.WorkerRecord) {
	t.Helper()
	if want == nil || got == nil {
		if want != got {
			t.Errorf("%s: want %v, got %v", what, want, got)
		}
		return
	}
	w, g := workerFields(want), workerFields(got)
	diffs := fieldDiff(w, g)
	if len(diffs) > 0 {
		t.Errorf("%s: worker record differs:\n\t%s", what, joinLines(diffs))
	}
}

func workerFields(w *errandtype.WorkerRecord) map[string]any {
	c := *w
	c.StartedAt = c.StartedAt.UTC()
	c.HeartbeatAt = c.HeartbeatAt.UTC()
	c.StoppedAt = utc(c.StoppedAt)
	c.LastCompletedAt = utc(c.LastCompletedAt)
	b, err := json.Marshal(c)
	if err != nil {
		return map[string]any{"marshal error": err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"unmarshal error": err.Error()}
	}
	return m
}

// testWorkerRegister checks the whole record a registration writes.
func testWorkerRegister(t *testing.T, h harness) {
	e := open(t, h)
	if ws := e.workers(); ws == nil || len(ws) != 0 {
		t.Fatalf("WorkerList on an empty registry = %#v, want an empty, non-nil list", ws)
	}
	now := e.clock.Advance(time.Second)
	p := registerParams("host-7:4242:a1")
	want := registered(p, now)
	sameWorker(t, "registered worker", want, e.register(p))
	ws := e.workers()
	if len(ws) != 1 {
		t.Fatalf("WorkerList: %v, want one worker", workerIDs(ws))
	}
	sameWorker(t, "listed worker", want, ws[0])

	// No queues or kinds are stored as empty lists, not null.
	e.clock.Advance(time.Second)
	bare := &errandstore.WorkerRegisterParams{ID: "bare", HeartbeatInterval: time.Second}
	got := e.register(bare)
	if got.Queues == nil || len(got.Queues) != 0 || got.Kinds == nil || len(got.Kinds) != 0 {
		t.Errorf("worker registered without queues and kinds: Queues = %#v, Kinds = %#v, want empty and non-nil", got.Queues, got.Kinds)
	}
	if got := e.worker("bare"); got.Queues == nil || len(got.Queues) != 0 || got.Kinds == nil || len(got.Kinds) != 0 {
		t.Errorf("listed worker without queues and kinds: Queues = %#v, Kinds = %#v, want empty and non-nil", got.Queues, got.Kinds)
	}
}

// testWorkerRegisterAgain checks that registering an id again is a fresh
// start, not a second row.
func testWorkerRegisterAgain(t *testing.T, h harness) {
	e := open(t, h)
	p := registerParams("w")
	e.register(p)
	e.clock.Advance(beat)
	e.workerBeat("w", e.stats(2, 7, time.Second))
	e.clock.Advance(beat)
	e.workerBeat("w", e.draining(e.stats(2, 7, time.Second)))
	e.clock.Advance(beat)
	e.workerStop("w")

	now := e.clock.Advance(time.Minute)
	p2 := &errandstore.WorkerRegisterParams{ID: "w", Host: "host-8", PID: 99,
		Queues: []errandtype.WorkerQueue{{Name: "otp", Concurrency: 4}}, Kinds: []string{"send_otp"},
		HeartbeatInterval: 2 * time.Second}
	want := registered(p2, now)
	sameWorker(t, "registered again", want, e.register(p2))
	ws := e.workers()
	if len(ws) != 1 {
		t.Fatalf("WorkerList after registering one id twice: %v, want one worker", workerIDs(ws))
	}
	sameWorker(t, "listed after registering again", want, ws[0])
}

// testWorkerHeartbeat checks what a heartbeat writes, and that
// last_completed_at moves only when the completed count does.
func testWorkerHeartbeat(t *testing.T, h harness) {
	e := open(t, h)
	start := e.now()
	p := registerParams("w")
	want := registered(p, start)
	e.register(p)

	// Nothing completed yet: last_completed_at stays null.
	now := e.clock.Advance(beat)
	want.HeartbeatAt, want.JobsRunning = now, 3
	sameWorker(t, "heartbeat with nothing completed", want, e.workerBeat("w", e.stats(3, 0, 0)))
	sameWorker(t, "listed after the heartbeat", want, e.worker("w"))

	// Two completed, the latest 1.5s ago.
	now = e.clock.Advance(beat)
	want.HeartbeatAt, want.JobsRunning, want.JobsCompleted = now, 1, 2
	want.LastCompletedAt = ptr(now.Add(-1500 * time.Millisecond))
	sameWorker(t, "heartbeat with two completed", want, e.workerBeat("w", e.stats(1, 2, 1500*time.Millisecond)))
	sameWorker(t, "listed after the second heartbeat", want, e.worker("w"))

	// The same count with an age that drifted: last_completed_at stays.
	now = e.clock.Advance(beat)
	want.HeartbeatAt, want.JobsRunning = now, 0
	sameWorker(t, "heartbeat with the count unchanged", want, e.workerBeat("w", e.stats(0, 2, beat+1400*time.Millisecond)))

	// A new completion moves it.
	now = e.clock.Advance(beat)
	want.HeartbeatAt, want.JobsRunning, want.JobsCompleted = now, 4, 3
	want.LastCompletedAt = ptr(now.Add(-250 * time.Millisecond))
	sameWorker(t, "heartbeat with a new completion", want, e.workerBeat("w", e.stats(4, 3, 250*time.Millisecond)))
	sameWorker(t, "listed after the last heartbeat", want, e.worker("w"))
	if !e.worker("w").StartedAt.Equal(start) {
		t.Errorf("heartbeats moved started_at")
	}
}

// testWorkerHeartbeatUnknown checks that a heartbeat for a worker that is
// not registered, or that stopped, is ErrNotFound and writes nothing.
func testWorkerHeartbeatUnknown(t *testing.T, h harness) {
	e := open(t, h)
	w, err := e.s.WorkerHeartbeat(e.ctx, &errandstore.WorkerHeartbeatParams{ID: "nobody", Stats: e.stats(1, 1, 0)})
	if !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("WorkerHeartbeat(unknown) = %v, %v; want ErrNotFound", w, err)
	}
	if ws := e.workers(); len(ws) != 0 {
		t.Fatalf("a heartbeat of an unknown worker created %v", workerIDs(ws))
	}

	e.register(registerParams("w"))
	e.clock.Advance(time.Second)
	e.workerStop("w")
	before := e.worker("w")
	e.clock.Advance(time.Second)
	w, err = e.s.WorkerHeartbeat(e.ctx, &errandstore.WorkerHeartbeatParams{ID: "w", Stats: e.stats(1, 1, 0)})
	if !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("WorkerHeartbeat(stopped worker) = %v, %v; want ErrNotFound", w, err)
	}
	sameWorker(t, "stopped worker after a refused heartbeat", before, e.worker("w"))
}

// testWorkerGone checks the staleness rule: a worker is alive until
// WorkerMissedHeartbeats intervals after its last heartbeat and gone from
// that instant, and a heartbeat brings it back.
func testWorkerGone(t *testing.T, h harness) {
	e := open(t, h)
	e.register(registerParams("w"))
	p := registerParams("slow")
	p.HeartbeatInterval = time.Minute
	e.register(p)
	window := errandstore.WorkerMissedHeartbeats * beat

	e.clock.Advance(window - time.Microsecond)
	if got := e.worker("w").Status; got != errandtype.WorkerAlive {
		t.Errorf("a microsecond before its window ends: status %s, want alive", got)
	}
	e.clock.Advance(time.Microsecond)
	if got := e.worker("w").Status; got != errandstore.WorkerGone {
		t.Errorf("when its window ends: status %s, want gone", got)
	}
	// The window is each worker's own.
	if got := e.worker("slow").Status; got != errandtype.WorkerAlive {
		t.Errorf("worker with a 1m interval after %s: status %s, want alive", window, got)
	}
	e.clock.Advance(time.Hour)
	if got := e.worker("w").Status; got != errandstore.WorkerGone {
		t.Errorf("an hour later: status %s, want gone", got)
	}
	// A gone worker that heartbeats again (it was frozen, not dead) is
	// alive again.
	w := e.workerBeat("w", e.stats(0, 0, 0))
	if w.Status != errandtype.WorkerAlive {
		t.Errorf("heartbeat of a gone worker returned status %s, want alive", w.Status)
	}
	if got := e.worker("w").Status; got != errandtype.WorkerAlive {
		t.Errorf("after a heartbeat: status %s, want alive", got)
	}
}

// testWorkerStaleAfter checks that WorkerList's StaleAfter overrides each
// worker's window.
func testWorkerStaleAfter(t *testing.T, h harness) {
	e := open(t, h)
	e.register(registerParams("w"))
	e.clock.Advance(10 * time.Second)
	for _, c := range []struct {
		stale time.Duration
		want  errandtype.WorkerStatus
	}{
		{0, errandtype.WorkerAlive}, // default window 15s
		{10*time.Second + time.Microsecond, errandtype.WorkerAlive},
		{10 * time.Second, errandstore.WorkerGone},
		{time.Second, errandstore.WorkerGone},
	} {
		got := e.statuses(&errandstore.WorkerListParams{StaleAfter: c.stale})["w"]
		if got != c.want {
			t.Errorf("StaleAfter %s, last heartbeat 10s ago: status %s, want %s", c.stale, got, c.want)
		}
	}
}

// testWorkerStop checks that a stopped worker is stopped whatever its
// heartbeat age, and that stopping twice keeps the first time.
func testWorkerStop(t *testing.T, h harness) {
	e := open(t, h)
	start := e.now()
	p := registerParams("w")
	e.register(p)
	e.register(registerParams("other"))
	now := e.clock.Advance(beat)
	e.workerBeat("w", e.stats(3, 5, time.Second))
	stopAt := e.clock.Advance(time.Second)
	e.workerStop("w")

	want := registered(p, start)
	want.HeartbeatAt = now
	want.JobsCompleted = 5
	want.LastCompletedAt = ptr(now.Add(-time.Second))
	want.StoppedAt = ptr(stopAt)
	want.Status = errandstore.WorkerStopped
	sameWorker(t, "stopped worker", want, e.worker("w"))
	if got := e.worker("other").Status; got != errandtype.WorkerAlive {
		t.Errorf("the other worker: status %s, want alive", got)
	}

	// Past any staleness window a stopped worker is still stopped, not gone.
	e.clock.Advance(time.Hour)
	if got := e.worker("w").Status; got != errandstore.WorkerStopped {
		t.Errorf("an hour after stopping: status %s, want stopped", got)
	}
	if got := e.worker("other").Status; got != errandstore.WorkerGone {
		t.Errorf("the other worker an hour on: status %s, want gone", got)
	}
	e.workerStop("w")
	sameWorker(t, "stopped twice", want, e.worker("w"))

	if err := e.s.WorkerStop(e.ctx, &errandstore.WorkerStopParams{ID: "nobody"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("WorkerStop(unknown) = %v, want ErrNotFound", err)
	}
	if ws := e.workers(); len(ws) != 2 {
		t.Errorf("after stopping an unknown worker: %v, want [w other]", workerIDs(ws))
	}
}

// testWorkerDraining checks that a heartbeat saying the worker drains
// records when it began, once; that the worker is draining until it stops
// or its heartbeats go stale; and that a registration starts afresh.
func testWorkerDraining(t *testing.T, h harness) {
	e := open(t, h)
	start := e.now()
	p := registerParams("w")
	e.register(p)
	e.register(registerParams("other"))
	drainAt := e.clock.Advance(time.Second)
	want := registered(p, start)
	want.HeartbeatAt, want.JobsRunning = drainAt, 2
	want.DrainingAt = ptr(drainAt)
	want.Status = errandstore.WorkerDraining
	sameWorker(t, "heartbeat that says it drains", want, e.workerBeat("w", e.draining(e.stats(2, 0, 0))))
	sameWorker(t, "listed while draining", want, e.worker("w"))
	if got := e.worker("other").Status; got != errandtype.WorkerAlive {
		t.Errorf("the other worker: status %s, want alive", got)
	}

	// Later heartbeats, whether they say so or not, keep when it began.
	now := e.clock.Advance(beat)
	want.HeartbeatAt, want.JobsRunning, want.JobsCompleted = now, 1, 1
	want.LastCompletedAt = ptr(now)
	sameWorker(t, "draining, a job done", want, e.workerBeat("w", e.draining(e.stats(1, 1, 0))))
	now = e.clock.Advance(beat)
	want.HeartbeatAt = now
	sameWorker(t, "a heartbeat that does not say it drains", want, e.workerBeat("w", e.stats(1, 1, beat)))

	// A draining worker whose heartbeats stop is gone, and is not pruned
	// before then.
	e.clock.Advance(errandstore.WorkerMissedHeartbeats*beat - time.Microsecond)
	if _, err := e.s.WorkerPrune(e.ctx, &errandstore.WorkerPruneParams{OlderThan: 0}); err != nil {
		t.Fatalf("WorkerPrune(0): %v", err)
	}
	if got := e.worker("w").Status; got != errandstore.WorkerDraining {
		t.Errorf("a microsecond before its window ends: status %s, want draining", got)
	}
	e.clock.Advance(time.Microsecond)
	if got := e.worker("w").Status; got != errandstore.WorkerGone {
		t.Errorf("when its window ends: status %s, want gone", got)
	}
	// A draining worker that stops is stopped.
	e.workerBeat("w", e.stats(0, 1, 0))
	e.workerStop("w")
	if got := e.worker("w"); got.Status != errandstore.WorkerStopped || got.DrainingAt == nil || !got.DrainingAt.Equal(drainAt) {
		t.Errorf("stopped after draining: status %s, draining_at %v; want stopped, %v", got.Status, got.DrainingAt, drainAt)
	}
	// Registering again is a fresh start: not draining.
	now = e.clock.Advance(time.Second)
	sameWorker(t, "registered again", registered(p, now), e.register(p))
}

// testWorkerListOrder checks newest first, then id.
func testWorkerListOrder(t *testing.T, h harness) {
	e := open(t, h)
	e.register(registerParams("b"))
	e.register(registerParams("a")) // same started_at as b
	e.clock.Advance(time.Second)
	e.register(registerParams("c"))
	e.clock.Advance(time.Second)
	e.register(registerParams("z"))
	e.workerStop("z")
	e.clock.Advance(time.Second)
	e.workerBeat("a", e.stats(0, 0, 0)) // a heartbeat does not reorder
	if got := workerIDs(e.workers()); !slices.Equal(got, []string{"z", "c", "a", "b"}) {
		t.Errorf("WorkerList order: %v, want [z c a b]", got)
	}
}

// testWorkerPrune checks that prune deletes only stopped and gone workers
// whose last sign of life is old enough.
func testWorkerPrune(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	for _, id := range []string{"stopped-old", "stopped-new", "gone-old", "gone-new", "alive"} {
		e.register(registerParams(id))
	}
	slow := registerParams("alive-slow") // its own window is 3h
	slow.HeartbeatInterval = time.Hour
	e.register(slow)
	e.workerStop("stopped-old")
	e.clock.Set(t0.Add(40 * time.Minute))
	e.workerBeat("gone-new", e.stats(0, 0, 0))
	e.workerStop("stopped-new")
	e.clock.Set(t0.Add(time.Hour))
	e.workerBeat("alive", e.stats(0, 0, 0))
	// Now: stopped-old stopped 60m ago, stopped-new 20m ago; gone-old last
	// beat 60m ago, gone-new 20m ago; alive beat now; alive-slow beat 60m
	// ago but its window is 3h.

	n, err := e.s.WorkerPrune(e.ctx, &errandstore.WorkerPruneParams{OlderThan: 30 * time.Minute})
	if err != nil {
		t.Fatalf("WorkerPrune(30m): %v", err)
	}
	if n != 2 {
		t.Errorf("WorkerPrune(30m) deleted %d, want 2", n)
	}
	got := workerIDs(e.workers())
	slices.Sort(got)
	if want := []string{"alive", "alive-slow", "gone-new", "stopped-new"}; !slices.Equal(got, want) {
		t.Errorf("after WorkerPrune(30m): %v, want %v", got, want)
	}

	// Zero prunes every stopped and gone worker, and no alive one.
	if n, err = e.s.WorkerPrune(e.ctx, &errandstore.WorkerPruneParams{OlderThan: 0}); err != nil || n != 2 {
		t.Errorf("WorkerPrune(0) = %d, %v; want 2", n, err)
	}
	got = workerIDs(e.workers())
	slices.Sort(got)
	if want := []string{"alive", "alive-slow"}; !slices.Equal(got, want) {
		t.Errorf("after WorkerPrune(0): %v, want %v", got, want)
	}
	if n, err = e.s.WorkerPrune(e.ctx, &errandstore.WorkerPruneParams{OlderThan: 0}); err != nil || n != 0 {
		t.Errorf("WorkerPrune(0) again = %d, %v; want 0", n, err)
	}
	// A pruned worker's heartbeat is ErrNotFound, so it registers again.
	if _, err := e.s.WorkerHeartbeat(e.ctx, &errandstore.WorkerHeartbeatParams{ID: "gone-old", Stats: e.stats(0, 0, 0)}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("heartbeat of a pruned worker = %v, want ErrNotFound", err)
	}
}

func testWorkerInvalidParams(t *testing.T, h harness) {
	e := open(t, h)
	before := e.register(registerParams("w"))
	for name, p := range map[string]*errandstore.WorkerRegisterParams{
		"no-id":             {HeartbeatInterval: beat},
		"zero-interval":     {ID: "x"},
		"negative-interval": {ID: "x", HeartbeatInterval: -time.Second},
		// A nanosecond is none at all in the stores' microseconds;
		// under MinInterval a worker would heartbeat in a tight loop.
		"nanosecond-interval": {ID: "x", HeartbeatInterval: time.Nanosecond},
		"under-min-interval":  {ID: "x", HeartbeatInterval: errandstore.MinInterval - time.Microsecond},
		"replace-zero":        {ID: "w"},
	} {
		if w, err := e.s.WorkerRegister(e.ctx, p); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("WorkerRegister %s = %v, %v; want an error wrapping ErrInvalid", name, w, err)
		}
	}
	for name, st := range map[string]errandstore.WorkerStats{
		"negative-running":   {JobsRunning: -1},
		"negative-completed": {JobsCompleted: -1},
		"negative-ago":       {JobsCompleted: 1, LastCompletedAgo: -time.Second},
	} {
		if w, err := e.s.WorkerHeartbeat(e.ctx, &errandstore.WorkerHeartbeatParams{ID: "w", Stats: st}); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("WorkerHeartbeat %s = %v, %v; want an error wrapping ErrInvalid", name, w, err)
		}
	}
	if ws, err := e.s.WorkerList(e.ctx, &errandstore.WorkerListParams{StaleAfter: -time.Second}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("WorkerList with a negative StaleAfter = %v, %v; want an error wrapping ErrInvalid", workerIDs(ws), err)
	}
	if n, err := e.s.WorkerPrune(e.ctx, &errandstore.WorkerPruneParams{OlderThan: -time.Second}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("WorkerPrune(-1s) = %d, %v; want an error wrapping ErrInvalid", n, err)
	}
	ws := e.workers()
	if len(ws) != 1 {
		t.Fatalf("after invalid calls: %v, want [w]", workerIDs(ws))
	}
	sameWorker(t, "worker after invalid calls", before, ws[0])
}

// testWorkerJSON pins the record's JSON: the field names the CLI and the
// API print, times in RFC 3339 UTC, unset fields null.
func testWorkerJSON(t *testing.T, h harness) {
	e := open(t, h)
	e.register(registerParams("w"))
	b, err := json.Marshal(e.worker("w"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ts := T0.Format(time.RFC3339Nano)
	want := map[string]any{
		"id":   "w",
		"host": "host-7",
		"pid":  float64(4242),
		"queues": []any{
			map[string]any{"name": "default", "concurrency": float64(10), "weight": nil},
			map[string]any{"name": "reports", "concurrency": float64(2), "weight": nil},
		},
		"kinds":              []any{"send_receipt", "build_report"},
		"heartbeat_interval": "5s",
		"started_at":         ts,
		"heartbeat_at":       ts,
		"stopped_at":         nil,
		"draining_at":        nil,
		"last_completed_at":  nil,
		"jobs_running":       float64(0),
		"jobs_completed":     float64(0),
		"status":             "alive",
		"clock_skew_ms":      float64(0),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("worker JSON:\n got %s\nwant %s", b, mustJSON(want))
	}

	now := e.clock.Advance(beat)
	e.workerBeat("w", e.stats(1, 1, 0))
	e.workerStop("w")
	b, err = json.Marshal(e.worker("w"))
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]any{}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ts = now.Format(time.RFC3339Nano)
	for k, v := range map[string]any{"stopped_at": ts, "last_completed_at": ts, "heartbeat_at": ts, "status": "stopped", "jobs_completed": float64(1)} {
		if got[k] != v {
			t.Errorf("stopped worker JSON: %s = %v, want %v (%s)", k, got[k], v, b)
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// testWorkerSecondStore checks that another process sees the registry.
func testWorkerSecondStore(t *testing.T, h harness) {
	e := open(t, h)
	s2 := e.second()
	w1 := e.register(registerParams("first"))
	e.clock.Advance(time.Second)
	if _, err := s2.WorkerRegister(e.ctx, registerParams("second")); err != nil {
		t.Fatalf("WorkerRegister on the second store: %v", err)
	}
	ws, err := s2.WorkerList(e.ctx, &errandstore.WorkerListParams{})
	if err != nil {
		t.Fatalf("WorkerList on the second store: %v", err)
	}
	if got := workerIDs(ws); !slices.Equal(got, []string{"second", "first"}) {
		t.Fatalf("second store lists %v, want [second first]", got)
	}
	sameWorker(t, "first worker seen by the second store", w1, ws[1])
	if err := s2.WorkerStop(e.ctx, &errandstore.WorkerStopParams{ID: "first"}); err != nil {
		t.Fatalf("WorkerStop on the second store: %v", err)
	}
	if got := e.worker("first").Status; got != errandstore.WorkerStopped {
		t.Errorf("first store sees status %s after the second stopped it, want stopped", got)
	}
}
