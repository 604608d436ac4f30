package storetest

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The schedule cases run on stores that implement the optional
// [errandstore.ScheduleStore]; others skip them.
var scheduleCases = []testCase{
	{"UpsertKeepsStateUnlessSpecChanges", testScheduleUpsert},
	{"AdvanceIsCompareAndSet", testScheduleAdvance},
	{"AdvanceFencedBySpec", testScheduleAdvanceSpec},
	{"AdvanceWithoutJob", testScheduleAdvanceSkip},
	{"AdvanceTakenKey", testScheduleAdvanceTakenKey},
	{"AdvanceRefusals", testScheduleAdvanceRefusals},
	{"List", testScheduleList},
	{"OneJobPerTickAcrossStores", testScheduleAcrossStores},
}

func (e *env) schedules() errandstore.ScheduleStore {
	e.t.Helper()
	ss, ok := e.s.(errandstore.ScheduleStore)
	if !ok {
		e.t.Skip("the store is not an errandstore.ScheduleStore")
	}
	return ss
}

func scheduleParams(name, spec string, next time.Time) *errandstore.ScheduleUpsertParams {
	return &errandstore.ScheduleUpsertParams{Name: name, Spec: spec, Kind: "report", Queue: "cron",
		Missed: errandtype.MissedSkip, NextFireAt: next}
}

func (e *env) upsertSchedule(p *errandstore.ScheduleUpsertParams) *errandtype.ScheduleRecord {
	e.t.Helper()
	r, err := e.schedules().ScheduleUpsert(e.ctx, p)
	if err != nil {
		e.t.Fatalf("ScheduleUpsert(%s): %v", p.Name, err)
	}
	return r
}

func tickJob(name string, tick time.Time, id string) *errandstore.JobInsertParams {
	j := newJob(id)
	j.Kind, j.Queue = "report", "cron"
	j.UniqueKey = errand.ScheduleUniqueKey(name, tick)
	return j
}

func (e *env) advance(p *errandstore.ScheduleAdvanceParams) *errandstore.ScheduleAdvanceResult {
	e.t.Helper()
	r, err := e.schedules().ScheduleAdvance(e.ctx, p)
	if err != nil {
		e.t.Fatalf("ScheduleAdvance(%s from %s): %v", p.Name, p.From, err)
	}
	return r
}

func wantSchedule(t *testing.T, got, want *errandtype.ScheduleRecord) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("schedule =\n  %+v\nwant\n  %+v", *got, *want)
	}
}

func testScheduleUpsert(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	n1 := t0.Add(time.Minute).Truncate(time.Minute)
	got := e.upsertSchedule(scheduleParams("digest", "@every 1m", n1))
	want := &errandtype.ScheduleRecord{Name: "digest", Spec: "@every 1m", Kind: "report", Queue: "cron",
		Missed: errandtype.MissedSkip, NextFireAt: n1, CreatedAt: t0, UpdatedAt: t0}
	wantSchedule(t, got, want)

	// Fire one tick, then register again with the same spec, as a
	// restarted process does: the stored tick and history stay.
	e.clock.Set(n1)
	r := e.advance(&errandstore.ScheduleAdvanceParams{Name: "digest", From: n1, To: n1.Add(time.Minute), Tick: n1,
		Job: tickJob("digest", n1, "tick-1")})
	e.clock.Advance(10 * time.Second)
	t1 := e.now()
	p := scheduleParams("digest", "@every 1m", t1.Add(time.Hour))
	p.Kind, p.Queue, p.Missed = "report2", "other", errandtype.MissedCatchUp
	got = e.upsertSchedule(p)
	want = &errandtype.ScheduleRecord{Name: "digest", Spec: "@every 1m", Kind: "report2", Queue: "other",
		Missed: errandtype.MissedCatchUp, NextFireAt: n1.Add(time.Minute), LastFireAt: &n1, LastJobID: ptr("tick-1"),
		CreatedAt: t0, UpdatedAt: t1}
	wantSchedule(t, got, want)
	if r.Schedule.LastJobID == nil || *r.Schedule.LastJobID != "tick-1" {
		t.Fatalf("advance result's schedule has last job %v, want tick-1", r.Schedule.LastJobID)
	}

	// A changed spec takes the new next fire time; the history stays.
	n2 := t1.Add(time.Hour)
	got = e.upsertSchedule(scheduleParams("digest", "@hourly", n2))
	want = &errandtype.ScheduleRecord{Name: "digest", Spec: "@hourly", Kind: "report", Queue: "cron",
		Missed: errandtype.MissedSkip, NextFireAt: n2, LastFireAt: &n1, LastJobID: ptr("tick-1"),
		CreatedAt: t0, UpdatedAt: t1}
	wantSchedule(t, got, want)

	var ie *errandtype.InputError
	for _, bad := range []*errandstore.ScheduleUpsertParams{
		scheduleParams("", "@hourly", n2),
		scheduleParams("has space", "@hourly", n2),
		scheduleParams("digest", "", n2),
		{Name: "digest", Spec: "@daily", Kind: "report", Queue: "cron", Missed: "sometimes", NextFireAt: n2},
		{Name: "digest", Spec: "@daily", Kind: "", Queue: "cron", Missed: errandtype.MissedSkip, NextFireAt: n2},
	} {
		if _, err := e.schedules().ScheduleUpsert(e.ctx, bad); !errors.As(err, &ie) {
			t.Errorf("ScheduleUpsert(%+v) = %v, want an *InputError", *bad, err)
		}
	}
	list, err := e.schedules().ScheduleList(e.ctx, &errandstore.ScheduleListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("after refused upserts: %d schedules, want 1", len(list))
	}
	wantSchedule(t, list[0], want)
}

func testScheduleAdvance(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	n1 := t0.Truncate(time.Second).Add(time.Second)
	e.upsertSchedule(scheduleParams("s", "@every 1s", n1))
	e.clock.Set(n1.Add(3 * time.Millisecond))
	r := e.advance(&errandstore.ScheduleAdvanceParams{Name: "s", From: n1, To: n1.Add(time.Second), Tick: n1,
		Job: tickJob("s", n1, "j1")})
	if !r.Advanced || r.Job == nil || r.Job.Duplicate || r.Job.Job.ID != "j1" {
		t.Fatalf("first advance = %+v, want advanced with new job j1", r)
	}
	if got := r.Job.Job.UniqueKey; got == nil || *got != errand.ScheduleUniqueKey("s", n1) {
		t.Fatalf("job unique key = %v, want %s", got, errand.ScheduleUniqueKey("s", n1))
	}
	want := &errandtype.ScheduleRecord{Name: "s", Spec: "@every 1s", Kind: "report", Queue: "cron",
		Missed: errandtype.MissedSkip, NextFireAt: n1.Add(time.Second), LastFireAt: &n1, LastJobID: ptr("j1"),
		CreatedAt: t0, UpdatedAt: e.now()}
	wantSchedule(t, r.Schedule, want)

	// A second process that read the same next fire time changes nothing.
	e.clock.Advance(time.Millisecond)
	r = e.advance(&errandstore.ScheduleAdvanceParams{Name: "s", From: n1, To: n1.Add(time.Second), Tick: n1,
		Job: tickJob("s", n1, "j1-again")})
	if r.Advanced || r.Job != nil {
		t.Fatalf("second advance of one tick = %+v, want not advanced and no job", r)
	}
	wantSchedule(t, r.Schedule, want)
	e.notFound("j1-again")
}

// testScheduleAdvanceSpec: a process that planned its tick from a spec no
// longer stored (another process registered a new one meanwhile) moves
// nothing and inserts nothing; with the stored spec it advances.
func testScheduleAdvanceSpec(t *testing.T, h harness) {
	e := open(t, h)
	n1 := e.now().Truncate(time.Hour).Add(time.Hour)
	e.upsertSchedule(scheduleParams("s", "30 * * * *", n1))
	e.clock.Set(n1)
	r := e.advance(&errandstore.ScheduleAdvanceParams{Name: "s", From: n1, Spec: "*/30 * * * *", To: n1.Add(30 * time.Minute), Tick: n1,
		Job: tickJob("s", n1, "stale")})
	if r.Advanced || r.Job != nil {
		t.Fatalf("advance planned from an old spec = %+v, want not advanced and no job", r)
	}
	if r.Schedule.Spec != "30 * * * *" || !r.Schedule.NextFireAt.Equal(n1) {
		t.Fatalf("schedule after the refused advance: spec %q next %s; want the stored spec and %s", r.Schedule.Spec, r.Schedule.NextFireAt, n1)
	}
	e.notFound("stale")
	r = e.advance(&errandstore.ScheduleAdvanceParams{Name: "s", From: n1, Spec: "30 * * * *", To: n1.Add(time.Hour), Tick: n1,
		Job: tickJob("s", n1, "fresh")})
	if !r.Advanced || r.Job == nil || r.Job.Job.ID != "fresh" || !r.Schedule.NextFireAt.Equal(n1.Add(time.Hour)) {
		t.Fatalf("advance with the stored spec = %+v, want advanced to %s with job fresh", r, n1.Add(time.Hour))
	}
}

func testScheduleAdvanceSkip(t *testing.T, h harness) {
	e := open(t, h)
	n1 := e.now().Add(time.Hour)
	e.upsertSchedule(scheduleParams("s", "@hourly", n1))
	e.clock.Set(n1.Add(5 * time.Hour))
	r := e.advance(&errandstore.ScheduleAdvanceParams{Name: "s", From: n1, To: n1.Add(6 * time.Hour)})
	if !r.Advanced || r.Job != nil || r.Schedule.LastFireAt != nil || r.Schedule.LastJobID != nil ||
		!r.Schedule.NextFireAt.Equal(n1.Add(6*time.Hour)) {
		t.Fatalf("advance without a job = %+v (schedule %+v), want advanced to %s with no job and no last fire",
			r, *r.Schedule, n1.Add(6*time.Hour))
	}
	js, err := e.s.JobList(e.ctx, &errandstore.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 0 {
		t.Fatalf("advance without a job inserted %d jobs", len(js))
	}
}

func testScheduleAdvanceTakenKey(t *testing.T, h harness) {
	e := open(t, h)
	n1 := e.now().Add(time.Minute)
	e.upsertSchedule(scheduleParams("s", "@every 1m", n1))
	// The tick's job exists already (its schedule row was reset, say).
	e.insert(tickJob("s", n1, "first"))
	r := e.advance(&errandstore.ScheduleAdvanceParams{Name: "s", From: n1, To: n1.Add(time.Minute), Tick: n1,
		Job: tickJob("s", n1, "second")})
	if !r.Advanced || r.Job == nil || !r.Job.Duplicate || r.Job.Job.ID != "first" {
		t.Fatalf("advance onto a taken key = %+v, want advanced with the duplicate job first", r)
	}
	if r.Schedule.LastJobID == nil || *r.Schedule.LastJobID != "first" {
		t.Fatalf("last job = %v, want first", r.Schedule.LastJobID)
	}
	e.notFound("second")
}

func testScheduleAdvanceRefusals(t *testing.T, h harness) {
	e := open(t, h)
	n1 := e.now().Add(time.Minute)
	before := e.upsertSchedule(scheduleParams("s", "@every 1m", n1))
	if _, err := e.schedules().ScheduleAdvance(e.ctx, &errandstore.ScheduleAdvanceParams{Name: "nope", From: n1, To: n1.Add(time.Minute)}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("advance of an unknown schedule: %v, want ErrNotFound", err)
	}
	var ie *errandtype.InputError
	noKey := tickJob("s", n1, "j")
	noKey.UniqueKey = ""
	badJob := tickJob("s", n1, "j")
	badJob.MaxAttempts = 0
	for _, p := range []*errandstore.ScheduleAdvanceParams{
		{Name: "s", From: n1, To: n1},
		{Name: "s", From: n1, To: n1.Add(-time.Second)},
		{Name: "s", From: n1, To: n1.Add(time.Minute), Tick: n1, Job: noKey},
		{Name: "s", From: n1, To: n1.Add(time.Minute), Tick: n1, Job: badJob},
	} {
		if _, err := e.schedules().ScheduleAdvance(e.ctx, p); !errors.As(err, &ie) {
			t.Errorf("ScheduleAdvance(%+v) = %v, want an *InputError", *p, err)
		}
	}
	list, err := e.schedules().ScheduleList(e.ctx, &errandstore.ScheduleListParams{})
	if err != nil {
		t.Fatal(err)
	}
	wantSchedule(t, list[0], before)
	e.notFound("j")
}

func testScheduleList(t *testing.T, h harness) {
	e := open(t, h)
	list, err := e.schedules().ScheduleList(e.ctx, &errandstore.ScheduleListParams{})
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("ScheduleList of none = %v, %v; want an empty, non-nil list", list, err)
	}
	n := e.now().Add(time.Minute)
	for _, name := range []string{"b", "c", "a"} {
		e.upsertSchedule(scheduleParams(name, "@every 1m", n))
	}
	list, err = e.schedules().ScheduleList(e.ctx, &errandstore.ScheduleListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) {
		t.Fatalf("ScheduleList names = %v, want [a b c]", names)
	}
}

// testScheduleAcrossStores has two stores on one database race to fire the
// same ticks: each tick is advanced once and enqueues one job.
func testScheduleAcrossStores(t *testing.T, h harness) {
	e := open(t, h)
	s2, ok := e.second().(errandstore.ScheduleStore)
	if !ok {
		t.Fatal("the second store is not an errandstore.ScheduleStore")
	}
	stores := []errandstore.ScheduleStore{e.schedules(), s2}
	n0 := e.now().Truncate(time.Second).Add(time.Second)
	e.upsertSchedule(scheduleParams("s", "@every 1s", n0))
	const ticks, racers = 10, 4
	for i := range ticks {
		tick := n0.Add(time.Duration(i) * time.Second)
		var mu sync.Mutex
		advanced := 0
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				res, err := stores[r%2].ScheduleAdvance(e.ctx, &errandstore.ScheduleAdvanceParams{Name: "s", From: tick,
					To: tick.Add(time.Second), Tick: tick, Job: tickJob("s", tick, "t"+tick.Format("150405")+"-"+string(rune('a'+r)))})
				if err != nil {
					t.Errorf("ScheduleAdvance: %v", err)
					return
				}
				if res.Advanced {
					mu.Lock()
					advanced++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if advanced != 1 {
			t.Fatalf("tick %d advanced %d times, want 1", i, advanced)
		}
	}
	js, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, j := range js {
		perKey[*j.UniqueKey]++
	}
	if len(js) != ticks || len(perKey) != ticks {
		t.Fatalf("%d jobs over %d keys, want %d jobs, one per tick", len(js), len(perKey), ticks)
	}
}
