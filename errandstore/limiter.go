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
	// Name is the bucket's: "queue:NAME", "kind:NAME", "dependency:NAME"
	// or "retry:KIND".
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
		if t.Spec.Mode == errandtype.LimiterModeConcurrency {
			return &errandtype.InputError{Field: "limiter", Message: fmt.Sprintf("limiter %s: a concurrency limit holds no tokens; claim under it with JobClaimLimited", t.Name)}
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
// write (its Rate and the spec's burst are the bucket's rate and burst
// from now on: t's own for a fixed limit, the stored rate within t's
// bounds for an adaptive one), what the take got, and 1 for a take that
// wanted tokens and got none (a limiter counts those as denied), else 0.
func (t LimiterTake) From(st errandtype.LimiterState, now time.Time) (errandtype.LimiterState, errandtype.LimiterSpec, LimiterGrant, int) {
	spec := t.Spec.Current(st.Rate)
	if !spec.Adaptive() {
		st.HeldUntil = time.Time{} // only an adaptive limit is held
	}
	next, granted, wait := spec.Take(st, now, t.Want)
	next.Rate = spec.Rate
	denied := 0
	if granted == 0 && t.Want > 0 {
		denied = 1
	}
	return next, spec, LimiterGrant{Granted: granted, Tokens: next.Tokens, Wait: wait}, denied
}

// LimiterAdjustParams report one worker's signal for an adaptive limit.
type LimiterAdjustParams struct {
	Name   string
	Signal errandtype.LimiterSignal
}

// Validate checks the params.
func (p *LimiterAdjustParams) Validate() error {
	if err := checkLimiterName(p.Name); err != nil {
		return err
	}
	return p.Signal.Validate()
}

// LimiterAdjustResult is what a [LimiterStore.LimiterAdjust] did.
type LimiterAdjustResult struct {
	// Limiter is the bucket as it stands after; nil when it does not
	// exist or is not adaptive.
	Limiter *errandtype.LimiterRecord
	// Moved: the signal moved the bucket's rate or its hold, and the
	// bucket was written.
	Moved bool
}

// AdjustLimiter applies p's signal to the bucket read, locked, in tx (see
// [errandtype.LimiterSpec.Adapt]) and writes what moved with write. read
// returns nil for a bucket that does not exist or is not adaptive, which
// is left alone.
func AdjustLimiter[Tx any](p *LimiterAdjustParams, now func() time.Time, inTx func(fn func(tx Tx) error) error,
	read func(tx Tx) (*errandtype.LimiterRecord, errandtype.LimiterState, error),
	write func(tx Tx, r *errandtype.LimiterRecord, st errandtype.LimiterState) error) (*LimiterAdjustResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out LimiterAdjustResult
	err := inTx(func(tx Tx) error {
		out = LimiterAdjustResult{} // a retried transaction starts over
		r, st, err := read(tx)
		if err != nil || r == nil || r.Adaptive == nil {
			return err
		}
		at := now()
		next, a, moved := r.Spec.Adapt(st, *r.Adaptive, p.Signal, at)
		r.Adaptive = &a
		if moved {
			r.Spec = r.Spec.Current(next.Rate)
			r.UpdatedAt = next.At
			if err := write(tx, r, next); err != nil {
				return err
			}
		}
		r.Tokens = r.Spec.Level(next, at)
		out = LimiterAdjustResult{Limiter: r, Moved: moved}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("adjust limiter %s: %w", p.Name, err)
	}
	return &out, nil
}

// TakeLimiters takes the tokens of p's takes in one transaction, which
// inTx runs: take takes t's tokens in tx (see [LimiterTake.From]) and
// returns what it got. Buckets are taken from in name order, so that
// transactions that lock several rows lock them in one order.
func TakeLimiters[Tx any](p *LimiterTakeParams, inTx func(fn func(tx Tx) error) error, take func(tx Tx, t LimiterTake) (LimiterGrant, error)) ([]LimiterGrant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	order := make([]int, len(p.Takes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(p.Takes[a].Name, p.Takes[b].Name) })
	grants := make([]LimiterGrant, len(p.Takes))
	err := inTx(func(tx Tx) error {
		for _, i := range order {
			g, err := take(tx, p.Takes[i])
			if err != nil {
				return err
			}
			grants[i] = g
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("take limiter tokens: %w", err)
	}
	return grants, nil
}

// GiveLimiters gives back the tokens of p's gives in one transaction,
// which inTx runs, with give, in the name order TakeLimiters locks rows
// in.
func GiveLimiters[Tx any](p *LimiterGiveParams, inTx func(fn func(tx Tx) error) error, give func(tx Tx, g LimiterGive) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	gives := slices.Clone(p.Gives)
	slices.SortStableFunc(gives, func(a, b LimiterGive) int { return strings.Compare(a.Name, b.Name) })
	err := inTx(func(tx Tx) error {
		for _, g := range gives {
			if err := give(tx, g); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("give limiter tokens: %w", err)
	}
	return nil
}
