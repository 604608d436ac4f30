package errand

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
)

// fakeGate records what a claim asks of it, in calls shared by every gate
// of a test.
type fakeGate struct {
	name  string
	calls *[]string
	limit int  // admit lowers the claim's limit to this, when positive
	hold  bool // admit holds the claim back
	stop  bool // admit ends the loop
}

func (g *fakeGate) admit(_ context.Context, t *claimTicket) bool {
	*g.calls = append(*g.calls, "admit "+g.name)
	if g.limit > 0 {
		t.limit = min(t.limit, g.limit)
	}
	t.held = g.hold
	return !g.stop
}

func (g *fakeGate) through(_ *claimTicket, next claimFunc) claimFunc { return next }

func (g *fakeGate) settle(_ context.Context, _ *claimTicket, jobs []*errandtype.Job, err error) {
	*g.calls = append(*g.calls, fmt.Sprintf("settle %s %d %v", g.name, len(jobs), err))
}

func (g *fakeGate) idleWait(_ *claimTicket, wait time.Duration) time.Duration { return wait }

// TestClaimGatesAdmit: a claim passes the gates in order; a gate that holds
// it back or ends the loop stops it there, and only the gates before it
// settle, last first, with nothing claimed; a held gate gave back its own.
func TestClaimGatesAdmit(t *testing.T) {
	for _, tt := range []struct {
		name      string
		gates     func(calls *[]string) []claimGate
		cancelled bool
		want      int
		calls     []string
		limit     int
	}{
		{"all admit", func(c *[]string) []claimGate {
			return []claimGate{&fakeGate{name: "a", calls: c, limit: 5}, &fakeGate{name: "b", calls: c, limit: 3}}
		}, false, admitClaim, []string{"admit a", "admit b"}, 3},
		{"the third holds", func(c *[]string) []claimGate {
			return []claimGate{&fakeGate{name: "a", calls: c}, &fakeGate{name: "b", calls: c}, &fakeGate{name: "c", calls: c, hold: true}, &fakeGate{name: "d", calls: c}}
		}, false, admitHeld, []string{"admit a", "admit b", "admit c", "settle b 0 <nil>", "settle a 0 <nil>"}, 10},
		{"the second stops", func(c *[]string) []claimGate {
			return []claimGate{&fakeGate{name: "a", calls: c}, &fakeGate{name: "b", calls: c, stop: true}, &fakeGate{name: "c", calls: c}}
		}, false, admitStop, []string{"admit a", "admit b", "settle a 0 <nil>"}, 10},
		{"stopped before the first", func(c *[]string) []claimGate {
			return []claimGate{&fakeGate{name: "a", calls: c}}
		}, true, admitStop, nil, 10},
		{"no gate", func(*[]string) []claimGate { return nil }, false, admitClaim, nil, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			gates := claimGates(tt.gates(&calls))
			ctx, cancel := context.WithCancel(t.Context())
			if tt.cancelled {
				cancel()
			}
			defer cancel()
			ticket := &claimTicket{queue: "q", limit: 10}
			if got := gates.admit(ctx, ticket); got != tt.want {
				t.Errorf("admit = %d, want %d", got, tt.want)
			}
			if !slices.Equal(calls, tt.calls) {
				t.Errorf("calls %q, want %q", calls, tt.calls)
			}
			if ticket.limit != tt.limit {
				t.Errorf("limit %d, want %d", ticket.limit, tt.limit)
			}
		})
	}
}

// TestClaimGatesSettle: after a claim every gate settles, last first, with
// what it returned.
func TestClaimGatesSettle(t *testing.T) {
	var calls []string
	gates := claimGates{&fakeGate{name: "a", calls: &calls}, &fakeGate{name: "b", calls: &calls}}
	jobs := []*errandtype.Job{{ID: "1"}, {ID: "2"}}
	gates.settle(t.Context(), &claimTicket{}, jobs, nil)
	if want := []string{"settle b 2 <nil>", "settle a 2 <nil>"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
}

// TestShareGateGivesBackUnused: the capacity gate takes the queue's share
// and gives back what the claim did not use, all of it when held back.
func TestShareGateGivesBackUnused(t *testing.T) {
	s := flow.NewShare(4, map[string]int{"q": 1}, nil)
	g := shareGate{s}
	ticket := &claimTicket{queue: "q", limit: 10}
	if !g.admit(t.Context(), ticket) || ticket.limit != 4 {
		t.Fatalf("admit: limit %d, want 4", ticket.limit)
	}
	g.settle(t.Context(), ticket, []*errandtype.Job{{ID: "1"}}, nil)
	if s.Free() != 3 {
		t.Errorf("free after a claim of 1 of 4: %d, want 3", s.Free())
	}
	s.Release("q")
	ticket = &claimTicket{queue: "q", limit: 10}
	if !g.admit(t.Context(), ticket) || ticket.limit != 4 {
		t.Fatalf("admit again: limit %d, want 4", ticket.limit)
	}
	g.settle(t.Context(), ticket, nil, nil)
	if s.Free() != 4 {
		t.Errorf("free after a held claim: %d, want 4", s.Free())
	}
}

// TestWorkerGatesFromConfig: NewWorker builds the gates its config and
// kinds ask for, and none for a plain worker, whose claims then go ahead
// of each other (see pipelines).
func TestWorkerGatesFromConfig(t *testing.T) {
	ks := NewKinds()
	noop := HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })
	ks.HandleRaw("plain", noop, nil)
	ks.HandleRaw("mail", noop, &KindOpts{Dependency: "smtp"})
	plain := NewKinds()
	plain.HandleRaw("plain", noop, nil)
	for _, tt := range []struct {
		name  string
		kinds *Kinds
		wc    *WorkerConfig
		want  string
	}{
		{"plain", plain, nil, ""},
		{"weights", plain, &WorkerConfig{Queues: map[string]int{"a": 2, "b": 2}, MaxWorkers: 3}, "errand.shareGate"},
		{"rate limit", plain, &WorkerConfig{RateLimits: []RateLimit{{Kind: "plain", Limit: 1, Per: time.Second}}}, "errand.flowGate"},
		{"breaker", ks, nil, "*errand.breakerGate"},
		{"all", ks, &WorkerConfig{Queues: map[string]int{"a": 2, "b": 2}, MaxWorkers: 3, RetryBudgets: []RetryBudget{{Kind: "mail", Ratio: 0.1}}},
			"errand.shareGate errand.flowGate *errand.breakerGate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient[struct{}](capableStore{}, &Config{Kinds: tt.kinds})
			if err != nil {
				t.Fatal(err)
			}
			w, err := c.NewWorker(tt.wc)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range w.gates {
				got = append(got, fmt.Sprintf("%T", g))
			}
			if s := fmt.Sprint(got); s != "["+tt.want+"]" {
				t.Errorf("gates %s, want [%s]", s, tt.want)
			}
			if pipe := w.pipelines(t.Context(), &flow.Claimer{}, false); pipe != (tt.want == "") {
				t.Errorf("pipelines = %v with gates %s", pipe, got)
			}
		})
	}
}
