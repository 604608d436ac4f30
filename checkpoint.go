package errand

import (
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandtype"
)

// Checkpoints. A handler that works through something large in steps
// records where it got to with [SetProgress] after each step; the
// checkpoint is written fenced by the attempt's lease, and it stays on the
// job. Every later attempt of the job (a retry after a failure, a crash, a
// timeout, a lease lost, a drain that gave the job back, a replay) receives
// it in Job.Progress, and [Checkpoint] decodes it. A handler that starts
// from its checkpoint redoes at most the step it was in when the attempt
// ended. Steps must therefore be safe to redo: write a step's effects and
// nothing else in one transaction (or key them, see [Once]), then the
// checkpoint. A replay keeps the checkpoint unless it corrects the args or
// asks to restart (see [ReplayOpts]).

// Checkpoint decodes the job's last checkpoint, recorded by [SetProgress]
// in this or an earlier attempt, into a T. ok is false, with the zero T,
// when the job has none: its first attempt, or a replay that restarted it.
func Checkpoint[T any](job *errandtype.Job) (v T, ok bool, err error) {
	if len(job.Progress) == 0 || string(job.Progress) == "null" {
		return v, false, nil
	}
	if err := json.Unmarshal(job.Progress, &v); err != nil {
		return v, false, fmt.Errorf("checkpoint of job %s: %w", job.ID, err)
	}
	return v, true, nil
}
