package errand

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Retry defaults. A job that still fails after 20 attempts needs a person,
// and the dead-letter set is where people look; a bounded budget also keeps
// a poison job from occupying workers for days. The 19 delays between the
// attempts have caps of 1s, 2s, ... 2048s, then seven of an hour: 8h08m in
// all, so with the jitter below the retries last 4h04m to 8h08m, 6h06m on
// average.
const (
	DefaultMaxAttempts = 20
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Hour
)

// RetryPolicy computes the delay before the next attempt with equal jitter:
// cap = min(Max, Base * 2^(attempt-1)), delay uniform in [cap/2, cap). Half
// the delay is guaranteed, so a retry never comes back at once, and half is
// random, so a burst of failures does not return as a burst.
type RetryPolicy struct {
	// Base is the first attempt's cap. Zero means DefaultBackoffBase.
	Base time.Duration
	// Max caps every delay. Zero means DefaultBackoffMax, or Base when
	// Base is longer. Both are zero or at least a millisecond, and Max,
	// when set, is at least Base: NewClient refuses other policies.
	Max time.Duration
	// Rand supplies randomness; nil means a process-wide source. Tests pass
	// a seeded source for deterministic delays.
	// It is used under a package-wide lock, so one source may serve many
	// policies.
	Rand *rand.Rand
}

// check refuses a policy whose delays would not be what it says: a negative
// or sub-millisecond Base or Max (as a job's backoff, see [MinMaxAge]), or
// a Max below Base. field names the policy in the error.
func (p *RetryPolicy) check(field string) error {
	if p == nil {
		return nil
	}
	if p.Base < 0 || p.Max < 0 {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("Base %s and Max %s must not be negative; give 0 for the defaults", p.Base, p.Max)}
	}
	if err := errandstore.CheckBackoff(field+".Base", p.Base); err != nil {
		return err
	}
	if err := errandstore.CheckBackoff(field+".Max", p.Max); err != nil {
		return err
	}
	if base, _ := p.withDefaults(); p.Max > 0 && p.Max < base {
		return &errandtype.InputError{Field: field + ".Max", Message: fmt.Sprintf("%s is less than Base %s (the default when Base is 0); raise it or lower Base", p.Max, base)}
	}
	return nil
}

// randMu guards every caller-supplied *rand.Rand, which is not safe for
// concurrent use.
var randMu sync.Mutex

// withDefaults returns the base and max delays with zero fields filled in.
func (p *RetryPolicy) withDefaults() (base, max time.Duration) {
	base, max = DefaultBackoffBase, DefaultBackoffMax
	if p != nil && p.Base > 0 {
		base = p.Base
	}
	if p != nil && p.Max > 0 {
		max = p.Max
	}
	if max < base {
		max = base
	}
	return base, max
}

// Cap returns the upper bound of the delay after the given failed attempt
// (attempt counts from 1).
func (p *RetryPolicy) Cap(attempt int) time.Duration {
	base, max := p.withDefaults()
	return backoffCap(base, max, attempt)
}

// Delay returns the jittered delay after the given failed attempt, in
// [Cap/2, Cap).
func (p *RetryPolicy) Delay(attempt int) time.Duration {
	return p.jitter(p.Cap(attempt))
}

// jitter returns a uniform delay in [c/2, c).
func (p *RetryPolicy) jitter(c time.Duration) time.Duration {
	half := c / 2
	span := c - half
	if span <= 0 {
		return c
	}
	return half + time.Duration(p.int64n(int64(span)))
}

func (p *RetryPolicy) int64n(n int64) int64 {
	if p == nil || p.Rand == nil {
		return rand.Int64N(n)
	}
	randMu.Lock()
	defer randMu.Unlock()
	return p.Rand.Int64N(n)
}

func backoffCap(base, max time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	c := base
	for i := 1; i < attempt; i++ {
		if c >= max/2 {
			return max
		}
		c *= 2
	}
	if c > max {
		return max
	}
	return c
}

// delayFor returns the delay after job j's current attempt failed: the job's
// own base and max where set, the policy's otherwise.
func (p *RetryPolicy) delayFor(j *errandtype.Job) time.Duration {
	base, max := p.withDefaults()
	if j.BackoffBase > 0 {
		base = time.Duration(j.BackoffBase)
	}
	if j.BackoffMax > 0 {
		max = time.Duration(j.BackoffMax)
	}
	if max < base {
		max = base
	}
	return p.jitter(backoffCap(base, max, j.Attempt))
}
