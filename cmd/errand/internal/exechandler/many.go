package exechandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A command of many jobs (`errand work --exec-many KIND=COMMAND`) runs once
// for a group of jobs of its kind, as errand.HandleMany groups them, in the
// same guarded process group as a command of one job, with the same
// environment but for the job's own variables: ERRAND_JOB_KIND and
// ERRAND_JOB_COUNT. Its stdin is the jobs' envelopes, a JSON array; its
// stdout is their outcomes, a JSON array of [Outcome], one per job, in any
// order. A job the output names no outcome for ends as the command's exit
// says: a failure classified as a command of one job's exit is, or, after
// exit 0, class bad_output; so does every job when the output is not such
// an array. Its stderr is logged, and its last lines are the message of
// those failures.

// ClassBadOutput is the class of a job that a command of many jobs exited
// 0 without a valid outcome for.
const ClassBadOutput = "bad_output"

// maxOutput bounds what a command of many jobs may print: outcomes, not a
// log (its stderr is that).
const maxOutput = 1 << 20

// Outcome is one job's outcome as a command of many jobs prints it:
// {"id": ID, "ok": true}, or a failure with the fields of the JSON API's
// fail (POST /api/v1/fail): class, message, retry_after, permanent.
type Outcome struct {
	ID         string              `json:"id"`
	OK         bool                `json:"ok"`
	Class      string              `json:"class"`
	Message    string              `json:"message"`
	RetryAfter errandtype.Duration `json:"retry_after"`
	Permanent  bool                `json:"permanent"`
}

// WorkMany runs the command once for jobs, all of one kind, and returns
// each job's error, in the order of jobs.
func (h *Handler) WorkMany(ctx context.Context, jobs []*errandtype.Job) []error {
	envs := make([]errandtype.Envelope, len(jobs))
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		envs[i], ids[i] = j.Envelope(), j.ID
	}
	stdin, err := json.Marshal(envs)
	if err != nil {
		return slices.Repeat([]error{fmt.Errorf("encode jobs for %s: %w", h.argv[0], err)}, len(jobs))
	}
	log := h.logger.With("kind", jobs[0].Kind, "jobs", len(jobs), "job_ids", ids)
	out := &capped{max: maxOutput}
	env := []string{"ERRAND_JOB_KIND=" + jobs[0].Kind, "ERRAND_JOB_COUNT=" + strconv.Itoa(len(jobs))}
	ended := h.run(ctx, log, stdin, env, out)
	byID, bad := parseOutcomes(out, ids)
	errs := make([]error, len(jobs))
	for i, id := range ids {
		o, ok := byID[id]
		switch {
		case ok:
			errs[i] = o.err(h.argv[0])
		case ended != nil:
			errs[i] = ended
		case bad != "":
			errs[i] = errand.WithClass(ClassBadOutput, fmt.Errorf("%s exited 0 but %s; print a JSON array of outcomes, one per job of stdin: [{\"id\": ..., \"ok\": true}, {\"id\": ..., \"message\": ..., \"class\": ...}]", h.argv[0], bad))
		default:
			errs[i] = errand.WithClass(ClassBadOutput, fmt.Errorf("%s exited 0 without an outcome for job %s; print one entry per job of stdin", h.argv[0], id))
		}
	}
	if bad != "" && (ended == nil || len(bytes.TrimSpace(out.b)) > 0) {
		log.Warn("exec output refused", "problem", bad)
	}
	return errs
}

// parseOutcomes reads out, a command's outcomes of the jobs ids, by job
// id, or says what is wrong with it: then no outcome is taken.
func parseOutcomes(out *capped, ids []string) (map[string]*Outcome, string) {
	if out.cut {
		return nil, fmt.Sprintf("printed more than %d bytes", maxOutput)
	}
	var outs []*Outcome
	d := json.NewDecoder(bytes.NewReader(out.b))
	d.DisallowUnknownFields()
	if err := d.Decode(&outs); err != nil {
		return nil, fmt.Sprintf("its output is not a JSON array of outcomes (%v)", err)
	}
	if d.More() {
		return nil, "its output has more than one JSON value"
	}
	byID := make(map[string]*Outcome, len(outs))
	for i, o := range outs {
		if o == nil {
			return nil, fmt.Sprintf("outcome %d is null", i)
		}
		if !slices.Contains(ids, o.ID) {
			return nil, fmt.Sprintf("outcome %d names job %q, which is not one of its jobs", i, o.ID)
		}
		if _, dup := byID[o.ID]; dup {
			return nil, fmt.Sprintf("outcome %d names job %q again", i, o.ID)
		}
		if problem := o.check(); problem != "" {
			return nil, fmt.Sprintf("outcome %d (job %s) %s", i, o.ID, problem)
		}
		byID[o.ID] = o
	}
	return byID, ""
}

// check says what is wrong with o, or "".
func (o *Outcome) check() string {
	switch {
	case o.OK && (o.Class != "" || o.Message != "" || o.RetryAfter != 0 || o.Permanent):
		return "is ok and a failure at once"
	case o.Class != "" && !errandstore.ValidClass(o.Class):
		return fmt.Sprintf("has class %q, not a short snake_case word", errandstore.CleanText(o.Class, 80))
	case o.RetryAfter < 0:
		return "has a negative retry_after"
	case o.Permanent && o.RetryAfter > 0:
		return "is permanent and has a retry_after"
	}
	if err := errandstore.CheckDelay("retry_after", time.Duration(o.RetryAfter)); err != nil {
		return err.Error()
	}
	return ""
}

// err is the job's error by o: nil for a success.
func (o *Outcome) err(name string) error {
	if o.OK {
		return nil
	}
	msg := o.Message
	if msg == "" {
		msg = name + " reported the job failed"
	}
	err := errors.New(msg)
	if o.Class != "" {
		err = errand.WithClass(o.Class, err)
	}
	if o.Permanent {
		return errand.Permanent(err)
	}
	return errand.RetryAfter(time.Duration(o.RetryAfter), err)
}

// capped keeps what is written to it up to max bytes, and notes that more
// came; it never fails a write, so the command never blocks on its stdout.
type capped struct {
	max int
	b   []byte
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); len(p) > room {
		c.b, c.cut = append(c.b, p[:max(room, 0)]...), true
	} else {
		c.b = append(c.b, p...)
	}
	return len(p), nil
}
