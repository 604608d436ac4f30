package errandtype

import (
	"time"
)

// BreakerState is where a circuit breaker is.
type BreakerState string

const (
	// BreakerOpen: jobs of the dependency are not claimed until OpenUntil;
	// they wait, queued or retrying, with their attempts intact.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: the cool-down passed and up to the policy's Probes
	// jobs run to test the dependency. A success closes the breaker, a
	// counted failure opens it again.
	BreakerHalfOpen BreakerState = "half_open"
)

// Gauge is the state as a number, for metrics: 0 closed, 1 half-open, 2
// open.
func (s BreakerState) Gauge() int {
	switch s {
	case BreakerOpen:
		return 2
	case BreakerHalfOpen:
		return 1
	}
	return 0
}

// BreakerRecord is the stored state of one dependency's circuit breaker.
type BreakerRecord struct {
	// Dependency names what the breaker protects, e.g. "smtp".
	Dependency string       `json:"dependency"`
	State      BreakerState `json:"state"`
	// Failures counts the failures of the current run: failures with no
	// success between them, the first at FailingSince.
	Failures     int        `json:"failures"`
	FailingSince *time.Time `json:"failing_since"`
	// OpenedAt is when the breaker last opened; nil if it never did.
	OpenedAt *time.Time `json:"opened_at"`
	// OpenUntil, while open, is when the cool-down ends and the breaker lets
	// a probe through; nil otherwise.
	OpenUntil *time.Time `json:"open_until"`
	// Probes counts the probes running while half-open; ProbeUntil is when
	// probes that have not reported are presumed lost and their slots free.
	Probes     int        `json:"probes"`
	ProbeUntil *time.Time `json:"probe_until"`
	// Trips counts every time the breaker opened, since it was created.
	Trips int `json:"trips"`
	// LastError is the message of the last counted failure.
	LastError string    `json:"last_error"`
	UpdatedAt time.Time `json:"updated_at"`
}
