package errandtype

// BatchState selects batches by completion: open (a member is unfinished,
// or the completion is not yet recorded) or completed.
type BatchState string

const (
	// BatchOpen: the batch has not completed; its callback is not enqueued.
	BatchOpen BatchState = "open"
	// BatchCompleted: every member finished and the batch completed once,
	// with its final counts and callback job.
	BatchCompleted BatchState = "completed"
)

// Valid reports whether s is a batch state.
func (s BatchState) Valid() bool { return s == BatchOpen || s == BatchCompleted }
