package errandstore

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/errandhq/errand/errandtype"
)

// TestJobConflict: only a duplicate found under its caller-given id, that
// does not let the first enqueue win, and whose job differs is a conflict;
// the first such job is named with what differs.
func TestJobConflict(t *testing.T) {
	have := &errandtype.Job{ID: "pay-1", Kind: "charge", Queue: "default", Args: json.RawMessage(`{"cents":100}`)}
	want := func(mod func(*JobInsertParams)) *JobInsertParams {
		p := &JobInsertParams{ID: "pay-1", CallerID: true, Kind: "charge", Queue: "default", Args: json.RawMessage(`{"cents": 100}`)}
		if mod != nil {
			mod(p)
		}
		return p
	}
	other := func(p *JobInsertParams) { p.Args = json.RawMessage(`{"cents":200}`) }
	dup := JobInsertResult{Job: have, Duplicate: true}
	for _, tc := range []struct {
		name   string
		ps     []*JobInsertParams
		rs     []JobInsertResult
		at     int
		fields []string
	}{
		{"same job, args spelt otherwise", []*JobInsertParams{want(nil)}, []JobInsertResult{dup}, -1, nil},
		{"different args", []*JobInsertParams{want(other)}, []JobInsertResult{dup}, 0, []string{"args"}},
		{"first wins", []*JobInsertParams{want(func(p *JobInsertParams) { other(p); p.FirstWins = true })}, []JobInsertResult{dup}, -1, nil},
		{"errand's id", []*JobInsertParams{want(func(p *JobInsertParams) { other(p); p.CallerID = false })}, []JobInsertResult{dup}, -1, nil},
		{"found by its unique key", []*JobInsertParams{want(func(p *JobInsertParams) { other(p); p.ID = "pay-2" })}, []JobInsertResult{dup}, -1, nil},
		{"new", []*JobInsertParams{want(other)}, []JobInsertResult{{Job: have}}, -1, nil},
		{"second of two", []*JobInsertParams{want(nil), want(other)}, []JobInsertResult{dup, dup}, 1, []string{"args"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, fields := JobConflict(tc.ps, tc.rs)
			if at != tc.at || !slices.Equal(fields, tc.fields) {
				t.Fatalf("JobConflict = %d, %v; want %d, %v", at, fields, tc.at, tc.fields)
			}
		})
	}
}

// TestMayConflict: only a caller-given id that does not let the first
// enqueue win can end in a conflict, so only then are results compared.
func TestMayConflict(t *testing.T) {
	given := &JobInsertParams{ID: "a", CallerID: true}
	firstWins := &JobInsertParams{ID: "b", CallerID: true, FirstWins: true}
	errands := &JobInsertParams{ID: "c"}
	if MayConflict([]*JobInsertParams{firstWins, errands}) {
		t.Fatal("first wins and errand's ids may conflict; want not")
	}
	if !MayConflict([]*JobInsertParams{errands, given}) {
		t.Fatal("a caller-given id may not conflict; want it may")
	}
}
