package storetest

import (
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// agingCases check priority aging: a waiting job's stored priority falls
// with its wait, by errandtype.PriorityAging.Aged, so claims take it
// before newer urgent jobs; a replay restores the enqueued priority.
var agingCases = []testCase{
	{"Formula", testAgingFormula},
	{"OvertakesNewerJobs", testAgingOvertakes},
	{"ReplayRestores", testAgingReplay},
}

var aging = errandtype.PriorityAging{Step: time.Minute, Floor: -2}

func (e *env) age(queue string, limit int) int {
	e.t.Helper()
	a, ok := e.s.(errandstore.PriorityAger)
	if !ok {
		e.t.Fatalf("%T does not age priorities", e.s)
	}
	n, err := a.JobAgePriorities(e.ctx, &errandstore.JobAgePrioritiesParams{Queue: queue, Aging: aging, Limit: limit})
	if err != nil {
		e.t.Fatalf("JobAgePriorities: %v", err)
	}
	return n
}

// insertWaiting inserts job id at priority, then lets wait pass.
func (e *env) insertWaiting(id string, priority int, wait time.Duration) {
	e.t.Helper()
	p := newJob(id)
	p.Priority = priority
	e.insert(p)
	e.clock.Advance(wait)
}

// testAgingFormula checks each job's priority against Aged at several
// waits, that only the waiting jobs of the queue age, that a job at the
// floor or scheduled later is left alone, and that Limit bounds a call.
func testAgingFormula(t *testing.T, h harness) {
	e := open(t, h)
	low, floor, later, other := newJob("low"), newJob("floor"), newJob("later"), newJob("other")
	low.Priority, floor.Priority, later.Priority = 5, -2, 5
	later.Delay = 3 * time.Minute
	other.Priority, other.Queue = 5, "other"
	e.insert(low, floor, later, other)
	for _, step := range []struct {
		at      time.Duration
		changed int
		low     int
		later   int
	}{
		{time.Minute - time.Microsecond, 0, 5, 5},
		{time.Minute, 1, 4, 5},
		{90 * time.Second, 0, 4, 5},
		{4 * time.Minute, 2, 1, 4},
		{time.Hour, 2, -2, -2},
	} {
		e.clock.Set(T0.Add(step.at))
		if n := e.age("default", 10); n != step.changed {
			t.Errorf("at +%s: %d jobs aged, want %d", step.at, n, step.changed)
		}
		for id, want := range map[string]int{"low": step.low, "later": step.later, "floor": -2, "other": 5} {
			got := e.get(id)
			if got.Priority != want || got.EnqueuedPriority() != map[string]int{"low": 5, "later": 5, "floor": -2, "other": 5}[id] {
				t.Errorf("at +%s: %s priority %d (enqueued %d), want %d", step.at, id, got.Priority, got.EnqueuedPriority(), want)
			}
			if wantAged := aging.Aged(got.EnqueuedPriority(), e.now().Sub(got.AvailableAt)); id != "other" && got.Priority != wantAged {
				t.Errorf("at +%s: %s priority %d, Aged says %d", step.at, id, got.Priority, wantAged)
			}
		}
	}
	if got := e.get("floor"); got.BasePriority != nil {
		t.Errorf("job at the floor: base priority %d, want none: it never aged", *got.BasePriority)
	}
	e.clock.Set(T0)
	more := []*errandstore.JobInsertParams{newJob("m1"), newJob("m2"), newJob("m3")}
	for _, p := range more {
		p.Priority = 9
	}
	e.insert(more...)
	e.clock.Set(T0.Add(time.Hour))
	if n := e.age("default", 2); n != 2 {
		t.Errorf("aging with limit 2 changed %d jobs", n)
	}
}

// testAgingOvertakes checks that an aged job is claimed before urgent jobs
// enqueued after it, and that a claimed job keeps its aged priority.
func testAgingOvertakes(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWaiting("low", 3, 2*time.Minute)
	e.insertWaiting("urgent", 0, 2*time.Minute)
	if got := e.claim(1); len(got) != 1 || got[0].ID != "urgent" {
		t.Fatalf("claim before aging took %v; want urgent", ids(got))
	}
	e.insertIDs("urgent2")
	e.age("default", 10)
	j := e.claimOne("low")
	if j.Priority != -1 || j.BasePriority == nil || *j.BasePriority != 3 {
		t.Errorf("claimed aged job: priority %d, base %v; want -1 from 3", j.Priority, j.BasePriority)
	}
}

// testAgingReplay checks that a replay restores the enqueued priority.
func testAgingReplay(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWaiting("a", 4, 3*time.Minute)
	e.age("default", 10)
	e.recordOK(dead(e.claimOne("a")))
	got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Priority != 4 || got.BasePriority != nil {
		t.Errorf("replayed aged job: priority %d, base %v; want 4, none", got.Priority, got.BasePriority)
	}
}
