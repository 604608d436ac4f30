package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var searchCases = []testCase{
	{"ArgsContain", testSearchArgs},
	{"OutputContains", testSearchOutput},
	{"TagsAndPages", testSearchTags},
	{"BadFilterRefused", testSearchBad},
}

// search lists the ids of the jobs p keeps.
func (e *env) search(p *errandstore.JobListParams) []string {
	e.t.Helper()
	js, err := e.s.JobList(e.ctx, p)
	if err != nil {
		e.t.Fatalf("JobList(%+v): %v", p, err)
	}
	return ids(js)
}

// wantSearch requires that filtering args by filter keeps the jobs want.
func (e *env) wantSearch(p *errandstore.JobListParams, want ...string) {
	e.t.Helper()
	if got := e.search(p); !slices.Equal(got, want) {
		e.t.Errorf("args_has %s output_has %s tags %v: jobs %v; want %v", p.ArgsHas, p.OutputHas, p.Tags, got, want)
	}
}

// jobWithArgs returns insert parameters for a job with args.
func jobWithArgs(id, args string) *errandstore.JobInsertParams {
	p := newJob(id)
	p.Args = json.RawMessage(args)
	return p
}

// testSearchArgs: a filter keeps the jobs whose args hold each of its
// scalars at its path, numbers equal as numbers, types kept apart.
func testSearchArgs(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(
		jobWithArgs("int", `{"user_id": 42, "plan": "pro", "a": {"b": true}}`),
		jobWithArgs("real", `{"user_id": 42.0, "plan": "free", "x": null}`),
		jobWithArgs("text", `{"user_id": "42", "a": {"b": false}}`),
		jobWithArgs("list", `{"user_id": [42]}`),
		jobWithArgs("other", `{"user_id": 7, "a": {"b": true, "c": 1}}`),
	)
	has := func(f string) *errandstore.JobListParams {
		return &errandstore.JobListParams{ArgsHas: json.RawMessage(f)}
	}
	e.wantSearch(has(`{"user_id": 42}`), "int", "real")
	e.wantSearch(has(`{"user_id": "42"}`), "text")
	e.wantSearch(has(`{"user_id": 42, "plan": "pro"}`), "int")
	e.wantSearch(has(`{"a": {"b": true}}`), "int", "other")
	e.wantSearch(has(`{"a": {"b": false}}`), "text")
	e.wantSearch(has(`{"x": null}`), "real")
	e.wantSearch(has(`{"missing": 1}`))
	p := has(`{"user_id": 42}`)
	p.Kind, p.States = "email", []errandtype.JobState{errandtype.StateQueued}
	e.wantSearch(p, "int", "real")
}

// testSearchOutput: an output filter keeps the jobs whose recorded output
// holds it; jobs without output match none.
func testSearchOutput(t *testing.T, h harness) {
	e := open(t, h)
	ws := e.workflows()
	e.insertIDs("a", "b", "none")
	for _, o := range []struct{ id, out string }{{"a", `{"rows": 10, "file": "x.csv"}`}, {"b", `{"rows": 3}`}} { // in claim order
		id, out := o.id, o.out
		j := e.claimOne(id)
		if err := ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: id, LeaseToken: *j.LeaseToken, Output: json.RawMessage(out)}); err != nil {
			t.Fatal(err)
		}
		e.recordOK(succeeded(j))
	}
	e.wantSearch(&errandstore.JobListParams{OutputHas: json.RawMessage(`{"rows": 10}`)}, "a")
	e.wantSearch(&errandstore.JobListParams{OutputHas: json.RawMessage(`{"file": "x.csv"}`), ArgsHas: json.RawMessage(`{"n": 1}`)}, "a")
}

// testSearchTags: a job matches when it has every tag asked for; pages
// continue after the last seq, as every listing does.
func testSearchTags(t *testing.T, h harness) {
	e := open(t, h)
	var ps []*errandstore.JobInsertParams
	for id, tags := range map[string][]string{"both": {"eu", "vip"}, "eu": {"eu"}, "vip": {"vip"}, "none": nil} {
		p := newJob(id)
		p.Tags = tags
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *errandstore.JobInsertParams) int { return strings.Compare(a.ID, b.ID) })
	e.insert(ps...) // both, eu, none, vip
	e.wantSearch(&errandstore.JobListParams{Tags: []string{"eu"}}, "both", "eu")
	e.wantSearch(&errandstore.JobListParams{Tags: []string{"vip", "eu"}}, "both")
	first, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Tags: []string{"vip"}, Limit: 1})
	if err != nil || len(first) != 1 || first[0].ID != "both" {
		t.Fatalf("first page: %v, %v; want [both]", ids(first), err)
	}
	e.wantSearch(&errandstore.JobListParams{Tags: []string{"vip"}, AfterSeq: first[0].Seq, Limit: 1}, "vip")
}

// testSearchBad: a filter the stores cannot both match is refused.
func testSearchBad(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	for _, f := range []string{`[1]`, `42`, `{}`, `{"a": [1]}`, `{"a": {}}`, `{"a": 1`, `{"a": 1} {}`} {
		_, err := e.s.JobList(e.ctx, &errandstore.JobListParams{ArgsHas: json.RawMessage(f)})
		if !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("args_has %s: %v; want an *InputError", f, err)
		}
	}
	if _, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Tags: []string{""}}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("empty tag: %v; want an *InputError", err)
	}
}
