package errandtype

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseConcurrencyLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ConcurrencyLimit
		err  string // part of the error; "" for none
	}{
		{in: "kind:export=10", want: ConcurrencyLimit{Kind: "export", Limit: 10}},
		{in: "kind:sync=10,floor=2,ceiling=50,target=2s", want: ConcurrencyLimit{Kind: "sync", Limit: 10, Floor: 2, Ceiling: 50, Target: 2 * time.Second}},
		{in: "kind:sync=10,ceiling=50,floor=10", want: ConcurrencyLimit{Kind: "sync", Limit: 10, Floor: 10, Ceiling: 50}},
		{in: "dependency:stripe=20", want: ConcurrencyLimit{Dependency: "stripe", Limit: 20}},
		{in: "dependency:stripe=20,floor=5,ceiling=40", want: ConcurrencyLimit{Dependency: "stripe", Limit: 20, Floor: 5, Ceiling: 40}},
		{in: "export=10", err: "names no kind:NAME"},
		{in: "queue:q=10", err: "names no kind:NAME"},
		{in: "kind:=10", err: "names no kind:NAME"},
		{in: "dependency:=10", err: "names no kind:NAME or dependency:NAME"},
		{in: "kind:export", err: "names no kind:NAME"},
		{in: "kind:dependency:stripe=10", err: "set Dependency"},
		{in: "dependency:a b=10", err: "dependency"},
		{in: "kind:export=0", err: "limit N of at least 1"},
		{in: "kind:export=ten", err: "limit N of at least 1"},
		{in: "kind:export=10/s", err: "limit N of at least 1"},
		{in: "kind:export=10,burst=2", err: `option "burst=2"`},
		{in: "kind:export=10,floor=2", err: "must hold the starting limit"},
		{in: "kind:export=10,floor=20,ceiling=50", err: "must hold the starting limit"},
		{in: "kind:export=10,floor=2,ceiling=5", err: "must hold the starting limit"},
		{in: "kind:export=10,floor=2,floor=3,ceiling=50", err: `option "floor=3"`},
		{in: "kind:export=10,floor=2,ceiling=50,target=0s", err: "target that is not a positive duration"},
		{in: "kind:export=10,target=2s", err: "must hold the starting limit"},
		{in: "kind:a b=10", err: "kind"},
	} {
		got, err := ParseConcurrencyLimit(c.in)
		if c.err != "" {
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseConcurrencyLimit(%q) = %+v, %v; want an *InputError saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseConcurrencyLimit(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if back, err := ParseConcurrencyLimit(got.String()); err != nil || back != got {
			t.Errorf("%q written as %q reads back as %+v, %v", c.in, got.String(), back, err)
		}
	}
}

// TestConcurrencyAdmit: the room a claim gets is the limit (an adaptive
// one's stored value within its bounds, rounded down) less the running
// jobs, never below 0 nor above what it wants, and none while a
// provider's reset time holds an adaptive limit.
func TestConcurrencyAdmit(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	fixed := LimiterSpec{Mode: LimiterModeConcurrency, Rate: 5}
	adaptive := LimiterSpec{Mode: LimiterModeConcurrency, Rate: 5, Floor: 2, Ceiling: 8}
	held := LimiterState{Rate: 3.6, HeldUntil: now.Add(time.Second)}
	for _, c := range []struct {
		what          string
		spec          LimiterSpec
		st            LimiterState
		running, want int
		room          int
		rate          float64
	}{
		{"fixed, empty", fixed, LimiterState{}, 0, 10, 5, 5},
		{"fixed, some running", fixed, LimiterState{}, 3, 10, 2, 5},
		{"fixed, wants fewer", fixed, LimiterState{}, 3, 1, 1, 5},
		{"fixed, over the limit", fixed, LimiterState{}, 7, 10, 0, 5},
		{"fixed ignores a stored rate and hold", fixed, held, 0, 10, 5, 5},
		{"adaptive, stored rate rounded down", adaptive, LimiterState{Rate: 3.6}, 1, 10, 2, 3.6},
		{"adaptive, stored rate below the floor", adaptive, LimiterState{Rate: 1}, 0, 10, 2, 2},
		{"adaptive, stored rate above the ceiling", adaptive, LimiterState{Rate: 20}, 0, 10, 8, 8},
		{"adaptive, held", adaptive, held, 0, 10, 0, 3.6},
	} {
		room, cur := c.spec.Admit(c.st, now, c.running, c.want)
		if room != c.room || cur.Rate != c.rate {
			t.Errorf("%s: room %d at limit %g; want %d at %g", c.what, room, cur.Rate, c.room, c.rate)
		}
	}
}
