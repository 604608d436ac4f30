package errand

import (
	"encoding/json"
	"testing"

	"github.com/errandhq/errand/errandtype"
)

// TestDecodeColumnsArrays checks that the history and tags decode alike
// whether they are empty (a fast path) or not: never nil, so that they
// marshal as [], and a malformed column is an error.
func TestDecodeColumnsArrays(t *testing.T) {
	for _, tc := range []struct {
		errors, tags         string
		wantErrors, wantTags string // the fields marshalled
		bad                  bool
	}{
		{errors: `[]`, tags: `[]`, wantErrors: `[]`, wantTags: `[]`},
		{errors: `[ ]`, tags: ` []`, wantErrors: `[]`, wantTags: `[]`},
		{errors: `null`, tags: `null`, wantErrors: `[]`, wantTags: `[]`},
		{errors: `[{"attempt":1,"replay":0,"at":"2026-01-02T03:04:05Z","class":"error","message":"boom","stack":""}]`, tags: `["a","b"]`,
			wantErrors: `[{"attempt":1,"replay":0,"at":"2026-01-02T03:04:05Z","class":"error","message":"boom","stack":null}]`, wantTags: `["a","b"]`},
		{errors: `[`, tags: `[]`, bad: true},
		{errors: `[]`, tags: `[1]`, bad: true},
	} {
		var j errandtype.Job
		err := j.DecodeColumns(&errandtype.JobColumns{Args: `{}`, State: "queued", Errors: tc.errors, Tags: tc.tags})
		if tc.bad {
			if err == nil {
				t.Errorf("errors %s, tags %s: decoded, want an error", tc.errors, tc.tags)
			}
			continue
		}
		if err != nil {
			t.Errorf("errors %s, tags %s: %v", tc.errors, tc.tags, err)
			continue
		}
		gotErrors, _ := json.Marshal(j.Errors)
		gotTags, _ := json.Marshal(j.Tags)
		if string(gotErrors) != tc.wantErrors || string(gotTags) != tc.wantTags {
			t.Errorf("errors %s, tags %s: decoded as %s and %s, want %s and %s", tc.errors, tc.tags, gotErrors, gotTags, tc.wantErrors, tc.wantTags)
		}
	}
}
