package errandtype

import "time"

// PauseScope says what a [Pause] stops: a queue or a kind.
type PauseScope string

const (
	// PauseQueue: no job of the queue is claimed.
	PauseQueue PauseScope = "queue"
	// PauseKind: no job of the kind is claimed, in any queue.
	PauseKind PauseScope = "kind"
)

// Pause is an operator's stop of the claims of a queue or a kind across
// the cluster. Running jobs finish; waiting ones wait until it is lifted.
type Pause struct {
	Scope PauseScope `json:"scope"`
	// Name is the queue's or the kind's.
	Name     string    `json:"name"`
	PausedAt time.Time `json:"paused_at"`
	// Operator and Reason say who paused it and why.
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}
