package errandstore

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// JobShape is what an enqueue decides about a job, and what a stored job
// or template keeps of it, for comparison.
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
	return JobShape{Kind: j.Kind, Queue: j.Queue, Args: j.Args, ArgsVersion: j.ArgsVersion, Priority: j.Priority,
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
	differ("args", sameJSON(withoutField(have.Args, field), withoutField(want.Args, field)))
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
