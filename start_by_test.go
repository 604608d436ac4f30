package errand_test

import (
	"context"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestStartByNeverStartsLate checks that a job not started by its start-by
// never runs and dies with class start_by, and that a job which started in
// time is not bound by it afterwards: snoozed past it, it still runs.
func TestStartByNeverStartsLate(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	runs := map[string]int{}
	c := handlerClient(t, st, func(_ context.Context, j *errandtype.Job) error {
		runs[j.ID]++
		if j.ID == "early" && runs[j.ID] == 1 {
			return errand.Snooze(time.Hour)
		}
		return nil
	})
	startBy := clock.Now().Add(time.Minute)
	late := enqueue(t, c, "task", &errand.EnqueueOpts{ID: "late", Delay: 2 * time.Minute, StartBy: startBy})
	if late.Deadline == nil || !late.Deadline.Equal(startBy) {
		t.Fatalf("enqueued: deadline %v, want the start-by %v", late.Deadline, startBy)
	}
	enqueue(t, c, "task", &errand.EnqueueOpts{ID: "early", StartBy: startBy})
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSnoozed {
		t.Fatalf("first run of early: %+v, want snoozed", r)
	}
	clock.Advance(time.Hour)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded || r.JobID == nil || *r.JobID != "early" {
		t.Fatalf("after the start-by: %+v, want early, started in time, to succeed", r)
	}
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("late job claimed past its start-by: %+v", r)
	}
	j := getJob(t, c, "late")
	if runs["late"] != 0 || j.State != errandtype.StateDead || j.LastError == nil || j.LastError.Class != errandtype.ClassStartBy {
		t.Fatalf("late job: ran %d times, state %s, last error %+v; want never run, dead with class start_by", runs["late"], j.State, j.LastError)
	}
}
