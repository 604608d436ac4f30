package errandtype

import "time"

// PriorityAging raises a queue's waiting jobs in priority as they wait, so
// that a steady stream of urgent jobs cannot starve the others: a job that
// has been available for wait runs at
//
//	max(Floor, priority - floor(wait / Step))
//
// (lower runs first). A job enqueued at or below Floor never ages.
type PriorityAging struct {
	// Step is the wait that lowers a job's priority number by one.
	Step time.Duration `json:"step"`
	// Floor is the priority number aging stops at.
	Floor int `json:"floor"`
}

// Aged is the priority of a job enqueued with priority base that has been
// available for wait.
func (a PriorityAging) Aged(base int, wait time.Duration) int {
	if base <= a.Floor || wait < a.Step || a.Step <= 0 {
		return base
	}
	steps := int64(wait / a.Step)
	if int64(base)-int64(a.Floor) <= steps {
		return a.Floor
	}
	return base - int(steps)
}
