package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestAPIFailMany: a batch fail records each failure as the one-job fail
// would (a retry after retry_after, a permanent failure, the class and
// message kept), answers lease_lost for a stale entry and leaves its job
// as it was, on both stores.
func TestAPIFailMany(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		js := claimTasks(t, s, 3)
		stale := s.job(t, js[1].ID)
		f := s.op(t, "POST", "/api/v1/fail", map[string]any{"jobs": []map[string]any{
			{"id": js[0].ID, "lease_token": js[0].LeaseToken, "class": "rate_limited", "message": "429", "retry_after": "90s"},
			{"id": js[1].ID, "lease_token": "stale", "permanent": true},
			{"id": js[2].ID, "lease_token": js[2].LeaseToken, "class": "bad_image", "message": "not a PNG", "permanent": true},
		}})
		want(t, "fail many", f, http.StatusOK, "")
		var res struct {
			Results []struct {
				ID          string     `json:"id"`
				State       string     `json:"state"`
				AvailableAt *time.Time `json:"available_at"`
				Error       *struct {
					Code string `json:"code"`
				} `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(f.body, &res); err != nil || len(res.Results) != 3 {
			t.Fatalf("fail many answered %s, %v", f.body, err)
		}
		due := clock.Now().Add(90 * time.Second)
		r0, r1, r2 := res.Results[0], res.Results[1], res.Results[2]
		if r0.ID != js[0].ID || r0.State != "retrying" || r0.AvailableAt == nil || !r0.AvailableAt.Equal(due) ||
			r1.ID != js[1].ID || r1.State != "" || r1.Error == nil || r1.Error.Code != "lease_lost" ||
			r2.ID != js[2].ID || r2.State != "dead" || r2.AvailableAt != nil || r2.Error != nil {
			t.Fatalf("fail many answered %s; want retrying at %s, lease_lost, dead", f.body, due.Format(time.RFC3339))
		}
		if j := s.job(t, js[1].ID); !reflect.DeepEqual(j, stale) {
			t.Fatalf("the stale failure changed its job:\n%+v\n%+v", j, stale)
		}
		if j := s.job(t, js[2].ID); j.LastError == nil || j.LastError.Class != "bad_image" || j.LastError.Message != "not a PNG" {
			t.Fatalf("dead job's last error %+v", j.LastError)
		}
	})
}

// TestAPIFailManyRefusesBadEntries: a batch fail with a bad entry is 400,
// naming the entry, and records nothing, on both stores.
func TestAPIFailManyRefusesBadEntries(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		js := claimTasks(t, s, 2)
		a, b := js[0], js[1]
		ok := map[string]any{"id": a.ID, "lease_token": a.LeaseToken, "message": "boom"}
		for _, tc := range []struct {
			name  string
			bad   map[string]any
			names string
		}{
			{"a job twice", map[string]any{"id": a.ID, "lease_token": a.LeaseToken}, "jobs[1].id"},
			{"an empty token", map[string]any{"id": b.ID}, "jobs[1].lease_token"},
			{"a bad class", map[string]any{"id": b.ID, "lease_token": b.LeaseToken, "class": "Not A Class"}, "jobs[1].class"},
			{"retry_after on a permanent failure", map[string]any{"id": b.ID, "lease_token": b.LeaseToken, "permanent": true, "retry_after": "1s"}, "jobs[1].retry_after"},
		} {
			r := s.op(t, "POST", "/api/v1/fail", map[string]any{"jobs": []map[string]any{ok, tc.bad}})
			want(t, tc.name, r, http.StatusBadRequest, "invalid_input")
			if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.HasPrefix(msg, tc.names+": ") {
				t.Errorf("%s: message %q does not name %s", tc.name, msg, tc.names)
			}
		}
		many := make([]map[string]any, errand.MaxClaimJobs+1)
		for i := range many {
			many[i] = ok
		}
		want(t, "too many", s.op(t, "POST", "/api/v1/fail", map[string]any{"jobs": many}), http.StatusBadRequest, "invalid_input")
		want(t, "none", s.op(t, "POST", "/api/v1/fail", map[string]any{"jobs": []any{}}), http.StatusBadRequest, "invalid_input")
		for _, env := range js {
			if j := s.job(t, env.ID); j.State != errandtype.StateRunning {
				t.Fatalf("a refused batch failed job %s: %s", j.ID, j.State)
			}
		}
	})
}
