// Package provider simulates a rate-limited service for errand's adaptive
// rate limits: an HTTP handler with a hidden capacity, which may change
// over time, that answers 429 with a Retry-After past it, as a real
// provider does. The tests and bench/cmd/adaptive run against it.
package provider

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Provider serves up to Capacity(now) requests a second: a token bucket of
// that rate holding a quarter of a second's worth (at least 1), so that
// requests sent evenly at the capacity pass though they arrive unevenly. A request
// past it is answered 429 with Retry-After: RetryAfter seconds (0: no
// header).
type Provider struct {
	Capacity   func(now time.Time) float64
	Now        func() time.Time
	RetryAfter int

	mu       sync.Mutex
	tokens   float64
	at       time.Time
	ok, shed int
}

// Call answers one request at now: true when served.
func (p *Provider) Call() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Now()
	c := p.Capacity(now)
	burst := math.Max(1, math.Floor(c/4))
	if p.at.IsZero() {
		p.tokens = burst
	} else if d := now.Sub(p.at); d > 0 {
		p.tokens = math.Min(burst, p.tokens+c*d.Seconds())
	}
	p.at = now
	if p.tokens >= 1 {
		p.tokens--
		p.ok++
		return true
	}
	p.shed++
	return false
}

// ServeHTTP answers 200 within the capacity and 429 past it.
func (p *Provider) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if p.Call() {
		w.WriteHeader(http.StatusOK)
		return
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(http.StatusTooManyRequests)
}

// Counts returns the requests served and turned away so far.
func (p *Provider) Counts() (ok, shed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.shed
}

// Steps is a capacity that changes every interval: caps[i] from start +
// i×every, the last one after.
func Steps(start time.Time, every time.Duration, caps ...float64) func(time.Time) float64 {
	return func(now time.Time) float64 {
		i := int(now.Sub(start) / every)
		return caps[min(max(i, 0), len(caps)-1)]
	}
}
