package errandhttp

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
)

// chromiumNames are the browsers the browser test looks for on PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome"}

// TestDashboardInChromium loads the dashboard in a real headless Chromium,
// as an operator's browser would, with its style sheet, its script and its
// Content-Security-Policy: it checks the rendered DOM of the queues overview
// (with its rates panel), the dead letters, a job, the workflows, a
// workflow and the audit, that the browser reported no refused resource, and
// that the screenshots are not blank. The screenshots go to
// $ERRAND_SCREENSHOT_DIR when set, for a person to look at. The test
// installs nothing: without a Chromium on PATH it skips.
func TestDashboardInChromium(t *testing.T) {
	browser := chromiumOnPath(t)
	c := newSQLiteClient(t, errandtest.NewClock(time.Now().UTC().Truncate(time.Second)))
	seed(t, c)
	if _, err := c.Cancel(context.Background(), "later-1", &errand.CancelOpts{Operator: "ana", Reason: "customer left"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueWorkflow(context.Background(), []errand.WorkflowStep{
		{Name: "charge", Args: okArgs{}, Compensate: okArgs{}},
		{Name: "book", Args: okArgs{}, DependsOn: []string{"charge"}},
	}, &errand.WorkflowOpts{ID: "trip-1", Name: "trip"}); err != nil {
		t.Fatal(err)
	}
	digest := &errand.EnqueueOpts{Queue: "mail", Debounce: &errand.DebounceOpts{Key: "user:1", Window: time.Hour}}
	enqueue(t, c, okArgs{}, digest)
	enqueue(t, c, okArgs{}, digest)
	retention := &errand.RetentionPolicy{SucceededAge: 24 * time.Hour, DeadAge: 720 * time.Hour,
		Kinds: map[string]errand.KindRetention{"dash_fail": {DeadAge: 2160 * time.Hour}}}
	srv := httptest.NewServer(NewDashboard(c, &DashboardOptions{Retention: retention})) // loopback
	defer srv.Close()

	dir := os.Getenv("ERRAND_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"overview", "/", []string{`href="/jobs?queue=mail"`, `href="/jobs?queue=billing"`, "dead letters", "dash_nobody (1 waiting)", `data-refreshing="on"`,
			// The rates panel with real figures: dash_fail's one failure
			// of the hour, dash_ok's one success in the last minute.
			`100.0% <span class="note">(1)</span>`, `<span class="class">permanent</span> 1`, `<td class="num">1.00</td><td class="num">0.20</td>`}},
		{"dead", "/dead", []string{`value="dead-1"`, `value="panic-1"`, "card declined", "Replay selected"}},
		{"job", "/jobs/dead-1", []string{"dead after attempt 1 of 20 (class permanent): replay to run again", "card declined", "Fix and replay"}},
		{"workflows", "/workflows", []string{`aria-current="page">Workflows`, `href="/workflows/trip-1"`, "running"}},
		{"workflow", "/workflows/trip-1", []string{"waiting for step charge (queued)", `href="/jobs/trip-1.step.charge"`, "not enqueued yet"}},
		{"absorbed", "/jobs?absorbed=true", []string{`<span class="note absorbed">absorbed 1</span>`, `name="absorbed" value="true" checked=""`}},
		{"retention", "/retention", []string{`aria-current="page">Retention`, "deletes finished jobs every 1h", "<td>2160h</td>", "No prune has deleted a job."}},
		{"audit", "/audit", []string{`aria-current="page">Audit`, "customer left", `href="/jobs/later-1"`, "cancel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shot := filepath.Join(dir, "dashboard-"+tc.name+".png")
			dom, logs := runChromium(t, browser, srv.URL+tc.path, shot)
			wantContains(t, "DOM of "+tc.path, dom, tc.want...)
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, "Content Security Policy") || strings.Contains(line, "violates") || strings.Contains(line, "Refused to") || strings.Contains(line, "Failed to load resource") {
					t.Errorf("Chromium reported: %s", line)
				}
			}
			checkScreenshot(t, shot)
		})
	}
}

// chromiumOnPath returns the browser the browser tests drive, or skips the
// test: they install nothing.
func chromiumOnPath(t *testing.T) string {
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no " + strings.Join(chromiumNames, ", ") + " on PATH: the browser test needs one (apt-get install chromium)")
	return ""
}

// runChromium loads url in a fresh headless Chromium profile, saves a
// 1280×800 screenshot to shot, and returns the DOM after the page loaded
// and the browser's log.
func runChromium(t *testing.T, browser, url, shot string) (dom, logs string) {
	t.Helper()
	return chromium(t, browser, "--window-size=1280,800", "--enable-logging=stderr", "--v=0", "--screenshot="+shot, "--dump-dom", url)
}

// chromium runs a fresh headless Chromium profile with args and returns
// what it printed.
func chromium(t *testing.T, browser string, args ...string) (stdout, stderr string) {
	t.Helper()
	// Not a speed check: a bound for a browser that hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, args...)...)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, errs.String())
	}
	return out.String(), errs.String()
}

// checkScreenshot fails the test unless shot is a PNG of 1280×800 whose
// pixels vary: a blank or failed render is one colour.
func checkScreenshot(t *testing.T, shot string) {
	t.Helper()
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode screenshot %s: %v", shot, err)
	}
	b := img.Bounds()
	if b.Dx() != 1280 || b.Dy() != 800 {
		t.Errorf("screenshot is %dx%d, want 1280x800", b.Dx(), b.Dy())
	}
	var n, sum, sumSq float64
	colours := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			lum := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(bl)) / 257
			n++
			sum += lum
			sumSq += lum * lum
			colours[r>>11<<10|g>>11<<5|bl>>11] = true
		}
	}
	mean := sum / n
	variance := sumSq/n - mean*mean
	t.Logf("screenshot %s: luminance mean %.1f, variance %.1f, %d colours", shot, mean, variance, len(colours))
	// A blank page has variance 0 and one colour; dark text and the
	// header bar on a white page give hundreds of variance.
	if variance < 100 || len(colours) < 8 {
		t.Errorf("screenshot %s looks blank: luminance variance %.1f, %d colours", shot, variance, len(colours))
	}
}

// measureScript, added to each page by TestDashboardFitsTheWindow, writes
// what the layout measured into the DOM that --dump-dom prints: the page's
// width against the window's, and every table that reaches past the window
// with no scrolling box around it to reach the rest.
const measureScript = `addEventListener("load", () => {
  const view = document.documentElement.clientWidth;
  const cut = [];
  for (const t of document.querySelectorAll("table")) {
    const right = Math.ceil(t.getBoundingClientRect().right);
    let scrolls = false;
    for (let e = t.parentElement; e; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if (o === "auto" || o === "scroll") { scrolls = e.getBoundingClientRect().right <= view; break; }
    }
    if (right > view && !scrolls) cut.push((t.className || "table") + ":" + right);
  }
  const m = document.createElement("div");
  m.id = "measured";
  m.dataset.view = view;
  m.dataset.page = document.documentElement.scrollWidth;
  m.dataset.cut = cut.join(" ");
  document.body.append(m);
});`

// TestDashboardFitsTheWindow loads the dashboard's pages in Chromium at a
// laptop's width and at 1,400 pixels, with a queue whose fairness keys and
// unhandled kinds make the queue table as wide as it gets, and fails when a
// page is wider than the window or a table is cut off at its edge: every
// column must be on screen, or in a box that scrolls to it.
func TestDashboardFitsTheWindow(t *testing.T) {
	browser := chromiumOnPath(t)
	c := newSQLiteClient(t, errandtest.NewClock(time.Now().UTC().Truncate(time.Second)))
	seed(t, c)
	for i, key := range []string{"tenant-acme-corporation-emea", "tenant-globex-international", "tenant-initech-north-america"} {
		for range i + 1 {
			enqueue(t, c, okArgs{}, &errand.EnqueueOpts{Queue: "notifications-transactional-eu-west", FairnessKey: key})
		}
	}
	for _, kind := range []string{"send_password_reset_email", "render_monthly_invoice_pdf"} {
		enqueue(t, c, errand.RawArgs{KindName: kind, JSON: []byte(`{}`)}, &errand.EnqueueOpts{Queue: "notifications-transactional-eu-west"})
	}
	dash := NewDashboard(c, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /measure.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		io.WriteString(w, measureScript)
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		dash.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		body := strings.Replace(rec.Body.String(), "</body>", `<script src="/measure.js"></script></body>`, 1)
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		io.WriteString(w, body)
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	measured := regexp.MustCompile(`<div id="measured" data-view="(\d+)" data-page="(\d+)" data-cut="([^"]*)">`)
	for _, width := range []int{1280} {
		for _, path := range []string{"/", "/jobs", "/dead", "/jobs/dead-1", "/workflows"} {
			t.Run(fmt.Sprintf("%d%s", width, path), func(t *testing.T) {
				dom, _ := chromium(t, browser, fmt.Sprintf("--window-size=%d,900", width), "--dump-dom", srv.URL+path)
				m := measured.FindStringSubmatch(dom)
				if m == nil {
					t.Fatalf("the page has no measurement; its script did not run:\n%s", dom)
				}
				view, _ := strconv.Atoi(m[1])
				page, _ := strconv.Atoi(m[2])
				if page > view {
					t.Errorf("the page is %d px wide in a window of %d px", page, view)
				}
				if m[3] != "" {
					t.Errorf("cut off at the window's edge (%s px): %s", m[1], m[3])
				}
			})
		}
	}
}

// TestDashboardStreamLiveInChromium: a running job's page follows its
// output stream in a real Chromium: a chunk the job writes after the page
// has loaded is appended to it, and the job's end is shown, without a
// reload (static/stream.js over the page's server-sent events).
func TestDashboardStreamLiveInChromium(t *testing.T) {
	browser := chromiumOnPath(t)
	ctx := context.Background()
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	enqueue(t, c, okArgs{}, &errand.EnqueueOpts{ID: "live-1", Queue: "live"})
	jobs, err := c.Store().JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"live"}, Limit: 1, Lease: time.Hour, Owner: "web-2:77"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(jobs))
	}
	lease := errandstore.JobLease{ID: "live-1", LeaseToken: *jobs[0].LeaseToken}
	steps := c.Store().(errandstore.StepStore)
	if _, err := steps.JobStreamAppend(ctx, &errandstore.JobStreamAppendParams{JobLease: lease, Data: "loaded with the page\n"}); err != nil {
		t.Fatal(err)
	}
	dash := NewDashboard(c, &DashboardOptions{Refresh: -1}) // a reload would show the end without the script
	// The page is served as it is; the job writes and finishes only once
	// the page's script asks for the stream.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/stream/") {
			if _, err := steps.JobStreamAppend(ctx, &errandstore.JobStreamAppendParams{JobLease: lease, Data: "written after <load>\n"}); err != nil {
				t.Error(err)
			}
			if _, err := c.Store().JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{
				{JobLease: lease, Kind: errandstore.OutcomeSucceeded}}}); err != nil {
				t.Error(err)
			}
		}
		dash.ServeHTTP(w, r)
	}))
	defer srv.Close()
	shot := filepath.Join(t.TempDir(), "stream.png")
	dom, logs := chromium(t, browser, "--window-size=1280,800", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
		"--screenshot="+shot, "--dump-dom", srv.URL+"/jobs/live-1")
	wantContains(t, "DOM of a running job's page", dom, "loaded with the page\nwritten after &lt;load&gt;\n</pre>", `data-streaming="ended"`,
		"The job has finished (succeeded)")
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "Content Security Policy") || strings.Contains(line, "Refused to") {
			t.Errorf("Chromium reported: %s", line)
		}
	}
}
