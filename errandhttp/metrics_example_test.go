package errandhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// Serve /metrics, /healthz and /readyz from an application's own server.
// The observer in the client's config feeds the counters; the gauges are
// read from the database.
func ExampleNewMetrics() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "errand-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "errand.db"), nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	obs := errandhttp.NewMetricsObserver()
	kinds := errand.NewKinds()
	kinds.HandleRaw("send_receipt", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds, Observer: obs})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", errandhttp.NewMetrics(client, &errandhttp.MetricsOptions{Observer: obs}))
	mux.Handle("GET /healthz", errandhttp.NewHealthz())
	mux.Handle("GET /readyz", errandhttp.NewReadyz(client, nil))

	if _, err := client.Enqueue(ctx, errand.RawArgs{KindName: "send_receipt"}, nil); err != nil {
		panic(err)
	}
	if _, err := client.WorkOne(ctx, nil); err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, `errand_jobs_finished_total{kind="send_receipt",outcome="succeeded"`) ||
			strings.HasPrefix(line, `errand_queue_jobs{queue="default",state="succeeded"}`) {
			fmt.Print(line)
		}
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// errand_jobs_finished_total{kind="send_receipt",outcome="succeeded",queue="default"} 1
	// errand_queue_jobs{queue="default",state="succeeded"} 1
	// 200 {"status":"ready","reasons":[]}
}
