package errand

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// A caller-given id makes a retried enqueue return the job (batch,
// workflow) the first one made. A duplicate id whose existing job is not
// what the enqueue would have made is another request reusing the id, and
// is refused with an *IDConflictError naming what differs, unless the
// enqueue says FirstWins. A duplicate found by a unique key is never a
// conflict: unique keys exist to dedupe jobs whose args differ.
//
// Times relative to a request (Delay, RunAt, MaxAge, which a job keeps as
// its deadline) cannot be compared and are not; neither is a max attempts
// or an ordering-on-dead choice the enqueue left to the defaults, which
// another client may resolve otherwise.

// IDConflictError reports an enqueue refused because its id names an
// existing job, batch or workflow that differs from the one it would have
// made. Nothing was written. errors.Is(err, ErrIDConflict) is true.
type IDConflictError struct {
	// What is "job", "batch" or "workflow".
	What string
	// ID is the id the existing one has.
	ID string
	// Fields names what differs, as the JSON API names it: "args",
	// "queue", "jobs[2].args", "steps[0].compensate.kind".
	Fields []string
}

func (e *IDConflictError) Error() string {
	return fmt.Sprintf("%s id %q is taken by a different %s (%s differ); give a new id for a new %s, or set FirstWins to get the existing one",
		e.What, e.ID, e.What, strings.Join(e.Fields, ", "), e.What)
}

// Is makes errors.Is(err, ErrIDConflict) true.
func (e *IDConflictError) Is(target error) bool { return target == ErrIDConflict }

// checkFirstWins refuses FirstWins without the id it is about.
func checkFirstWins(firstWins bool, id, what string) error {
	if firstWins && id == "" {
		return &InputError{Field: "first_wins", Message: fmt.Sprintf("is set without a %s id; it only decides what a duplicate id returns, so give the id or drop it", what)}
	}
	return nil
}

// jobShape is what an enqueue decides about a job, and what a stored job
// or template keeps of it, for comparison.
type jobShape struct {
	kind, queue                        string
	args                               json.RawMessage
	argsVersion, priority, maxAttempts int
	backoffBase, backoffMax            time.Duration
	delay, maxAge                      time.Duration
	timed                              bool // delay and maxAge are kept: a template keeps them, a job does not
	orderingKey, fairnessKey           string
	orderingHold                       bool
	tags                               []string
}

func shapeOfParams(p *JobInsertParams) jobShape {
	return jobShape{kind: p.Kind, queue: p.Queue, args: p.Args, argsVersion: p.ArgsVersion, priority: p.Priority,
		maxAttempts: p.MaxAttempts, backoffBase: p.BackoffBase, backoffMax: p.BackoffMax, delay: p.Delay, maxAge: p.MaxAge,
		timed: true, orderingKey: p.OrderingKey, fairnessKey: p.FairnessKey, orderingHold: p.OrderingHold, tags: p.Tags}
}

func shapeOfJob(j *Job) jobShape {
	return jobShape{kind: j.Kind, queue: j.Queue, args: j.Args, argsVersion: j.ArgsVersion, priority: j.Priority,
		maxAttempts: j.MaxAttempts, backoffBase: time.Duration(j.BackoffBase), backoffMax: time.Duration(j.BackoffMax),
		orderingKey: deref(j.OrderingKey), fairnessKey: deref(j.FairnessKey), orderingHold: j.OrderingHold, tags: j.Tags}
}

func shapeOfTemplate(t *JobTemplate) jobShape {
	return jobShape{kind: t.Kind, queue: t.Queue, args: t.Args, argsVersion: t.ArgsVersion, priority: t.Priority,
		maxAttempts: t.MaxAttempts, backoffBase: time.Duration(t.BackoffBaseUS) * time.Microsecond,
		backoffMax: time.Duration(t.BackoffMaxUS) * time.Microsecond, delay: time.Duration(t.DelayUS) * time.Microsecond,
		maxAge: time.Duration(t.MaxAgeUS) * time.Microsecond, timed: true,
		orderingKey: t.OrderingKey, fairnessKey: t.FairnessKey, orderingHold: t.OrderingHold, tags: t.Tags}
}

// differences names the fields in which have, an existing job, differs
// from the one p would make. field, when not "", is a field of the args
// errand sets ("batch", "workflow"), left out of both.
func (p *JobInsertParams) differences(have jobShape, field string) []string {
	want := shapeOfParams(p)
	var out []string
	differ := func(name string, same bool) {
		if !same {
			out = append(out, name)
		}
	}
	differ("kind", have.kind == want.kind)
	differ("queue", have.queue == want.queue)
	differ("args", sameJSON(withoutField(have.args, field), withoutField(want.args, field)))
	differ("args_version", have.argsVersion == want.argsVersion)
	differ("priority", have.priority == want.priority)
	differ("max_attempts", !p.maxAttemptsGiven || have.maxAttempts == want.maxAttempts)
	differ("backoff_base", have.backoffBase == want.backoffBase)
	differ("backoff_max", have.backoffMax == want.backoffMax)
	if have.timed && want.timed {
		differ("delay", have.delay == want.delay)
		differ("max_age", have.maxAge == want.maxAge)
	}
	differ("ordering_key", have.orderingKey == want.orderingKey)
	differ("ordering_on_dead", !p.holdGiven || have.orderingHold == want.orderingHold)
	differ("fairness_key", have.fairnessKey == want.fairnessKey)
	differ("tags", slices.Equal(have.tags, want.tags))
	return out
}

// jobDifferences names the fields in which j, the job found under p's id,
// differs from the job p would make.
func (p *JobInsertParams) jobDifferences(j *Job) []string {
	out := p.differences(shapeOfJob(j), "")
	if deref(j.UniqueKey) != p.UniqueKey {
		return append(out, "unique_key")
	}
	if p.UniqueKey == "" {
		return out
	}
	if j.UniqueScope == nil || j.UniqueScope.orDefault() != p.UniqueScope.orDefault() {
		out = append(out, "unique_scope")
	}
	// A job keeps the start of its window, not its length: a window of
	// the same length starts at a multiple of it.
	w := p.UniqueWindow.Microseconds()
	if (j.UniqueWindowStart != nil) != (w > 0) || (w > 0 && j.UniqueWindowStart.UnixMicro()%w != 0) {
		out = append(out, "unique_window")
	}
	return out
}

// checkJobConflicts returns the *IDConflictError of the first job of ps
// whose caller-given id found an existing job that differs, in rs.
func checkJobConflicts(ps []*JobInsertParams, rs []JobInsertResult) error {
	for i, p := range ps {
		r := rs[i]
		if !r.Duplicate || !p.callerID || p.firstWins || r.Job.ID != p.ID {
			continue // new, errand's id, first wins, or found by its unique key
		}
		if fields := p.jobDifferences(r.Job); len(fields) > 0 {
			err := &IDConflictError{What: "job", ID: p.ID, Fields: fields}
			if len(ps) > 1 {
				return fmt.Errorf("job %d: %w", i, err)
			}
			return err
		}
	}
	return nil
}

// mayConflict reports whether an insert of ps may end in an
// *IDConflictError.
func mayConflict(ps []*JobInsertParams) bool {
	return slices.ContainsFunc(ps, func(p *JobInsertParams) bool { return p.callerID && !p.firstWins })
}

// batchConflict returns the *IDConflictError of b, the batch found under
// p's id, when it is not what p would have made, as far as the store
// tells: its number of jobs, its callback, and each member given an id
// that still exists. An id no job has is a member deleted since, unless
// every member is there. Members without an id cannot be told apart.
func (c *engine) batchConflict(ctx context.Context, b *Batch, p *BatchInsertParams) error {
	var fields []string
	if b.Total != len(p.Jobs) {
		fields = append(fields, "jobs")
	}
	switch {
	case (b.Callback == nil) != (p.callback == nil):
		fields = append(fields, "callback")
	case b.Callback != nil:
		for _, f := range p.callback.differences(shapeOfTemplate(b.Callback), "batch") {
			fields = append(fields, "callback."+f)
		}
	}
	for i, jp := range p.Jobs {
		if !jp.callerID {
			continue
		}
		j, err := c.store.JobGet(ctx, &JobGetParams{ID: jp.ID})
		if errors.Is(err, ErrNotFound) {
			if present(b) == b.Total {
				fields = append(fields, fmt.Sprintf("jobs[%d].id", i)) // never a member
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("enqueue batch %s: compare with the existing one: %w", b.ID, err)
		}
		if j.BatchID == nil || *j.BatchID != b.ID {
			fields = append(fields, fmt.Sprintf("jobs[%d].id", i))
			continue
		}
		for _, f := range jp.jobDifferences(j) {
			fields = append(fields, fmt.Sprintf("jobs[%d].%s", i, f))
		}
	}
	if len(fields) > 0 {
		return &IDConflictError{What: "batch", ID: b.ID, Fields: fields}
	}
	return nil
}

// present is how many of b's members exist still.
func present(b *Batch) int {
	n := 0
	for _, c := range b.Counts {
		n += c
	}
	return n
}

// workflowConflict returns the *IDConflictError of w, the workflow found
// under p's id, when it is not what p would have made, as far as the store
// tells: its name and graph, and the job of every step and compensation
// enqueued and not deleted since.
func (c *engine) workflowConflict(ctx context.Context, w *Workflow, p *WorkflowInsertParams) error {
	var fields []string
	if w.Name != p.Name {
		fields = append(fields, "name")
	}
	if len(w.Steps) != len(p.Steps) {
		fields = append(fields, "steps")
	}
	for i := range min(len(w.Steps), len(p.Steps)) {
		ws, ps, at := &w.Steps[i], &p.Steps[i], fmt.Sprintf("steps[%d].", i)
		if ws.Name != ps.Name {
			fields = append(fields, at+"name")
		}
		if !slices.Equal(ws.DependsOn, ps.DependsOn) {
			fields = append(fields, at+"depends_on")
		}
		fs, err := c.workflowJobConflict(ctx, ws.JobID, ws.State, ws.Kind, p.jobs[i][0])
		if err != nil {
			return err
		}
		fields = appendPrefixed(fields, at, fs)
		switch wc := ws.Compensation; {
		case (wc == nil) != (ps.Compensation == nil):
			fields = append(fields, at+"compensate")
		case wc != nil:
			fs, err := c.workflowJobConflict(ctx, wc.JobID, wc.State, wc.Kind, p.jobs[i][1])
			if err != nil {
				return err
			}
			fields = appendPrefixed(fields, at+"compensate.", fs)
		}
	}
	if len(fields) > 0 {
		return &IDConflictError{What: "workflow", ID: w.ID, Fields: fields}
	}
	return nil
}

// workflowJobConflict names the fields in which a workflow's job id, of
// kind and in state (nil when it is not enqueued or was deleted), differs
// from the one want would make: only the kind, when there is no job.
func (c *engine) workflowJobConflict(ctx context.Context, id string, state *JobState, kind string, want *JobInsertParams) ([]string, error) {
	if state == nil {
		if kind != want.Kind {
			return []string{"kind"}, nil
		}
		return nil, nil
	}
	j, err := c.store.JobGet(ctx, &JobGetParams{ID: id})
	if errors.Is(err, ErrNotFound) {
		return c.workflowJobConflict(ctx, id, nil, kind, want) // deleted since
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue workflow: compare with the existing one: %w", err)
	}
	return want.differences(shapeOfJob(j), "workflow"), nil
}

func appendPrefixed(out []string, prefix string, fields []string) []string {
	for _, f := range fields {
		out = append(out, prefix+f)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// withoutField returns the JSON object doc without its field name; null or
// nothing reads as {}. A document that is not an object, or a name of "",
// leaves doc as it is.
func withoutField(doc json.RawMessage, name string) json.RawMessage {
	if name == "" {
		return doc
	}
	if t := bytes.TrimSpace(doc); len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return doc
	}
	delete(m, name)
	b, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return b
}

// sameJSON compares two documents by value, not by spelling: a store may
// reformat what it keeps (PostgreSQL's jsonb does: the order of an object's
// keys, the space between tokens, 1e3 as 1000). Numbers compare by their
// exact decimal value, not as float64, which would make 9007199254740993
// equal 9007199254740992 and fail to decode 1e400 at all.
func sameJSON(a, b json.RawMessage) bool {
	canon := func(doc json.RawMessage) ([]byte, bool) {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil, false
		}
		out, err := json.Marshal(canonNumbers(v))
		return out, err == nil
	}
	x, okX := canon(a)
	y, okY := canon(b)
	return okX && okY && bytes.Equal(x, y)
}

// canonNumbers replaces every number in a decoded document with
// canonNumber's spelling of it.
func canonNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return json.Number(canonNumber(string(v)))
	case map[string]any:
		for k, x := range v {
			v[k] = canonNumbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = canonNumbers(x)
		}
	}
	return v
}

// canonNumber spells a JSON number so that two numbers of the same value
// are spelt alike: its significant digits, without leading or trailing
// zeros, and the power of ten to multiply them by ("15e-1" for 1.50 and
// 0.15e1). The exponent is a big.Int, so 1e99999999999999999999 costs no
// more than 1e9.
func canonNumber(n string) string {
	sign, n := "", n
	if rest, ok := strings.CutPrefix(n, "-"); ok {
		sign, n = "-", rest
	}
	mant, expText, _ := strings.Cut(strings.ToLower(n), "e")
	exp := new(big.Int)
	if expText != "" {
		if _, ok := exp.SetString(strings.TrimPrefix(expText, "+"), 10); !ok {
			return sign + n // not a JSON number; compared as written
		}
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed))))
	return sign + trimmed + "e" + exp.String()
}
