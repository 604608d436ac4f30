package errand_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// flakyClaimStore fails claims while failing is set, as a store does whose
// connection was just terminated or whose server is down.
type flakyClaimStore struct {
	*sqlite.Store
	failing atomic.Bool
	failed  chan struct{} // receives a token for each failed claim
}

func (s *flakyClaimStore) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if s.failing.Load() {
		s.failed <- struct{}{}
		return nil, errors.New("conn closed")
	}
	return s.Store.JobClaimMany(ctx, p)
}

// lockedBuffer is a bytes.Buffer a logger and a test can share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFailedClaimRetriedBeforePoll: a queue whose claim fails (a dropped
// connection, a server down) claims again 100ms later, the wait doubling
// while claims keep failing, rather than after its poll interval: the job
// whose wake-up led to the failed claim does not wait an hour's poll. Of the
// failures in a row the 1st, 2nd, 4th and 8th are logged as errors, and the
// success that ends them once.
func TestFailedClaimRetriedBeforePoll(t *testing.T) {
	clock := newTestClock()
	st := &flakyClaimStore{Store: openStore(t, clock), failed: make(chan struct{})}
	var logs lockedBuffer
	ran := make(chan string, 1)
	c := newClient(t, st, &errand.Config{Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Kinds: kindsOf([]testKind{{Name: "ping",
			Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error { ran <- j.ID; return nil })}})})
	idleWorker(t, c, clock, errand.WorkerConfig{})

	st.failing.Store(true)
	job := enqueue(t, c, "ping", nil) // wakes the idle queue, whose claim fails
	const failures = 9
	for i := range failures {
		if i > 0 {
			wait := 100 * time.Millisecond << (i - 1)
			blockUntilAt(t, clock, clock.Now().Add(wait), 1)
			clock.Advance(wait)
		}
		select {
		case <-st.failed:
		case <-time.After(clockWait):
			t.Fatalf("claim %d not made", i+1)
		}
	}
	st.failing.Store(false)
	wait := 100 * time.Millisecond << (failures - 1)
	blockUntilAt(t, clock, clock.Now().Add(wait), 1)
	clock.Advance(wait)
	waitRan(t, ran, job.ID, clockWait)

	if n := strings.Count(logs.String(), `level=ERROR msg="claim failed`); n != 4 {
		t.Errorf("%d failed claims in a row logged %d errors, want 4 (the 1st, 2nd, 4th and 8th):\n%s", failures, n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg="claims succeed again" queue=default failed_in_a_row=9`); n != 1 {
		t.Errorf("the claim that ended the failures logged %d times, want once:\n%s", n, logs.String())
	}
}
