package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var listCases = []testCase{
	{"Filters", testListFilters},
	{"Paging", testListPaging},
	{"DefaultLimit", testListDefaultLimit},
	{"FlowFilters", testListFlowFilters},
}

var statsCases = []testCase{
	{"Queues", testStats},
	{"Empty", testStatsEmpty},
	{"HeldNotReady", testStatsHeldNotReady},
}

// oldestReady returns the oldest ready age QueueStats reports for queue.
func (e *env) oldestReady(queue string) float64 {
	e.t.Helper()
	qs, err := e.s.QueueStats(e.ctx, &errandstore.QueueStatsParams{})
	if err != nil {
		e.t.Fatalf("QueueStats: %v", err)
	}
	for _, q := range qs {
		if q.Queue == queue {
			return q.OldestReadyAgeSeconds
		}
	}
	e.t.Fatalf("QueueStats: no queue %s in %+v", queue, qs)
	return 0
}

// testStatsHeldNotReady: a job held back by its ordering key is not ready,
// however long ago it became available: the oldest ready age is the age of
// jobs a worker could take.
func testStatsHeldNotReady(t *testing.T, h harness) {
	e := open(t, h)
	first := keyed("first", "key")
	first.RunAt = T0.Add(-time.Minute)
	second := keyed("second", "key") // after first, though available longer
	second.RunAt = T0.Add(-2 * time.Minute)
	e.insert(first, second)
	if got := e.oldestReady(errand.DefaultQueue); got != 60 {
		t.Errorf("first waiting, second held behind it: oldest ready age %v, want 60", got)
	}
	j := e.claimOne("first")
	if got := e.oldestReady(errand.DefaultQueue); got != 0 {
		t.Errorf("first running, second held: oldest ready age %v, want 0", got)
	}
	e.recordOK(succeeded(j))
	if got := e.oldestReady(errand.DefaultQueue); got != 120 {
		t.Errorf("first succeeded, second free: oldest ready age %v, want 120", got)
	}
}

func (e *env) list(p *errandstore.JobListParams) []*errandtype.Job {
	e.t.Helper()
	js, err := e.s.JobList(e.ctx, p)
	if err != nil {
		e.t.Fatalf("JobList(%+v): %v", p, err)
	}
	return js
}

func testListFilters(t *testing.T, h harness) {
	e := open(t, h)
	mk := func(id, queue, kind string) *errandstore.JobInsertParams {
		p := newJob(id)
		p.Queue, p.Kind = queue, kind
		return p
	}
	e.insert(
		mk("1", "mail", "welcome"),
		mk("2", "mail", "digest"),
		mk("3", "billing", "charge"),
		mk("4", "mail", "welcome"),
		mk("5", "billing", "refund"),
	)
	// 1 running, 2 succeeded, 3 dead, 4 stays queued, 5 cancelled.
	run := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"mail"}, Kinds: []string{"welcome"}, Limit: 1, Lease: lease, Owner: owner})
	ok := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"mail"}, Kinds: []string{"digest"}, Limit: 1, Lease: lease, Owner: owner})
	die := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"billing"}, Kinds: []string{"charge"}, Limit: 1, Lease: lease, Owner: owner})
	if len(run) != 1 || len(ok) != 1 || len(die) != 1 {
		t.Fatalf("setup claims: %v %v %v", ids(run), ids(ok), ids(die))
	}
	e.recordOK(succeeded(ok[0]))
	e.recordOK(dead(die[0]))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "5"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    errandstore.JobListParams
		want []string
	}{
		{errandstore.JobListParams{}, []string{"1", "2", "3", "4", "5"}},
		{errandstore.JobListParams{Queue: "mail"}, []string{"1", "2", "4"}},
		{errandstore.JobListParams{Kind: "welcome"}, []string{"1", "4"}},
		{errandstore.JobListParams{Queue: "billing", Kind: "welcome"}, nil},
		{errandstore.JobListParams{States: []errandtype.JobState{errandtype.StateQueued}}, []string{"4"}},
		{errandstore.JobListParams{States: []errandtype.JobState{errandtype.StateDead, errandtype.StateRunning}}, []string{"1", "3"}},
		{errandstore.JobListParams{States: []errandtype.JobState{errandtype.StateSucceeded, errandtype.StateCancelled}, Queue: "billing"}, []string{"5"}},
		{errandstore.JobListParams{States: []errandtype.JobState{errandtype.StateRetrying}}, nil},
		{errandstore.JobListParams{Queue: "mail", Limit: 2}, []string{"1", "2"}},
	} {
		got := e.list(&c.p)
		if g := ids(got); !slices.Equal(g, c.want) && !(len(g) == 0 && len(c.want) == 0) {
			t.Errorf("JobList(%+v) = %v, want %v", c.p, g, c.want)
		}
		// Listed records are whole: the same as JobGet's.
		for _, j := range got {
			same(t, "listed job "+j.ID, e.get(j.ID), j)
		}
	}
}

// testListPaging checks that walking a filtered list page by page with
// AfterSeq visits every match once, in order.
func testListPaging(t *testing.T, h harness) {
	e := open(t, h)
	var ps []*errandstore.JobInsertParams
	var all, even []string
	for i := range 23 {
		p := newJob(fmt.Sprintf("job-%02d", i))
		if i%2 == 0 {
			p.Queue = "even"
			even = append(even, p.ID)
		}
		all = append(all, p.ID)
		ps = append(ps, p)
	}
	e.insert(ps...)
	for _, c := range []struct {
		queue string
		limit int
		want  []string
	}{
		{"", 5, all},
		{"", 23, all},
		{"", 1, all},
		{"even", 4, even},
	} {
		var got []string
		var after int64
		pages := 0
		for {
			js := e.list(&errandstore.JobListParams{Queue: c.queue, AfterSeq: after, Limit: c.limit})
			if len(js) > c.limit {
				t.Fatalf("page of %d jobs with limit %d", len(js), c.limit)
			}
			if len(js) == 0 {
				break
			}
			for _, j := range js {
				if j.Seq <= after {
					t.Fatalf("job %s has seq %d, not after the cursor %d", j.ID, j.Seq, after)
				}
				after = j.Seq
			}
			got = append(got, ids(js)...)
			if pages++; pages > len(c.want)+1 {
				t.Fatalf("paging does not end: %v", got)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("walk queue %q by %d: %v, want %v", c.queue, c.limit, got, c.want)
		}
	}
}

func testListDefaultLimit(t *testing.T, h harness) {
	e := open(t, h)
	var ps []*errandstore.JobInsertParams
	for i := range 101 {
		ps = append(ps, newJob(fmt.Sprintf("job-%03d", i)))
	}
	e.insert(ps...)
	js := e.list(&errandstore.JobListParams{})
	if len(js) != 100 || js[0].ID != "job-000" || js[99].ID != "job-099" {
		t.Errorf("JobList with no limit returned %d jobs; want the first 100", len(js))
	}
}

func testStats(t *testing.T, h harness) {
	e := open(t, h)
	mk := func(id, queue string, runAt time.Time) *errandstore.JobInsertParams {
		p := newJob(id)
		p.Queue, p.RunAt = queue, runAt
		return p
	}
	ready := mk("ready", "alpha", T0.Add(10*time.Second))
	ready.Kind = "report" // out of reach of the claim below
	e.insert(
		ready,
		mk("scheduled", "alpha", T0.Add(time.Hour)),
		mk("to-retry", "alpha", T0),
		mk("to-run", "alpha", T0),
		mk("to-succeed", "alpha", T0),
		mk("to-die-1", "alpha", T0),
		mk("to-die-2", "alpha", T0),
		mk("to-cancel", "alpha", T0.Add(time.Hour)),
		mk("beta-ready", "beta", T0.Add(-30*time.Second)),
		mk("gamma-later", "gamma", T0.Add(time.Hour)),
		mk("delta-retry", "delta", T0),
	)
	js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"alpha"}, Kinds: []string{"email"}, Limit: 10, Lease: time.Hour, Owner: owner})
	if got := ids(js); !slices.Equal(got, []string{"to-retry", "to-run", "to-succeed", "to-die-1", "to-die-2"}) {
		t.Fatalf("setup claim: %v", got)
	}
	e.recordOK(retry(js[0], 30*time.Second)) // due at T0+30s
	e.recordOK(succeeded(js[2]))
	e.recordOK(dead(js[3]))
	e.recordOK(dead(js[4]))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "to-cancel"}); err != nil {
		t.Fatal(err)
	}
	d := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"delta"}, Limit: 1, Lease: time.Hour, Owner: owner})
	if len(d) != 1 {
		t.Fatalf("setup claim in delta: %v", ids(d))
	}
	e.recordOK(retry(d[0], 40*time.Second)) // due at T0+40s
	// At T0+100s alpha's oldest ready job has been available since T0+10s
	// (the due retry only since T0+30s; the scheduled job is not ready),
	// beta's since T0-30s, delta's retry since T0+40s, and gamma has nothing
	// ready.
	e.clock.Set(T0.Add(100 * time.Second))
	got, err := e.s.QueueStats(e.ctx, &errandstore.QueueStatsParams{})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	counts := func(queued, running, retrying, succeeded, dead, cancelled int) map[errandtype.JobState]int {
		return map[errandtype.JobState]int{
			errandtype.StateQueued: queued, errandtype.StateRunning: running, errandtype.StateRetrying: retrying,
			errandtype.StateSucceeded: succeeded, errandtype.StateDead: dead, errandtype.StateCancelled: cancelled,
		}
	}
	// Waiting jobs per kind count queued and retrying jobs, due or not.
	want := []errandtype.QueueStats{
		{Queue: "alpha", Counts: counts(2, 1, 1, 1, 2, 1), OldestReadyAgeSeconds: 90, Dead: 2,
			WaitingByKind: map[string]int{"email": 2, "report": 1}, ReadyAgeByKind: map[string]float64{"email": 70, "report": 90}},
		{Queue: "beta", Counts: counts(1, 0, 0, 0, 0, 0), OldestReadyAgeSeconds: 130,
			WaitingByKind: map[string]int{"email": 1}, ReadyAgeByKind: map[string]float64{"email": 130}},
		{Queue: "delta", Counts: counts(0, 0, 1, 0, 0, 0), OldestReadyAgeSeconds: 60,
			WaitingByKind: map[string]int{"email": 1}, ReadyAgeByKind: map[string]float64{"email": 60}},
		{Queue: "gamma", Counts: counts(1, 0, 0, 0, 0, 0), WaitingByKind: map[string]int{"email": 1}, ReadyAgeByKind: map[string]float64{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("QueueStats:\n got %+v\nwant %+v", got, want)
	}
}

func testStatsEmpty(t *testing.T, h harness) {
	e := open(t, h)
	got, err := e.s.QueueStats(e.ctx, &errandstore.QueueStatsParams{})
	if err != nil || len(got) != 0 {
		t.Errorf("QueueStats of an empty store = %+v, %v; want none", got, err)
	}
}

// testListFlowFilters checks the filters that find flow control at work:
// the jobs whose last error has a class (start_by: not started in time),
// those that absorbed later enqueues of their debounce key, and those whose
// priority aged while they waited.
func testListFlowFilters(t *testing.T, h harness) {
	e := open(t, h)
	perm, late, plain := newJob("perm"), newJob("late"), newJob("plain")
	perm.Kind = "charge"
	late.StartBy, late.Delay = T0.Add(time.Minute), 2*time.Minute
	plain.Priority = 5
	e.insert(perm)
	e.recordOK(dead(e.claimOne("perm")))
	e.insert(late, plain)
	e.wantNew(debounced("folded", "user:1", errandtype.DebounceLastWins, time.Hour, 1))
	e.wantAbsorbed(debounced("gone", "user:1", errandtype.DebounceLastWins, time.Hour, 2), "folded", 1, 2, T0.Add(time.Hour))
	e.wantNew(debounced("alone", "user:2", errandtype.DebounceLastWins, time.Hour, 1))
	e.clock.Advance(time.Minute)
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r.Dead != 1 {
		t.Fatalf("JobSweep at late's start-by = %+v, %v; want 1 dead", r, err)
	}
	if n := e.age(errand.DefaultQueue, 10); n != 1 {
		t.Fatalf("aged %d jobs, want plain alone", n)
	}
	queued := []errandtype.JobState{errandtype.StateQueued}
	for _, c := range []struct {
		p    errandstore.JobListParams
		want []string
	}{
		{errandstore.JobListParams{Class: errandstore.ClassStartBy}, []string{"late"}},
		{errandstore.JobListParams{Class: errand.ClassPermanent}, []string{"perm"}},
		{errandstore.JobListParams{Class: errandstore.ClassExpired}, nil},
		{errandstore.JobListParams{Class: errandstore.ClassStartBy, Kind: "charge"}, nil},
		{errandstore.JobListParams{Absorbed: true}, []string{"folded"}},
		{errandstore.JobListParams{Absorbed: true, States: queued}, []string{"folded"}},
		{errandstore.JobListParams{Aged: true}, []string{"plain"}},
		{errandstore.JobListParams{Aged: true, States: queued}, []string{"plain"}},
		{errandstore.JobListParams{Aged: true, Absorbed: true}, nil},
	} {
		got := e.list(&c.p)
		if g := ids(got); !slices.Equal(g, c.want) && !(len(g) == 0 && len(c.want) == 0) {
			t.Errorf("JobList(%+v) = %v, want %v", c.p, g, c.want)
		}
	}
	var in *errandtype.InputError
	if _, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Class: "Start By"}); !errors.As(err, &in) || in.Field != "class" {
		t.Errorf("JobList with class %q: %v; want an input error on class", "Start By", err)
	}
}
