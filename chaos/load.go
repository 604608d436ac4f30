package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// spec is one enqueue as sent, kept to send again as a duplicate.
type spec struct {
	id, unique, kind string
	args             json.RawMessage
	maxAttempts      int
	delay            time.Duration
	viaAPI           bool
	key              bool // the API's Idempotency-Key rather than "id"
	poison           bool
}

const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = time.Second
)

func (r *run) enabled(fault string) bool {
	return len(r.cfg.Faults) == 0 || contains(r.cfg.Faults, fault)
}

func (r *run) fault(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
}

// load enqueues at cfg.Rate until ctx ends. What it enqueues, and how, comes
// from the seed alone.
func (r *run) load(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 1))
	t := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer t.Stop()
	var recent []spec
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := rng.IntN(100)
		switch {
		case p < 5 && len(recent) > 0 && r.enabled("duplicate_enqueue"):
			s := recent[rng.IntN(len(recent))]
			r.fault("duplicate_enqueue")
			r.enqueue(ctx, s, true)
		case p < 9:
			r.enqueueBatch(ctx, rng, n)
		case p < 12:
			r.enqueueWorkflow(ctx, rng, n)
		default:
			s := r.newSpec(rng, n)
			if id, ok := r.enqueue(ctx, s, false); ok {
				s.id = id
				if len(recent) < 64 {
					recent = append(recent, s)
				} else {
					recent[rng.IntN(len(recent))] = s
				}
			}
		}
	}
}

func (r *run) newSpec(rng *rand.Rand, n int) spec {
	kinds := []string{"chaos_ok", "chaos_ok", "chaos_flaky", "chaos_slow"}
	s := spec{kind: kinds[rng.IntN(len(kinds))], maxAttempts: 2 + rng.IntN(3), viaAPI: rng.IntN(3) == 0}
	a := map[string]any{"n": n, "seed": r.cfg.Seed}
	switch s.kind {
	case "chaos_flaky":
		a["fail_first"] = 1 + rng.IntN(4) // beyond max attempts: dead
	case "chaos_slow":
		a["slow_ms"] = 300 + rng.IntN(1500)
	}
	if rng.IntN(25) == 0 && r.enabled("poison") {
		a["poison"] = true
		s.poison = true
	}
	if rng.IntN(30) == 0 {
		s.delay = time.Hour // waits past the run: legitimately scheduled
	}
	s.args, _ = json.Marshal(a)
	switch rng.IntN(4) {
	case 0:
		s.unique = fmt.Sprintf("u-%d-%d", r.cfg.Seed, n)
	case 1:
		s.key = s.viaAPI
		fallthrough
	default:
		s.id = fmt.Sprintf("j-%d-%d", r.cfg.Seed, n)
	}
	return s
}

// enqueue sends s through the client or the API and logs it once the store
// acknowledged it. dup marks a resend, which must return the first job.
func (r *run) enqueue(ctx context.Context, s spec, dup bool) (string, bool) {
	var id string
	var duplicate bool
	if s.viaAPI {
		body := map[string]any{"kind": s.kind, "args": s.args, "max_attempts": s.maxAttempts,
			"backoff_base": backoffBase.String(), "backoff_max": backoffMax.String()}
		if s.delay > 0 {
			body["delay"] = s.delay.String()
		}
		var hdr []string
		switch {
		case s.unique != "":
			body["unique_key"] = s.unique
		case s.key:
			hdr = []string{"Idempotency-Key", s.id}
		default:
			body["id"] = s.id
		}
		var res struct {
			Job       errandtype.Job `json:"job"`
			Duplicate bool           `json:"duplicate"`
		}
		if _, err := r.api.call(ctx, http.MethodPost, "/jobs", body, &res, hdr...); err != nil {
			r.enqueueFailed(s, dup, err)
			return "", false
		}
		id, duplicate = res.Job.ID, res.Duplicate
	} else {
		opts := &errand.EnqueueOpts{ID: s.id, UniqueKey: s.unique, MaxAttempts: s.maxAttempts,
			BackoffBase: backoffBase, BackoffMax: backoffMax, Delay: s.delay}
		res, err := r.client.Enqueue(ctx, errand.RawArgs{KindName: s.kind, JSON: s.args}, opts)
		if err != nil {
			r.enqueueFailed(s, dup, err)
			return "", false
		}
		id, duplicate = res.Job.ID, res.Duplicate
	}
	if dup {
		r.count("duplicates_sent")
		if !duplicate || (s.id != "" && id != s.id) {
			r.violate("duplicate enqueues return the first job", id,
				fmt.Sprintf("resending %s (unique key %q) returned duplicate=%v", s.id, s.unique, duplicate))
		}
		return id, true
	}
	if err := r.log.append(logEntry{ID: id, Kind: s.kind, MaxAttempts: s.maxAttempts, Digest: digest(s.args),
		Via: via(s.viaAPI), Scheduled: s.delay > 0, Poison: s.poison}); err != nil {
		r.logf("%v", err)
		return "", false
	}
	r.count("enqueued")
	if s.poison {
		r.fault("poison")
	}
	return id, true
}

func (r *run) enqueueFailed(s spec, dup bool, err error) {
	var conflict *errand.IDConflictError
	var ae *apiError
	if errors.As(err, &conflict) || (asAPIError(err, &ae) && (ae.Code == "id_conflict" || ae.Code == "idempotency_conflict" || ae.Code == "unique_conflict")) {
		r.violate("duplicate enqueues return the first job", s.id, "the same enqueue sent again was refused: "+err.Error())
		return
	}
	r.count("enqueue_errors")
}

func via(viaAPI bool) string {
	if viaAPI {
		return "api"
	}
	return "client"
}

func (r *run) enqueueBatch(ctx context.Context, rng *rand.Rand, n int) {
	id := fmt.Sprintf("b-%d-%d", r.cfg.Seed, n)
	viaAPI := rng.IntN(2) == 0
	members := 2 + rng.IntN(3)
	var logs []logEntry
	var params []errand.EnqueueParams
	var apiJobs []map[string]any
	for i := range members {
		a := map[string]any{"batch_member": i, "n": n}
		kind := "chaos_ok"
		if rng.IntN(4) == 0 {
			kind, a["fail_first"] = "chaos_flaky", 1+rng.IntN(3)
		}
		args, _ := json.Marshal(a)
		jid := fmt.Sprintf("%s-%d", id, i)
		params = append(params, errand.EnqueueParams{Args: errand.RawArgs{KindName: kind, JSON: args},
			Opts: &errand.EnqueueOpts{ID: jid, MaxAttempts: 3, BackoffBase: backoffBase, BackoffMax: backoffMax}})
		apiJobs = append(apiJobs, map[string]any{"id": jid, "kind": kind, "args": json.RawMessage(args), "max_attempts": 3,
			"backoff_base": backoffBase.String(), "backoff_max": backoffMax.String()})
		logs = append(logs, logEntry{ID: jid, Kind: kind, MaxAttempts: 3, Digest: digest(args), Via: via(viaAPI)})
	}
	var err error
	if viaAPI {
		_, err = r.api.call(ctx, http.MethodPost, "/batches", map[string]any{"id": id, "jobs": apiJobs,
			"callback": map[string]any{"kind": "chaos_batch_done", "args": map[string]any{"n": n}, "max_attempts": 5,
				"backoff_base": backoffBase.String(), "backoff_max": backoffMax.String()}}, nil)
	} else {
		_, err = r.client.EnqueueBatch(ctx, params, &errand.BatchOpts{ID: id,
			Callback:     errand.RawArgs{KindName: "chaos_batch_done", JSON: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))},
			CallbackOpts: &errand.EnqueueOpts{MaxAttempts: 5, BackoffBase: backoffBase, BackoffMax: backoffMax}})
	}
	if err != nil {
		r.count("enqueue_errors")
		return
	}
	for _, e := range logs {
		if err := r.log.append(e); err != nil {
			r.logf("%v", err)
			return
		}
	}
	if err := r.log.append(logEntry{ID: id, Kind: "@batch", Via: via(viaAPI)}); err != nil {
		return
	}
	r.count("batches")
	r.count("enqueued")
}

func (r *run) enqueueWorkflow(ctx context.Context, rng *rand.Rand, n int) {
	id := fmt.Sprintf("w-%d-%d", r.cfg.Seed, n)
	opts := &errand.EnqueueOpts{MaxAttempts: 3, BackoffBase: backoffBase, BackoffMax: backoffMax}
	step := func(name string, extra string) errand.RawArgs {
		return errand.RawArgs{KindName: "chaos_step", JSON: json.RawMessage(fmt.Sprintf(`{"step":%q,"n":%d%s}`, name, n, extra))}
	}
	undo := func(name string) errand.RawArgs {
		return errand.RawArgs{KindName: "chaos_undo", JSON: json.RawMessage(fmt.Sprintf(`{"undo":%q,"n":%d}`, name, n))}
	}
	last := ""
	if rng.IntN(3) == 0 && r.enabled("poison") {
		last = `,"poison":true` // the last step dies: the workflow compensates
		r.fault("poison")
	}
	// Compensations retry longer than any outage of the sink lasts.
	undoOpts := &errand.EnqueueOpts{MaxAttempts: 10, BackoffBase: backoffBase, BackoffMax: backoffMax}
	steps := []errand.WorkflowStep{
		{Name: "a", Args: step("a", ""), Opts: opts, Compensate: undo("a"), CompensateOpts: undoOpts},
		{Name: "b", Args: step("b", `,"fail_first":1`), Opts: opts, DependsOn: []string{"a"}, Compensate: undo("b"), CompensateOpts: undoOpts},
		{Name: "c", Args: step("c", last), Opts: opts, DependsOn: []string{"b"}},
	}
	if _, err := r.client.EnqueueWorkflow(ctx, steps, &errand.WorkflowOpts{ID: id, Name: "chaos"}); err != nil {
		r.count("enqueue_errors")
		return
	}
	if err := r.log.append(logEntry{ID: id, Kind: "@workflow", Via: "client"}); err != nil {
		return
	}
	r.count("workflows")
	r.count("enqueued")
}

// operators cancel and replay jobs while they run, each through the client
// and the API at once.
func (r *run) operators(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 2))
	t := time.NewTicker(700 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if rng.IntN(2) == 0 {
			if r.enabled("cancel_race") {
				r.cancelRace(ctx, rng)
			}
		} else if r.enabled("replay_race") {
			r.replayRace(ctx, rng)
		}
	}
}

// cancelRace cancels a waiting or running slow job through the client and
// the API at once.
func (r *run) cancelRace(ctx context.Context, rng *rand.Rand) {
	id, ok := r.pick(ctx, rng, "cancel_race", &errand.ListOpts{Queue: errand.DefaultQueue, Kind: "chaos_slow", Limit: 20,
		States: []errandtype.JobState{errandtype.StateQueued, errandtype.StateRetrying, errandtype.StateRunning}})
	if !ok {
		return
	}
	n := r.race(func() error {
		_, err := r.client.Cancel(ctx, id, &errand.CancelOpts{Reason: "chaos cancel", Operator: "chaos"})
		return err
	}, r.apiAction(ctx, id, "cancel"))
	if n > 0 {
		r.mu.Lock()
		r.cancels[id] = true
		r.mu.Unlock()
	}
}

// replayRace replays a dead job through the client and the API at once.
func (r *run) replayRace(ctx context.Context, rng *rand.Rand) {
	id, ok := r.pick(ctx, rng, "replay_race", &errand.ListOpts{Queue: errand.DefaultQueue, States: []errandtype.JobState{errandtype.StateDead}, Limit: 50})
	if !ok {
		return
	}
	n := r.race(func() error {
		_, err := r.client.Replay(ctx, id, &errand.ReplayOpts{Reason: "chaos replay", Operator: "chaos"})
		return err
	}, r.apiAction(ctx, id, "replay"))
	r.mu.Lock()
	r.replays[id] += n
	r.mu.Unlock()
}

// pick chooses one of the jobs opts lists, and counts the fault.
func (r *run) pick(ctx context.Context, rng *rand.Rand, fault string, opts *errand.ListOpts) (string, bool) {
	jobs, err := r.client.List(ctx, opts)
	if err != nil || len(jobs) == 0 {
		return "", false
	}
	r.fault(fault)
	return jobs[rng.IntN(len(jobs))].ID, true
}

// apiAction is POST /api/v1/jobs/{id}/{action} with a reason.
func (r *run) apiAction(ctx context.Context, id, action string) func() error {
	return func() error {
		_, err := r.api.call(ctx, http.MethodPost, "/jobs/"+id+"/"+action, map[string]any{"reason": "chaos " + action}, nil)
		return err
	}
}

// race runs fns at once and returns how many succeeded.
func (r *run) race(fns ...func() error) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if fn() == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ok
}
