package errandhttp_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlitetest"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

// testEnv is one store for a test, on a fake clock the test moves.
type testEnv[TTx any] struct {
	store errandstore.TxStore[TTx]
	clock *errandtest.Clock
}

// newMetricsClock starts on a whole second, so times survive the stores'
// microsecond precision.
func newMetricsClock() *errandtest.Clock {
	return errandtest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

func sqliteEnv(t *testing.T) *testEnv[*sql.Tx] {
	t.Helper()
	clock := newMetricsClock()
	st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &testEnv[*sql.Tx]{store: st, clock: clock}
}

func postgresEnv(t *testing.T) *testEnv[pgx.Tx] {
	t.Helper()
	url := pgtest.URL(t)
	clock := newMetricsClock()
	st, err := postgres.Open(context.Background(), url, &postgres.Options{Clock: clock, Schema: pgtest.Schema(t, url), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &testEnv[pgx.Tx]{store: st, clock: clock}
}

// client returns a client of the env's store with kinds "ok" (succeeds),
// "fail" (fails permanently) and "idle" (declared, no handler).
func (e *testEnv[TTx]) client(t *testing.T, obs errand.Observer) *errand.Client[TTx] {
	t.Helper()
	kinds := errand.NewKinds()
	kinds.HandleRaw("ok", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
	kinds.HandleRaw("fail", errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
		return errand.Permanent(io.ErrUnexpectedEOF)
	}), nil)
	kinds.HandleRaw("idle", nil, nil)
	c, err := errand.NewClient(e.store, &errand.Config{Kinds: kinds, Clock: e.clock, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func enqueue[TTx any](t *testing.T, c *errand.Client[TTx], kind string, opts *errand.EnqueueOpts) *errandtype.Job {
	t.Helper()
	r, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: kind}, opts)
	if err != nil {
		t.Fatalf("enqueue %s: %v", kind, err)
	}
	return r.Job
}

// workOne runs one job of queue and checks its result.
func workOne[TTx any](t *testing.T, c *errand.Client[TTx], queue string, want errand.Result) {
	t.Helper()
	r, err := c.WorkOne(context.Background(), &errand.WorkOneOpts{Queues: []string{queue}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != want {
		t.Fatalf("work one in %s: %+v, want %s", queue, r, want)
	}
}

// scrape GETs h and parses Prometheus's text format.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, rec.Body)
	}
	return fams
}

// labels are a series' labels, written "k=v,k=v" in any order.
func seriesValue(fams map[string]*dto.MetricFamily, name, labels string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	if labels != "" {
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			want[k] = v
		}
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// wantSeries checks one series' value.
func wantSeries(t *testing.T, fams map[string]*dto.MetricFamily, name, labels string, want float64) {
	t.Helper()
	got, ok := seriesValue(fams, name, labels)
	if !ok {
		t.Errorf("%s{%s}: missing", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s{%s} = %v, want %v", name, labels, got, want)
	}
}
