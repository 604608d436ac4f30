package errand_test

import (
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestDeleteSchedule: a deleted schedule is gone and audited; a worker that
// still declares it registers it again at its next tick, as documented.
func TestDeleteSchedule(t *testing.T) {
	e := newScheduleEnv(t)
	r := e.runner(e.schedule("digest", "@every 1m", nil))
	var ie *errandtype.InputError
	if _, err := e.c.DeleteSchedule(e.ctx, "digest", &errand.DeleteScheduleOpts{Operator: "ops"}); !errors.As(err, &ie) {
		t.Fatalf("delete without a reason = %v, want an *InputError", err)
	}
	if _, err := e.c.DeleteSchedule(e.ctx, "nope", &errand.DeleteScheduleOpts{Operator: "ops", Reason: "r"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("delete unknown = %v, want ErrNotFound", err)
	}
	got, err := e.c.DeleteSchedule(e.ctx, "digest", &errand.DeleteScheduleOpts{Operator: "ops", Reason: "retired"})
	if err != nil || got.Name != "digest" {
		t.Fatalf("delete = %+v, %v", got, err)
	}
	if rs, err := e.c.Schedules(e.ctx); err != nil || len(rs) != 0 {
		t.Fatalf("schedules after delete = %v, %v", rs, err)
	}
	recs, err := e.c.Audit(e.ctx, &errand.AuditOpts{Action: errandtype.AuditScheduleDelete})
	if err != nil || len(recs) != 1 || recs[0].Reason != "retired" || recs[0].Operator != "ops" {
		t.Fatalf("audit = %+v, %v", recs, err)
	}

	// The runner still declares it: when its next tick comes due it
	// registers it again from that tick, which fires, as documented.
	e.clock.Set(e.t0.Add(time.Minute))
	e.fire(r)
	rec := e.record("digest")
	wantTime(t, "next fire after re-registering", rec.NextFireAt, e.t0.Add(2*time.Minute))
	if keys, _ := e.ticksEnqueued(); len(keys) != 1 || keys[0] != errand.ScheduleUniqueKey("digest", e.t0.Add(time.Minute)) {
		t.Fatalf("jobs = %v, want the tick that came due", keys)
	}
}
