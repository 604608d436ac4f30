package errandhttp_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/errandhq/errand/errandhttp"
)

// TestAPISearch: GET /api/v1/jobs keeps the jobs whose args hold args_has
// and that have every tag, pages with next_cursor, answers 400 to a filter
// it cannot match and 403 to a search of args the server hides.
func TestAPISearch(t *testing.T) {
	clock := newTestClock()
	st := openSQLite(t, clock)
	s := newServer(t, st, clock, nil)
	for id, body := range map[string]map[string]any{
		"a": {"args": map[string]any{"user_id": 42}, "tags": []string{"eu"}},
		"b": {"args": map[string]any{"user_id": 7}, "tags": []string{"eu"}},
		"c": {"args": map[string]any{"user_id": 42}, "tags": []string{"us"}},
	} {
		body["kind"], body["id"] = "task", id
		want(t, "enqueue "+id, s.op(t, "POST", "/api/v1/jobs", body), http.StatusCreated, "")
	}
	ids := func(path string) ([]string, any) {
		t.Helper()
		r := s.op(t, "GET", path, nil)
		want(t, path, r, http.StatusOK, "")
		m := r.json(t)
		var out []string
		for _, j := range m["jobs"].([]any) {
			out = append(out, j.(map[string]any)["id"].(string))
		}
		return out, m["next_cursor"]
	}
	has := url.QueryEscape(`{"user_id":42}`)
	if got, _ := ids("/api/v1/jobs?args_has=" + has); len(got) != 2 || got[0] != "a" && got[0] != "c" {
		t.Errorf("args_has user_id 42: %v", got)
	}
	if got, _ := ids("/api/v1/jobs?args_has=" + has + "&tag=eu"); len(got) != 1 || got[0] != "a" {
		t.Errorf("args_has and tag eu: %v; want [a]", got)
	}
	first, next := ids("/api/v1/jobs?tag=eu&limit=1")
	if rest, _ := ids("/api/v1/jobs?tag=eu&limit=1&cursor=" + next.(string)); len(first) != 1 || len(rest) != 1 || first[0] == rest[0] {
		t.Errorf("pages of tag eu: %v then %v; want a and b", first, rest)
	}
	want(t, "array", s.op(t, "GET", "/api/v1/jobs?args_has="+url.QueryEscape(`{"user_id":[42]}`), nil), http.StatusBadRequest, "invalid_input")
	want(t, "not json", s.op(t, "GET", "/api/v1/jobs?output_has=nope", nil), http.StatusBadRequest, "invalid_input")

	hidden := newServer(t, st, clock, &errandhttp.Options{API: &errandhttp.APIOptions{HideArgs: true}})
	want(t, "hidden args", hidden.op(t, "GET", "/api/v1/jobs?args_has="+has, nil), http.StatusForbidden, "forbidden")
	if got, _ := ids("/api/v1/jobs?tag=us"); len(got) != 1 || got[0] != "c" {
		t.Errorf("tag us: %v; want [c]", got)
	}
}
