package errandtype

import (
	"fmt"
	"time"
)

// Defaults of a [BreakerPolicy].
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerWindow    = time.Minute
	DefaultBreakerCooldown  = 30 * time.Second
	DefaultBreakerProbes    = 1
)

// BreakerPolicy is when a dependency's circuit breaker opens and how it
// recovers. Zero fields take the defaults. Give a dependency its own in
// [github.com/errandhq/errand.Config].Breakers.
type BreakerPolicy struct {
	// Threshold is how many failures in a row, with no success between
	// them, open the breaker. Default: DefaultBreakerThreshold.
	Threshold int
	// Window bounds a run of failures: a failure more than Window after
	// the run's first starts a new run. Default: DefaultBreakerWindow.
	Window time.Duration
	// Cooldown is how long the breaker stays open before it lets probes
	// through; it is also how long a probe may take to report before its
	// slot is presumed lost and given to another. Default:
	// DefaultBreakerCooldown.
	Cooldown time.Duration
	// Probes is how many jobs may run at once, cluster-wide, while the
	// breaker is half-open. Default: DefaultBreakerProbes.
	Probes int
}

func (p BreakerPolicy) WithDefaults() BreakerPolicy {
	if p.Threshold == 0 {
		p.Threshold = DefaultBreakerThreshold
	}
	if p.Window == 0 {
		p.Window = DefaultBreakerWindow
	}
	if p.Cooldown == 0 {
		p.Cooldown = DefaultBreakerCooldown
	}
	if p.Probes == 0 {
		p.Probes = DefaultBreakerProbes
	}
	return p
}

// Validate checks a policy; field names it in the error.
func (p BreakerPolicy) Validate(field string) error {
	switch {
	case p.Threshold < 0 || p.Threshold > MaxAttemptsLimit:
		return &InputError{Field: field + ".Threshold", Message: fmt.Sprintf("must be 1 to %d (or 0 for %d)", MaxAttemptsLimit, DefaultBreakerThreshold)}
	case p.Probes < 0 || p.Probes > MaxAttemptsLimit:
		return &InputError{Field: field + ".Probes", Message: fmt.Sprintf("must be 1 to %d (or 0 for %d)", MaxAttemptsLimit, DefaultBreakerProbes)}
	case p.Window != 0 && p.Window < time.Millisecond:
		return &InputError{Field: field + ".Window", Message: "must be at least 1ms (or 0 for 1m)"}
	case p.Cooldown != 0 && p.Cooldown < time.Millisecond:
		return &InputError{Field: field + ".Cooldown", Message: "must be at least 1ms (or 0 for 30s)"}
	case p.Window > maxScheduleDelay || p.Cooldown > maxScheduleDelay:
		return &InputError{Field: field, Message: "Window and Cooldown must be under 100 years"}
	}
	return nil
}

// maxScheduleDelay keeps a breaker's times inside the years every store
// represents.
const maxScheduleDelay = 100 * 365 * 24 * time.Hour
