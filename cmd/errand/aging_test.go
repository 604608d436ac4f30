package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// TestPriorityAgingFlag: --priority-aging QUEUE=STEP[:FLOOR] gives the
// worker its PriorityAging; a bad value is a usage error naming the flag,
// before anything runs.
func TestPriorityAgingFlag(t *testing.T) {
	got, err := parseAging([]string{"bulk=1m", "reports=30s:-2"})
	want := map[string]errand.PriorityAging{"bulk": {Step: time.Minute}, "reports": {Step: 30 * time.Second, Floor: -2}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseAging = %v, %v; want %v", got, err, want)
	}
	db := tempDB(t)
	for _, c := range []struct{ value, want string }{
		{"bulk", "QUEUE=STEP"},
		{"bulk=soon", "not a duration"},
		{"bulk=1ms", "too short"},
		{"bulk=1m:low", "not an integer"},
	} {
		r := cli(t, "work", "--db", db, "--exec", "k=/bin/true", "--priority-aging", c.value)
		if r.code != 2 || !strings.Contains(r.stderr, "--priority-aging") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("--priority-aging %s = exit %d, stderr %q; want exit 2 naming the flag and %q", c.value, r.code, r.stderr, c.want)
		}
	}
	if r := cli(t, "work", "--db", db, "--exec", "k=/bin/true", "--priority-aging", "a=1m", "--priority-aging", "a=2m"); r.code != 2 || !strings.Contains(r.stderr, "twice") {
		t.Errorf("a queue aged twice: exit %d, %q", r.code, r.stderr)
	}
}
