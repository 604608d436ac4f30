package errand

import (
	"context"
	"encoding/json"
	"fmt"
)

// Classes of failures in decoding a job's args. Both are permanent: running
// the job again cannot change its args.
const (
	// ClassUnknownVersion: the job's args_version is newer than the
	// handler knows, as when a newer producer enqueued it during a rolling
	// deploy. Replay it once a worker that knows the version is running.
	ClassUnknownVersion = "unknown_version"
	// ClassInvalidArgs: the args did not decode into the handler's type, or
	// an upgrade from an older version failed.
	ClassInvalidArgs = "invalid_args"
)

// Typed is a Handler whose args decode into T. Jobs carry an args_version;
// Typed decodes versions up to Version, upgrading older ones with Upgrade
// first, and dead-letters newer ones with class "unknown_version" instead of
// guessing at their meaning.
//
//	errand.Kind{Name: "send_receipt", Handler: errand.WorkFunc(
//		func(ctx context.Context, job *errand.Job, args ReceiptArgs) error { ... })}
type Typed[T any] struct {
	// Version is the newest args_version the handler knows. Zero means 1.
	Version int
	// Upgrade converts args of an older version (from) to Version. Nil
	// means older args decode into T as they are.
	Upgrade func(from int, args json.RawMessage) (json.RawMessage, error)
	// Func runs the job with its decoded args.
	Func func(ctx context.Context, job *Job, args T) error
}

// WorkFunc returns a Typed handler for args version 1.
func WorkFunc[T any](fn func(ctx context.Context, job *Job, args T) error) *Typed[T] {
	return &Typed[T]{Func: fn}
}

// Work implements Handler.
func (h *Typed[T]) Work(ctx context.Context, job *Job) error {
	version := h.Version
	if version == 0 {
		version = 1
	}
	raw := job.Args
	switch {
	case job.ArgsVersion > version:
		return Permanent(WithClass(ClassUnknownVersion, fmt.Errorf(
			"args_version %d is newer than this handler knows (%d); run a worker that knows it, then replay the job",
			job.ArgsVersion, version)))
	case job.ArgsVersion < version && h.Upgrade != nil:
		up, err := h.Upgrade(job.ArgsVersion, raw)
		if err != nil {
			return Permanent(WithClass(ClassInvalidArgs, fmt.Errorf("upgrade args from version %d to %d: %w", job.ArgsVersion, version, err)))
		}
		raw = up
	}
	var args T
	if err := json.Unmarshal(raw, &args); err != nil {
		return Permanent(WithClass(ClassInvalidArgs, fmt.Errorf("decode args (version %d) into %T: %w", job.ArgsVersion, args, err)))
	}
	return h.Func(ctx, job, args)
}
