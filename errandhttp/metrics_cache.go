package errandhttp

import (
	"context"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// readCache reads a value from the database at most once per maxAge:
// however often /metrics is scraped or /readyz probed, the database sees
// one query per maxAge. Callers that arrive while a read is in flight wait
// for it rather than starting their own.
type readCache[T any] struct {
	read    func(ctx context.Context) (T, error)
	clock   errandstore.Clock
	maxAge  time.Duration
	timeout time.Duration

	mu    sync.Mutex
	at    time.Time // when stats (or err) were read; zero: never
	stats T
	err   error
}

// statsCache caches queue statistics.
type statsCache = readCache[[]errandtype.QueueStats]

// get returns the cached value, reading it again when it is older than
// maxAge. A failed read is cached too, so that a database that is down is
// not asked again by every scrape.
func (s *readCache[T]) get(ctx context.Context) (T, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if !s.at.IsZero() && now.Sub(s.at) < s.maxAge {
		return s.stats, s.at, s.err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.stats, s.err = s.read(ctx)
	s.at = now
	return s.stats, s.at, s.err
}

// systemClock is the process clock, for options that name none.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
