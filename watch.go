package errand

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// watches wake this process's waits (Result, GetEvent, a stream's readers)
// as soon as this process's own attempts finish a job, publish an event or
// append to a stream, so a wait on local work takes no poll's pause. Waits
// on other processes' work find it by polling.
type watches struct {
	n  atomic.Int64 // watches open; none spares every outcome the lock
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

// watch returns a channel that receives when key is woken, and a func to
// stop watching. A wake while nobody reads is kept, one deep.
func (w *watches) watch(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[key] == nil {
		w.m[key] = map[chan struct{}]struct{}{}
	}
	w.m[key][ch] = struct{}{}
	w.n.Add(1)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		if _, ok := w.m[key][ch]; ok {
			delete(w.m[key], ch)
			if len(w.m[key]) == 0 {
				delete(w.m, key)
			}
			w.n.Add(-1)
		}
		w.mu.Unlock()
	}
}

// wake wakes every watch of key.
func (w *watches) wake(key string) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for ch := range w.m[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

// finished wakes the waits on job id's end and on its stream. The keys are
// built only when something is watched: every outcome passes here.
func (w *watches) finished(id string) {
	if w.n.Load() == 0 {
		return
	}
	w.wake(finishKey(id))
	w.wake(streamKey(id))
}

// The keys of what can be watched: a job's end, one of its events, its
// stream.
func finishKey(id string) string     { return "finish\x00" + id }
func eventKey(id, key string) string { return "event\x00" + id + "\x00" + key }
func streamKey(id string) string     { return "stream\x00" + id }

// pollPause is a poll's first pause, which doubles up to its most. A test
// lengthens it to tell a wake from a poll.
var pollPause = 10 * time.Millisecond

// poll calls done until it reports true or fails, or wait has passed. It
// calls done again as soon as key is woken in this process, and otherwise
// at growing intervals up to most. It returns nil when wait passed. wait
// bounds a caller's blocking call, so it runs on the system clock, not the
// client's (Config.Clock), which schedules jobs.
func (c *engine) poll(ctx context.Context, wait, most time.Duration, key string, done func() (bool, error)) error {
	woken, stop := c.watches.watch(key) // before the first look, so no wake falls between
	defer stop()
	deadline := time.Now().Add(wait)
	pause, most := pollPause, max(most, pollPause)
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-woken:
		case <-t.C:
		}
		t.Stop()
		pause = min(2*pause, most)
	}
}
