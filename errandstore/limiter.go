package errandstore

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

const (
	// maxLimiterNameBytes bounds a bucket's name: a scope prefix and a
	// queue or kind name.
	maxLimiterNameBytes = errandtype.MaxNameBytes + 16
)

// LimiterTake is one bucket's part of a [LimiterStore.LimiterTake].
type LimiterTake struct {
	// Name is the bucket's: "queue:NAME", "kind:NAME" or "retry:KIND".
	Name string
	// Spec is the bucket's rule; it replaces the stored one.
	Spec errandtype.LimiterSpec
	// Want is the most tokens to take; 0 takes none (and records the
	// spec).
	Want int
}

// LimiterTakeParams are the takes of one transaction.
type LimiterTakeParams struct {
	Takes []LimiterTake
}

// Validate checks the takes.
func (p *LimiterTakeParams) Validate() error {
	seen := make(map[string]bool, len(p.Takes))
	for _, t := range p.Takes {
		if err := checkLimiterName(t.Name); err != nil {
			return err
		}
		if seen[t.Name] {
			return &errandtype.InputError{Field: "limiter", Message: fmt.Sprintf("%q is taken from twice in one call; take from each bucket once", t.Name)}
		}
		seen[t.Name] = true
		if err := t.Spec.Validate(); err != nil {
			return fmt.Errorf("limiter %s: %w", t.Name, err)
		}
		if t.Want < 0 || t.Want > math.MaxInt32 {
			return &errandtype.InputError{Field: "want", Message: fmt.Sprintf("limiter %s: want %d; give 0 to %d", t.Name, t.Want, math.MaxInt32)}
		}
	}
	return nil
}

// LimiterGrant is what one take got.
type LimiterGrant struct {
	// Granted is how many tokens were taken: at most Want.
	Granted int
	// Tokens is what the bucket holds after the take.
	Tokens float64
	// Wait is how long, on the store's clock, until the bucket next holds
	// a token: 0 when it holds one now, negative when only a retry
	// budget's deposit can give it one.
	Wait time.Duration
}

// LimiterGive is tokens to add to one bucket.
type LimiterGive struct {
	Name   string
	Amount float64
}

// LimiterGiveParams are the gives of one transaction.
type LimiterGiveParams struct {
	Gives []LimiterGive
}

// Validate checks the gives.
func (p *LimiterGiveParams) Validate() error {
	for _, g := range p.Gives {
		if err := checkLimiterName(g.Name); err != nil {
			return err
		}
		if math.IsNaN(g.Amount) || g.Amount < 0 || g.Amount > errandtype.MaxLimiterTokens {
			return &errandtype.InputError{Field: "amount", Message: fmt.Sprintf("limiter %s: give 0 to %g tokens", g.Name, float64(errandtype.MaxLimiterTokens))}
		}
	}
	return nil
}

// LimiterListParams asks for every bucket. It has no fields yet.
type LimiterListParams struct{}

func checkLimiterName(name string) error {
	if name == "" || len(name) > maxLimiterNameBytes {
		return &errandtype.InputError{Field: "limiter", Message: fmt.Sprintf("name %q must be 1 to %d bytes, e.g. \"queue:emails\"", name, maxLimiterNameBytes)}
	}
	return checkText("limiter", name)
}

// From takes t's tokens from a bucket in state st at now: the state to
// write, what the take got, and 1 for a take that wanted tokens and got
// none (a limiter counts those as denied), else 0.
func (t LimiterTake) From(st errandtype.LimiterState, now time.Time) (errandtype.LimiterState, LimiterGrant, int) {
	next, granted, wait := t.Spec.Take(st, now, t.Want)
	denied := 0
	if granted == 0 && t.Want > 0 {
		denied = 1
	}
	return next, LimiterGrant{Granted: granted, Tokens: next.Tokens, Wait: wait}, denied
}

// LimiterOrder is the order to take from the buckets of takes in, as
// indexes into takes: by name, so that transactions that lock several
// rows lock them in one order.
func LimiterOrder(takes []LimiterTake) []int {
	order := make([]int, len(takes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(takes[a].Name, takes[b].Name) })
	return order
}

// SortedGives is gives by name, the order LimiterOrder locks rows in.
func SortedGives(gives []LimiterGive) []LimiterGive {
	gives = slices.Clone(gives)
	slices.SortStableFunc(gives, func(a, b LimiterGive) int { return strings.Compare(a.Name, b.Name) })
	return gives
}
