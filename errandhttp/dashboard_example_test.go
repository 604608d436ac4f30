package errandhttp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/sqlite"
)

// The dashboard mounted under /ops in an application's own server, with
// args hidden. In production, put the server's authentication in front of
// it and pass Identity.
func ExampleNewDashboard() {
	dir, err := os.MkdirTemp("", "errand-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "errand.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	client, err := errand.NewClient(store, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, errand.RawArgs{KindName: "send_receipt"}, nil); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	dash := errandhttp.NewDashboard(client, &errandhttp.DashboardOptions{PathPrefix: "/ops", HideArgs: true})
	mux.Handle("/ops/", http.StripPrefix("/ops", dash))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ops/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
