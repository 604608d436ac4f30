package errandhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// MaxBulkReplaySeconds bounds how long POST /api/v1/replay may take at its
// rate (limit / rate): a request must end within the server's write
// timeout. Slower runs belong to the CLI (errand replay --rate).
const MaxBulkReplaySeconds = 50

// auditResponse is a page of the audit, newest first. NextCursor, when not
// null, fetches the next (older) page as ?cursor=.
type auditResponse struct {
	Audit      []errandtype.AuditRecord `json:"audit"`
	NextCursor *string                  `json:"next_cursor"`
}

// audit serves GET /api/v1/audit?job=&action=&since=&until=&limit=&cursor=.
func (a *api[TTx]) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "job", "action", "since", "until", "limit", "cursor"); err != nil {
		return err
	}
	opts := &errand.AuditOpts{JobID: q.Get("job"), Action: errandtype.AuditAction(q.Get("action"))}
	var err error
	if opts.Since, err = queryTime(q, "since"); err != nil {
		return err
	}
	if opts.Until, err = queryTime(q, "until"); err != nil {
		return err
	}
	if opts.Limit, err = queryLimit(q, errandstore.DefaultAuditLimit, errandstore.MaxAuditLimit); err != nil {
		return err
	}
	if opts.BeforeID, err = queryCursor(q, 1); err != nil {
		return err
	}
	rs, err := a.c.Audit(r.Context(), opts)
	if err != nil {
		return err
	}
	resp := auditResponse{Audit: rs}
	if resp.Audit == nil {
		resp.Audit = []errandtype.AuditRecord{}
	}
	if a.hideArgs {
		// A fix-and-replay's details are the job's old and new args.
		for i := range resp.Audit {
			if resp.Audit[i].Action == errandtype.AuditReplayArgs {
				resp.Audit[i].Details = nil
			}
		}
	}
	if len(rs) == opts.Limit {
		next := strconv.FormatInt(rs[len(rs)-1].ID, 10)
		resp.NextCursor = &next
	}
	return reply(w, resp)
}

// queryTime reads an RFC 3339 time from q; absent is the zero time.
func queryTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest("%s %q is not an RFC 3339 time; write e.g. 2026-11-29T12:00:00Z", name, v)
	}
	return t, nil
}

// bulkReplayRequest is the body of POST /api/v1/replay: which dead jobs to
// replay, how many, how fast, and why.
type bulkReplayRequest struct {
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// Class is the error class that killed the jobs.
	Class string `json:"class"`
	// Since and Until keep jobs that died in [since, until).
	Since *Time `json:"since"`
	Until *Time `json:"until"`
	// Limit is the most jobs to replay: 1 to errand.MaxReplayMany, default
	// errand.DefaultReplayMany.
	Limit *int `json:"limit"`
	// Rate is the most jobs replayed per second; 0 is no limit.
	Rate   float64 `json:"rate"`
	Reason string  `json:"reason"`
	// DryRun lists the jobs that would be replayed and changes nothing.
	DryRun bool `json:"dry_run"`
}

// bulkReplay serves POST /api/v1/replay.
func (a *api[TTx]) bulkReplay(w http.ResponseWriter, r *http.Request, req *bulkReplayRequest) error {
	if err := requireReason(req.Reason, reasonExample); err != nil {
		return err
	}
	limit, err := optCount("limit", req.Limit, errand.MaxReplayMany, errand.DefaultReplayMany)
	if err != nil {
		return err
	}
	if req.Rate < 0 {
		return badRequest("rate must be a positive number of jobs per second, or 0 for no limit")
	}
	if req.Rate > 0 && !req.DryRun && float64(limit)/req.Rate > MaxBulkReplaySeconds {
		return badRequest("limit %d at rate %g/s takes over %ds, longer than a request may last; raise the rate, lower the limit, or use errand replay --rate", limit, req.Rate, MaxBulkReplaySeconds)
	}
	operator, _ := Identity(r)
	opts := &errand.ReplayManyOpts{
		Filter: errandstore.DeadFilter{Kind: req.Kind, Queue: req.Queue, Class: req.Class},
		Limit:  limit, Rate: req.Rate, Operator: operator, Reason: req.Reason, DryRun: req.DryRun,
	}
	if req.Since != nil {
		opts.Filter.DiedSince = req.Since.Time
	}
	if req.Until != nil {
		opts.Filter.DiedUntil = req.Until.Time
	}
	res, err := a.c.ReplayMany(r.Context(), opts)
	if err != nil {
		return err
	}
	for i, j := range res.Jobs {
		res.Jobs[i] = a.show(j)
	}
	if !res.DryRun {
		a.log.Info("dead jobs replayed", "bulk", res.Bulk, "jobs", len(res.Jobs), "operator", operator, "reason", req.Reason)
	}
	return reply(w, res)
}

// replayRequest is the body of POST /api/v1/jobs/{id}/replay.
type replayRequest struct {
	// Reason says why, for the audit; required.
	Reason string `json:"reason"`
	// Args, when given, replace the job's args (fix-and-replay); the audit
	// keeps the old and the new.
	Args json.RawMessage `json:"args"`
	// FromStep, when given, forks a durable handler's job from that step:
	// the steps before it are kept, the rest run again.
	FromStep *int `json:"from_step"`
}

func (a *api[TTx]) replay(w http.ResponseWriter, r *http.Request, req *replayRequest) error {
	if err := requireReason(req.Reason, reasonExample); err != nil {
		return err
	}
	if string(req.Args) == "null" {
		req.Args = nil
	}
	operator, _ := Identity(r)
	j, err := a.c.Replay(r.Context(), r.PathValue("id"), &errand.ReplayOpts{Operator: operator, Reason: req.Reason, Args: req.Args, FromStep: req.FromStep})
	if err != nil {
		return err
	}
	a.log.Info("job replayed", "job_id", j.ID, "operator", operator, "reason", req.Reason, "new_args", req.Args != nil)
	return reply(w, a.show(j))
}

// resetBreaker serves POST /api/v1/breakers/{dependency}/reset: an
// operator closes a breaker at once, with a reason, for the audit.
func (a *api[TTx]) resetBreaker(w http.ResponseWriter, r *http.Request) error {
	operator, reason, err := operatorReason(r)
	if err != nil {
		return err
	}
	dep := r.PathValue("dependency")
	b, err := a.c.ResetBreaker(r.Context(), dep, operator, reason)
	if err != nil {
		return notFound(err, "no circuit breaker for dependency "+strconv.Quote(dep)+"; GET /api/v1/breakers lists them")
	}
	a.log.Info("circuit breaker reset", "dependency", dep, "operator", operator, "reason", reason)
	return reply(w, b)
}

// pruneRequest is the body of POST /api/v1/prune, with the limits of
// errand prune.
type pruneRequest struct {
	// SucceededAge and DeadAge, in Go syntax ("168h"); at least one.
	SucceededAge errandtype.Duration `json:"succeeded_age"`
	DeadAge      errandtype.Duration `json:"dead_age"`
	// Kinds gives kinds their own ages, as errand prune --retain-kind.
	Kinds map[string]pruneKind `json:"kinds"`
	// Batch is the most jobs per transaction: 1 to errandstore.MaxPruneBatch,
	// default the most.
	Batch  *int   `json:"batch"`
	Reason string `json:"reason"`
	DryRun bool   `json:"dry_run"`
}

// pruneKind is one kind's ages in a pruneRequest; 0 or absent leaves a
// state to the default age.
type pruneKind struct {
	SucceededAge errandtype.Duration `json:"succeeded_age"`
	DeadAge      errandtype.Duration `json:"dead_age"`
}

// prune serves POST /api/v1/prune: an operator action, so it needs the
// operator role (as every POST does) and a reason, and lands in the audit.
func (a *api[TTx]) prune(w http.ResponseWriter, r *http.Request, req *pruneRequest) error {
	if err := requireReason(req.Reason, "monthly retention"); err != nil {
		return err
	}
	if req.SucceededAge == 0 && req.DeadAge == 0 && len(req.Kinds) == 0 {
		return badRequest("give succeeded_age, dead_age, kinds or more, e.g. {\"succeeded_age\": \"168h\", \"dead_age\": \"720h\"}")
	}
	var kinds map[string]errand.KindRetention
	for k, a := range req.Kinds {
		if kinds == nil {
			kinds = map[string]errand.KindRetention{}
		}
		kinds[k] = errand.KindRetention{SucceededAge: time.Duration(a.SucceededAge), DeadAge: time.Duration(a.DeadAge)}
	}
	batch, err := optCount("batch", req.Batch, errandstore.MaxPruneBatch, 0)
	if err != nil {
		return err
	}
	operator, _ := Identity(r)
	res, err := a.c.Prune(r.Context(), &errand.PruneOpts{SucceededAge: time.Duration(req.SucceededAge), DeadAge: time.Duration(req.DeadAge),
		Kinds: kinds, BatchSize: batch, Operator: operator, Reason: req.Reason, DryRun: req.DryRun})
	if err != nil {
		return err
	}
	if !res.DryRun {
		a.log.Info("jobs pruned", "jobs", res.Total(), "batches", res.Batches, "workflows", res.Workflows,
			"operator", operator, "reason", req.Reason)
	}
	return reply(w, res)
}

// statsResponse is GET /api/v1/stats: counts by queue and state, and the
// insights per queue and kind. The oldest ready age is null, not 0, where
// no job is ready, as errand stats --json has it.
type statsResponse struct {
	Queues   []statsQueue  `json:"queues"`
	Insights statsInsights `json:"insights"`
}

type statsQueue struct {
	errandtype.QueueStats
	OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
}

type statsInsights struct {
	At    time.Time   `json:"at"`
	Kinds []statsKind `json:"kinds"`
}

type statsKind struct {
	errand.KindInsights
	OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
}

// readyAge is an oldest ready age, nil when no job is ready.
func readyAge(s float64) *float64 {
	if s <= 0 {
		return nil
	}
	return &s
}

func (a *api[TTx]) stats(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	s, err := a.c.Stats(r.Context())
	if err != nil {
		return err
	}
	if s == nil {
		s = []errandtype.QueueStats{}
	}
	ins, err := a.c.Insights(r.Context(), nil)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	resp := statsResponse{Queues: make([]statsQueue, len(s)), Insights: statsInsights{At: ins.At, Kinds: make([]statsKind, len(ins.Kinds))}}
	for i, q := range s {
		resp.Queues[i] = statsQueue{QueueStats: q, OldestReadyAgeSeconds: readyAge(q.OldestReadyAgeSeconds)}
	}
	for i, k := range ins.Kinds {
		resp.Insights.Kinds[i] = statsKind{KindInsights: k, OldestReadyAgeSeconds: readyAge(k.OldestReadyAgeSeconds)}
	}
	return reply(w, resp)
}

// optCount reads an optional count of a body, field: absent is def (0
// leaves the default to the library), given it is 1 to max. A 0 given is
// refused rather than taken for the default, as docs/http-api.md's range says.
func optCount(field string, v *int, max, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > max {
		return 0, badRequest("%s %d is out of range; give 1 to %d, or leave it out for the default", field, *v, max)
	}
	return *v, nil
}

// pauseSet serves the pause (paused) or the resume of a queue or a kind
// (scope), named in the path: an operator action with a reason, audited.
func (a *api[TTx]) pauseSet(scope errandtype.PauseScope, paused bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		operator, reason, err := operatorReason(r)
		if err != nil {
			return err
		}
		name := r.PathValue(string(scope))
		target := errand.PauseTarget{Queue: name}
		if scope == errandtype.PauseKind {
			target = errand.PauseTarget{Kind: name}
		}
		if !paused {
			changed, err := a.c.Resume(r.Context(), target, operator, reason)
			if err != nil {
				return err
			}
			a.log.Info("resumed", string(scope), name, "operator", operator, "reason", reason, "changed", changed)
			return reply(w, map[string]bool{"changed": changed})
		}
		p, changed, err := a.c.Pause(r.Context(), target, operator, reason)
		if err != nil {
			return err
		}
		a.log.Info("paused", string(scope), name, "operator", operator, "reason", reason, "changed", changed)
		return reply(w, map[string]any{"pause": p, "changed": changed})
	}
}
