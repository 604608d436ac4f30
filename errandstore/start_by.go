package errandstore

import (
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// A start-by time bounds a job's first start. Stores keep it beside the
// deadline and fold it into the deadline until the first claim: the claim
// already skips, and the sweep already ends, a waiting job past its
// deadline, so a start-by costs the claim nothing. The first claim puts
// back the maximum age's deadline (created_at + max_age); the deadline
// sweep records class start_by when the deadline it ends is the start-by
// of a job never started ([StartByMessage]), and class expired otherwise.

// StartByMessage is the history message of a job ended by its start-by.
const StartByMessage = "start-by time passed before the job started"

// ExpiredMessage is the history message of a waiting job past its maximum
// age.
const ExpiredMessage = "deadline passed before the job could run"

// FirstDeadline is the deadline of a job inserted at now with maximum age
// maxAge (zero: none) and start-by startBy (zero: none): the earlier of
// the two, or nil for neither.
func FirstDeadline(now time.Time, maxAge time.Duration, startBy time.Time) *time.Time {
	var d *time.Time
	if maxAge > 0 {
		t := now.Add(maxAge)
		d = &t
	}
	if !startBy.IsZero() && (d == nil || startBy.Before(*d)) {
		t := startBy
		d = &t
	}
	return d
}

// checkStartBy refuses a start-by the stores cannot keep, or one before
// the job's run-at time, which the job could never meet.
func checkStartBy(startBy, runAt time.Time) error {
	if err := checkTime("start_by", startBy); err != nil {
		return err
	}
	if !startBy.IsZero() && !runAt.IsZero() && !startBy.After(runAt) {
		return &errandtype.InputError{Field: "start_by", Message: fmt.Sprintf("%s is not after the run-at time %s, so the job could never start; give a later start-by or an earlier run-at",
			startBy.UTC().Format(time.RFC3339Nano), runAt.UTC().Format(time.RFC3339Nano))}
	}
	return nil
}
