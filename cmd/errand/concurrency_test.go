package main

import (
	"strings"
	"testing"
)

// TestWorkerConcurrencyLimitFlags: bad concurrency limits are usage errors
// that say what to change, before anything runs.
func TestWorkerConcurrencyLimitFlags(t *testing.T) {
	db := tempDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency-limit", "k=10"}, "names no kind:NAME"},
		{[]string{"--concurrency-limit", "queue:default=10"}, "names no kind:NAME"},
		{[]string{"--concurrency-limit", "kind:k=0"}, "limit N of at least 1"},
		{[]string{"--concurrency-limit", "kind:k=10/s"}, "limit N of at least 1"},
		{[]string{"--concurrency-limit", "kind:k=10,floor=20,ceiling=50"}, "must hold the starting limit"},
		{[]string{"--concurrency-limit", "kind:k=10,burst=2"}, "not floor=F"},
		{[]string{"--concurrency-limit", "kind:nope=10"}, "no handler"},
		{[]string{"--concurrency-limit", "kind:k=1", "--concurrency-limit", "kind:k=2"}, "one concurrency limit"},
		{[]string{"--concurrency-limit", "dependency:payments=1"}, "no kind of this worker declares"},
		{[]string{"--dependency", "k=payments", "--concurrency-limit", "dependency:payments=1", "--concurrency-limit", "kind:k=2"}, "one concurrency limit"},
		{[]string{"--once", "--concurrency-limit", "kind:k=1"}, "drop it with --once"},
		{[]string{"serve", "--concurrency-limit", "kind:k=1"}, "--concurrency-limit"},
		{[]string{"serve", "--exec", "k=/bin/true", "--concurrency-limit", "kind:nope=1"}, "no handler"},
	} {
		args := append([]string{"work", "--db", db, "--exec", "k=/bin/true"}, c.args...)
		if c.args[0] == "serve" {
			args = append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, c.args[1:]...)
		}
		r := cli(t, args...)
		stderr := strings.TrimSpace(r.stderr)
		if c.args[0] == "serve" {
			stderr = stderr[strings.LastIndex(stderr, "\n")+1:]
		}
		if r.code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 0 || !strings.HasPrefix(stderr, "errand: ") {
			t.Errorf("errand %s = exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}
