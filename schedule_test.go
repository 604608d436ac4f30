package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// scheduleEnv is a SQLite store, a client and a fake clock at 12:00:00 UTC.
type scheduleEnv struct {
	t     *testing.T
	ctx   context.Context
	clock *errandtest.Clock
	c     *errand.Client[*sql.Tx]
	t0    time.Time
}

func newScheduleEnv(t *testing.T) *scheduleEnv {
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock})
	return &scheduleEnv{t: t, ctx: t.Context(), clock: clock, c: c, t0: clock.Now()}
}

func (e *scheduleEnv) schedule(name, spec string, opts *errand.ScheduleOpts) *errand.Schedule {
	e.t.Helper()
	s, err := errand.NewSchedule(name, spec, errand.RawArgs{KindName: "report"}, opts)
	if err != nil {
		e.t.Fatalf("NewSchedule(%s, %q): %v", name, spec, err)
	}
	return s
}

// runner registers ss as a starting worker does.
func (e *scheduleEnv) runner(ss ...*errand.Schedule) *errand.ScheduleRunner {
	e.t.Helper()
	r, err := errand.NewScheduleRunner(e.c, ss)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Register(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *scheduleEnv) fire(r *errand.ScheduleRunner) time.Time {
	e.t.Helper()
	next, err := r.Fire(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return next
}

func (e *scheduleEnv) record(name string) *errandtype.ScheduleRecord {
	e.t.Helper()
	rs, err := e.c.Schedules(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	e.t.Fatalf("no schedule %s in %v", name, rs)
	return nil
}

// ticksEnqueued returns the unique keys of the jobs, in enqueue order, and
// the keys of those tagged catch_up.
func (e *scheduleEnv) ticksEnqueued() (keys, catchUp []string) {
	e.t.Helper()
	js, err := e.c.List(e.ctx, &errand.ListOpts{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, j := range js {
		keys = append(keys, *j.UniqueKey)
		if slices.Contains(j.Tags, "catch_up") {
			catchUp = append(catchUp, *j.UniqueKey)
		}
	}
	return keys, catchUp
}

func keysAt(name string, ticks ...time.Time) []string {
	var out []string
	for _, t := range ticks {
		out = append(out, errand.ScheduleUniqueKey(name, t))
	}
	return out
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %s, want %s", what, got.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano))
	}
}

func TestScheduleFiresEachTickOnce(t *testing.T) {
	e := newScheduleEnv(t)
	r := e.runner(e.schedule("digest", "@every 1m", nil))
	wantTime(t, "first next fire", e.record("digest").NextFireAt, e.t0.Add(time.Minute))
	wantTime(t, "next before the tick", e.fire(r), e.t0.Add(time.Minute))
	if keys, _ := e.ticksEnqueued(); len(keys) != 0 {
		t.Fatalf("jobs before the first tick: %v", keys)
	}
	e.clock.Set(e.t0.Add(time.Minute + 300*time.Millisecond))
	wantTime(t, "next after a tick", e.fire(r), e.t0.Add(2*time.Minute))
	e.fire(r) // nothing more is due
	// A second process that still holds the old next fire time fires
	// nothing: the store moved on.
	other := e.runner(e.schedule("digest", "@every 1m", nil))
	e.fire(other)
	keys, _ := e.ticksEnqueued()
	if want := keysAt("digest", e.t0.Add(time.Minute)); !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v", keys, want)
	}
	rec := e.record("digest")
	if rec.LastFireAt == nil || !rec.LastFireAt.Equal(e.t0.Add(time.Minute)) || rec.LastJobID == nil {
		t.Fatalf("record = %+v, want the last fire at the first tick with its job", rec)
	}
	if rec.Kind != "report" || rec.Queue != errand.DefaultQueue || rec.Missed != errandtype.MissedSkip {
		t.Fatalf("record = %+v, want kind report, default queue, policy skip", rec)
	}
}

// TestScheduleLateTicksEachGetAJob: ticks no older than the grace are late,
// not missed: each gets its job, whatever the policy.
func TestScheduleLateTicksEachGetAJob(t *testing.T) {
	e := newScheduleEnv(t)
	r := e.runner(e.schedule("s", "@every 1s", nil))
	e.clock.Set(e.t0.Add(4500 * time.Millisecond))
	wantTime(t, "next", e.fire(r), e.t0.Add(5*time.Second))
	keys, _ := e.ticksEnqueued()
	want := keysAt("s", e.t0.Add(time.Second), e.t0.Add(2*time.Second), e.t0.Add(3*time.Second), e.t0.Add(4*time.Second))
	if !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v", keys, want)
	}
}

func TestScheduleMissedTicks(t *testing.T) {
	for _, tc := range []struct {
		policy      errandtype.MissedPolicy
		wantTicks   []int // seconds after t0
		wantCatchUp []int
	}{
		// Down until 10.5s with a grace of 2s: ticks 1..8 are missed, 9
		// and 10 late.
		{errandtype.MissedSkip, []int{9, 10}, nil},
		{errandtype.MissedCatchUp, []int{1, 9, 10}, []int{1}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := newScheduleEnv(t)
			r := e.runner(e.schedule("s", "@every 1s", &errand.ScheduleOpts{Missed: tc.policy, Grace: 2 * time.Second}))
			e.clock.Set(e.t0.Add(10500 * time.Millisecond))
			wantTime(t, "next", e.fire(r), e.t0.Add(11*time.Second))
			keys, catchUp := e.ticksEnqueued()
			at := func(secs []int) []string {
				var ts []time.Time
				for _, s := range secs {
					ts = append(ts, e.t0.Add(time.Duration(s)*time.Second))
				}
				return keysAt("s", ts...)
			}
			if !slices.Equal(keys, at(tc.wantTicks)) || !slices.Equal(catchUp, at(tc.wantCatchUp)) {
				t.Fatalf("jobs = %v (catch-up %v), want %v (catch-up %v)", keys, catchUp, at(tc.wantTicks), at(tc.wantCatchUp))
			}
			if rec := e.record("s"); rec.Missed != tc.policy {
				t.Fatalf("stored policy = %s, want %s", rec.Missed, tc.policy)
			}
		})
	}
}

// TestScheduleMissedHours: an hourly schedule down for a day with the
// default grace skips, or catches up with one job, and goes on at the next
// hour.
func TestScheduleMissedHours(t *testing.T) {
	for _, policy := range []errandtype.MissedPolicy{errandtype.MissedSkip, errandtype.MissedCatchUp} {
		t.Run(string(policy), func(t *testing.T) {
			e := newScheduleEnv(t)
			r := e.runner(e.schedule("h", "@hourly", &errand.ScheduleOpts{Missed: policy}))
			e.clock.Set(e.t0.Add(24*time.Hour + 30*time.Minute))
			wantTime(t, "next", e.fire(r), e.t0.Add(25*time.Hour))
			keys, _ := e.ticksEnqueued()
			var want []string
			if policy == errandtype.MissedCatchUp {
				want = keysAt("h", e.t0.Add(time.Hour))
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("jobs = %v, want %v", keys, want)
			}
		})
	}
}

func TestScheduleTimeZones(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	winter := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	summer := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec       string
		loc        *time.Location
		stored     string
		from, want time.Time
	}{
		{"CRON_TZ=Europe/Paris 0 9 * * *", nil, "CRON_TZ=Europe/Paris 0 9 * * *", winter, time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
		{"0 9 * * *", paris, "CRON_TZ=Europe/Paris 0 9 * * *", summer, time.Date(2026, 7, 2, 7, 0, 0, 0, time.UTC)},
		{"0 9 * * *", nil, "0 9 * * *", winter, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)},
		{"TZ=America/New_York 30 6 * * MON-FRI", paris, "TZ=America/New_York 30 6 * * MON-FRI", winter, time.Date(2026, 11, 30, 11, 30, 0, 0, time.UTC)},
		{"15 */10 * * * *", nil, "15 */10 * * * *", winter, winter.Add(15 * time.Second)},
		{"@every 90s", paris, "@every 90s", winter.Add(time.Second), winter.Add(90 * time.Second)},
	} {
		s, err := errand.NewSchedule("s", tc.spec, errand.RawArgs{KindName: "k"}, &errand.ScheduleOpts{Location: tc.loc})
		if err != nil {
			t.Fatalf("NewSchedule(%q): %v", tc.spec, err)
		}
		if s.Spec() != tc.stored {
			t.Errorf("%q: stored spec %q, want %q", tc.spec, s.Spec(), tc.stored)
		}
		if got := s.Next(tc.from); !got.Equal(tc.want) {
			t.Errorf("%q: next after %s = %s, want %s", tc.spec, tc.from, got.UTC(), tc.want)
		}
	}

	// The stored spec carries the zone: a registered schedule fires at
	// 09:00 in Paris.
	e := newScheduleEnv(t)
	e.runner(e.schedule("morning", "0 9 * * *", &errand.ScheduleOpts{Location: paris}))
	rec := e.record("morning")
	wantTime(t, "next fire", rec.NextFireAt, time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	if rec.Spec != "CRON_TZ=Europe/Paris 0 9 * * *" {
		t.Fatalf("stored spec %q", rec.Spec)
	}
}

// TestScheduleRestartAndSpecChange: registering again with the same spec
// keeps the stored next fire time and history; a changed spec starts afresh
// from now.
func TestScheduleRestartAndSpecChange(t *testing.T) {
	e := newScheduleEnv(t)
	r := e.runner(e.schedule("s", "@every 1m", nil))
	e.clock.Set(e.t0.Add(time.Minute))
	e.fire(r)
	e.clock.Set(e.t0.Add(90 * time.Second))
	before := e.record("s")

	// A restart: the next tick stays at 12:02, not recomputed.
	r = e.runner(e.schedule("s", "@every 1m", nil))
	after := e.record("s")
	wantTime(t, "next fire after a restart", after.NextFireAt, before.NextFireAt)
	if *after.LastJobID != *before.LastJobID {
		t.Fatalf("last job changed on restart: %s, was %s", *after.LastJobID, *before.LastJobID)
	}
	e.clock.Set(e.t0.Add(2 * time.Minute))
	e.fire(r)

	// A changed spec: the next fire time is computed from now by it.
	e.clock.Set(e.t0.Add(2*time.Minute + 10*time.Second))
	r = e.runner(e.schedule("s", "@hourly", nil))
	changed := e.record("s")
	if changed.Spec != "@hourly" {
		t.Fatalf("stored spec %q, want @hourly", changed.Spec)
	}
	wantTime(t, "next fire after a spec change", changed.NextFireAt, e.t0.Add(time.Hour))
	e.clock.Set(e.t0.Add(time.Hour))
	e.fire(r)
	keys, _ := e.ticksEnqueued()
	if want := keysAt("s", e.t0.Add(time.Minute), e.t0.Add(2*time.Minute), e.t0.Add(time.Hour)); !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v", keys, want)
	}
}

func TestNewScheduleRefusesBadInput(t *testing.T) {
	args := errand.RawArgs{KindName: "k"}
	for _, tc := range []struct {
		name, spec string
		args       errand.JobArgs
		opts       *errand.ScheduleOpts
	}{
		{"", "@hourly", args, nil},
		{"two words", "@hourly", args, nil},
		{"s", "", args, nil},
		{"s", "61 * * * *", args, nil},
		{"s", "@every 500ms", args, nil},
		{"s", "@every soon", args, nil},
		{"s", "@fortnightly", args, nil},
		{"s", "CRON_TZ=Nowhere/Special 0 9 * * *", args, nil},
		{"s", "@hourly", nil, nil},
		{"s", "@hourly", errand.RawArgs{}, nil},
		{"s", "@hourly", args, &errand.ScheduleOpts{Location: time.Local}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Missed: "sometimes"}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Grace: -time.Second}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Enqueue: &errand.EnqueueOpts{UniqueKey: "k"}}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Enqueue: &errand.EnqueueOpts{ID: "j"}}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Enqueue: &errand.EnqueueOpts{Unique: &errand.UniqueOpts{Key: "k", Scope: errandtype.UniqueUntilFinished}}}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Enqueue: &errand.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}}},
		{"s", "@hourly", args, &errand.ScheduleOpts{Enqueue: &errand.EnqueueOpts{Tags: manyTags(errandstore.MaxTags)}}},
		{".", "@hourly", args, nil},
		{"..", "@hourly", args, nil},
		{"s", "0 9 * * *", args, &errand.ScheduleOpts{Location: time.FixedZone("UTC+2", 2*3600)}},
	} {
		_, err := errand.NewSchedule(tc.name, tc.spec, tc.args, tc.opts)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("NewSchedule(%q, %q, %v, %+v) = %v, want an *InputError", tc.name, tc.spec, tc.args, tc.opts, err)
		}
	}
}

func manyTags(n int) []string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("t%d", i)
	}
	return tags
}

// TestScheduleFollowsTheStoredSpecInARollingDeploy: a process that has not
// read the spec another registered since (a rolling deploy) cannot fire a
// tick of its old spec, nor store a next fire time of it, even when the
// two specs share the pending tick.
func TestScheduleFollowsTheStoredSpecInARollingDeploy(t *testing.T) {
	e := newScheduleEnv(t)                                 // 12:00
	old := e.runner(e.schedule("s", "*/30 * * * *", nil))  // next 12:30
	latest := e.runner(e.schedule("s", "30 * * * *", nil)) // next 12:30 too
	if rec := e.record("s"); rec.Spec != "30 * * * *" {
		t.Fatalf("stored spec %q, want the latest registered", rec.Spec)
	}
	e.clock.Set(e.t0.Add(30 * time.Minute))
	e.fire(old) // the old process fires 12:30 first
	e.fire(latest)
	for _, m := range []time.Duration{60, 90} { // 13:00, no tick of the stored spec, and 13:30
		e.clock.Set(e.t0.Add(m * time.Minute))
		e.fire(latest)
		e.fire(old)
	}
	keys, _ := e.ticksEnqueued()
	if want := keysAt("s", e.t0.Add(30*time.Minute), e.t0.Add(90*time.Minute)); !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v: ticks of the stored spec %q alone", keys, want, e.record("s").Spec)
	}
}

// TestScheduleCatchUpTag: the catch-up job's tag fits within MaxTags (a
// schedule whose Tags would leave it no room is refused at NewSchedule),
// and is not added twice when Tags has it already.
func TestScheduleCatchUpTag(t *testing.T) {
	e := newScheduleEnv(t)
	tags := append(manyTags(errandstore.MaxTags-1), "catch_up")
	r := e.runner(e.schedule("s", "@every 1m", &errand.ScheduleOpts{Missed: errandtype.MissedCatchUp,
		Enqueue: &errand.EnqueueOpts{Tags: tags}}))
	e.clock.Set(e.t0.Add(time.Minute))
	e.fire(r)
	e.clock.Set(e.t0.Add(6*time.Minute + 5*time.Second)) // every process was down; 12:06 is late, in its grace
	e.fire(r)
	// 12:02 to 12:05 caught up by one job, keyed by the first.
	keys, _ := e.ticksEnqueued()
	if want := keysAt("s", e.t0.Add(time.Minute), e.t0.Add(2*time.Minute), e.t0.Add(6*time.Minute)); !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v", keys, want)
	}
	js, err := e.c.List(e.ctx, &errand.ListOpts{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if !slices.Equal(j.Tags, tags) {
			t.Errorf("job %s tagged %v; want the schedule's %d tags as given", *j.UniqueKey, j.Tags, len(tags))
		}
	}
}

func TestWorkerRefusesBadSchedules(t *testing.T) {
	st := openStore(t, nil)
	c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "work", Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	unknown, err := errand.NewSchedule("s", "@hourly", errand.RawArgs{KindName: "typo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	known, err := errand.NewSchedule("s", "@hourly", errand.RawArgs{KindName: "work"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range [][]*errand.Schedule{{unknown}, {known, known}, {nil}} {
		if _, err := c.NewWorker(&errand.WorkerConfig{Schedules: ss}); err == nil {
			t.Errorf("NewWorker with schedules %v: no error", ss)
		}
	}
}

// TestWorkerRunsSchedules: a started worker registers its schedule and
// enqueues a job on each tick of the fake clock.
func TestWorkerRunsSchedules(t *testing.T) {
	clock := newTestClock()
	t0 := clock.Now()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "report"}, {Name: "other", Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	s, err := errand.NewSchedule("digest", "@every 1m", errand.RawArgs{KindName: "report"}, &errand.ScheduleOpts{Enqueue: &errand.EnqueueOpts{Queue: "reports"}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Schedules: []*errand.Schedule{s}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	for i := 1; i <= 3; i++ {
		tick := t0.Add(time.Duration(i) * time.Minute)
		blockUntilAt(t, clock, tick, 1) // the scheduler sleeps until the tick
		clock.Set(tick)
		waitFor(t, clockWait, "the tick's job", func() bool {
			js, err := c.List(t.Context(), &errand.ListOpts{Queue: "reports"})
			return err == nil && len(js) == i
		})
	}
	js, err := c.List(t.Context(), &errand.ListOpts{Queue: "reports"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := []string{*js[0].UniqueKey, *js[1].UniqueKey, *js[2].UniqueKey},
		keysAt("digest", t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)); !slices.Equal(got, want) {
		t.Fatalf("jobs = %v, want %v", got, want)
	}
}

func TestParseScheduleFlag(t *testing.T) {
	from := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		flag, name, spec, kind, args string
		next                         time.Time
	}{
		{`nightly=0 3 * * * cleanup {"days": 30}`, "nightly", "0 3 * * *", "cleanup", `{"days":30}`, time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)},
		{`heartbeat=@every 30s ping`, "heartbeat", "@every 30s", "ping", `{}`, from.Add(30 * time.Second)},
		{`tick=*/5 * * * * * ping [1, 2]`, "tick", "*/5 * * * * *", "ping", `[1,2]`, from.Add(5 * time.Second)},
		{`report=CRON_TZ=Europe/Paris 0 9 * * MON-FRI send_report`, "report", "CRON_TZ=Europe/Paris 0 9 * * MON-FRI", "send_report", `{}`, time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
	} {
		s, err := errand.ParseScheduleFlag(tc.flag, nil)
		if err != nil {
			t.Errorf("ParseScheduleFlag(%q): %v", tc.flag, err)
			continue
		}
		if s.Name() != tc.name || s.Spec() != tc.spec || !s.Next(from).Equal(tc.next) {
			t.Errorf("ParseScheduleFlag(%q) = name %q spec %q next %s; want %q %q %s", tc.flag, s.Name(), s.Spec(), s.Next(from), tc.name, tc.spec, tc.next)
		}
		if got := s.Args(); got.Kind() != tc.kind || string(mustJSON(t, got)) != tc.args {
			t.Errorf("ParseScheduleFlag(%q) args = %s %s, want %s %s", tc.flag, got.Kind(), mustJSON(t, got), tc.kind, tc.args)
		}
	}
	for _, bad := range []string{"", "nightly", "=@hourly k", "nightly=@hourly", "nightly=cleanup", "n=@hourly k {bad", "n=61 * * * * k"} {
		var ie *errandtype.InputError
		if _, err := errand.ParseScheduleFlag(bad, nil); !errors.As(err, &ie) {
			t.Errorf("ParseScheduleFlag(%q) = %v, want an *InputError", bad, err)
		}
	}
	// Args that are JSON but no object or array are named as such, not
	// taken for the kind with the real kind read into the spec.
	for _, bad := range []string{`n=@hourly k 42`, `n=0 3 * * * k "x"`, `n=@daily k true`} {
		_, err := errand.ParseScheduleFlag(bad, nil)
		if err == nil || !strings.Contains(err.Error(), "must be a JSON object or array") {
			t.Errorf("ParseScheduleFlag(%q) = %v; want it to say the args must be an object or array", bad, err)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestScheduleDeletedRowIsRegisteredAgain: a schedule row deleted by hand
// while a worker runs it comes back when its tick comes due, from that
// tick: the tick still fires, once.
func TestScheduleDeletedRowIsRegisteredAgain(t *testing.T) {
	e := newScheduleEnv(t)
	r := e.runner(e.schedule("s", "@every 1m", nil))
	e.clock.Set(e.t0.Add(time.Minute))
	e.fire(r)
	mustExec(t, e.c.Store().(interface{ DB() *sql.DB }).DB(), `DELETE FROM errand_schedules`)
	e.clock.Set(e.t0.Add(2 * time.Minute))
	e.fire(r)
	wantTime(t, "next fire after the row came back", e.record("s").NextFireAt, e.t0.Add(3*time.Minute))
	keys, _ := e.ticksEnqueued()
	if want := keysAt("s", e.t0.Add(time.Minute), e.t0.Add(2*time.Minute)); !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v", keys, want)
	}
}

// TestWorkerWithoutHandlersRunsSchedules: a client that handles no kind
// may run a worker for its schedules (or retention) alone; it registers
// with no queue and fires the ticks. Without either it is refused.
func TestWorkerWithoutHandlersRunsSchedules(t *testing.T) {
	clock := newTestClock()
	t0 := clock.Now()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "report"}})})
	var ie *errandtype.InputError
	if _, err := c.NewWorker(&errand.WorkerConfig{}); !errors.As(err, &ie) || ie.Field != "Kinds" {
		t.Fatalf("NewWorker without handlers, schedules or retention: %v", err)
	}
	if _, err := c.NewWorker(&errand.WorkerConfig{Retention: &errand.RetentionPolicy{DeadAge: time.Hour}}); err != nil {
		t.Fatalf("NewWorker with retention only: %v", err)
	}
	s, err := errand.NewSchedule("digest", "@every 1m", errand.RawArgs{KindName: "report"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Schedules: []*errand.Schedule{s}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	tick := t0.Add(time.Minute)
	blockUntilAt(t, clock, tick, 1)
	clock.Set(tick)
	waitFor(t, clockWait, "the tick's job", func() bool {
		js, err := c.List(t.Context(), &errand.ListOpts{Kind: "report"})
		return err == nil && len(js) == 1 && js[0].State == errandtype.StateQueued
	})
	ws, err := c.Workers(t.Context())
	if err != nil || len(ws) != 1 || len(ws[0].Queues) != 0 || ws[0].Handles(errand.DefaultQueue, "report") {
		t.Fatalf("registry: %+v, %v", ws, err)
	}
}
