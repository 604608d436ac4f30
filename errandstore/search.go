package errandstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// JSONLeaf is one value a containment filter ([JobListParams.ArgsHas])
// asks for: the scalar Value, of JSON type Type ("string", "number",
// "true", "false" or "null"), at the object keys Path.
type JSONLeaf struct {
	Path  []string
	Type  string
	Value any // a string, an int64 or float64, or nil
}

// ContainmentLeaves checks a containment filter and returns its leaves. A
// filter is a JSON object whose values are scalars or such objects: a job
// matches when its document holds each scalar at its path (numbers equal
// as numbers), as PostgreSQL's jsonb @> does for such a filter. Arrays and
// empty objects are refused: the stores would not agree on them.
func ContainmentLeaves(field string, filter json.RawMessage) ([]JSONLeaf, error) {
	dec := json.NewDecoder(bytes.NewReader(filter))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is not one JSON object; write it like {\"user_id\": 42}", filter)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is not a JSON object; name the fields to match, like {\"user_id\": 42}", filter)}
	}
	var leaves []JSONLeaf
	if err := collectLeaves(field, nil, obj, &leaves); err != nil {
		return nil, err
	}
	return leaves, nil
}

// collectLeaves adds the leaves of obj, at path, to leaves.
func collectLeaves(field string, path []string, obj map[string]any, leaves *[]JSONLeaf) error {
	if len(obj) == 0 {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("has an empty object at %q; name a field in it, or leave it out", strings.Join(path, "."))}
	}
	for k, v := range obj {
		if strings.ContainsAny(k, "\"\\") {
			return &errandtype.InputError{Field: field, Message: fmt.Sprintf("key %q holds a quote or a backslash; match another field", k)}
		}
		p := append(path[:len(path):len(path)], k)
		leaf := JSONLeaf{Path: p}
		switch x := v.(type) {
		case map[string]any:
			if err := collectLeaves(field, p, x, leaves); err != nil {
				return err
			}
			continue
		case []any:
			return &errandtype.InputError{Field: field, Message: fmt.Sprintf("has an array at %q; match scalar fields (strings, numbers, booleans, null) only", strings.Join(p, "."))}
		case string:
			leaf.Type, leaf.Value = "string", x
		case json.Number:
			leaf.Type = "number"
			if n, err := x.Int64(); err == nil {
				leaf.Value = n
			} else if f, err := x.Float64(); err == nil {
				leaf.Value = f
			} else {
				return &errandtype.InputError{Field: field, Message: fmt.Sprintf("number %s at %q is out of range", x, strings.Join(p, "."))}
			}
		case bool:
			leaf.Type = fmt.Sprint(x)
		case nil:
			leaf.Type = "null"
		}
		*leaves = append(*leaves, leaf)
	}
	return nil
}

// Validate checks a listing's search filters: ArgsHas and OutputHas must
// be containment filters (see ContainmentLeaves), each tag a tag.
func (p *JobListParams) Validate() error {
	for _, f := range []struct {
		field  string
		filter json.RawMessage
	}{{"args_has", p.ArgsHas}, {"output_has", p.OutputHas}} {
		if f.filter == nil {
			continue
		}
		if _, err := ContainmentLeaves(f.field, f.filter); err != nil {
			return err
		}
	}
	if p.Class != "" && !ValidClass(p.Class) {
		return &errandtype.InputError{Field: "class", Message: fmt.Sprintf("%q is not an error class; give a snake_case word such as start_by or timeout", p.Class)}
	}
	return checkTags(p.Tags)
}

// FlowWhere appends to where the conditions of p's Class, Absorbed and
// Aged filters, for a store's list of jobs aliased j. classOf is the
// store's expression for the class of j.last_error; arg binds a value and
// returns its placeholder.
func (p *JobListParams) FlowWhere(where []string, classOf string, arg func(v any) string) []string {
	if p.Class != "" {
		where = append(where, classOf+" = "+arg(p.Class))
	}
	if p.Absorbed {
		where = append(where, "j.absorbed > 0")
	}
	if p.Aged {
		// An aged job keeps its enqueued priority there until a replay
		// restores it.
		where = append(where, "j.base_priority IS NOT NULL")
	}
	return where
}

// TagsFilterJSON is the JSON array of p's tags, for a store's containment
// test of a job's tags.
func (p *JobListParams) TagsFilterJSON() string {
	b, _ := json.Marshal(p.Tags) // strings always marshal
	return string(b)
}
