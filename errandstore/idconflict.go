package errandstore

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

	"github.com/errandhq/errand/errandtype"
)

// JobShape is what an enqueue decides about a job, and what a stored job
// or template keeps of it, for comparison. Metadata is left out: it
// describes the request (a retried request carries another trace
// context), not the work.
type JobShape struct {
	Kind, Queue                        string
	Args                               json.RawMessage
	ArgsVersion, Priority, MaxAttempts int
	BackoffBase, BackoffMax            time.Duration
	Delay, MaxAge                      time.Duration
	Timed                              bool // delay and maxAge are kept: a template keeps them, a job does not
	OrderingKey, FairnessKey           string
	OrderingHold                       bool
	Tags                               []string
}

func shapeOfParams(p *JobInsertParams) JobShape {
	return JobShape{Kind: p.Kind, Queue: p.Queue, Args: p.Args, ArgsVersion: p.ArgsVersion, Priority: p.Priority,
		MaxAttempts: p.MaxAttempts, BackoffBase: p.BackoffBase, BackoffMax: p.BackoffMax, Delay: p.Delay, MaxAge: p.MaxAge,
		Timed: true, OrderingKey: p.OrderingKey, FairnessKey: p.FairnessKey, OrderingHold: p.OrderingHold, Tags: p.Tags}
}

func ShapeOfJob(j *errandtype.Job) JobShape {
	return JobShape{Kind: j.Kind, Queue: j.Queue, Args: j.Args, ArgsVersion: j.ArgsVersion, Priority: j.EnqueuedPriority(),
		MaxAttempts: j.MaxAttempts, BackoffBase: time.Duration(j.BackoffBase), BackoffMax: time.Duration(j.BackoffMax),
		OrderingKey: deref(j.OrderingKey), FairnessKey: deref(j.FairnessKey), OrderingHold: j.OrderingHold, Tags: j.Tags}
}

// Differences names the fields in which have, an existing job, differs
// from the one p would make. field, when not "", is a field of the args
// errand sets ("batch", "workflow"), left out of both.
func (p *JobInsertParams) Differences(have JobShape, field string) []string {
	want := shapeOfParams(p)
	var out []string
	differ := func(name string, same bool) {
		if !same {
			out = append(out, name)
		}
	}
	differ("kind", have.Kind == want.Kind)
	differ("queue", have.Queue == want.Queue)
	differ("args", bothSealed(have.Args, want.Args) || sameJSON(withoutField(have.Args, field), withoutField(want.Args, field)))
	differ("args_version", have.ArgsVersion == want.ArgsVersion)
	differ("priority", have.Priority == want.Priority)
	differ("max_attempts", !p.MaxAttemptsGiven || have.MaxAttempts == want.MaxAttempts)
	differ("backoff_base", have.BackoffBase == want.BackoffBase)
	differ("backoff_max", have.BackoffMax == want.BackoffMax)
	if have.Timed && want.Timed {
		differ("delay", have.Delay == want.Delay)
		differ("max_age", have.MaxAge == want.MaxAge)
	}
	differ("ordering_key", have.OrderingKey == want.OrderingKey)
	differ("ordering_on_dead", !p.HoldGiven || have.OrderingHold == want.OrderingHold)
	differ("fairness_key", have.FairnessKey == want.FairnessKey)
	differ("tags", slices.Equal(have.Tags, want.Tags))
	return out
}

// JobDifferences names the fields in which j, the job found under p's id,
// differs from the job p would make.
func (p *JobInsertParams) JobDifferences(j *errandtype.Job) []string {
	out := p.Differences(ShapeOfJob(j), "")
	if deref(j.UniqueKey) != p.UniqueKey {
		return append(out, "unique_key")
	}
	if p.UniqueKey == "" {
		return out
	}
	if j.UniqueScope == nil || j.UniqueScope.OrDefault() != p.UniqueScope.OrDefault() {
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

// The rules by which a client finds a caller-given id taken by a different
// job, batch or workflow (see [github.com/errandhq/errand.IDConflictError]):
// they name what differs as the JSON API names it. A duplicate found by a
// unique key is never a conflict: unique keys exist to dedupe jobs whose
// args differ.

// CheckFirstWins refuses FirstWins without the id it is about; what is
// "job", "batch" or "workflow".
func CheckFirstWins(firstWins bool, id, what string) error {
	if firstWins && id == "" {
		return &errandtype.InputError{Field: "first_wins", Message: fmt.Sprintf("is set without a %s id; it only decides what a duplicate id returns, so give the id or drop it", what)}
	}
	return nil
}

// ShapeOfTemplate is what template t keeps of a job, for comparison.
func ShapeOfTemplate(t *JobTemplate) JobShape {
	return JobShape{Kind: t.Kind, Queue: t.Queue, Args: t.Args, ArgsVersion: t.ArgsVersion, Priority: t.Priority,
		MaxAttempts: t.MaxAttempts, BackoffBase: time.Duration(t.BackoffBaseUS) * time.Microsecond,
		BackoffMax: time.Duration(t.BackoffMaxUS) * time.Microsecond, Delay: time.Duration(t.DelayUS) * time.Microsecond,
		MaxAge: time.Duration(t.MaxAgeUS) * time.Microsecond, Timed: true,
		OrderingKey: t.OrderingKey, FairnessKey: t.FairnessKey, OrderingHold: t.OrderingHold, Tags: t.Tags}
}

// MayConflict reports whether an insert of ps may find a caller-given id
// taken by a different job.
func MayConflict(ps []*JobInsertParams) bool {
	return slices.ContainsFunc(ps, func(p *JobInsertParams) bool { return p.CallerID && !p.FirstWins })
}

// JobConflict returns the index in ps of the first job whose caller-given
// id found, in rs, an existing job that differs, and the fields that
// differ; -1 when there is none.
func JobConflict(ps []*JobInsertParams, rs []JobInsertResult) (int, []string) {
	for i, p := range ps {
		r := rs[i]
		if !r.Duplicate || !p.CallerID || p.FirstWins || r.Job.ID != p.ID {
			continue // new, errand's id, first wins, or found by its unique key
		}
		if fields := p.JobDifferences(r.Job); len(fields) > 0 {
			return i, fields
		}
	}
	return -1, nil
}

// JobGetter reads one job; a Store is one.
type JobGetter interface {
	JobGet(ctx context.Context, params *JobGetParams) (*errandtype.Job, error)
}

// BatchDifferences names the fields in which b, the batch found under p's
// id, differs from the one p would have made, as far as the store tells:
// its number of jobs, its callback, and each member given an id that still
// exists. An id no job has is a member deleted since, unless every member
// is there. Members without an id cannot be told apart.
func BatchDifferences(ctx context.Context, jobs JobGetter, b *Batch, p *BatchInsertParams) ([]string, error) {
	var fields []string
	if b.Total != len(p.Jobs) {
		fields = append(fields, "jobs")
	}
	switch {
	case (b.Callback == nil) != (p.ClientCallback == nil):
		fields = append(fields, "callback")
	case b.Callback != nil:
		for _, f := range p.ClientCallback.Differences(ShapeOfTemplate(b.Callback), "batch") {
			fields = append(fields, "callback."+f)
		}
	}
	for i, jp := range p.Jobs {
		if !jp.CallerID {
			continue
		}
		j, err := jobs.JobGet(ctx, &JobGetParams{ID: jp.ID})
		if errors.Is(err, errandtype.ErrNotFound) {
			if present(b) == b.Total {
				fields = append(fields, fmt.Sprintf("jobs[%d].id", i)) // never a member
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("enqueue batch %s: compare with the existing one: %w", b.ID, err)
		}
		if j.BatchID == nil || *j.BatchID != b.ID {
			fields = append(fields, fmt.Sprintf("jobs[%d].id", i))
			continue
		}
		for _, f := range jp.JobDifferences(j) {
			fields = append(fields, fmt.Sprintf("jobs[%d].%s", i, f))
		}
	}
	return fields, nil
}

// present is how many of b's members exist still.
func present(b *Batch) int {
	n := 0
	for _, c := range b.Counts {
		n += c
	}
	return n
}

// WorkflowDifferences names the fields in which w, the workflow found
// under p's id, differs from the one p would have made, as far as the
// store tells: its name and graph, and the job of every step and
// compensation enqueued and not deleted since.
func WorkflowDifferences(ctx context.Context, jobs JobGetter, w *errandtype.Workflow, p *WorkflowInsertParams) ([]string, error) {
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
		fs, err := workflowJobDifferences(ctx, jobs, ws.JobID, ws.State, ws.Kind, p.Jobs[i][0])
		if err != nil {
			return nil, err
		}
		fields = appendPrefixed(fields, at, fs)
		switch wc := ws.Compensation; {
		case (wc == nil) != (ps.Compensation == nil):
			fields = append(fields, at+"compensate")
		case wc != nil:
			fs, err := workflowJobDifferences(ctx, jobs, wc.JobID, wc.State, wc.Kind, p.Jobs[i][1])
			if err != nil {
				return nil, err
			}
			fields = appendPrefixed(fields, at+"compensate.", fs)
		}
	}
	return fields, nil
}

// workflowJobDifferences names the fields in which a workflow's job id, of
// kind and in state (nil when it is not enqueued or was deleted), differs
// from the one want would make: only the kind, when there is no job.
func workflowJobDifferences(ctx context.Context, jobs JobGetter, id string, state *errandtype.JobState, kind string, want *JobInsertParams) ([]string, error) {
	if state == nil {
		if kind != want.Kind {
			return []string{"kind"}, nil
		}
		return nil, nil
	}
	j, err := jobs.JobGet(ctx, &JobGetParams{ID: id})
	if errors.Is(err, errandtype.ErrNotFound) {
		return workflowJobDifferences(ctx, jobs, id, nil, kind, want) // deleted since
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue workflow: compare with the existing one: %w", err)
	}
	return want.Differences(ShapeOfJob(j), "workflow"), nil
}

func appendPrefixed(out []string, prefix string, fields []string) []string {
	for _, f := range fields {
		out = append(out, prefix+f)
	}
	return out
}

// SealedMark is the field that marks a sealed value (see
// [github.com/errandhq/errand.Codec]).
const SealedMark = "$errand_enc"

// bothSealed reports whether a and b are both sealed values, which differ
// byte for byte each time the same args are sealed: not compared here. The
// client compares a job's args opened; a batch's or workflow's members are
// compared on the rest.
func bothSealed(a, b json.RawMessage) bool {
	mark := []byte(`"` + SealedMark + `"`)
	return bytes.Contains(a, mark) && bytes.Contains(b, mark)
}
