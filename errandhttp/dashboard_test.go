package errandhttp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// The dashboard tests' kinds. failArgs fails permanently with its Note as
// the message, so a test chooses the error text; panicArgs panics, leaving
// a stack in the history; flakyArgs fails with a retryable class.
type failArgs struct {
	Note string `json:"note"`
}

func (failArgs) Kind() string { return "dash_fail" }

type panicArgs struct{}

func (panicArgs) Kind() string { return "dash_panic" }

type flakyArgs struct {
	Order int `json:"order"`
}

func (flakyArgs) Kind() string { return "dash_flaky" }

type okArgs struct{}

func (okArgs) Kind() string { return "dash_ok" }

// testStart is the fake clocks' start, on a whole second so that times
// survive the stores' microsecond precision.
var testStart = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func testConfig(clk *errandtest.Clock) *errand.Config {
	ks := errand.NewKinds()
	errand.Handle(ks, func(_ context.Context, _ *errandtype.Job, a failArgs) error {
		return errand.Permanent(errors.New(a.Note))
	}, nil)
	errand.Handle(ks, func(context.Context, *errandtype.Job, panicArgs) error {
		panic("dash_panic handler gave up")
	}, nil)
	errand.Handle(ks, func(context.Context, *errandtype.Job, flakyArgs) error {
		return errand.WithClass("upstream_down", errors.New("upstream answered 503"))
	}, nil)
	errand.Handle(ks, func(context.Context, *errandtype.Job, okArgs) error { return nil }, nil)
	return &errand.Config{Kinds: ks, Clock: clk, AllowUnknownKinds: true}
}

// newSQLiteClient returns a client over a fresh SQLite file, on clk.
func newSQLiteClient(t *testing.T, clk *errandtest.Clock) *errand.Client[*sql.Tx] {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "errand.db"), &sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := errand.NewClient(st, testConfig(clk))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// enqueue enqueues one job or fails the test.
func enqueue[TTx any](t *testing.T, c *errand.Client[TTx], args errand.JobArgs, opts *errand.EnqueueOpts) *errandtype.Job {
	t.Helper()
	r, err := c.Enqueue(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("enqueue %s: %v", args.Kind(), err)
	}
	return r.Job
}

// workOne runs one job of queue, which must be there.
func workOne[TTx any](t *testing.T, c *errand.Client[TTx], queue string) {
	t.Helper()
	r, err := c.WorkOne(context.Background(), &errand.WorkOneOpts{Queues: []string{queue}, Owner: "test-worker"})
	if err != nil {
		t.Fatalf("work one in %s: %v", queue, err)
	}
	if r.Result == "idle" {
		t.Fatalf("work one in %s: no job to run", queue)
	}
}

// seed fills a store with one job in each situation the dashboard shows,
// in queues "mail" and "billing":
//
//   - dead-1: dead (class permanent), args {"note":"card declined"}
//   - panic-1: dead after a panic, with a stack
//   - retry-1: retrying (class upstream_down), attempt 1 of 5
//   - ok-1: succeeded
//   - ready-1: queued, of kind dash_nobody, which no worker handles
//   - later-1: scheduled an hour ahead
func seed[TTx any](t *testing.T, c *errand.Client[TTx]) {
	t.Helper()
	enqueue(t, c, failArgs{Note: "card declined"}, &errand.EnqueueOpts{ID: "dead-1", Queue: "mail"})
	workOne(t, c, "mail")
	enqueue(t, c, panicArgs{}, &errand.EnqueueOpts{ID: "panic-1", Queue: "mail", MaxAttempts: 1})
	workOne(t, c, "mail")
	enqueue(t, c, flakyArgs{}, &errand.EnqueueOpts{ID: "retry-1", Queue: "billing", MaxAttempts: 5, BackoffBase: time.Minute, BackoffMax: time.Minute})
	workOne(t, c, "billing")
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: "ok-1", Queue: "billing"})
	workOne(t, c, "billing")
	enqueue(t, c, errand.RawArgs{KindName: "dash_nobody", JSON: []byte(`{"to":"ana@example.com"}`)}, &errand.EnqueueOpts{ID: "ready-1", Queue: "mail"})
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: "later-1", Queue: "billing", Delay: time.Hour})
}

// get fetches path from h and returns the status and body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// post sends form to h at path as a same-origin browser form would.
func post(t *testing.T, h http.Handler, path string, form url.Values) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func mustGet(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	code, body := get(t, h, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d\n%s", path, code, body)
	}
	return body
}

func wantContains(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Errorf("%s lacks %q", what, s)
		}
	}
}

func wantLacks(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(body, s) {
			t.Errorf("%s contains %q", what, s)
		}
	}
}

// checkOverview seeds c's store and checks the queues overview: both stores
// run it.
func checkOverview[TTx any](t *testing.T, c *errand.Client[TTx]) {
	seed(t, c)
	h := NewDashboard(c, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: status %d\n%s", rec.Code, rec.Body)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	body := rec.Body.String()
	for _, q := range []struct {
		name   string
		counts map[errandtype.JobState]int
	}{
		{"billing", map[errandtype.JobState]int{errandtype.StateQueued: 1, errandtype.StateRetrying: 1, errandtype.StateSucceeded: 1}},
		{"mail", map[errandtype.JobState]int{errandtype.StateQueued: 1, errandtype.StateDead: 2}},
	} {
		row := tableRow(t, body, `/jobs?queue=`+q.name+`"`)
		for _, st := range errandtype.JobStates {
			want := "0"
			if n := q.counts[st]; n > 0 {
				want = `state=` + string(st) + `"`
				if st == errandtype.StateDead {
					want += ` class="bad">2<`
				}
			}
			if !strings.Contains(row, want) {
				t.Errorf("queue %s, state %s: row lacks %q:\n%s", q.name, st, want, row)
			}
		}
	}
	// Dead letters in all: 2; ready-1's kind has no worker.
	wantContains(t, "overview", body, `<span class="n">2</span> dead letters`, `dash_nobody (1 waiting)`, `id="rates"`, `id="workers"`,
		`<span class="n">1</span> ready`, `<span class="n">1</span> scheduled`, `<span class="n">0</span> held by ordering key`)
	wantLacks(t, "overview", body, "not reported")
	// Queued split by why the jobs wait: billing has later-1 scheduled,
	// mail has ready-1 ready.
	billing := tableRow(t, body, `/jobs?queue=billing"`)
	wantContains(t, "billing row", billing, `<td class="num">0</td><td class="num">1</td><td class="num">0</td>`)
	// The rates panel: one row per queue and kind, with real figures.
	rates := body[strings.Index(body, `id="rates"`):strings.Index(body, `id="workers"`)]
	fail := tableRow(t, rates, `kind=dash_fail"`)
	wantContains(t, "dash_fail rates", fail, `100.0% <span class="note">(1)</span>`, `<span class="class">permanent</span> 1`,
		`?queue=mail&amp;kind=dash_fail">1</a>`, `<td class="num bad">1</td><td class="num">1</td>`)
	flaky := tableRow(t, rates, `kind=dash_flaky"`)
	wantContains(t, "dash_flaky rates", flaky, `<span class="class">upstream_down</span> 1`, `<td class="num">1</td>`)
	ok := tableRow(t, rates, `kind=dash_ok"`)
	wantContains(t, "dash_ok rates", ok, `<td class="num">1.00</td><td class="num">0.20</td><td class="num">0.02</td>`, `<td class="num">0ms</td>`)
}

// tableRow returns the table row of body that contains marker.
func tableRow(t *testing.T, body, marker string) string {
	t.Helper()
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no row with %q in\n%s", marker, body)
	}
	start := strings.LastIndex(body[:i], "<tr>")
	end := strings.Index(body[i:], "</tr>")
	return body[start : i+end]
}

func TestDashboardOverview(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	checkOverview(t, newSQLiteClient(t, clk))
}

func TestDashboardOverviewShowsWorkers(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	_, err := c.Store().WorkerRegister(context.Background(), &errandstore.WorkerRegisterParams{
		ID: "web-1:812", Host: "web-1", PID: 812, Queues: []errandtype.WorkerQueue{{Name: "mail", Concurrency: 4}},
		Kinds: []string{"dash_fail"}, HeartbeatInterval: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	body := mustGet(t, NewDashboard(c, nil), "/")
	row := tableRow(t, body, "web-1:812")
	wantContains(t, "worker row", row, "web-1", "812", "alive", "mail×4", "dash_fail")
	wantLacks(t, "overview", body, "No worker has registered")
}

// TestDashboardOverviewCountsLiveWorkers: the workers tile counts the
// live workers, not the stopped and gone ones the registry keeps for a day,
// and a worker gone without stopping (killed) is counted apart.
func TestDashboardOverviewCountsLiveWorkers(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	register := func(id string) {
		t.Helper()
		_, err := c.Store().WorkerRegister(context.Background(), &errandstore.WorkerRegisterParams{
			ID: id, Host: "web-1", PID: 812, Queues: []errandtype.WorkerQueue{{Name: "mail", Concurrency: 4}},
			Kinds: []string{"dash_fail"}, HeartbeatInterval: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	register("killed")
	register("stopped")
	if err := c.Store().WorkerStop(context.Background(), &errandstore.WorkerStopParams{ID: "stopped"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(errandstore.WorkerMissedHeartbeats * 5 * time.Second)
	register("alive")
	body := mustGet(t, NewDashboard(c, nil), "/")
	wantContains(t, "overview", body, `<span class="n">1</span> workers alive`, `<span class="n">1</span> workers gone`)
	wantContains(t, "killed worker's row", tableRow(t, body, "killed"), "gone")
}

func TestDashboardEmptyStore(t *testing.T) {
	body := mustGet(t, NewDashboard(newSQLiteClient(t, errandtest.NewClock(testStart)), nil), "/")
	wantContains(t, "overview", body, "No jobs yet.", "No worker has registered.", `<span class="n">0</span> dead letters`,
		`<span class="n">0</span> workers alive`)
	wantLacks(t, "overview", body, "workers gone")
}

// jobIDs lists the job links of a page, in order.
func jobIDs(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<td class="id"><a href="/jobs/([^"]+)">`).FindAllStringSubmatch(body, -1) {
		id, _ := url.PathUnescape(m[1])
		ids = append(ids, id)
	}
	return ids
}

func TestDashboardJobListFiltersAndPages(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	seed(t, c)
	for _, id := range []string{"bulk-1", "bulk-2", "bulk-3", "bulk-4", "bulk-5"} {
		enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: id, Queue: "bulk"})
	}
	h := NewDashboard(c, nil)

	var seen []string
	next := "/jobs?queue=bulk&limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 5 jobs at 2 a page: %v", seen)
		}
		body := mustGet(t, h, next)
		seen = append(seen, jobIDs(body)...)
		next = ""
		if m := regexp.MustCompile(`<a href="\?([^"]+)" rel="next">`).FindStringSubmatch(body); m != nil {
			next = "/jobs?" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if got := strings.Join(seen, " "); got != "bulk-1 bulk-2 bulk-3 bulk-4 bulk-5" {
		t.Errorf("paging through queue bulk gave %q", got)
	}

	body := mustGet(t, h, "/jobs?state=dead")
	if got := strings.Join(jobIDs(body), " "); got != "dead-1 panic-1" {
		t.Errorf("state=dead lists %q", got)
	}
	body = mustGet(t, h, "/jobs?kind=dash_flaky&queue=billing")
	if got := strings.Join(jobIDs(body), " "); got != "retry-1" {
		t.Errorf("kind=dash_flaky lists %q", got)
	}
	wantContains(t, "filtered list", body, `name="kind" value="dash_flaky"`, `name="queue" value="billing"`)

	for _, bad := range []string{"/jobs?state=zombie", "/jobs?limit=0", "/jobs?limit=100000", "/jobs?after=x"} {
		if code, body := get(t, h, bad); code != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400\n%s", bad, code, body)
		}
	}
	_, body = get(t, h, "/jobs?state=zombie")
	wantContains(t, "bad state page", body, "unknown state &#34;zombie&#34;: use one of queued")
}

func TestDashboardJobDetail(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	seed(t, c)
	h := NewDashboard(c, nil)

	body := mustGet(t, h, "/jobs/dead-1")
	wantContains(t, "dead job", body,
		"dead after attempt 1 of 20 (class permanent): replay to run again",
		"{\n  &#34;note&#34;: &#34;card declined&#34;\n}", // pretty-printed args
		`<span class="class">permanent</span>`, "card declined",
		"No operator action on this job.", `action="/replay/confirm"`, `action="/replay-args/confirm"`, `Last worker</dt><dd>test-worker`)
	wantLacks(t, "dead job", body, `action="/cancel/confirm"`)

	body = mustGet(t, h, "/jobs/panic-1")
	wantContains(t, "panicked job", body, `<span class="class">panic</span>`, "dash_panic handler gave up", "<summary>stack</summary>", "goroutine")

	body = mustGet(t, h, "/jobs/retry-1")
	wantContains(t, "retrying job", body, "retries at 14:00:", ", attempt 2 of 5", "upstream_down", "upstream answered 503", `action="/cancel/confirm"`)

	body = mustGet(t, h, "/jobs/ready-1")
	wantContains(t, "unhandled job", body, "no live worker handles kind dash_nobody in queue mail")

	// A running job shows its lease.
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: "run-1", Queue: "run"})
	if _, err := c.Store().JobClaimMany(context.Background(), &errandstore.JobClaimParams{Queues: []string{"run"}, Limit: 1, Lease: time.Minute, Owner: "web-2:77"}); err != nil {
		t.Fatal(err)
	}
	body = mustGet(t, h, "/jobs/run-1")
	wantContains(t, "running job", body, "running under lease of web-2:77 until 14:01:00 UTC, attempt 1 of 20",
		"Lease owner</dt><dd>web-2:77", "Lease until</dt><dd>2026-11-30 14:01:00 UTC")

	if code, _ := get(t, h, "/jobs/no-such-job"); code != http.StatusNotFound {
		t.Errorf("GET /jobs/no-such-job: status %d, want 404", code)
	}
	wantLacks(t, "a job without steps", body, `id="steps"`, `id="stream"`)

	// The steps a durable handler recorded, results hidden with HideArgs.
	run, err := c.Get(context.Background(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	lease := errandstore.JobLease{ID: "run-1", LeaseToken: *run.LeaseToken}
	for _, st := range []errandtype.Step{
		{Index: 0, Name: "charge", Result: json.RawMessage(`{"card":"4111"}`)},
		{Index: 1, Name: "mail", Error: "mailbox full"},
	} {
		if err := errandstore.RecordStep(context.Background(), c.Store().(errandstore.StepStore), &errandstore.JobStepRecordParams{JobLease: lease, Step: st}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Store().(errandstore.StepStore).JobStreamAppend(context.Background(), &errandstore.JobStreamAppendParams{JobLease: lease, Data: "reading <rows>\n"}); err != nil {
		t.Fatal(err)
	}
	body = mustGet(t, h, "/jobs/run-1")
	wantContains(t, "a job with a stream", body, `id="stream"`, "reading &lt;rows&gt;", "it grows here as the job writes",
		`data-stream="/stream/run-1" data-after="0"`, `src="/static/stream.js"`)
	if code, body := get(t, NewDashboard(c, &DashboardOptions{HideArgs: true}), "/stream/run-1"); code != http.StatusForbidden || !strings.Contains(body, "HideArgs") {
		t.Errorf("GET /stream/run-1 with HideArgs: %d %q, want 403", code, body)
	}
	if code, _ := get(t, h, "/stream/no-such-job"); code != http.StatusNotFound {
		t.Errorf("GET /stream/no-such-job: status %d, want 404", code)
	}
	wantContains(t, "a job with steps", body, `id="steps"`, "Steps (2)", "<td>charge</td>", "4111", "<td>mail</td>", "mailbox full")
	body = mustGet(t, NewDashboard(c, &DashboardOptions{HideArgs: true}), "/jobs/run-1")
	wantContains(t, "a job with steps, args hidden", body, "<td>charge</td>", "mailbox full")
	wantLacks(t, "a job with steps, args hidden", body, "4111")

	// A job waiting for a signal says so in what happens next.
	if err := errandstore.RecordStep(context.Background(), c.Store().(errandstore.StepStore), &errandstore.JobStepRecordParams{JobLease: lease,
		Step: errandtype.Step{Index: 2, Name: errandstore.WaitStepName, Result: json.RawMessage(`{"signal":"approval"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Store().JobRecordOutcomes(context.Background(), &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{
		{JobLease: lease, Kind: errandstore.OutcomeSnooze, Delay: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	body = mustGet(t, h, "/jobs/run-1")
	wantContains(t, "a job waiting for a signal", body, "its handler waits for signal &#34;approval&#34; without a timeout")
}

func TestDashboardJobWithSlashInID(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: "invoice/2026/7 ?#"})
	h := NewDashboard(c, nil)
	body := mustGet(t, h, "/jobs")
	ids := jobIDs(body)
	if len(ids) != 1 || ids[0] != "invoice/2026/7 ?#" {
		t.Fatalf("job links = %q", ids)
	}
	m := regexp.MustCompile(`<td class="id"><a href="([^"]+)">`).FindStringSubmatch(body)
	wantContains(t, "job page", mustGet(t, h, m[1]), "invoice/2026/7 ?#")
}

func TestDashboardHideArgs(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	seed(t, c)
	h := NewDashboard(c, &DashboardOptions{HideArgs: true})
	body := mustGet(t, h, "/jobs/dead-1")
	wantContains(t, "job page with hidden args", body, `<p class="hidden">hidden</p>`)
	wantLacks(t, "job page with hidden args", body, "&#34;note&#34;")
	body = mustGet(t, NewDashboard(c, nil), "/jobs/dead-1")
	wantContains(t, "job page", body, "&#34;note&#34;")
}

// replayed reads a job and its replay audit.
func replayed(t *testing.T, c *errand.Client[*sql.Tx], id string) (*errandtype.Job, []errandtype.ReplayRecord) {
	t.Helper()
	j, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := c.ReplayAudit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j, audit
}

func TestDashboardReplayAfterConfirmation(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	seed(t, c)
	h := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "ana", true }})

	body := mustGet(t, h, "/dead")
	wantContains(t, "dead letters", body, `name="id" value="dead-1"`, `name="id" value="panic-1"`, `action="/replay/confirm"`)
	wantLacks(t, "dead letters", body, "retry-1")

	// The first POST asks; it changes nothing.
	form := url.Values{"id": {"dead-1", "panic-1", "retry-1", "gone-1"}, "reason": {"card processor fixed"}}
	code, body := post(t, h, "/replay/confirm", form)
	if code != http.StatusOK {
		t.Fatalf("confirm: status %d\n%s", code, body)
	}
	wantContains(t, "confirm page", body, "Replay 2 of the 4 selected jobs as <strong>ana</strong>",
		"retrying: only dead and cancelled jobs can be replayed", "no such job",
		`action="/replay"`, `<input type="hidden" name="id" value="dead-1">`, `<input type="hidden" name="id" value="panic-1">`,
		`<input type="hidden" name="reason" value="card processor fixed">`, "Replay 2 jobs")
	wantLacks(t, "confirm page", body, `<input type="hidden" name="id" value="retry-1">`)
	if j, audit := replayed(t, c, "dead-1"); j.State != errandtype.StateDead || len(audit) != 0 {
		t.Fatalf("after the confirm page dead-1 is %s with %d replays; want it untouched", j.State, len(audit))
	}

	// The second POST replays.
	code, body = post(t, h, "/replay", url.Values{"id": {"dead-1", "panic-1"}, "reason": {"card processor fixed"}})
	if code != http.StatusOK {
		t.Fatalf("replay: status %d\n%s", code, body)
	}
	wantContains(t, "result page", body, "Replay: 2 of 2 done, by ana")
	for _, id := range []string{"dead-1", "panic-1"} {
		j, audit := replayed(t, c, id)
		if j.State != errandtype.StateQueued || len(audit) != 1 || audit[0].Operator != "ana" || audit[0].Reason != "card processor fixed" {
			t.Errorf("%s after replay: state %s, audit %+v", id, j.State, audit)
		}
	}
	body = mustGet(t, h, "/jobs/dead-1")
	row := tableRow(t, body, "card processor fixed")
	wantContains(t, "replay audit row", row, "<td>ana</td>", "<td>dead</td>", "2026-11-30 14:00:00 UTC")

	// Replaying again finds the job no longer dead: a conflict, nothing
	// written.
	code, body = post(t, h, "/replay", url.Values{"id": {"dead-1"}, "reason": {"again"}})
	if code != http.StatusConflict {
		t.Errorf("second replay: status %d, want 409\n%s", code, body)
	}
	wantContains(t, "second replay", body, "job is queued; only dead or cancelled jobs can be replayed")
	if _, audit := replayed(t, c, "dead-1"); len(audit) != 1 {
		t.Errorf("second replay wrote an audit record: %+v", audit)
	}
}

func TestDashboardActionsRefuseBadRequests(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	seed(t, c)
	readOnly := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "viewer", false }})
	h := NewDashboard(c, &DashboardOptions{MaxBatch: 2})

	tooMany := url.Values{"id": {"a", "b", "c"}, "reason": {"x"}}
	cases := []struct {
		name string
		h    http.Handler
		req  *http.Request
		want int
	}{
		{"no reason", h, formRequest("/replay", url.Values{"id": {"dead-1"}}), http.StatusBadRequest},
		{"blank reason", h, formRequest("/replay", url.Values{"id": {"dead-1"}, "reason": {"  "}}), http.StatusBadRequest},
		{"no job", h, formRequest("/replay", url.Values{"reason": {"x"}}), http.StatusBadRequest},
		{"over the batch", h, formRequest("/replay", tooMany), http.StatusBadRequest},
		{"over the batch, confirm", h, formRequest("/replay/confirm", tooMany), http.StatusBadRequest},
		{"read-only operator", readOnly, formRequest("/replay", url.Values{"id": {"dead-1"}, "reason": {"x"}}), http.StatusForbidden},
		{"read-only operator cancels", readOnly, formRequest("/cancel", url.Values{"id": {"ready-1"}, "reason": {"x"}}), http.StatusForbidden},
		{"GET replay", h, httptest.NewRequest(http.MethodGet, "/replay", nil), http.StatusMethodNotAllowed},
		{"POST overview", h, formRequest("/", url.Values{}), http.StatusMethodNotAllowed},
		{"oversized form", h, formRequest("/replay", url.Values{"id": {"dead-1"}, "reason": {strings.Repeat("x", maxActionBody)}}), http.StatusRequestEntityTooLarge},
	}
	cross := formRequest("/replay", url.Values{"id": {"dead-1"}, "reason": {"x"}})
	cross.Header.Set("Sec-Fetch-Site", "cross-site")
	cases = append(cases, struct {
		name string
		h    http.Handler
		req  *http.Request
		want int
	}{"cross-site form", h, cross, http.StatusForbidden})

	for _, tc := range cases {
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, tc.req)
		if rec.Code != tc.want {
			t.Errorf("%s: status %d, want %d\n%s", tc.name, rec.Code, tc.want, rec.Body)
		}
	}
	if j, audit := replayed(t, c, "dead-1"); j.State != errandtype.StateDead || len(audit) != 0 {
		t.Errorf("refused requests changed dead-1: %s, %+v", j.State, audit)
	}
	if j, _ := replayed(t, c, "ready-1"); j.State != errandtype.StateQueued {
		t.Errorf("refused requests changed ready-1: %s", j.State)
	}

	body := mustGet(t, readOnly, "/dead")
	wantLacks(t, "read-only dead letters", body, `type="checkbox"`, "Replay selected")
	body = mustGet(t, readOnly, "/jobs/dead-1")
	wantLacks(t, "read-only job page", body, `action="/replay/confirm"`)
	wantContains(t, "read-only header", body, "viewer (read only)")
}

func formRequest(path string, form url.Values) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

func TestDashboardCancelAfterConfirmation(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	seed(t, c)
	h := NewDashboard(c, nil)

	body := mustGet(t, h, "/jobs/later-1")
	wantContains(t, "scheduled job", body, "runs at 15:00:00 UTC, attempt 1 of 20", `action="/cancel/confirm"`)

	code, body := post(t, h, "/cancel/confirm", url.Values{"id": {"later-1", "dead-1"}, "reason": {"customer left"}})
	if code != http.StatusOK {
		t.Fatalf("confirm: status %d\n%s", code, body)
	}
	wantContains(t, "cancel confirm", body, "Cancel 1 of the 2 selected jobs as <strong>"+AnonymousOperator+"</strong>",
		"dead: only queued, retrying and running jobs can be cancelled", `action="/cancel"`, "Cancel 1 job<")
	if j, _ := replayed(t, c, "later-1"); j.State != errandtype.StateQueued {
		t.Fatalf("the confirm page cancelled later-1")
	}
	code, body = post(t, h, "/cancel", url.Values{"id": {"later-1"}, "reason": {"customer left"}})
	if code != http.StatusOK {
		t.Fatalf("cancel: status %d\n%s", code, body)
	}
	if j, _ := replayed(t, c, "later-1"); j.State != errandtype.StateCancelled {
		t.Errorf("later-1 after cancel: %s", j.State)
	}
	wantContains(t, "cancelled job", mustGet(t, h, "/jobs/later-1"), "cancelled: replay to run again", `action="/replay/confirm"`)
}

// hostile is text that would run script, or break out of an attribute, if
// a page printed it unescaped.
const hostile = `<script>alert("x")</script>'"><img src=x onerror=alert(1)>`

func TestDashboardEscapesEverything(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	kind := `<script>alert("k")</script>`
	queue := `q"'><b>x</b>`
	enqueue(t, c, failArgs{Note: hostile}, &errand.EnqueueOpts{ID: "evil-1", Queue: queue, Tags: []string{hostile}})
	workOne(t, c, queue)
	enqueue(t, c, errand.RawArgs{KindName: kind, JSON: []byte(`{"html":"</pre><script>alert(2)</script>"}`)}, &errand.EnqueueOpts{ID: `evil-"2"<i>`, Queue: queue})
	h := NewDashboard(c, nil)

	pages := []string{"/", "/jobs", "/dead", "/jobs/evil-1", "/jobs/" + url.PathEscape(`evil-"2"<i>`),
		"/jobs?kind=" + url.QueryEscape(hostile) + "&queue=" + url.QueryEscape(hostile),
		"/dead?kind=" + url.QueryEscape(hostile)}
	for _, p := range pages {
		// A filter by a kind or queue no job could have is refused, on a
		// page that names it, escaped too.
		code, body := get(t, h, p)
		if code != http.StatusOK && !(strings.Contains(p, "?") && code == http.StatusBadRequest) {
			t.Fatalf("GET %s: status %d\n%s", p, code, body)
		}
		wantLacks(t, p, body, "<script>alert", "<img src=x", "<b>x</b>", "<i>", `'"><`)
		// Every page's only script is the dashboard's own file.
		for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
			if m != `<script src="/static/refresh.js" defer>` {
				t.Errorf("%s has a script tag %s", p, m)
			}
		}
		if strings.Contains(body, "style=") || strings.Contains(body, "<style") {
			t.Errorf("%s has inline style, which the CSP forbids", p)
		}
	}
	wantContains(t, "dead letters", mustGet(t, h, "/dead"), "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")
	wantContains(t, "overview", mustGet(t, h, "/"), "q&#34;&#39;&gt;&lt;b&gt;x&lt;/b&gt;")

	code, body := post(t, h, "/replay/confirm", url.Values{"id": {"evil-1"}, "reason": {hostile}})
	if code != http.StatusOK {
		t.Fatalf("confirm: status %d", code)
	}
	wantLacks(t, "confirm page", body, "<script>alert", "<img src=x")
	code, body = post(t, h, "/replay", url.Values{"id": {"evil-1"}, "reason": {hostile}})
	if code != http.StatusOK {
		t.Fatalf("replay: status %d\n%s", code, body)
	}
	wantLacks(t, "result page", body, "<script>alert", "<img src=x")
	wantLacks(t, "audit", mustGet(t, h, "/jobs/evil-1"), "<script>alert", "<img src=x")
}

func TestDashboardStaticFilesAndPrefix(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	seed(t, c)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", NewDashboard(c, &DashboardOptions{PathPrefix: "/ops/"})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fetch := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := fetch("/ops/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ops/: %d", resp.StatusCode)
	}
	wantContains(t, "prefixed overview", body, `href="/ops/static/dashboard.css"`, `src="/ops/static/refresh.js"`,
		`href="/ops/jobs?queue=mail"`, `href="/ops/dead"`)
	wantLacks(t, "prefixed overview", body, `href="/jobs`, `href="/dead"`)
	wantContains(t, "prefixed job list", func() string { _, b := fetch("/ops/jobs"); return b }(), `href="/ops/jobs/dead-1"`)

	for path, ctype := range map[string]string{"/ops/static/dashboard.css": "text/css", "/ops/static/refresh.js": "javascript"} {
		resp, body := fetch(path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}

	// The dead-letter page and the pages with forms to fill do not reload.
	_, body = fetch("/ops/dead")
	wantLacks(t, "dead letters", body, "refresh.js")
	wantContains(t, "dead letters", body, `data-refresh="0"`)
	_, body = fetch("/ops/")
	wantContains(t, "overview", body, `data-refresh="10"`)
	off := NewDashboard(c, &DashboardOptions{Refresh: -1})
	wantLacks(t, "overview without refresh", mustGet(t, off, "/"), "refresh.js")
}

// TestDashboardCancelRunning: a running job's page shows its checkpoint and
// a cancel button; cancelling it records a request, which the job page and
// the list show while the job runs.
func TestDashboardCancelRunning(t *testing.T) {
	ctx := context.Background()
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	enqueue(t, c, errand.RawArgs{KindName: "import"}, &errand.EnqueueOpts{ID: "import-1", Queue: "bulk"})
	js, err := c.Claim(ctx, &errand.ClaimOpts{Queue: "bulk", Kinds: []string{"import"}, Owner: "node-3"})
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v, %v", js, err)
	}
	if err := c.Store().JobSetProgress(ctx, &errandstore.JobSetProgressParams{ID: "import-1", LeaseToken: *js[0].LeaseToken,
		Progress: []byte(`{"next_row": 42000}`)}); err != nil {
		t.Fatal(err)
	}
	h := NewDashboard(c, nil)
	body := mustGet(t, h, "/jobs/import-1")
	wantContains(t, "running job", body, "Progress", "next_row", "42000", `action="/cancel/confirm"`, "The running handler is cancelled")
	wantContains(t, "job list", mustGet(t, h, "/jobs?queue=bulk"), `{&#34;next_row&#34;:42000}`)

	code, body := post(t, h, "/cancel", url.Values{"id": {"import-1"}, "reason": {"wrong file"}})
	if code != http.StatusOK {
		t.Fatalf("cancel: status %d\n%s", code, body)
	}
	wantContains(t, "cancel result", body, "cancel requested")
	j, err := c.Get(ctx, "import-1")
	if err != nil || j.State != errandtype.StateRunning || !j.CancelPending() {
		t.Fatalf("after cancel: %+v, %v; want running with a request", j, err)
	}
	body = mustGet(t, h, "/jobs/import-1")
	wantContains(t, "job with a cancel request", body, "Cancel requested", "cancel requested at")
	wantLacks(t, "job with a cancel request", body, `action="/cancel/confirm"`)
	wantContains(t, "job list", mustGet(t, h, "/jobs?queue=bulk"), "cancel requested")
}

// TestDashboardHidesStoreErrors: a page whose read fails says so without
// the store's error, which may name tables, files and addresses (it goes
// to the log), and a page for nothing says what is missing, escaped.
func TestDashboardHidesStoreErrors(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	h := NewDashboard(c, nil)
	db := c.Store().(*sqlite.Store).DB()
	if _, err := db.Exec(`ALTER TABLE errand_audit RENAME TO errand_audit_gone`); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, h, "/audit")
	if code != http.StatusInternalServerError || strings.Contains(body, "errand_audit") || strings.Contains(body, "sqlite") ||
		!strings.Contains(body, "see its log") {
		t.Errorf("GET /audit with its table gone: %d\n%s", code, body)
	}
	code, body = get(t, h, "/jobs/%FF")
	if code != http.StatusNotFound || strings.Contains(body, "\xff") || !strings.Contains(body, `\xff`) {
		t.Errorf("GET /jobs/%%FF: %d\n%s", code, body)
	}
}

// TestDashboardReplayFromStep: the job page of a durable handler's dead job
// offers a replay from a step; the confirm page carries it and the replay
// forks the job there; a from step for several jobs, or not a number, is
// refused.
func TestDashboardReplayFromStep(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	ctx := context.Background()
	h := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "ana", true }})
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: "flow-1", Queue: "flows"})
	js, err := c.Store().JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"flows"}, Limit: 1, Lease: time.Minute, Owner: "w"})
	if err != nil || len(js) != 1 {
		t.Fatal(js, err)
	}
	lease := errandstore.JobLease{ID: "flow-1", LeaseToken: *js[0].LeaseToken}
	for i, name := range []string{"a", "b", "c"} {
		if err := errandstore.RecordStep(ctx, c.Store().(errandstore.StepStore), &errandstore.JobStepRecordParams{JobLease: lease,
			Step: errandtype.Step{Index: i, Name: name, Result: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Store().JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{JobLease: lease,
		Kind: errandstore.OutcomeDead, Error: &errandtype.AttemptError{Attempt: 1, Class: "permanent", Message: "stop"}}}}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "a dead durable job's page", mustGet(t, h, "/jobs/flow-1"), `name="from_step"`)

	for _, bad := range []url.Values{
		{"id": {"flow-1", "dead-1"}, "reason": {"r"}, "from_step": {"1"}},
		{"id": {"flow-1"}, "reason": {"r"}, "from_step": {"one"}},
	} {
		if code, body := post(t, h, "/replay/confirm", bad); code != http.StatusBadRequest {
			t.Errorf("confirm %v: %d, want 400\n%s", bad, code, body)
		}
	}
	form := url.Values{"id": {"flow-1"}, "reason": {"redo c"}, "from_step": {"2"}}
	code, body := post(t, h, "/replay/confirm", form)
	if code != http.StatusOK {
		t.Fatalf("confirm: %d\n%s", code, body)
	}
	wantContains(t, "confirm page", body, "from step 2", `<input type="hidden" name="from_step" value="2">`)
	if code, body = post(t, h, "/replay", form); code != http.StatusOK {
		t.Fatalf("replay: %d\n%s", code, body)
	}
	steps, err := c.Steps(ctx, "flow-1")
	if err != nil || len(steps) != 2 {
		t.Errorf("steps after the fork: %+v, %v; want a and b kept", steps, err)
	}
}
