package errandhttp

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/workflowview"
)

// Dashboard defaults and bounds.
const (
	// DefaultDashboardPageSize is how many jobs a list page shows unless
	// DashboardOptions.PageSize says otherwise.
	DefaultDashboardPageSize = 50
	// MaxDashboardPageSize bounds PageSize and the limit a visitor asks for.
	MaxDashboardPageSize = 500
	// DefaultDashboardRefresh is how often the reading pages reload
	// themselves in a browser that runs the dashboard's script.
	DefaultDashboardRefresh = 10 * time.Second
	// DefaultDashboardMaxBatch bounds how many jobs one replay or cancel
	// from the dashboard may name.
	DefaultDashboardMaxBatch = 100
)

// DashboardOptions configure [NewDashboard]. The zero value (or nil) shows
// args, lets every visitor act as AnonymousOperator, and serves from "/".
type DashboardOptions struct {
	// Identity names the operator behind a request and says whether they
	// may change anything (replay, cancel). The server's authentication
	// sits in front of the dashboard and answers it; nil means every
	// request comes from AnonymousOperator, who may write: for tests and
	// for applications that protect the dashboard themselves.
	Identity func(r *http.Request) (operator string, canWrite bool)
	// HideArgs shows "hidden" in place of every job's args, for queues
	// whose args carry data operators should not see.
	HideArgs bool
	// PathPrefix is the path the dashboard is mounted under when the
	// caller strips it (http.StripPrefix("/ops", dash) has PathPrefix
	// "/ops"), so that links and forms point back into the dashboard.
	// Empty means the dashboard is served from "/".
	PathPrefix string
	// PageSize is how many jobs a list page shows; 0 means
	// DefaultDashboardPageSize, and at most MaxDashboardPageSize.
	PageSize int
	// Refresh is how often the overview, job list and job pages reload in a
	// browser running the dashboard's script; 0 means
	// DefaultDashboardRefresh, negative turns reloading off. Pages with a
	// form to fill in never reload.
	Refresh time.Duration
	// MaxBatch bounds how many jobs one replay or cancel may name; 0 means
	// DefaultDashboardMaxBatch.
	MaxBatch int
	// Retention is the retention policy the process serving the dashboard
	// applies while its worker leads the cluster (errand serve's
	// --retain-* flags), shown on "/retention" as the policy in force. Nil
	// means this process applies none: the page shows what the audit
	// records of the prunes, which any process may have run.
	Retention *errand.RetentionPolicy
	// Logger receives one line per operator action (who, what, which job,
	// why, the outcome). Nil discards.
	Logger *slog.Logger
}

//go:embed dashboard/templates/*.html dashboard/static/*
var dashboardFiles embed.FS

// dashboardClient is what the dashboard uses of an errand.Client, whatever
// its transaction type.
type dashboardClient interface {
	Stats(ctx context.Context) ([]errandtype.QueueStats, error)
	Workers(ctx context.Context) ([]*errandtype.WorkerRecord, error)
	List(ctx context.Context, opts *errand.ListOpts) ([]*errandtype.Job, error)
	Get(ctx context.Context, id string) (*errandtype.Job, error)
	ReplayAudit(ctx context.Context, id string) ([]errandtype.ReplayRecord, error)
	Replay(ctx context.Context, id string, opts *errand.ReplayOpts) (*errandtype.Job, error)
	Cancel(ctx context.Context, id string, opts *errand.CancelOpts) (*errandtype.Job, error)
	Insights(ctx context.Context, opts *errand.InsightsOpts) (*errand.Insights, error)
	Audit(ctx context.Context, opts *errand.AuditOpts) ([]errandtype.AuditRecord, error)
	Schedules(ctx context.Context) ([]*errandtype.ScheduleRecord, error)
	Limits(ctx context.Context) ([]*errandtype.LimiterRecord, error)
	Breakers(ctx context.Context) ([]*errandtype.BreakerRecord, error)
	Pauses(ctx context.Context) ([]errandtype.Pause, error)
	Pause(ctx context.Context, target errand.PauseTarget, operator, reason string) (*errandtype.Pause, bool, error)
	Resume(ctx context.Context, target errand.PauseTarget, operator, reason string) (bool, error)
	BreakerHolds(ctx context.Context) (*errand.BreakerHolds, error)
	Batch(ctx context.Context, id string) (*errandstore.Batch, error)
	Batches(ctx context.Context, p *errandstore.BatchListParams) ([]*errandstore.Batch, error)
	Workflow(ctx context.Context, id string) (*errandtype.Workflow, error)
	Workflows(ctx context.Context, p *errandstore.WorkflowListParams) ([]*errandtype.Workflow, error)
	WorkflowCounts(ctx context.Context) (map[errandtype.WorkflowState]int, error)
	RerunWorkflow(ctx context.Context, id string, opts *errand.WorkflowRerunOpts) (*errandstore.WorkflowInsertResult, error)
	ReplayMany(ctx context.Context, opts *errand.ReplayManyOpts) (*errand.ReplayManyResult, error)
	FairnessKeys(ctx context.Context, opts *errand.FairnessKeysOpts) ([]errandtype.FairnessKeyCount, error)
	Steps(ctx context.Context, id string) ([]errandtype.Step, error)
	ReadStream(ctx context.Context, id string, after, limit int, wait time.Duration) (*errandstore.StreamPage, error)
}

// dashboard serves the operator pages. See NewDashboard.
type dashboard struct {
	c     dashboardClient
	now   func(ctx context.Context) (time.Time, error) // the store's clock
	opts  DashboardOptions                             // with defaults applied
	pages map[string]*template.Template
	mux   *http.ServeMux
	// workflows: the store keeps workflows (is an errandstore.WorkflowStore).
	workflows bool
}

// NewDashboard returns the operator dashboard over c: server-rendered HTML
// pages that read and act on the jobs of c's store.
//
//   - "/": every queue's jobs by state (queued split into ready, scheduled
//     and held by an ordering key), oldest ready age, dead letters and
//     waiting kinds no live worker handles, the fairness keys with the
//     most waiting jobs; per queue and kind the
//     throughput, failure rate by class, retries and dead letters of the
//     last hour, and p50/p99 run and wait times; the workflows by state;
//     the circuit breakers of dependencies; the workers, with their
//     queues' slots and weights.
//   - "/jobs": jobs filtered by state, queue and kind, a page at a time.
//   - "/jobs/ID": one job: args, every failed attempt with its class,
//     message and stack, its lease, its audit, and what happens next; a
//     dead or cancelled job can be replayed as it is or with corrected
//     args.
//   - "/dead": dead letters, to select and replay with a reason, or to
//     replay by filter (kind, queue, error class).
//   - "/audit": every operator action, filtered and paged.
//   - "/schedules": the recurring jobs.
//   - "/retention": the retention in force per kind (DashboardOptions.Retention,
//     else the ages of the newest prune in the audit) and the newest prunes.
//   - "/batches": batches, newest first, open or completed, with their
//     members' outcomes.
//   - "/batches/ID": one batch: its members' states, its completion and
//     its callback job; a member's page links to it.
//   - "/workflows": workflows, newest first, by state.
//   - "/workflows/ID": one workflow: its state and failed step, each step
//     with its dependencies, job, state, attempts and compensation, and
//     what happens next; a step's page links to it.
//
// Replays and cancels are two POSTs: the first shows what will change and
// asks for confirmation, the second does it, recording the operator that
// [DashboardOptions.Identity] names. The pages need no script and load
// nothing from elsewhere; the one small script (auto-refresh) and the style
// sheet are files the dashboard serves itself, never inline, so every
// response carries a strict Content-Security-Policy ("script-src 'self';
// style-src 'self'", everything else 'none').
//
// The dashboard does not authenticate: mount it behind the server's
// authentication. It does refuse cross-origin form posts
// ([http.CrossOriginProtection]).
func NewDashboard[TTx any](c *errand.Client[TTx], opts *DashboardOptions) http.Handler {
	d := &dashboard{c: c, now: c.Store().Now, opts: dashboardDefaults(opts), workflows: c.SupportsWorkflows()}
	d.pages = parseDashboardPages(d.opts.PathPrefix)
	static, err := fs.Sub(dashboardFiles, "dashboard/static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	protect := http.NewCrossOriginProtection()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.overview)
	mux.HandleFunc("GET /jobs", d.jobList)
	mux.HandleFunc("GET /jobs/{id...}", d.jobDetail)
	mux.HandleFunc("GET /stream/{id...}", d.jobStream)
	mux.HandleFunc("GET /dead", d.deadList)
	mux.HandleFunc("GET /audit", d.auditPage)
	mux.HandleFunc("GET /schedules", d.schedulesPage)
	mux.HandleFunc("GET /retention", d.retentionPage)
	mux.HandleFunc("GET /batches", d.batchesPage)
	mux.HandleFunc("GET /batches/{id...}", d.batchPage)
	mux.HandleFunc("GET /workflows", d.workflowsPage)
	mux.HandleFunc("GET /workflows/{id...}", d.workflowPage)
	mux.HandleFunc("GET /api-docs", d.apiPage)
	mux.Handle("POST /replay-filter/confirm", protect.Handler(d.filterReplay(false)))
	mux.Handle("POST /replay-filter", protect.Handler(d.filterReplay(true)))
	mux.Handle("POST /replay-args/confirm", protect.Handler(d.fixReplay(false)))
	mux.Handle("POST /replay-args", protect.Handler(d.fixReplay(true)))
	mux.Handle("POST /replay/confirm", protect.Handler(d.action(replayAction, false)))
	mux.Handle("POST /replay", protect.Handler(d.action(replayAction, true)))
	mux.Handle("POST /cancel/confirm", protect.Handler(d.action(cancelAction, false)))
	mux.Handle("POST /cancel", protect.Handler(d.action(cancelAction, true)))
	mux.Handle("POST /workflow-rerun", protect.Handler(http.HandlerFunc(d.rerunWorkflow)))
	mux.Handle("POST /pause", protect.Handler(http.HandlerFunc(d.setPause)))
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	d.mux = mux
	return d
}

func dashboardDefaults(opts *DashboardOptions) DashboardOptions {
	var o DashboardOptions
	if opts != nil {
		o = *opts
	}
	if o.Identity == nil {
		o.Identity = func(*http.Request) (string, bool) { return AnonymousOperator, true }
	}
	o.PathPrefix = strings.TrimSuffix(o.PathPrefix, "/")
	if o.PageSize <= 0 {
		o.PageSize = DefaultDashboardPageSize
	}
	o.PageSize = min(o.PageSize, MaxDashboardPageSize)
	if o.Refresh == 0 {
		o.Refresh = DefaultDashboardRefresh
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultDashboardMaxBatch
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if r := o.Retention; r != nil && r.Interval == 0 {
		withDefault := *r
		withDefault.Interval = errand.DefaultRetentionInterval
		o.Retention = &withDefault
	}
	return o
}

// dashboardCSP allows the dashboard's own script, style sheet, forms and
// live streams and nothing else: no inline script or style, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	d.mux.ServeHTTP(w, r)
}

// page is what every page template gets: the layout's needs, and the
// page's own data in Data.
type page struct {
	Prefix   string
	Title    string
	Nav      string // which navigation entry is current
	Operator string
	CanWrite bool
	// RefreshSeconds, when positive, makes the page reload itself that
	// often (see static/refresh.js).
	RefreshSeconds int
	Now            time.Time
	HideArgs       bool
	Data           any
}

func (d *dashboard) newPage(r *http.Request, title, nav string, now time.Time, refresh bool) *page {
	op, canWrite := d.opts.Identity(r)
	p := &page{Prefix: d.opts.PathPrefix, Title: title, Nav: nav, Operator: op, CanWrite: canWrite, Now: now, HideArgs: d.opts.HideArgs}
	if refresh && d.opts.Refresh > 0 {
		p.RefreshSeconds = max(1, int(d.opts.Refresh/time.Second))
	}
	return p
}

func (d *dashboard) render(w http.ResponseWriter, status int, name string, p *page) {
	var b strings.Builder
	if err := d.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		d.opts.Logger.Error("dashboard: render page", "page", name, "err", err)
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// problem renders an error page: what went wrong and what to change.
func (d *dashboard) problem(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := d.newPage(r, http.StatusText(status), "", time.Now().UTC(), false)
	p.Data = msg
	d.render(w, status, "problem", p)
}

// fail renders err: a bad request for an *errandtype.InputError, a conflict
// for a state that forbids the change (errandtype.ErrWrongState) or a unique
// key held by another job, not found for errandtype.ErrNotFound, unavailable
// for errandtype.ErrStoreUnavailable, otherwise a server error.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	var in *errandtype.InputError
	var se *errandtype.StateError
	switch {
	case errors.As(err, &in):
		d.problem(w, r, http.StatusBadRequest, err.Error())
	case errors.As(err, &se), errors.Is(err, errandtype.ErrWrongState), errors.Is(err, errandtype.ErrUniqueConflict):
		d.problem(w, r, http.StatusConflict, err.Error())
	case errors.Is(err, errandtype.ErrNotFound):
		d.problem(w, r, http.StatusNotFound, fmt.Sprintf("nothing is at %q: it never existed, or retention has deleted it", r.URL.Path))
	case errors.Is(err, errandtype.ErrStoreUnavailable):
		d.opts.Logger.Warn("dashboard: store unavailable", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(UnavailableRetryAfter))
		d.problem(w, r, http.StatusServiceUnavailable, "the database could not be reached or dropped the connection; reload in a few seconds")
	default:
		// The store's error may name tables, files and addresses: it
		// goes to the log, as the API's do, not to the page.
		d.opts.Logger.Error("dashboard: read the store", "path", r.URL.Path, "err", err)
		d.problem(w, r, http.StatusInternalServerError, "the server failed to answer; see its log")
	}
}

// overviewData is the queues overview.
type overviewData struct {
	// Queues are a page of at most DefaultTopN queues, deepest first, from
	// the From'th; MoreQueues counts the queues after them, NextFrom is
	// where their page starts.
	Queues         []errandtype.QueueStats
	From, NextFrom int
	MoreQueues     int
	MoreKinds      int // insight rows of these queues past DefaultTopN
	States         []errandtype.JobState
	Workers        []*errandtype.WorkerRecord
	// WorkersLive counts the workers alive or draining, WorkersGone those
	// that stopped heartbeating without stopping: the registry keeps
	// stopped and gone workers for a day.
	WorkersLive, WorkersGone int
	// Totals sums Counts over the queues, by state.
	Totals map[errandtype.JobState]int
	Dead   int
	// Insights are the figures per queue and kind; Depth splits each
	// queue's queued jobs, and TotalDepth all of them.
	Insights   *errand.Insights
	Depth      map[string]*queueDepth
	TotalDepth queueDepth
	// Limits are the cluster's rate limits and retry budgets, with their
	// tokens now.
	Limits []*errandtype.LimiterRecord
	// Breakers are the circuit breakers of dependencies.
	Breakers []*errandtype.BreakerRecord
	// Pauses are the paused queues and kinds.
	Pauses []errandtype.Pause
	// FairKeys are each queue's fairness keys with the most waiting jobs.
	FairKeys map[string][]errandtype.FairnessKeyCount
	// Workflows counts the workflows of each state; nil when the store
	// keeps none.
	Workflows []workflowCount
}

// workflowCount is how many workflows are in State.
type workflowCount struct {
	State errandtype.WorkflowState
	N     int
}

// AnyWorkflows reports whether a workflow was counted.
func (o *overviewData) AnyWorkflows() bool {
	for _, c := range o.Workflows {
		if c.N > 0 {
			return true
		}
	}
	return false
}

// countWorkflows counts the workflows of each state, in the order of
// errandtype.WorkflowStates; nil when the store keeps no workflows.
func (d *dashboard) countWorkflows(ctx context.Context) ([]workflowCount, error) {
	if !d.workflows {
		return nil, nil
	}
	counts, err := d.c.WorkflowCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]workflowCount, len(errandtype.WorkflowStates))
	for i, st := range errandtype.WorkflowStates {
		out[i] = workflowCount{State: st, N: counts[st]}
	}
	return out, nil
}

// QueueFairKeys is queue's top fairness keys.
func (o *overviewData) QueueFairKeys(queue string) []errandtype.FairnessKeyCount {
	return o.FairKeys[queue]
}

// overviewFairKeys is how many fairness keys the overview shows per queue.
const overviewFairKeys = 5

// QueueDepth is queue's split of its queued jobs.
func (o *overviewData) QueueDepth(queue string) queueDepth {
	if q := o.Depth[queue]; q != nil {
		return *q
	}
	return queueDepth{}
}

func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data, err := d.loadOverview(r.Context(), r.URL.Query().Get("from"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.newPage(r, "Queues", "overview", now, true)
	p.Data = data
	d.render(w, http.StatusOK, "overview", p)
}

// loadOverview reads what the overview shows, its queues from the offset
// from.
func (d *dashboard) loadOverview(ctx context.Context, from string) (*overviewData, error) {
	stats, err := d.c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	workers, err := d.c.Workers(ctx)
	if err != nil {
		return nil, err
	}
	ins, err := d.c.Insights(ctx, nil)
	if err != nil {
		return nil, err
	}
	limits, err := d.c.Limits(ctx)
	if err != nil {
		return nil, err
	}
	breakers, err := d.c.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	pauses, err := d.c.Pauses(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := d.c.FairnessKeys(ctx, &errand.FairnessKeysOpts{Limit: overviewFairKeys})
	if err != nil {
		return nil, err
	}
	wfs, err := d.countWorkflows(ctx)
	if err != nil {
		return nil, err
	}
	data := &overviewData{States: errandtype.JobStates, Workers: workers, Totals: map[errandtype.JobState]int{},
		Depth: insightsByQueue(ins), Limits: limits, Breakers: breakers, Pauses: pauses,
		FairKeys: map[string][]errandtype.FairnessKeyCount{}, Workflows: wfs}
	data.pageQueues(stats, ins, from)
	data.tally(stats, keys)
	return data, nil
}

// tally fills in the overview's totals: live and gone workers, depth and
// jobs by state across queues, and each queue's fairness keys.
func (o *overviewData) tally(stats []errandtype.QueueStats, keys []errandtype.FairnessKeyCount) {
	for _, k := range keys {
		o.FairKeys[k.Queue] = append(o.FairKeys[k.Queue], k)
	}
	for _, wr := range o.Workers {
		switch wr.Status {
		case errandtype.WorkerAlive, errandstore.WorkerDraining:
			o.WorkersLive++
		case errandstore.WorkerGone:
			o.WorkersGone++
		}
	}
	for _, q := range o.Depth {
		o.TotalDepth.Ready += q.Ready
		o.TotalDepth.Scheduled += q.Scheduled
		o.TotalDepth.Held += q.Held
		o.TotalDepth.Paused += q.Paused
	}
	for _, q := range stats {
		for st, n := range q.Counts {
			o.Totals[st] += n
		}
		o.Dead += q.Dead
	}
}

// pageQueues keeps the page of queues that from (an offset into the
// queues, deepest first) names, and the busiest insight rows of those
// queues: a system with thousands of queues gets pages, not one page of
// megabytes.
func (o *overviewData) pageQueues(stats []errandtype.QueueStats, ins *errand.Insights, from string) {
	ranked := rankQueues(stats)
	o.From, _ = strconv.Atoi(from)
	o.From = min(max(o.From, 0), len(ranked))
	end := min(o.From+DefaultTopN, len(ranked))
	o.Queues, o.NextFrom, o.MoreQueues = ranked[o.From:end], end, len(ranked)-end
	shown := map[string]bool{}
	for _, q := range o.Queues {
		shown[q.Queue] = true
	}
	var kinds []errand.KindInsights
	for _, k := range ins.Kinds {
		if shown[k.Queue] {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) > DefaultTopN {
		busy := slices.Clone(kinds)
		slices.SortStableFunc(busy, func(a, b errand.KindInsights) int { return cmp.Compare(activity(b), activity(a)) })
		keep := map[[2]string]bool{}
		for _, k := range busy[:DefaultTopN] {
			keep[[2]string{k.Queue, k.Kind}] = true
		}
		kinds = slices.DeleteFunc(kinds, func(k errand.KindInsights) bool { return !keep[[2]string{k.Queue, k.Kind}] })
		o.MoreKinds = len(busy) - DefaultTopN
	}
	page := *ins
	page.Kinds = kinds // in the insights' order: by queue, then kind
	o.Insights = &page
}

// activity ranks a row of the throughput table: its jobs waiting, running
// and dead, and those that finished or failed in the last hour.
func activity(k errand.KindInsights) int {
	return k.Ready + k.Scheduled + k.Retrying + k.Held + k.Running + k.Dead + k.SucceededLastHour + k.FailedLastHour
}

// listData is one page of a job listing.
type listData struct {
	Jobs   []*errandtype.Job
	States []errandtype.JobState
	// Filter is the listing's filter as the visitor gave it.
	State, Queue, Kind string
	// ArgsHas and OutputHas are JSON objects to search args and output
	// for, Tag a tag (see errand.ListOpts).
	ArgsHas, OutputHas, Tag string
	// Class, Absorbed and Aged find flow control at work: the jobs whose
	// last error has a class (start_by), those that absorbed debounced
	// enqueues, those whose priority aged (see errand.ListOpts).
	Class          string
	Absorbed, Aged bool
	Limit          int
	// After is the cursor of this page; Next the cursor of the next page,
	// 0 when this is the last.
	After, Next int64
	MaxBatch    int
}

// QueryNext is the query string of the next page.
func (l *listData) QueryNext() template.URL { return l.query(l.Next) }

// QueryFirst is the query string of the first page.
func (l *listData) QueryFirst() template.URL { return l.query(0) }

// query encodes the listing's filter with the cursor after. Every value is
// query-escaped by url.Values, which is what makes it a safe template.URL.
func (l *listData) query(after int64) template.URL {
	v := url.Values{}
	for k, s := range map[string]string{"state": l.State, "queue": l.Queue, "kind": l.Kind,
		"args_has": l.ArgsHas, "output_has": l.OutputHas, "tag": l.Tag, "class": l.Class} {
		if s != "" {
			v.Set(k, s)
		}
	}
	for k, on := range map[string]bool{"absorbed": l.Absorbed, "aged": l.Aged} {
		if on {
			v.Set(k, "true")
		}
	}
	v.Set("limit", strconv.Itoa(l.Limit))
	if after > 0 {
		v.Set("after", strconv.FormatInt(after, 10))
	}
	return template.URL(v.Encode())
}

// listPage reads the filter and cursor of a listing from r's query and the
// page of jobs they select; state, when not empty, fixes the state.
func (d *dashboard) listPage(r *http.Request, state errandtype.JobState) (*listData, error) {
	q := r.URL.Query()
	l := &listData{States: errandtype.JobStates, State: q.Get("state"), Queue: strings.TrimSpace(q.Get("queue")),
		Kind: strings.TrimSpace(q.Get("kind")), Limit: d.opts.PageSize, MaxBatch: d.opts.MaxBatch,
		ArgsHas: strings.TrimSpace(q.Get("args_has")), OutputHas: strings.TrimSpace(q.Get("output_has")), Tag: strings.TrimSpace(q.Get("tag")),
		Class: strings.TrimSpace(q.Get("class"))}
	var err error
	if l.Absorbed, err = queryFlag(q, "absorbed"); err != nil {
		return nil, &errandtype.InputError{Field: "absorbed", Message: "give true, or leave it out"}
	}
	if l.Aged, err = queryFlag(q, "aged"); err != nil {
		return nil, &errandtype.InputError{Field: "aged", Message: "give true, or leave it out"}
	}
	if state != "" {
		l.State = string(state)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDashboardPageSize {
			return nil, &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%q is not a page size; use 1 to %d", s, MaxDashboardPageSize)}
		}
		l.Limit = n
	}
	if s := q.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, &errandtype.InputError{Field: "after", Message: fmt.Sprintf("%q is not a cursor; follow the page links", s)}
		}
		l.After = n
	}
	opts := &errand.ListOpts{Queue: l.Queue, Kind: l.Kind, AfterSeq: l.After, Limit: l.Limit + 1,
		Class: l.Class, Absorbed: l.Absorbed, Aged: l.Aged}
	if err := d.searchOpts(l, opts); err != nil {
		return nil, err
	}
	if l.State != "" {
		st, err := errandtype.ParseJobState(l.State)
		if err != nil {
			return nil, &errandtype.InputError{Field: "state", Message: err.Error()}
		}
		opts.States = []errandtype.JobState{st}
	}
	jobs, err := d.c.List(r.Context(), opts)
	if err != nil {
		return nil, err
	}
	if len(jobs) > l.Limit {
		jobs = jobs[:l.Limit]
		l.Next = jobs[len(jobs)-1].Seq
	}
	l.Jobs = jobs
	return l, nil
}

// searchOpts sets the search filters of l on opts. A dashboard that hides
// args refuses to search them, which would reveal them.
func (d *dashboard) searchOpts(l *listData, opts *errand.ListOpts) error {
	if d.opts.HideArgs && (l.ArgsHas != "" || l.OutputHas != "") {
		return &errandtype.InputError{Field: "args_has", Message: "this dashboard hides jobs' args and output, and a search of them would reveal them; search by tag"}
	}
	if l.ArgsHas != "" {
		opts.ArgsHas = json.RawMessage(l.ArgsHas)
	}
	if l.OutputHas != "" {
		opts.OutputHas = json.RawMessage(l.OutputHas)
	}
	if l.Tag != "" {
		opts.Tags = []string{l.Tag}
	}
	return nil
}

func (d *dashboard) jobList(w http.ResponseWriter, r *http.Request) {
	d.listing(w, r, "", "Jobs", "jobs", "jobs")
}

func (d *dashboard) deadList(w http.ResponseWriter, r *http.Request) {
	d.listing(w, r, errandtype.StateDead, "Dead letters", "dead", "dead")
}

func (d *dashboard) listing(w http.ResponseWriter, r *http.Request, state errandtype.JobState, title, nav, tmpl string) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l, err := d.listPage(r, state)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	// The dead-letter page holds a selection to replay: reloading it
	// would clear the visitor's checkboxes.
	p := d.newPage(r, title, nav, now, state != errandtype.StateDead)
	p.Data = l
	d.render(w, http.StatusOK, tmpl, p)
}

// detailData is one job's page.
type detailData struct {
	Job  *errandtype.Job
	Next string
	// Compensated: the job is a dead or cancelled step of a workflow that
	// has begun compensating or was rerun, which refuses its replay; the
	// page offers the workflow's rerun instead.
	Compensated bool
	// Audit is every operator action on the job, newest first.
	Audit []errandtype.AuditRecord
	// Steps are what its durable handler recorded, in order.
	Steps []errandtype.Step
	// Stream is the end of its output stream, StreamCut the bytes before
	// it that the page leaves out, StreamAfter the index of its last chunk
	// (-1: none yet).
	Stream      string
	StreamCut   int
	StreamAfter int
	// StreamLive: the job runs and has written, so the page follows its
	// stream as it grows (static/stream.js, reading /stream/{id}).
	StreamLive bool
}

// maxStreamShown bounds the output stream a job's page shows: its end.
const maxStreamShown = 64 << 10

func (d *dashboard) jobDetail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	now, err := d.now(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	j, err := d.c.Get(ctx, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	audit, err := d.c.Audit(ctx, &errand.AuditOpts{JobID: id, Limit: errandstore.MaxAuditLimit})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	handled := true
	if j.State.Waiting() {
		ws, err := d.c.Workers(ctx)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		handled = errand.KindHandled(ws, j.Queue, j.Kind)
	}
	// A replayable job's page holds forms to fill in (a reason, corrected
	// args): reloading it would lose them.
	_, canWrite := d.opts.Identity(r)
	p := d.newPage(r, "Job "+j.ID, "jobs", now, !(canWrite && replayAction.Applies(j.State)))
	next := nextStep(j, now, handled)
	if j.HeldByBreaker != nil {
		h, err := d.c.BreakerHolds(ctx)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if b := h.HeldBy(j.Kind); b != nil {
			next += breakerStep(b, now)
		}
	}
	steps, err := d.c.Steps(ctx, id)
	if err != nil && !errors.Is(err, errand.ErrStepsUnsupported) {
		d.fail(w, r, err)
		return
	}
	if s := errand.Suspension(steps); s != "" && j.State.Waiting() {
		next += "; " + s
	}
	data := &detailData{Job: j, Next: next, Audit: audit, Steps: steps}
	if err := d.readStream(ctx, data); err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.explainCompensatedStep(ctx, data); err != nil {
		d.fail(w, r, err)
		return
	}
	p.Data = data
	d.render(w, http.StatusOK, "job", p)
}

// readStream fills in the end of the output stream of data's job.
func (d *dashboard) readStream(ctx context.Context, data *detailData) error {
	var all strings.Builder
	data.StreamAfter = -1
	for after := -1; ; {
		page, err := d.c.ReadStream(ctx, data.Job.ID, after, errand.MaxStreamPage, 0)
		if errors.Is(err, errand.ErrStepsUnsupported) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, c := range page.Chunks {
			all.WriteString(c.Data)
			after = c.Index
		}
		data.StreamAfter = after
		if len(page.Chunks) < errand.MaxStreamPage {
			// A job that has not written yet shows no stream until a reload.
			data.StreamLive = after >= 0 && page.State == errandtype.StateRunning && !d.opts.HideArgs
			break
		}
	}
	s := all.String()
	if len(s) > maxStreamShown {
		cut := len(s) - maxStreamShown
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		data.Stream, data.StreamCut = s[cut:], cut
		return nil
	}
	data.Stream = s
	return nil
}

// jobStream follows a job's output stream for its page, as server-sent
// events (see serveStream); a stream is the job's data, hidden with
// HideArgs.
func (d *dashboard) jobStream(w http.ResponseWriter, r *http.Request) {
	if d.opts.HideArgs {
		d.problem(w, r, http.StatusForbidden, "this dashboard hides jobs' data (HideArgs), and a job's stream is its data")
		return
	}
	after, err := streamAfter(r)
	if err == nil {
		err = serveStream(w, r, d.c, r.PathValue("id"), after, d.opts.Logger)
	}
	if err != nil {
		d.fail(w, r, err)
	}
}

// explainCompensatedStep marks data's job, a dead or cancelled step of a
// workflow that refuses its replay, as Compensated, and says so in Next
// with what happens to the workflow.
func (d *dashboard) explainCompensatedStep(ctx context.Context, data *detailData) error {
	j := data.Job
	if !d.workflows || !replayAction.Applies(j.State) || !errandstore.ReplayHeldByWorkflow(j.ID, j.WorkflowID) {
		return nil
	}
	wf, err := d.c.Workflow(ctx, *j.WorkflowID)
	if errors.Is(err, errandtype.ErrNotFound) || (err == nil && wf.CompensationStartedAt == nil && wf.RerunAs == nil) {
		return nil
	}
	if err != nil {
		return err
	}
	data.Compensated = true
	data.Next = fmt.Sprintf("%s; it is not replayed, as its workflow %s has begun compensating: %s", j.State, wf.ID, workflowview.Next(wf))
	return nil
}
