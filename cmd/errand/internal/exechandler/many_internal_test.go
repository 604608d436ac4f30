package exechandler

import (
	"strings"
	"testing"
)

// TestParseOutcomes: output that is not one JSON array of valid outcomes
// of the call's jobs gives no job an outcome, and says why.
func TestParseOutcomes(t *testing.T) {
	ids := []string{"a", "b"}
	for _, tc := range []struct{ out, problem string }{
		{`[{"id":"a","ok":true},{"id":"b","class":"busy","retry_after":"30s"}]`, ""},
		{`[]`, ""},
		{``, "not a JSON array"},
		{`{"id":"a","ok":true}`, "not a JSON array"},
		{`[{"id":"a","ok":true}] []`, "more than one JSON value"},
		{`[{"id":"a","ok":true,"retryAfter":"1s"}]`, "not a JSON array"},
		{`[null]`, "is null"},
		{`[{"id":"c","ok":true}]`, "not one of its jobs"},
		{`[{"id":"a","ok":true},{"id":"a","ok":true}]`, "again"},
		{`[{"id":"a","ok":true,"message":"x"}]`, "ok and a failure"},
		{`[{"id":"a","class":"Not A Class"}]`, "snake_case"},
		{`[{"id":"a","retry_after":"-1s"}]`, "negative"},
		{`[{"id":"a","permanent":true,"retry_after":"1s"}]`, "permanent and has a retry_after"},
		{`[{"id":"a","retry_after":"1000000h"}]`, "retry_after"},
	} {
		byID, problem := parseOutcomes(&capped{max: maxOutput, b: []byte(tc.out)}, ids)
		if tc.problem == "" && (problem != "" || byID == nil) || tc.problem != "" && (!strings.Contains(problem, tc.problem) || byID != nil) {
			t.Errorf("%s: outcomes %v, problem %q; want a problem with %q", tc.out, byID, problem, tc.problem)
		}
	}
	if _, problem := parseOutcomes(&capped{max: maxOutput, b: []byte(`[]`), cut: true}, ids); !strings.Contains(problem, "more than") {
		t.Errorf("cut output: problem %q", problem)
	}
	c := &capped{max: 4}
	if n, err := c.Write([]byte("abcdef")); n != 6 || err != nil || string(c.b) != "abcd" || !c.cut {
		t.Errorf("capped write: %d, %v, %q, cut %v", n, err, c.b, c.cut)
	}
}
