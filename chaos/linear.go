package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/chaos/history"
	"github.com/errandhq/errand/errandtype"
)

// The linear queue: every operation on its jobs (enqueue, claim, ack, fail,
// replay, cancel) is recorded with its invocation and completion, and the
// history is checked for linearizability against errand's state machine
// (package history). Only the harness's own linear workers claim from it,
// through the JSON API, and only its linear load enqueues, replays and
// cancels there, so the history holds every operation but the store's
// sweeps of expired leases, which the model allows for.
const (
	linearQueue = "linear"
	linearKind  = "chaos_linear"
)

// linear is the run's recorder and its client numbers.
type linear struct {
	rec     *history.Recorder
	clients atomic.Int32
}

func (l *linear) client() int { return int(l.clients.Add(1)) - 1 }

// linearLoad enqueues to the linear queue at a sixth of the load's rate (its
// workers, which stall now and then, must keep up with it through the faults),
// and now and then replays a dead job or cancels a waiting one there.
func (r *run) linearLoad(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 3))
	c := r.lin.client()
	t := time.NewTicker(time.Duration(float64(6*time.Second) / r.cfg.Rate))
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch p := rng.IntN(100); {
		case p < 8:
			r.linearAction(ctx, rng, c, history.OpReplay, errandtype.StateDead, errandtype.StateCancelled)
		case p < 12:
			r.linearAction(ctx, rng, c, history.OpCancel, errandtype.StateQueued, errandtype.StateRetrying)
		default:
			r.linearEnqueue(ctx, rng, c, n)
		}
	}
}

func (r *run) linearEnqueue(ctx context.Context, rng *rand.Rand, c, n int) {
	id := fmt.Sprintf("h-%d-%d", r.cfg.Seed, n)
	maxAttempts := 2 + rng.IntN(3)
	a := map[string]any{"n": n, "seed": r.cfg.Seed}
	if rng.IntN(3) == 0 {
		a["fail_first"] = 1 + rng.IntN(4)
	}
	args, _ := json.Marshal(a)
	call := r.lin.rec.Begin(c, history.Input{Op: history.OpEnqueue, JobID: id, MaxAttempts: maxAttempts})
	res, err := r.client.Enqueue(ctx, errand.RawArgs{KindName: linearKind, JSON: args}, &errand.EnqueueOpts{ID: id,
		Queue: linearQueue, MaxAttempts: maxAttempts, BackoffBase: backoffBase, BackoffMax: backoffMax})
	switch {
	case err != nil:
		call.Unknown()
		r.count("enqueue_errors")
		return
	case res.Duplicate:
		call.Done(history.Output{Result: history.Duplicate})
		return
	}
	call.Done(history.Output{Result: history.Ok})
	if err := r.log.append(logEntry{ID: id, Kind: linearKind, MaxAttempts: maxAttempts, Digest: digest(args), Via: "client"}); err != nil {
		r.logf("%v", err)
		return
	}
	r.count("enqueued")
	r.count("linear_enqueued")
}

// linearAction replays or cancels one of the linear queue's jobs in states.
func (r *run) linearAction(ctx context.Context, rng *rand.Rand, c int, op history.Op, states ...errandtype.JobState) {
	jobs, err := r.client.List(ctx, &errand.ListOpts{Queue: linearQueue, States: states, Limit: 20})
	if err != nil || len(jobs) == 0 {
		return
	}
	id := jobs[rng.IntN(len(jobs))].ID
	call := r.lin.rec.Begin(c, history.Input{Op: op, JobID: id})
	var j *errandtype.Job
	if op == history.OpReplay {
		j, err = r.client.Replay(ctx, id, &errand.ReplayOpts{Reason: "chaos linear replay", Operator: "chaos"})
	} else {
		j, err = r.client.Cancel(ctx, id, &errand.CancelOpts{Reason: "chaos linear cancel", Operator: "chaos"})
	}
	res := history.ResultOf(err)
	if res == history.Unknown {
		call.Unknown()
		return
	}
	out := history.Output{Result: res}
	if res == history.Ok {
		out.State = j.State
		r.count("linear_" + string(op))
		r.mu.Lock()
		if op == history.OpReplay {
			r.replays[id]++
		} else {
			r.cancels[id] = true
		}
		r.mu.Unlock()
	}
	call.Done(out)
}

// linearWorker claims from the linear queue through the API, delivers to
// the sink, and reports the outcome, recording each call. It renews no
// lease; one job in sixteen it holds past its lease first, so that its late
// outcome must be fenced.
func (r *run) linearWorker(ctx context.Context, name string) {
	bg := context.WithoutCancel(ctx)
	c := r.lin.client()
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(4+c)))
	for ctx.Err() == nil {
		var res struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		call := r.lin.rec.Begin(c, history.Input{Op: history.OpClaim, Lease: r.cfg.Lease})
		_, err := r.api.call(bg, http.MethodPost, "/queues/"+linearQueue+"/claim", map[string]any{
			"kinds": []string{linearKind}, "lease": r.cfg.Lease.String(), "max_jobs": 2, "worker": name}, &res)
		if err != nil {
			if definite(err) {
				call.Claimed(nil)
			} else {
				call.Unknown()
			}
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		claims := make([]history.Claim, len(res.Jobs))
		for i, env := range res.Jobs {
			claims[i] = history.Claim{JobID: env.ID, Token: env.LeaseToken, Attempt: env.Attempt, LeaseUntil: env.LeaseUntil}
		}
		call.Claimed(claims)
		if len(res.Jobs) == 0 {
			sleepCtx(ctx, 200*time.Millisecond)
		}
		for _, env := range res.Jobs {
			r.linearWork(bg, c, rng, env)
		}
	}
}

func (r *run) linearWork(ctx context.Context, c int, rng *rand.Rand, env errandtype.Envelope) {
	r.count("linear_claims")
	status, err := r.sink.deliver(ctx, &delivery{ID: env.ID, Kind: env.Kind, Args: env.Args, Attempt: env.Attempt, LeaseToken: env.LeaseToken}, "remote")
	stale := rng.IntN(16) == 0
	if stale {
		r.count("linear_stalls")
		sleepCtx(ctx, r.cfg.Lease+r.cfg.Lease/2+500*time.Millisecond)
	}
	in := history.Input{Op: history.OpAck, JobID: env.ID, Token: env.LeaseToken}
	path, body := "/jobs/"+env.ID+"/ack", map[string]any{"lease_token": env.LeaseToken}
	if err != nil || status != http.StatusOK {
		permanent := status/100 == 4
		in.Op, in.Final = history.OpFail, permanent || env.Attempt >= env.MaxAttempts
		path = "/jobs/" + env.ID + "/fail"
		body = map[string]any{"lease_token": env.LeaseToken, "class": fmt.Sprintf("sink_%d", status),
			"message": fmt.Sprintf("sink answered %d", status), "permanent": permanent, "retry_after": "200ms"}
	}
	// A lost answer is sent again: a retry of a recorded outcome is lease_lost.
	for try := 0; ; try++ {
		call := r.lin.rec.Begin(c, in)
		_, err := r.api.call(ctx, http.MethodPost, path, body, nil)
		var ae *apiError
		code := "ok"
		switch {
		case err == nil:
			call.Done(history.Output{Result: history.Ok})
		case asAPIError(err, &ae) && ae.Code == "lease_lost":
			code = ae.Code
			call.Done(history.Output{Result: history.LeaseLost})
		default:
			code = "error"
			if ae != nil {
				code = ae.Code
			}
			call.Unknown()
			if try < 5 && ctx.Err() == nil {
				sleepCtx(ctx, 300*time.Millisecond)
				continue
			}
		}
		if e := r.sink.recordOutcome(env.ID, env.Attempt, env.LeaseToken, string(in.Op), code == "ok", stale, code); e != nil {
			r.logf("record %s: %v", in.Op, e)
		}
		return
	}
}

// definite reports whether an API error says the call did nothing: a
// refusal (4xx), not a lost connection or a server that could not tell.
func definite(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status/100 == 4
}

// checkHistory checks the linear queue's history, and where it fails names
// the job and writes the visualization beside the run's files.
func (r *run) checkHistory(dir string, add func(inv, id, format string, args ...any)) (ops int, note string) {
	h := r.lin.rec.History()
	r.mu.Lock()
	skewed := r.faults["clock_skew"] > 0
	r.mu.Unlock()
	if skewed && r.target.Name() == "sqlite" {
		// Each process's clock is an embedded store's time authority
		// (docs/leases.md), so a worker an hour ahead sweeps live leases
		// early, as the model of one clock forbids.
		return h.Len(), "the clock_skew fault ran a worker an hour ahead, and on SQLite each process's clock is the time authority"
	}
	err := history.Check(h, history.Options{Timeout: 2 * time.Minute, VisualizationPath: filepath.Join(dir, "history.html")})
	var v *history.Violation
	switch {
	case errors.As(err, &v):
		add(invHistory, v.JobID, "%s", v.Error())
	case err != nil:
		add(invHistory, "", "the check could not decide: %v", err)
	}
	return h.Len(), ""
}
