package errandhttp_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
)

// TestSealedArgs: a server whose client holds the key takes plain args,
// stores them sealed, and gives them back plain through the API and the
// dashboard; one without it gives the API the sealed value, as the store
// keeps it, and shows on the dashboard only the key it needs.
func TestSealedArgs(t *testing.T) {
	eachStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		codec, err := errand.AESGCM(errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{7}, 32)})
		if err != nil {
			t.Fatal(err)
		}
		keyed := sealingServer(t, s, clock, codec)
		blind := sealingServer(t, s, clock, nil)

		r := keyed.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "charge", "args": map[string]string{"card": "4111-SECRET"}})
		want(t, "enqueue", r, 201, "")
		id := r.json(t)["job"].(map[string]any)["id"].(string)
		if raw := keyed.job(t, id); !bytes.Contains(raw.Args, []byte("4111-SECRET")) {
			t.Fatalf("args read with the key = %s; want them plain", raw.Args)
		}
		var got struct {
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(blind.op(t, "GET", "/api/v1/jobs/"+id, nil).body, &got); err != nil {
			t.Fatal(err)
		}
		if kid, ok := errand.SealedKeyID(got.Args); !ok || kid != "k1" || bytes.Contains(got.Args, []byte("SECRET")) {
			t.Fatalf("args through the API without the key = %s; want the value sealed with k1", got.Args)
		}

		page := blind.page(t, "/jobs/"+id)
		if !strings.Contains(page, "encrypted with key k1") || strings.Contains(page, "SECRET") || strings.Contains(page, "&#34;ct&#34;") || strings.Contains(page, "Fix and replay") {
			t.Fatalf("job page without the key: want the key it needs, no args, no fix-and-replay form\n%s", page)
		}
		if page := keyed.page(t, "/jobs/"+id); !strings.Contains(page, "4111-SECRET") {
			t.Fatalf("job page with the key: want the plain args\n%s", page)
		}
	})
}

// codecServer is a server over a client with a codec, or none, and its
// dashboard.
type codecServer struct {
	*server
	dash http.Handler
}

// sealingServer is newServer's API over s with a client of codec (nil:
// none), and its dashboard beside it.
func sealingServer(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, codec errand.Codec) *codecServer {
	t.Helper()
	c, err := errand.NewClient(s, &errand.Config{AllowUnknownKinds: true, Clock: clock, Codec: codec})
	if err != nil {
		t.Fatal(err)
	}
	return &codecServer{server: serveClient(t, c, nil), dash: errandhttp.NewDashboard(c, nil)}
}

// page returns the body of the dashboard's page at path.
func (s *codecServer) page(t *testing.T, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.dash.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: status %d\n%s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestSealedArgsInTheAudit: a replay with corrected args keeps both args
// sealed in the audit; the audit pages show them plain with the key, and
// without it only the key they need, never the sealed value.
func TestSealedArgsInTheAudit(t *testing.T) {
	eachStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		codec, err := errand.AESGCM(errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{7}, 32)})
		if err != nil {
			t.Fatal(err)
		}
		keyed := sealingServer(t, s, clock, codec)
		blind := sealingServer(t, s, clock, nil)
		r := keyed.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "charge", "args": map[string]string{"card": "4111-OLD"}})
		want(t, "enqueue", r, 201, "")
		id := r.json(t)["job"].(map[string]any)["id"].(string)
		want(t, "cancel", keyed.op(t, "POST", "/api/v1/jobs/"+id+"/cancel", map[string]any{"reason": "wrong card"}), 200, "")
		want(t, "replay", keyed.op(t, "POST", "/api/v1/jobs/"+id+"/replay", map[string]any{"reason": "fixed card", "args": map[string]string{"card": "4111-SECRET"}}), 200, "")

		for _, path := range []string{"/audit", "/jobs/" + id} {
			if page := keyed.page(t, path); !strings.Contains(page, "4111-OLD") || !strings.Contains(page, "4111-SECRET") {
				t.Errorf("%s with the key: want the old and new args plain\n%s", path, page)
			}
			page := blind.page(t, path)
			if !strings.Contains(page, "encrypted with key k1") || strings.Contains(page, "SECRET") || strings.Contains(page, "&#34;ct&#34;") {
				t.Errorf("%s without the key: want the key the args need, never their sealed value\n%s", path, page)
			}
		}
	})
}
