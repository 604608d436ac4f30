package errandhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
)

type readyBody struct {
	Status  string `json:"status"`
	Reasons []struct {
		Check   string `json:"check"`
		Queue   string `json:"queue"`
		Message string `json:"message"`
	} `json:"reasons"`
}

// probe GETs h and decodes its JSON body.
func probe(t *testing.T, h http.Handler) (int, readyBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var b readyBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, b
}

// wantProbe checks a probe's status, and the checks and queues its
// reasons name ("check:queue").
func wantProbe(t *testing.T, h http.Handler, code int, status string, reasons ...string) {
	t.Helper()
	gotCode, b := probe(t, h)
	var got []string
	for _, r := range b.Reasons {
		got = append(got, r.Check+":"+r.Queue)
		if r.Message == "" {
			t.Errorf("reason %s:%s has no message", r.Check, r.Queue)
		}
	}
	if gotCode != code || b.Status != status || strings.Join(got, " ") != strings.Join(reasons, " ") {
		t.Fatalf("got %d %s %v, want %d %s %v", gotCode, b.Status, got, code, status, reasons)
	}
}

func TestHealthz(t *testing.T) {
	wantProbe(t, errandhttp.NewHealthz(), http.StatusOK, "ok")
}

// /readyz is ready while the database answers and no threshold is
// crossed; degraded (503) while a queue's oldest ready job waits too long
// or too many of its jobs died within the window; unavailable (503) when
// the database does not answer.
func TestReadyz(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testReadyz(t, sqliteEnv(t)) })
	t.Run("postgres", func(t *testing.T) { testReadyz(t, postgresEnv(t)) })
}

func testReadyz[TTx any](t *testing.T, e *testEnv[TTx]) {
	c := e.client(t, nil)
	plain := errandhttp.NewReadyz(c, &errandhttp.ReadyOptions{Clock: e.clock})
	h := errandhttp.NewReadyz(c, &errandhttp.ReadyOptions{
		Clock:             e.clock,
		MaxOldestReadyAge: 5 * time.Minute,
		MaxDeadGrowth:     errandhttp.DeadGrowth{Jobs: 2, Per: time.Hour},
	})
	wantProbe(t, h, http.StatusOK, "ready")

	enqueue(t, c, "idle", nil)
	e.clock.Advance(4 * time.Minute)
	wantProbe(t, h, http.StatusOK, "ready")
	e.clock.Advance(2 * time.Minute)
	wantProbe(t, h, http.StatusServiceUnavailable, "degraded", "oldest_ready_age:default")
	wantProbe(t, plain, http.StatusOK, "ready") // no thresholds: only the database counts
	if _, err := c.Cancel(t.Context(), mustList(t, c, errandtype.StateQueued)[0].ID, &errand.CancelOpts{Operator: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	wantProbe(t, h, http.StatusOK, "ready")

	// Three jobs of mail die: over 2 within the hour.
	for range 3 {
		enqueue(t, c, "fail", &errand.EnqueueOpts{Queue: "mail"})
		workOne(t, c, "mail", errand.ResultDead)
	}
	e.clock.Advance(10 * time.Minute)
	wantProbe(t, h, http.StatusServiceUnavailable, "degraded", "dead_growth:mail")
	e.clock.Advance(40 * time.Minute)
	wantProbe(t, h, http.StatusServiceUnavailable, "degraded", "dead_growth:mail")
	// An hour after the deaths they are old news.
	e.clock.Advance(20 * time.Minute)
	wantProbe(t, h, http.StatusOK, "ready")
	// Over a day, the growth comes from the database's count of the day's
	// deaths: a handler started now sees them at its first probe. Over
	// another period it samples, and sees only deaths after it started.
	day := errandhttp.NewReadyz(c, &errandhttp.ReadyOptions{Clock: e.clock, MaxDeadGrowth: errandhttp.DeadGrowth{Jobs: 2, Per: 24 * time.Hour}})
	wantProbe(t, day, http.StatusServiceUnavailable, "degraded", "dead_growth:mail")
	sampled := errandhttp.NewReadyz(c, &errandhttp.ReadyOptions{Clock: e.clock, MaxDeadGrowth: errandhttp.DeadGrowth{Jobs: 2, Per: 2 * time.Hour}})
	wantProbe(t, sampled, http.StatusOK, "ready")
	for range 3 {
		enqueue(t, c, "fail", &errand.EnqueueOpts{Queue: "mail"})
		workOne(t, c, "mail", errand.ResultDead)
	}
	e.clock.Advance(time.Minute)
	wantProbe(t, sampled, http.StatusServiceUnavailable, "degraded", "dead_growth:mail")
	wantProbe(t, h, http.StatusServiceUnavailable, "degraded", "dead_growth:mail")
	// A replay takes a job out of the hour's dead: 2 is not over 2.
	if _, err := c.Replay(t.Context(), mustList(t, c, errandtype.StateDead)[5].ID, &errand.ReplayOpts{Operator: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	wantProbe(t, h, http.StatusOK, "ready")

	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	wantProbe(t, h, http.StatusServiceUnavailable, "unavailable", "database:")
}

func mustList[TTx any](t *testing.T, c *errand.Client[TTx], state errandtype.JobState) []*errandtype.Job {
	t.Helper()
	js, err := c.List(t.Context(), &errand.ListOpts{States: []errandtype.JobState{state}})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestParseDeadGrowth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want errandhttp.DeadGrowth
		err  bool
	}{
		{in: "100/h", want: errandhttp.DeadGrowth{Jobs: 100, Per: time.Hour}},
		{in: "5/m", want: errandhttp.DeadGrowth{Jobs: 5, Per: time.Minute}},
		{in: "1000/d", want: errandhttp.DeadGrowth{Jobs: 1000, Per: 24 * time.Hour}},
		{in: "20/30m", want: errandhttp.DeadGrowth{Jobs: 20, Per: 30 * time.Minute}},
		{in: "1/s", want: errandhttp.DeadGrowth{Jobs: 1, Per: time.Second}},
		{in: "100", err: true},
		{in: "0/h", err: true},
		{in: "-3/h", err: true},
		{in: "x/h", err: true},
		{in: "10/fortnight", err: true},
		{in: "10/500ms", err: true},
		{in: "", err: true},
	} {
		got, err := errandhttp.ParseDeadGrowth(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseDeadGrowth(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.err)
		}
		if err == nil {
			if back, _ := errandhttp.ParseDeadGrowth(got.String()); back != got {
				t.Errorf("ParseDeadGrowth(%q.String() = %q) = %+v", c.in, got.String(), back)
			}
		}
	}
}
