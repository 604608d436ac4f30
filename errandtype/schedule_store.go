package errandtype

import (
	"fmt"
	"time"
)

// MissedPolicy says what a schedule does with ticks that passed while no
// process ran it (see [github.com/errandhq/errand.ScheduleOpts].Grace for
// when a tick counts as missed).
type MissedPolicy string

const (
	// MissedSkip drops missed ticks: the schedule fires again at its next
	// tick that is not missed. The default.
	MissedSkip MissedPolicy = "skip"
	// MissedCatchUp enqueues one job for all the ticks missed in a row,
	// keyed by the first of them, then goes on with the next tick that is
	// not missed.
	MissedCatchUp MissedPolicy = "catch_up"
)

// ScheduleRecord is the stored state of one schedule, as
// [github.com/errandhq/errand.Client.Schedules] and errand schedules show it.
type ScheduleRecord struct {
	// Name identifies the schedule across processes and restarts.
	Name string `json:"name"`
	// Spec is the schedule's spec as registered, with its time zone as a
	// CRON_TZ= prefix when it has one: the spec that decides its ticks.
	Spec string `json:"spec"`
	// Kind and Queue are those of the jobs it enqueues.
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// Missed is its missed-tick policy.
	Missed MissedPolicy `json:"missed"`
	// NextFireAt is its next tick: the next job is enqueued then.
	NextFireAt time.Time `json:"next_fire_at"`
	// LastFireAt is the tick of its last job; nil before the first.
	LastFireAt *time.Time `json:"last_fire_at"`
	// LastJobID is the id of its last job; nil before the first.
	LastJobID *string   `json:"last_job_id"`
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when it was last registered or advanced: a schedule
	// that no running process registers any more stops advancing.
	UpdatedAt time.Time `json:"updated_at"`
}

func (m MissedPolicy) Validate() error {
	if m != MissedSkip && m != MissedCatchUp {
		return &InputError{Field: "missed", Message: fmt.Sprintf("%q is not a missed-tick policy; use %q or %q", m, MissedSkip, MissedCatchUp)}
	}
	return nil
}
