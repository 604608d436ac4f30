//go:build unix

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestJobsSearch runs the binary: errand jobs keeps the jobs whose args
// hold --args-has and that have every --tag, pages on with --after, and
// refuses a filter it cannot match with exit 2 naming the flag.
func TestJobsSearch(t *testing.T) {
	db := tempDB(t)
	a := enqueue(t, db, "reindex", `{"user_id":42,"full":true}`, "--tag", "eu")
	enqueue(t, db, "reindex", `{"user_id":7}`, "--tag", "eu")
	c := enqueue(t, db, "reindex", `{"user_id":42}`, "--tag", "us")
	list := func(args ...string) (ids []string, seqs []int64) {
		t.Helper()
		r := ok(t, cli(t, append([]string{"jobs", "--db", db, "--json"}, args...)...))
		var js []struct {
			ID  string `json:"id"`
			Seq int64  `json:"seq"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			ids, seqs = append(ids, j.ID), append(seqs, j.Seq)
		}
		return ids, seqs
	}
	if got, _ := list("--args-has", `{"user_id":42}`); strings.Join(got, ",") != a+","+c {
		t.Errorf("--args-has user_id 42: %v; want %s, %s", got, a, c)
	}
	if got, _ := list("--args-has", `{"user_id":42}`, "--tag", "eu"); strings.Join(got, ",") != a {
		t.Errorf("--args-has user_id 42 --tag eu: %v; want %s", got, a)
	}
	_, seqs := list("--args-has", `{"user_id":42}`, "--limit", "1")
	if got, _ := list("--args-has", `{"user_id":42}`, "--after", strconv.FormatInt(seqs[0], 10)); strings.Join(got, ",") != c {
		t.Errorf("second page: %v; want %s", got, c)
	}
	for _, bad := range [][]string{{"--args-has", `[42]`}, {"--args-has", `{"user_id":[42]}`}, {"--output-has", `{}`}, {"--tag", strings.Repeat("x", 200)}} {
		r := cli(t, append([]string{"jobs", "--db", db}, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("jobs %q: %s; want exit 2 naming %s", bad, r, bad[0])
		}
	}
}
