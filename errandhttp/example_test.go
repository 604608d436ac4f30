package errandhttp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/sqlite"
)

// ExampleNew mounts errand's HTTP surface in an application's own server,
// with an operator token and a read-only one.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "errandhttp-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "errand.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	client, err := errand.NewClient(store, nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := errandhttp.New(client, &errandhttp.Options{
		Auth: &errandhttp.AuthOptions{Tokens: []errandhttp.Token{
			{Name: "alice", Secret: "alice-secret-0123456789", Role: errandhttp.RoleOperator},
			{Name: "grafana", Secret: "grafana-secret-0123456789", Role: errandhttp.RoleRead},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/jobs", strings.NewReader(`{"kind": "send_receipt", "args": {"payment_id": "p1"}}`))
	req.Header.Set("Authorization", "Bearer alice-secret-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("enqueue:", resp.Status)

	req.Header.Set("Authorization", "Bearer grafana-secret-0123456789")
	req.Body = http.NoBody
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("enqueue with a read-only token:", resp.Status)
	// Output:
	// enqueue: 201 Created
	// enqueue with a read-only token: 403 Forbidden
}

// ExampleNewWebhook runs a kind by POSTing each job's envelope to a URL.
func ExampleNewWebhook() {
	hook, err := errandhttp.NewWebhook("https://billing.internal/jobs/send_receipt", nil)
	if err != nil {
		log.Fatal(err)
	}
	kinds := errand.NewKinds()
	kinds.HandleRaw("send_receipt", hook, &errand.KindOpts{MaxAttempts: 10})
	fmt.Println(hook.URL())
	// Output: https://billing.internal/jobs/send_receipt
}
