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
// on other processes' work find it by polling. A wake may hand the waits
// what they would read (see finished).
type watches struct {
	n  atomic.Int64 // watches open; none spares every outcome the lock
	mu sync.Mutex
	m  map[string]map[chan any]struct{}
}

// watch returns a channel that receives when key is woken, and a func to
// stop watching: nil, or what the wake hands over. A wake while nobody
// reads is kept, one deep.
func (w *watches) watch(key string) (<-chan any, func()) {
	ch := make(chan any, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]map[chan any]struct{}{}
	}
	if w.m[key] == nil {
		w.m[key] = map[chan any]struct{}{}
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
func (w *watches) wake(key string) { w.wakeWith(key, nil) }

// wakeWith wakes every watch of key, handing each v. A watch already woken
// keeps its first wake: what v would have spared, it reads.
func (w *watches) wakeWith(key string, v any) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for ch := range w.m[key] {
		select {
		case ch <- v:
		default:
		}
	}
	w.mu.Unlock()
}

// watching reports whether any wait is open: an outcome's write then
// reports what the waits on its job would read (see finished).
func (w *watches) watching() bool { return w.n.Load() > 0 }

// finished wakes the waits on job id's end and on its stream, handing the
// waits on its end res, when not nil: the job as its outcome's write,
// committed, left it. The keys are built only when something is watched:
// every outcome passes here.
func (w *watches) finished(id string, res *JobResult) {
	if w.n.Load() == 0 {
		return
	}
	var v any
	if res != nil {
		v = res
	}
	w.wakeWith(finishKey(id), v)
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
// calls done again as soon as key is woken in this process, with what the
// wake handed over, and otherwise at growing intervals up to most, with
// nil. It returns nil when wait passed. wait bounds a caller's blocking
// call, so it runs on the system clock, not the client's (Config.Clock),
// which schedules jobs.
func (c *engine) poll(ctx context.Context, wait, most time.Duration, key string, done func(handed any) (bool, error)) error {
	woken, stop := c.watches.watch(key) // before the first look, so no wake falls between
	defer stop()
	deadline := time.Now().Add(wait)
	pause, most := pollPause, max(most, pollPause)
	var handed any
	for {
		if ok, err := done(handed); ok || err != nil {
			return err
		}
		handed = nil
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case handed = <-woken:
		case <-t.C:
		}
		t.Stop()
		pause = min(2*pause, most)
	}
}
