package errandstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// ConcurrencyClaimer is the optional capability of cluster-wide
// concurrency limits (see [errandtype.ConcurrencyLimit]): a claim made in
// the transaction that locks the limit's row and counts the jobs it
// limits that run now, so that concurrent claimers, in one process or
// many, never start more than the limit between them. The limit's row
// lives with the rate limits' buckets, so [LimiterStore.LimiterList] and
// [LimiterStore.LimiterAdjust] show and move it. errand/sqlite and
// errand/postgres implement it.
type ConcurrencyClaimer interface {
	// JobClaimLimited upserts and locks the row p.Name (p.Spec and
	// p.Counts replace its stored rule and kinds; an adaptive limit keeps
	// its stored limit within the spec's bounds), counts the jobs of
	// p.Counted() in state running whose lease_until is after now, and
	// claims, as JobClaimMany
	// does but without its sweep, at most the room [errandtype.LimiterSpec.Admit]
	// leaves, all in one transaction (see [ClaimLimited]).
	JobClaimLimited(ctx context.Context, p *JobClaimLimitedParams) (*JobClaimLimitedResult, error)
}

// JobClaimLimitedParams is a claim under a concurrency limit.
type JobClaimLimitedParams struct {
	// Name is the limit's row, "concurrency:KIND" or
	// "concurrency:dependency:NAME".
	Name string
	// Spec is the limit's rule, of mode concurrency.
	Spec errandtype.LimiterSpec
	// Counts are the kinds whose running jobs the limit counts, the
	// claim's among them: a dependency's limit counts every kind that
	// declares it. Empty: the claim's kinds.
	Counts []string
	// Claim is the claim: its Kinds are the kinds claimed under the limit,
	// its Limit the most jobs wanted.
	Claim JobClaimParams
}

// Counted returns the kinds whose running jobs the limit counts.
func (p *JobClaimLimitedParams) Counted() []string {
	if len(p.Counts) == 0 {
		return p.Claim.Kinds
	}
	return p.Counts
}

// Validate checks the params.
func (p *JobClaimLimitedParams) Validate() error {
	if err := checkLimiterName(p.Name); err != nil {
		return err
	}
	if p.Spec.Mode != errandtype.LimiterModeConcurrency {
		return &errandtype.InputError{Field: "limiter", Message: fmt.Sprintf("limiter %s: a limited claim takes a concurrency limit, not mode %q", p.Name, p.Spec.Mode)}
	}
	if err := p.Spec.Validate(); err != nil {
		return fmt.Errorf("limiter %s: %w", p.Name, err)
	}
	if len(p.Claim.Kinds) == 0 {
		return &errandtype.InputError{Field: "kinds", Message: fmt.Sprintf("limiter %s: name the kinds the limit counts", p.Name)}
	}
	if len(p.Counts) > MaxClaimNames {
		return &errandtype.InputError{Field: "counts", Message: fmt.Sprintf("limiter %s counts %d kinds; at most %d", p.Name, len(p.Counts), MaxClaimNames)}
	}
	if err := checkTexts("counts", p.Counts); err != nil {
		return err
	}
	for _, k := range p.Claim.Kinds {
		if len(p.Counts) > 0 && !slices.Contains(p.Counts, k) {
			return &errandtype.InputError{Field: "counts", Message: fmt.Sprintf("limiter %s: claims kind %q that it does not count; add it to Counts", p.Name, k)}
		}
	}
	return p.Claim.Validate()
}

// JobClaimLimitedResult is what a limited claim got.
type JobClaimLimitedResult struct {
	// Jobs are the jobs claimed, in claim order.
	Jobs []*errandtype.Job
	// Running is how many jobs of the kinds ran before the claim, Slots
	// the limit (0 while a provider's reset time holds it), Room what the
	// claim was allowed: min(Slots-Running, Limit), at least 0.
	Running, Slots, Room int
	// Rate is the limit's number now (an adaptive one's, unrounded).
	Rate float64
	// HeldUntil is the end of a provider's hold of an adaptive limit.
	HeldUntil time.Time
}

// ClaimLimited is JobClaimLimited, the same for every store: in one
// transaction, which inTx runs, lock upserts and locks the row with p's
// rule and returns its state and the store's now; count counts the jobs
// of kinds running under a live lease at now; claim claims c (with its
// Limit lowered to the room) as JobClaimMany does; write stores the
// bucket's new state, its rule now and whether the claim was denied
// (wanted jobs, got no room).
func ClaimLimited[Tx any](p *JobClaimLimitedParams, inTx func(fn func(tx Tx) error) error,
	lock func(tx Tx) (errandtype.LimiterState, time.Time, error),
	count func(tx Tx, kinds []string, now time.Time) (int, error),
	claim func(tx Tx, c *JobClaimParams, now time.Time) ([]*errandtype.Job, error),
	write func(tx Tx, st errandtype.LimiterState, cur errandtype.LimiterSpec, denied int) error) (*JobClaimLimitedResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *JobClaimLimitedResult
	err := inTx(func(tx Tx) error {
		st, now, err := lock(tx)
		if err != nil {
			return err
		}
		running, err := count(tx, p.Counted(), now)
		if err != nil {
			return err
		}
		room, cur := p.Spec.Admit(st, now, running, p.Claim.Limit)
		r := &JobClaimLimitedResult{Running: running, Slots: cur.Slots(st, now), Room: room, Rate: cur.Rate}
		if cur.Adaptive() {
			r.HeldUntil = st.HeldUntil
		}
		if room > 0 {
			c := p.Claim
			c.Limit = room
			if r.Jobs, err = claim(tx, &c, now); err != nil {
				return err
			}
		}
		denied := 0
		if room == 0 {
			denied = 1
		}
		next := errandtype.LimiterState{Tokens: float64(running + len(r.Jobs)), At: now, Rate: cur.Rate, HeldUntil: r.HeldUntil}
		if now.Before(st.At) {
			next.At = st.At // a clock that went back does not move it back
		}
		out = r
		return write(tx, next, cur, denied)
	})
	if err != nil {
		return nil, fmt.Errorf("claim under %s: %w", p.Name, err)
	}
	SortClaimOrder(out.Jobs)
	return out, nil
}

// CountsColumn is kinds as a limiter row keeps them: separated by spaces,
// which no name holds.
func CountsColumn(kinds []string) string { return strings.Join(kinds, " ") }

// ReadLimiterRule completes r from a limiter row's counts and target_us
// columns: r.Counts (a concurrency limit's row without counts counts the
// kind it is named for) and r.Spec.Target.
func ReadLimiterRule(r *errandtype.LimiterRecord, column string, targetUS int64) {
	r.Spec.Target = time.Duration(targetUS) * time.Microsecond
	if column != "" {
		r.Counts = strings.Fields(column)
	}
	if len(r.Counts) == 0 && r.Spec.Mode == errandtype.LimiterModeConcurrency {
		if k, ok := strings.CutPrefix(r.Name, errandtype.ConcurrencyLimitPrefix); ok && !strings.HasPrefix(k, errandtype.DependencyLimitPrefix) {
			r.Counts = []string{k}
		}
	}
}

// FillRunning completes a concurrency limit's record r, stored as st,
// with the running jobs of its kind counted at now: its free slots in
// Tokens and the count in Running. Other records are left alone.
func FillRunning(r *errandtype.LimiterRecord, st errandtype.LimiterState, now time.Time, running int) {
	if r.Spec.Mode != errandtype.LimiterModeConcurrency {
		return
	}
	r.Running = &running
	r.Tokens = float64(max(r.Spec.Slots(st, now)-running, 0))
}

// FillAllRunning completes each concurrency limit of rs, stored as
// states, with the running jobs of the kinds it counts at now, which count
// counts (see [FillRunning]); other records are left alone.
func FillAllRunning(rs []*errandtype.LimiterRecord, states []errandtype.LimiterState, now time.Time, count func(kinds []string) (int, error)) error {
	for i, r := range rs {
		if r.Spec.Mode != errandtype.LimiterModeConcurrency || len(r.Counts) == 0 {
			continue
		}
		n, err := count(r.Counts)
		if err != nil {
			return err
		}
		FillRunning(r, states[i], now, n)
	}
	return nil
}
