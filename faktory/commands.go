package faktory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// commandTimeout bounds the store calls of one command.
const commandTimeout = 30 * time.Second

// maxFetchQueues bounds the queues of one FETCH: each is a claim at
// every look.
const maxFetchQueues = 100

// commands are the Faktory commands errand answers, after HELLO.
var commands = map[string]func(c *conn, arg string){
	"PUSH":  (*conn).push,
	"PUSHB": (*conn).pushBulk,
	"FETCH": (*conn).fetch,
	"ACK":   (*conn).ack,
	"FAIL":  (*conn).fail,
	"BEAT":  (*conn).beat,
	"INFO":  (*conn).info,
}

// unsupported are Faktory's commands that errand refuses, and why; the
// connection stays usable.
var unsupported = map[string]string{
	"FLUSH":  "it would delete every job; errand prune deletes finished jobs by age",
	"MUTATE": "edit the retry, scheduled and dead sets with errand's API, CLI or dashboard (errand replay, errand cancel)",
	"QUEUE":  "errand has no queue pause or removal; stop the workers of the queue instead",
	"BATCH":  "Faktory batches are an Enterprise feature; use errand's batches (POST /api/v1/batches)",
	"TRACK":  "job tracking is an Enterprise feature; read the job with GET /api/v1/jobs/{jid}",
	"PUSHU":  "unique jobs are an Enterprise feature; errand's unique keys are set through its API",
}

// ctx is the context of one command: it ends with the server's Close.
func (c *conn) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.s.base, commandTimeout)
}

// push enqueues one job: PUSH {job}.
func (c *conn) push(arg string) {
	var j pushJob
	if err := decodeJob([]byte(arg), &j); err != nil {
		c.writeErr("PUSH: " + err.Error())
		return
	}
	p, err := j.params()
	if err != nil {
		c.writeErr("PUSH: " + err.Error())
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.s.jobs.EnqueueMany(ctx, []errand.EnqueueParams{p}); err != nil {
		c.writeErr("PUSH: " + enqueueError(j.Jid, err))
		return
	}
	c.s.pushed.fire()
	c.writeOK()
}

// pushBulk enqueues many jobs: PUSHB [jobs]. It answers a JSON object of
// jid to the reason of each job refused; {} when none was.
func (c *conn) pushBulk(arg string) {
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(arg), &raws); err != nil {
		c.writeErr("PUSHB: " + jsonProblem(err) + "; send a JSON array of jobs")
		return
	}
	refused := map[string]string{}
	var ps []errand.EnqueueParams
	var jids []string
	seen := map[string]bool{}
	for i, raw := range raws {
		var j pushJob
		err := decodeJob(raw, &j)
		var p errand.EnqueueParams
		if err == nil {
			p, err = j.params()
		}
		if err == nil {
			err = errand.CheckEnqueue(p.Args, p.Opts) // refused here, it refuses this job alone
		}
		if err == nil && seen[j.Jid] {
			// Keyed by its place: under its jid it would read as the
			// refusal of the job that was pushed.
			refused[bulkKey("", i)] = fmt.Sprintf("jid %q is pushed twice in this PUSHB; give each job its own jid", j.Jid)
			continue
		}
		if err != nil {
			refused[bulkKey(j.Jid, i)] = err.Error()
			continue
		}
		seen[j.Jid] = true
		ps, jids = append(ps, p), append(jids, j.Jid)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if len(ps) > 0 {
		c.pushMany(ctx, ps, jids, refused)
		c.s.pushed.fire()
	}
	c.writeJSON(refused)
}

// pushMany enqueues ps, whose jids are jids, in one transaction, and notes
// in refused the jobs errand refuses. A jid taken by a different job
// refuses the whole transaction: the jobs are then pushed in halves, so
// that k such jobs among n cost about 2k·log2(n) transactions, not n.
func (c *conn) pushMany(ctx context.Context, ps []errand.EnqueueParams, jids []string, refused map[string]string) {
	_, err := c.s.jobs.EnqueueMany(ctx, ps)
	switch {
	case err == nil:
		return
	case len(ps) == 1:
		refused[jids[0]] = enqueueError(jids[0], err)
		return
	case !errors.Is(err, errand.ErrIDConflict):
		for _, jid := range jids { // the store failed: nothing was written
			refused[jid] = err.Error()
		}
		return
	}
	half := len(ps) / 2
	c.pushMany(ctx, ps[:half], jids[:half], refused)
	c.pushMany(ctx, ps[half:], jids[half:], refused)
}

// bulkKey names a refused job of a PUSHB: its jid, or, when it has none,
// its place: "[3]".
func bulkKey(jid string, i int) string {
	if jid == "" {
		return fmt.Sprintf("[%d]", i)
	}
	return jid
}

// enqueueError says why errand refused to enqueue job jid.
func enqueueError(jid string, err error) string {
	var ce *errand.IDConflictError
	if errors.As(err, &ce) {
		return fmt.Sprintf("jid %q is taken by a different job (%s differ); push a new jid for a new job", jid, strings.Join(ce.Fields, ", "))
	}
	return err.Error()
}

// fetch claims one job from the first of the queues named that has one
// ready, in order: FETCH q1 q2 ... (default: "default"). It waits up to
// FetchWait, then answers null.
func (c *conn) fetch(arg string) {
	if c.wid == "" {
		c.writeErr(`FETCH needs a worker id: send "wid" in HELLO (a producer's connection cannot hold jobs)`)
		return
	}
	queues := strings.Fields(arg)
	if len(queues) == 0 {
		queues = []string{errand.DefaultQueue}
	}
	if len(queues) > maxFetchQueues {
		c.writeErr(fmt.Sprintf("FETCH names %d queues; name at most %d", len(queues), maxFetchQueues))
		return
	}
	for _, q := range queues {
		if err := errandstore.CheckName("queue", q); err != nil {
			c.writeErr("FETCH: " + err.Error())
			return
		}
	}
	deadline := time.NewTimer(c.s.opts.FetchWait)
	defer deadline.Stop()
	poll := time.NewTicker(c.s.opts.PollInterval)
	defer poll.Stop()
	for {
		pushed := c.s.pushed.wait() // before the claim: a push during it is not missed
		if !c.s.isDraining() {
			job, err := c.claim(queues)
			if err != nil {
				c.writeErr("FETCH: " + err.Error())
				return
			}
			if job != nil {
				c.deliver(job)
				return
			}
		}
		select {
		case <-deadline.C:
			c.writeBulk(nil)
			return
		case <-c.s.base.Done():
			c.writeBulk(nil)
			return
		case <-pushed:
		case <-poll.C:
		}
	}
}

// claim claims one job of any kind from the first of queues that has one,
// under a lease of its reserve_for.
func (c *conn) claim(queues []string) (*errandtype.Job, error) {
	// A claim runs to its end once sent: cut off half-way it could commit
	// with nobody to hand the job to.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.s.base), commandTimeout)
	defer cancel()
	for _, q := range queues {
		js, err := c.s.jobs.Claim(ctx, &errand.ClaimOpts{Queue: q, AnyKind: true, Limit: 1, Lease: DefaultReserveFor, Owner: c.owner})
		if err != nil {
			return nil, err
		}
		if len(js) == 0 {
			continue
		}
		j := js[0]
		m := readMeta(j)
		if rf := reserveFor(&m); rf != DefaultReserveFor {
			until, err := c.s.jobs.Heartbeat(ctx, j.ID, *j.LeaseToken, rf)
			if err != nil {
				c.giveBack(j)
				return nil, fmt.Errorf("set the lease of job %s to its reserve_for: %w", j.ID, err)
			}
			j.LeaseUntil = &until
		}
		return j, nil
	}
	return nil, nil
}

// deliver answers a FETCH with job, which this worker now holds. A job
// that cannot be written to the client is given back at once.
func (c *conn) deliver(j *errandtype.Job) {
	b, err := json.Marshal(fetchedJob(j))
	if err != nil {
		c.giveBack(j)
		c.writeErr("FETCH: " + err.Error())
		return
	}
	c.s.res.hold(c.wid, j.ID, *j.LeaseToken, *j.LeaseUntil, time.Now())
	c.writeBulk(b)
	if err := c.flush(); err != nil {
		c.s.res.release(c.wid, j.ID, *j.LeaseToken)
		c.giveBack(j)
	}
}

// giveBack puts a job this connection claimed but could not hand over back
// in its queue, its attempt not counted. Should that fail, the job comes
// back when its lease ends.
func (c *conn) giveBack(j *errandtype.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.s.base), commandTimeout)
	defer cancel()
	if _, err := c.s.jobs.Snooze(ctx, j.ID, *j.LeaseToken, 0); err != nil {
		c.s.log.Warn("faktory: a fetched job could not be delivered nor given back; it runs again when its lease ends", "job_id", j.ID, "err", err)
	}
}

// jidMsg is the argument of ACK.
type jidMsg struct {
	Jid string `json:"jid"`
}

// ack records that the worker finished a job it holds: ACK {"jid"}.
func (c *conn) ack(arg string) {
	var m jidMsg
	if err := json.Unmarshal([]byte(arg), &m); err != nil {
		c.writeErr("ACK: " + jsonProblem(err) + `; send ACK {"jid":"..."}`)
		return
	}
	token, ok := c.reserved("ACK", m.Jid)
	if !ok {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.s.jobs.Ack(ctx, m.Jid, token)
	c.outcome("ACK", m.Jid, token, err)
}

// failMsg is the argument of FAIL.
type failMsg struct {
	Jid       string   `json:"jid"`
	ErrType   string   `json:"errtype"`
	Message   string   `json:"message"`
	Backtrace []string `json:"backtrace"`
}

// fail records a failed attempt of a job the worker holds: FAIL {"jid",
// "errtype", "message", "backtrace"}. errand's retry policy decides what
// follows, with the job's attempts.
func (c *conn) fail(arg string) {
	var m failMsg
	if err := json.Unmarshal([]byte(arg), &m); err != nil {
		c.writeErr("FAIL: " + jsonProblem(err) + `; send FAIL {"jid":"...","errtype":"...","message":"...","backtrace":[...]}`)
		return
	}
	token, ok := c.reserved("FAIL", m.Jid)
	if !ok {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.s.jobs.Fail(ctx, m.Jid, token, &errand.FailOpts{
		Class:   errorClass(m.ErrType),
		Message: m.Message,
		Stack:   strings.Join(m.Backtrace, "\n"),
	})
	c.outcome("FAIL", m.Jid, token, err)
}

// reserved returns the lease token under which this connection's worker
// holds jid, or answers why there is none.
func (c *conn) reserved(verb, jid string) (string, bool) {
	switch {
	case jid == "":
		c.writeErr(verb + `: jid is missing; send {"jid":"..."}`)
		return "", false
	case c.wid == "":
		c.writeErr(verb + `: this connection has no worker id, so it holds no job; send "wid" in HELLO, the wid that fetched the job`)
		return "", false
	}
	token, ok := c.s.res.token(c.wid, jid)
	if !ok {
		c.writeErr(fmt.Sprintf("%s: job %s is not reserved by worker %s: it did not fetch it, or its reservation ended long ago and errand may have given it to another worker", verb, oneWord(jid), oneWord(c.wid)))
		return "", false
	}
	return token, true
}

// outcome answers an ACK or FAIL whose outcome was written (err nil) or
// refused.
func (c *conn) outcome(verb, jid, token string, err error) {
	switch {
	case err == nil:
		c.s.res.release(c.wid, jid, token)
		c.writeOK()
	case errors.Is(err, errandtype.ErrLeaseLost):
		c.s.res.release(c.wid, jid, token)
		c.writeErr(fmt.Sprintf("%s: lease lost: job %s is no longer reserved by this worker (its reserve_for ran out, and errand may have given it to another worker); nothing was recorded", verb, oneWord(jid)))
	default:
		var ie *errandtype.InputError
		if errors.As(err, &ie) {
			c.writeErr(verb + ": " + err.Error())
			return
		}
		// The store failed: the reservation stays, so that the worker's
		// retry can still present its token.
		c.s.log.Warn("faktory: record outcome", "command", verb, "job_id", jid, "err", err)
		c.writeErr(fmt.Sprintf("%s: %v; nothing was recorded, send it again", verb, err))
	}
}

// beatMsg is the argument of BEAT.
type beatMsg struct {
	WID          string `json:"wid"`
	CurrentState string `json:"current_state"`
	RSSKB        int64  `json:"rss_kb"`
}

// beat answers a worker's heartbeat: +OK, or {"state":"terminate"} once
// the server is shutting down, so that the worker stops fetching, finishes
// its jobs and disconnects.
func (c *conn) beat(arg string) {
	var m beatMsg
	if err := json.Unmarshal([]byte(arg), &m); err != nil {
		c.writeErr("BEAT: " + jsonProblem(err) + `; send BEAT {"wid":"..."}`)
		return
	}
	if m.WID == "" || m.WID != c.wid {
		c.writeErr(fmt.Sprintf("BEAT: wid %s is not this connection's worker; send the wid given in HELLO", oneWord(m.WID)))
		return
	}
	if c.s.isDraining() {
		c.writeJSON(map[string]string{"state": "terminate"})
		return
	}
	c.writeOK()
}

// info answers INFO with the server and its queues: each queue's size is
// its queued jobs, scheduled ones included.
func (c *conn) info(string) {
	ctx, cancel := c.ctx()
	defer cancel()
	stats, err := c.s.jobs.Stats(ctx)
	if err != nil {
		c.writeErr("INFO: " + err.Error())
		return
	}
	queues := map[string]int{}
	var enqueued, succeeded, dead int
	for _, q := range stats {
		queues[q.Queue] = q.Counts[errandtype.StateQueued]
		enqueued += q.Counts[errandtype.StateQueued]
		succeeded += q.Counts[errandtype.StateSucceeded]
		dead += q.Counts[errandtype.StateDead]
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	now := time.Now().UTC()
	c.s.mu.Lock()
	conns := len(c.s.conns)
	c.s.mu.Unlock()
	c.writeJSON(map[string]any{
		"now":             now.Format(time.RFC3339Nano),
		"server_utc_time": now.Format("15:04:05 UTC"),
		"faktory": map[string]any{
			"total_enqueued":  enqueued,
			"total_queues":    len(queues),
			"queues":          queues,
			"total_processed": succeeded + dead, // finished jobs still kept, not a counter
			"total_failures":  dead,
			"reserved":        c.s.res.held(),
			"tasks":           map[string]any{},
		},
		"server": map[string]any{
			"description":     "errand",
			"faktory_version": "errand",
			"uptime":          int(time.Since(c.s.started).Seconds()),
			"connections":     conns,
			"command_count":   c.s.commands.Load(),
			"used_memory_mb":  mem.Sys >> 20,
		},
		"errand": map[string]any{"queues": stats},
	})
}
