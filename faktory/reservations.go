package faktory

import (
	"sync"
	"time"
)

// forgetAfter is how long past its lease a reservation is remembered: an
// ACK that late is still answered "lease lost" (errand's answer for the
// token), not "not reserved by this worker".
const forgetAfter = time.Hour

// sweepEvery is how often hold sweeps forgotten reservations.
const sweepEvery = time.Minute

// reservations holds, per worker id, the lease token of each job the
// worker fetched and has not yet acknowledged or failed. The connections
// of one wid share it: Faktory clients pool connections, and the one that
// ACKs is often not the one that fetched.
type reservations struct {
	mu      sync.Mutex
	workers map[string]*workerJobs
	swept   time.Time
}

type workerJobs struct {
	conns int                    // connections open under this wid
	jobs  map[string]reservation // by jid
}

type reservation struct {
	token string
	until time.Time // lease_until, on the store's clock
}

// attach notes a connection of wid.
func (r *reservations) attach(wid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.worker(wid).conns++
}

// detach notes that a connection of wid closed. The worker's
// reservations stay: its other connections, or a new one, ACK them.
func (r *reservations) detach(wid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[wid]
	if w == nil {
		return
	}
	w.conns--
	if w.conns <= 0 && len(w.jobs) == 0 {
		delete(r.workers, wid)
	}
}

func (r *reservations) worker(wid string) *workerJobs {
	if r.workers == nil {
		r.workers = map[string]*workerJobs{}
	}
	w := r.workers[wid]
	if w == nil {
		w = &workerJobs{jobs: map[string]reservation{}}
		r.workers[wid] = w
	}
	return w
}

// hold records that wid holds jid under token until until, and forgets,
// at most once per sweepEvery, the reservations long past their leases.
func (r *reservations) hold(wid, jid, token string, until, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.worker(wid).jobs[jid] = reservation{token: token, until: until}
	if now.Sub(r.swept) < sweepEvery {
		return
	}
	r.swept = now
	for id, w := range r.workers {
		for j, res := range w.jobs {
			if now.Sub(res.until) > forgetAfter {
				delete(w.jobs, j)
			}
		}
		if w.conns <= 0 && len(w.jobs) == 0 {
			delete(r.workers, id)
		}
	}
}

// token returns the lease token under which wid holds jid.
func (r *reservations) token(wid, jid string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[wid]
	if w == nil {
		return "", false
	}
	res, ok := w.jobs[jid]
	return res.token, ok
}

// release forgets wid's reservation of jid, held under token: the outcome
// was recorded, or refused for good. A reservation since replaced (the
// worker fetched the job again) stays.
func (r *reservations) release(wid, jid, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[wid]
	if w == nil {
		return
	}
	if res, ok := w.jobs[jid]; ok && res.token == token {
		delete(w.jobs, jid)
	}
	if w.conns <= 0 && len(w.jobs) == 0 {
		delete(r.workers, wid)
	}
}

// busy reports whether a connected worker holds a job whose lease has not
// ended at now: what a shutdown waits for.
func (r *reservations) busy(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		if w.conns <= 0 {
			continue
		}
		for _, res := range w.jobs {
			if res.until.After(now) {
				return true
			}
		}
	}
	return false
}

// held counts the reservations remembered, for INFO.
func (r *reservations) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.workers {
		n += len(w.jobs)
	}
	return n
}
