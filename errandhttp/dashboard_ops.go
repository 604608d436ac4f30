package errandhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// queueDepth splits a queue's queued jobs by why they wait, from the
// insights' depth buckets.
type queueDepth struct {
	Ready, Scheduled, Held, Paused int
}

// insightsByQueue sums the insights' buckets per queue.
func insightsByQueue(ins *errand.Insights) map[string]*queueDepth {
	m := map[string]*queueDepth{}
	for _, k := range ins.Kinds {
		q := m[k.Queue]
		if q == nil {
			q = &queueDepth{}
			m[k.Queue] = q
		}
		q.Ready += k.Ready
		q.Scheduled += k.Scheduled
		q.Held += k.Held
		q.Paused += k.Paused
	}
	return m
}

// auditData is one page of the audit page.
type auditData struct {
	Records []errandtype.AuditRecord
	Actions []errandtype.AuditAction
	// Filter as the visitor gave it.
	Job, Action, Since, Until string
	Limit                     int
	// Before is this page's cursor; Next the next page's, 0 on the last.
	Before, Next int64
}

// QueryNext is the query string of the next (older) page.
func (a *auditData) QueryNext() template.URL { return a.query(a.Next) }

// QueryFirst is the query string of the newest page.
func (a *auditData) QueryFirst() template.URL { return a.query(0) }

// query encodes the filter with the cursor before; url.Values escapes
// every value, which makes it a safe template.URL.
func (a *auditData) query(before int64) template.URL {
	v := url.Values{}
	for k, s := range map[string]string{"job": a.Job, "action": a.Action, "since": a.Since, "until": a.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	v.Set("limit", strconv.Itoa(a.Limit))
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	return template.URL(v.Encode())
}

// formTimeLayouts are the time spellings the audit filter accepts, read as
// UTC when they carry no zone: RFC 3339, and what a datetime-local input or
// a person types.
var formTimeLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

// parseFormTime reads a time of a filter; "" is the zero time.
func parseFormTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range formTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q is not a time; write 2026-11-30 14:00 (UTC) or RFC 3339", s)}
}

func (d *dashboard) auditPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	a := &auditData{Actions: errandtype.AuditActions, Job: strings.TrimSpace(q.Get("job")), Action: q.Get("action"),
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")), Limit: d.opts.PageSize}
	opts := &errand.AuditOpts{JobID: a.Job, Action: errandtype.AuditAction(a.Action)}
	if opts.Since, err = parseFormTime("since", a.Since); err != nil {
		d.fail(w, r, err)
		return
	}
	if opts.Until, err = parseFormTime("until", a.Until); err != nil {
		d.fail(w, r, err)
		return
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > min(MaxDashboardPageSize, errandstore.MaxAuditLimit-1) {
			d.fail(w, r, &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%q is not a page size; use 1 to %d", s, MaxDashboardPageSize)})
			return
		}
		a.Limit = n
	}
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			d.fail(w, r, &errandtype.InputError{Field: "before", Message: fmt.Sprintf("%q is not a cursor; follow the page links", s)})
			return
		}
		a.Before = n
	}
	opts.BeforeID, opts.Limit = a.Before, a.Limit+1
	rs, err := d.c.Audit(r.Context(), opts)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if len(rs) > a.Limit {
		rs = rs[:a.Limit]
		a.Next = rs[len(rs)-1].ID
	}
	a.Records = rs
	p := d.newPage(r, "Audit", "audit", now, true)
	p.Data = a
	d.render(w, http.StatusOK, "audit", p)
}

func (d *dashboard) schedulesPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	rs, err := d.c.Schedules(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.newPage(r, "Schedules", "schedules", now, true)
	p.Data = rs
	d.render(w, http.StatusOK, "schedules", p)
}

// filterReplayData is the confirmation page of a replay by filter, or its
// result.
type filterReplayData struct {
	Kind, Queue, Class, Reason string
	// Until bounds the replay to jobs that died before the dry run, so that
	// the replay takes no job the operator was not shown.
	Until     time.Time
	Jobs      []*errandtype.Job
	MaxBatch  int
	Committed bool
	Bulk      string
	Held      []string // steps of compensated workflows left out
}

// UntilValue is Until for the confirmation form.
func (f *filterReplayData) UntilValue() string { return f.Until.UTC().Format(time.RFC3339Nano) }

// filterReplay serves the two POSTs of a replay by filter. The first
// (commit false) is a dry run listing the dead jobs the filter selects, at
// most MaxBatch; the second replays at most that many of them, among those
// that died before the dry run, as one bulk replay.
func (d *dashboard) filterReplay(commit bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		operator, form, ok := d.operatorForm(w, r, "replay jobs")
		if !ok {
			return
		}
		f := &filterReplayData{Kind: strings.TrimSpace(form.Get("kind")), Queue: strings.TrimSpace(form.Get("queue")),
			Class: strings.TrimSpace(form.Get("class")), Reason: strings.TrimSpace(form.Get("reason")), MaxBatch: min(d.opts.MaxBatch, errand.MaxReplayMany), Committed: commit}
		if f.Reason == "" {
			d.problem(w, r, http.StatusBadRequest, "no reason given; say why you replay these jobs, for the audit")
			return
		}
		limit := f.MaxBatch
		if commit {
			n, err := strconv.Atoi(form.Get("limit"))
			if err != nil || n < 1 || n > f.MaxBatch {
				d.problem(w, r, http.StatusBadRequest, fmt.Sprintf("limit %q is out of range; replay 1 to %d jobs, from the confirmation page", form.Get("limit"), f.MaxBatch))
				return
			}
			until, err := time.Parse(time.RFC3339Nano, form.Get("until"))
			if err != nil {
				d.problem(w, r, http.StatusBadRequest, "the form lacks the time of its dry run; start from the dead-letters page")
				return
			}
			limit, f.Until = n, until
		} else {
			now, err := d.now(r.Context())
			if err != nil {
				d.fail(w, r, err)
				return
			}
			// A job that dies in this very instant is still shown: until
			// is exclusive.
			f.Until = now.Add(time.Microsecond)
		}
		res, err := d.c.ReplayMany(r.Context(), &errand.ReplayManyOpts{
			Filter: errandstore.DeadFilter{Kind: f.Kind, Queue: f.Queue, Class: f.Class, DiedUntil: f.Until},
			Limit:  limit, Operator: operator, Reason: f.Reason, DryRun: !commit,
		})
		if commit {
			d.opts.Logger.Info("dashboard: replay by filter", "operator", operator, "kind", f.Kind, "queue", f.Queue, "class", f.Class,
				"reason", f.Reason, "jobs", resultJobs(res), "err", err)
		}
		if err != nil {
			d.fail(w, r, err)
			return
		}
		f.Jobs, f.Bulk, f.Held = res.Jobs, res.Bulk, res.Held
		title := "Replay dead jobs by filter?"
		if commit {
			title = "Replay by filter: done"
		}
		p := d.newPage(r, title, "", d.timeNow(r), false)
		p.Data = f
		d.render(w, http.StatusOK, "replayfilter", p)
	})
}

func resultJobs(res *errand.ReplayManyResult) int {
	if res == nil {
		return 0
	}
	return len(res.Jobs)
}

// operatorForm checks that the caller may write and reads the posted form.
// On false it has answered.
func (d *dashboard) operatorForm(w http.ResponseWriter, r *http.Request, doing string) (operator string, form url.Values, ok bool) {
	operator, canWrite := d.opts.Identity(r)
	if !canWrite {
		d.problem(w, r, http.StatusForbidden, "your token may read but not change jobs; sign in with an operator token to "+doing)
		return "", nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			d.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is over %d bytes; shorten it", maxActionBody))
			return "", nil, false
		}
		d.problem(w, r, http.StatusBadRequest, "read form: "+err.Error())
		return "", nil, false
	}
	return operator, r.PostForm, true
}

// fixReplayData is the confirmation page of a fix-and-replay, or its
// result.
type fixReplayData struct {
	Job *errandtype.Job
	// Args are the corrected args, compacted; OldArgs the job's.
	Args, OldArgs json.RawMessage
	Reason        string
	Committed     bool
}

// ArgsText is Args as the confirmation form sends them back.
func (f *fixReplayData) ArgsText() string { return string(f.Args) }

// fixReplay serves the two POSTs of a fix-and-replay: the first shows the
// job's args and the corrected ones and asks for confirmation; the second
// replays the job with the corrected args.
func (d *dashboard) fixReplay(commit bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		operator, form, ok := d.operatorForm(w, r, "replay jobs")
		if !ok {
			return
		}
		if d.opts.HideArgs {
			d.problem(w, r, http.StatusForbidden, "this dashboard hides args, so it does not edit them; replay the job as it is, or use the API")
			return
		}
		id := strings.TrimSpace(form.Get("id"))
		reason := strings.TrimSpace(form.Get("reason"))
		raw := strings.TrimSpace(form.Get("args"))
		switch {
		case id == "":
			d.problem(w, r, http.StatusBadRequest, "no job named; start from the job's page")
			return
		case reason == "":
			d.problem(w, r, http.StatusBadRequest, "no reason given; say what you fixed, for the audit")
			return
		case !json.Valid([]byte(raw)):
			d.problem(w, r, http.StatusBadRequest, "the corrected args are not valid JSON; fix them, e.g. {\"id\": 7}")
			return
		}
		j, err := d.c.Get(r.Context(), id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if !replayAction.Applies(j.State) {
			d.problem(w, r, http.StatusConflict, fmt.Sprintf("job %s is %s: %s", j.ID, j.State, replayAction.Explain))
			return
		}
		f := &fixReplayData{Job: j, OldArgs: j.Args, Args: compact([]byte(raw)), Reason: reason, Committed: commit}
		if commit {
			nj, err := d.c.Replay(r.Context(), id, &errand.ReplayOpts{Operator: operator, Reason: reason, Args: f.Args})
			d.opts.Logger.Info("dashboard: fix and replay", "operator", operator, "job", id, "reason", reason, "err", err)
			if err != nil {
				d.fail(w, r, err)
				return
			}
			f.Job = nj
		}
		title := "Replay " + j.ID + " with new args?"
		if commit {
			title = "Replayed " + j.ID + " with new args"
		}
		p := d.newPage(r, title, "", d.timeNow(r), false)
		p.Data = f
		d.render(w, http.StatusOK, "fixreplay", p)
	})
}

// compact returns b without insignificant space, or b when it is not
// JSON.
func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// batchPage shows one batch: its members by state now, the final counts
// once it completed, and its callback job.
func (d *dashboard) batchPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	b, err := d.c.Batch(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.newPage(r, "Batch "+id, "batches", now, true)
	p.Data = b
	d.render(w, http.StatusOK, "batch", p)
}

// setPause pauses or resumes (form field do) the queue or kind of the form,
// with its reason, and goes back to the overview's pauses.
func (d *dashboard) setPause(w http.ResponseWriter, r *http.Request) {
	operator, canWrite := d.opts.Identity(r)
	if !canWrite {
		d.problem(w, r, http.StatusForbidden, "your token may read but not change anything; sign in with an operator token to pause or resume")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
	if err := r.ParseForm(); err != nil {
		d.problem(w, r, http.StatusBadRequest, "read form: "+err.Error())
		return
	}
	f := r.PostForm
	name, reason := strings.TrimSpace(f.Get("name")), strings.TrimSpace(f.Get("reason"))
	if reason == "" {
		d.problem(w, r, http.StatusBadRequest, "give a reason: the audit records why")
		return
	}
	var target errand.PauseTarget
	switch f.Get("scope") {
	case string(errandtype.PauseQueue):
		target.Queue = name
	case string(errandtype.PauseKind):
		target.Kind = name
	default:
		d.problem(w, r, http.StatusBadRequest, "pause a queue or a kind")
		return
	}
	var err error
	switch f.Get("do") {
	case "pause":
		_, _, err = d.c.Pause(r.Context(), target, operator, reason)
	case "resume":
		_, err = d.c.Resume(r.Context(), target, operator, reason)
	default:
		d.problem(w, r, http.StatusBadRequest, "pause or resume; use the overview's forms")
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.opts.Logger.Info("dashboard: "+f.Get("do"), "operator", operator, string(f.Get("scope")), name, "reason", reason)
	http.Redirect(w, r, d.opts.PathPrefix+"/#pauses", http.StatusSeeOther)
}
