package errandstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandtype"
)

// PauseStore is implemented by stores that keep pauses: an operator's stop
// of the claims of a queue or a kind, read by every client of the store
// (see [github.com/errandhq/errand.Client.Pause]).
type PauseStore interface {
	// PauseSet pauses (Paused) or resumes the queue or kind p names. A
	// change appends an [errandtype.AuditPause] or
	// [errandtype.AuditResume] record, with [PauseDetails], in the same
	// transaction. Pausing what is paused keeps the first pause, and
	// resuming what is not paused changes nothing; neither is audited.
	// Params that fail Validate are an *InputError and nothing is written.
	PauseSet(ctx context.Context, p *PauseSetParams) (*PauseSetResult, error)

	// PauseList returns every pause, queues first, then by name.
	PauseList(ctx context.Context) ([]errandtype.Pause, error)
}

// PauseSetParams pause or resume one queue or kind.
type PauseSetParams struct {
	Scope  errandtype.PauseScope
	Name   string
	Paused bool
	// Operator and Reason are recorded with the pause and in the audit.
	Operator, Reason string
}

// Validate checks p: a known scope, and a name as a queue's or a kind's.
func (p *PauseSetParams) Validate() error {
	switch p.Scope {
	case errandtype.PauseQueue:
		return CheckName("queue", p.Name)
	case errandtype.PauseKind:
		return CheckName("kind", p.Name)
	}
	return &errandtype.InputError{Field: "scope", Message: "must be queue or kind"}
}

// PauseSetResult is what PauseSet did.
type PauseSetResult struct {
	// Changed reports that the call paused or resumed something; false
	// when it already was as asked.
	Changed bool
	// Pause is the pause in force after the call, nil after a resume.
	Pause *errandtype.Pause
}

// PauseDetails are the details of an [errandtype.AuditPause] or
// [errandtype.AuditResume] record.
type PauseDetails struct {
	Scope errandtype.PauseScope `json:"scope"`
	Name  string                `json:"name"`
}

// PauseOps are a store's statements of PauseSet for one call, in its
// transaction.
type PauseOps struct {
	// Insert writes the pause unless one is in force, and returns it and
	// true, or nil and false.
	Insert func() (*errandtype.Pause, bool, error)
	// Read returns the pause in force.
	Read func() (*errandtype.Pause, error)
	// Delete lifts the pause, reporting whether there was one.
	Delete func() (bool, error)
	// Audit appends the audit record of a change.
	Audit func(action errandtype.AuditAction, details json.RawMessage) error
}

// Apply is PauseSet's rule, for every store: pausing keeps a pause in
// force, resuming deletes it, and only a change is audited.
func (p *PauseSetParams) Apply(ops PauseOps) (*PauseSetResult, error) {
	res := &PauseSetResult{}
	var err error
	if p.Paused {
		res.Pause, res.Changed, err = ops.Insert()
		if err == nil && !res.Changed {
			res.Pause, err = ops.Read()
		}
	} else {
		res.Changed, err = ops.Delete()
	}
	if err != nil || !res.Changed {
		return res, err
	}
	action := errandtype.AuditResume
	if p.Paused {
		action = errandtype.AuditPause
	}
	details, err := json.Marshal(PauseDetails{Scope: p.Scope, Name: p.Name})
	if err != nil {
		return nil, err
	}
	return res, ops.Audit(action, details)
}

// Verb is "pause" or "resume", for messages.
func (p *PauseSetParams) Verb() string {
	if p.Paused {
		return "pause"
	}
	return "resume"
}

// Failed names the pause or resume p asked for in err, a store's failure
// to write it.
func (p *PauseSetParams) Failed(err error) error {
	return fmt.Errorf("%s %s %s: %w", p.Verb(), p.Scope, p.Name, err)
}
