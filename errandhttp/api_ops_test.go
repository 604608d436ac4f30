package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// deadJob enqueues a job of kind in queue and kills it with an error of
// class, returning its id.
func (s *server) deadJob(t *testing.T, kind, queue, class string, args any) string {
	t.Helper()
	body := map[string]any{"kind": kind, "queue": queue, "max_attempts": 1}
	if args != nil {
		body["args"] = args
	}
	r := s.op(t, "POST", "/api/v1/jobs", body)
	want(t, "enqueue", r, http.StatusCreated, "")
	id := r.json(t)["job"].(map[string]any)["id"].(string)
	js, err := s.c.Claim(t.Context(), &errand.ClaimOpts{Queue: queue, Kinds: []string{kind}, Owner: "w"})
	if err != nil || len(js) != 1 || js[0].ID != id {
		t.Fatalf("claim %s: %v", id, err)
	}
	f := s.op(t, "POST", "/api/v1/jobs/"+id+"/fail", map[string]any{"lease_token": *js[0].LeaseToken, "class": class, "message": "boom"})
	want(t, "fail", f, http.StatusOK, "")
	if f.json(t)["state"] != "dead" {
		t.Fatalf("fail did not kill %s: %s", id, f.body)
	}
	return id
}

type auditPage struct {
	Audit      []errandtype.AuditRecord `json:"audit"`
	NextCursor *string                  `json:"next_cursor"`
}

func (s *server) auditPage(t *testing.T, path string) auditPage {
	t.Helper()
	r := s.do(t, req{method: "GET", path: path, token: readerSecret})
	want(t, path, r, http.StatusOK, "")
	var p auditPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAPIBulkReplayAndAudit(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		var timeouts []string
		for i := 0; i < 3; i++ {
			timeouts = append(timeouts, s.deadJob(t, "mail", "billing", "timeout", nil))
		}
		other := s.deadJob(t, "mail", "billing", "bad_input", nil)
		otherQueue := s.deadJob(t, "mail", "default", "timeout", nil)

		filter := map[string]any{"kind": "mail", "queue": "billing", "class": "timeout", "reason": "smtp back", "limit": 10}
		// Refused requests write nothing.
		for name, body := range map[string]any{
			"no reason":     map[string]any{"kind": "mail"},
			"limit too big": map[string]any{"reason": "x", "limit": errand.MaxReplayMany + 1},
			"bad rate":      map[string]any{"reason": "x", "rate": -1},
			"too slow":      map[string]any{"reason": "x", "limit": 1000, "rate": 1},
			"unknown field": map[string]any{"reason": "x", "kinds": "mail"},
			"empty range":   map[string]any{"reason": "x", "since": "2026-11-29T12:00:00Z", "until": "2026-11-29T11:00:00Z"},
		} {
			want(t, name, s.op(t, "POST", "/api/v1/replay", body), http.StatusBadRequest, "invalid_input")
		}
		want(t, "bulk replay by a reader", s.do(t, req{method: "POST", path: "/api/v1/replay", token: readerSecret, body: filter}), http.StatusForbidden, "forbidden")

		dry := map[string]any{}
		for k, v := range filter {
			dry[k] = v
		}
		dry["dry_run"] = true
		r := s.op(t, "POST", "/api/v1/replay", dry)
		want(t, "dry run", r, http.StatusOK, "")
		var res errand.ReplayManyResult
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		if !res.DryRun || len(res.Jobs) != 3 || res.Jobs[0].ID != timeouts[0] || res.Jobs[0].State != errandtype.StateDead {
			t.Fatalf("dry run: %s", r.body)
		}
		if j := s.job(t, timeouts[0]); j.State != errandtype.StateDead {
			t.Fatalf("a dry run replayed %s", j.ID)
		}

		r = s.op(t, "POST", "/api/v1/replay", filter)
		want(t, "bulk replay", r, http.StatusOK, "")
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		if res.DryRun || len(res.Jobs) != 3 || res.Bulk == "" {
			t.Fatalf("bulk replay: %s", r.body)
		}
		for _, id := range timeouts {
			if j := s.job(t, id); j.State != errandtype.StateQueued || j.Replays != 1 {
				t.Fatalf("job %s: %s, %d replays", id, j.State, j.Replays)
			}
		}
		for _, id := range []string{other, otherQueue} {
			if j := s.job(t, id); j.State != errandtype.StateDead {
				t.Fatalf("job %s outside the filter was replayed", id)
			}
		}

		// Fix-and-replay keeps the old and new args in the audit.
		want(t, "replay with bad args", s.op(t, "POST", "/api/v1/jobs/"+other+"/replay", `{"reason": "fixed", "args": "not json"`), http.StatusBadRequest, "invalid_input")
		fixed := s.op(t, "POST", "/api/v1/jobs/"+other+"/replay", map[string]any{"reason": "fixed address", "args": map[string]any{"to": "a@b.c"}})
		want(t, "fix and replay", fixed, http.StatusOK, "")
		if j := s.job(t, other); j.State != errandtype.StateQueued || !strings.Contains(string(j.Args), "a@b.c") {
			t.Fatalf("fixed job: %s %s", j.State, j.Args)
		}

		all := s.auditPage(t, "/api/v1/audit")
		if len(all.Audit) != 4 || all.NextCursor != nil {
			t.Fatalf("audit holds %d records, want 4", len(all.Audit))
		}
		newest := all.Audit[0]
		if newest.Action != errandtype.AuditReplayArgs || *newest.JobID != other || newest.Operator != "alice" || newest.Reason != "fixed address" {
			t.Fatalf("newest record: %+v", newest)
		}
		var details struct {
			OldArgs json.RawMessage `json:"old_args"`
			NewArgs json.RawMessage `json:"new_args"`
		}
		if err := json.Unmarshal(newest.Details, &details); err != nil || string(details.OldArgs) != "{}" || !strings.Contains(string(details.NewArgs), "a@b.c") {
			t.Fatalf("details %s: %v", newest.Details, err)
		}
		for _, rec := range all.Audit[1:] {
			if rec.Action != errandtype.AuditBulkReplay || rec.Operator != "alice" || rec.Reason != "smtp back" || !strings.Contains(string(rec.Details), res.Bulk) {
				t.Fatalf("bulk record: %+v %s", rec, rec.Details)
			}
		}

		// Filters and paging.
		if p := s.auditPage(t, "/api/v1/audit?action=bulk_replay"); len(p.Audit) != 3 {
			t.Fatalf("action filter: %d records", len(p.Audit))
		}
		if p := s.auditPage(t, "/api/v1/audit?job="+timeouts[1]); len(p.Audit) != 1 || *p.Audit[0].JobID != timeouts[1] {
			t.Fatalf("job filter: %+v", p.Audit)
		}
		since := clock.Now().Add(time.Second).Format(time.RFC3339)
		if p := s.auditPage(t, "/api/v1/audit?since="+since); len(p.Audit) != 0 {
			t.Fatalf("since filter kept %d records", len(p.Audit))
		}
		if p := s.auditPage(t, "/api/v1/audit?until="+since); len(p.Audit) != 4 {
			t.Fatalf("until filter kept %d records", len(p.Audit))
		}
		var paged []int64
		path := "/api/v1/audit?limit=3"
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("paging does not end")
			}
			p := s.auditPage(t, path)
			for _, rec := range p.Audit {
				paged = append(paged, rec.ID)
			}
			if p.NextCursor == nil {
				break
			}
			path = "/api/v1/audit?limit=3&cursor=" + *p.NextCursor
		}
		if len(paged) != 4 || paged[0] != newest.ID {
			t.Fatalf("paged ids %v", paged)
		}
		for _, path := range []string{
			fmt.Sprintf("/api/v1/audit?limit=%d", errandstore.MaxAuditLimit+1), "/api/v1/audit?limit=0", "/api/v1/audit?action=explode",
			"/api/v1/audit?since=yesterday", "/api/v1/audit?cursor=x", "/api/v1/audit?jobs=x",
		} {
			want(t, path, s.op(t, "GET", path, nil), http.StatusBadRequest, "invalid_input")
		}
	})
}

func TestAPIPrune(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		dead := s.deadJob(t, "mail", "default", "timeout", nil)
		clock.Advance(48 * time.Hour)
		fresh := s.deadJob(t, "mail", "default", "timeout", nil)

		for name, body := range map[string]any{
			"no reason":  map[string]any{"dead_age": "24h"},
			"no age":     map[string]any{"reason": "x"},
			"big batch":  map[string]any{"reason": "x", "dead_age": "24h", "batch": errandstore.MaxPruneBatch + 1},
			"short dead": map[string]any{"reason": "x", "succeeded_age": "48h", "dead_age": "24h"},
		} {
			want(t, name, s.op(t, "POST", "/api/v1/prune", body), http.StatusBadRequest, "invalid_input")
		}
		want(t, "prune by a reader", s.do(t, req{method: "POST", path: "/api/v1/prune", token: readerSecret, body: map[string]any{"reason": "x", "dead_age": "24h"}}), http.StatusForbidden, "forbidden")

		r := s.op(t, "POST", "/api/v1/prune", map[string]any{"reason": "retention", "dead_age": "24h", "dry_run": true})
		if want(t, "dry prune", r, http.StatusOK, ""); r.json(t)["dead"] != 1.0 || s.jobCount(t) != 2 {
			t.Fatalf("dry prune: %s", r.body)
		}
		r = s.op(t, "POST", "/api/v1/prune", map[string]any{"reason": "retention", "dead_age": "24h"})
		if want(t, "prune", r, http.StatusOK, ""); r.json(t)["dead"] != 1.0 || s.jobCount(t) != 1 || s.job(t, fresh).State != errandtype.StateDead {
			t.Fatalf("prune: %s", r.body)
		}
		p := s.auditPage(t, "/api/v1/audit?action=prune")
		if len(p.Audit) != 1 || p.Audit[0].Operator != "alice" || p.Audit[0].Reason != "retention" || p.Audit[0].JobID != nil {
			t.Fatalf("prune audit: %+v", p.Audit)
		}
		want(t, "pruned job", s.op(t, "GET", "/api/v1/jobs/"+dead, nil), http.StatusNotFound, "not_found")
	})
}

// TestAPIPruneKinds checks POST /api/v1/prune's kinds: a kind's own dead
// age replaces the default for its jobs alone, and bad kinds are refused
// with nothing deleted.
func TestAPIPruneKinds(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		mail := s.deadJob(t, "mail", "default", "timeout", nil)
		sms := s.deadJob(t, "sms", "default", "timeout", nil)
		clock.Advance(48 * time.Hour)

		for name, body := range map[string]any{
			"kind without ages":   map[string]any{"reason": "x", "kinds": map[string]any{"mail": map[string]any{}}},
			"kind negative":       map[string]any{"reason": "x", "kinds": map[string]any{"mail": map[string]any{"dead_age": "-1h"}}},
			"kind short dead":     map[string]any{"reason": "x", "dead_age": "24h", "kinds": map[string]any{"mail": map[string]any{"succeeded_age": "48h"}}},
			"kind unknown fields": map[string]any{"reason": "x", "kinds": map[string]any{"mail": map[string]any{"age": "1h"}}},
		} {
			want(t, name, s.op(t, "POST", "/api/v1/prune", body), http.StatusBadRequest, "invalid_input")
		}
		if s.jobCount(t) != 2 {
			t.Fatal("a refused prune deleted jobs")
		}
		r := s.op(t, "POST", "/api/v1/prune", map[string]any{"reason": "retention", "dead_age": "720h",
			"kinds": map[string]any{"mail": map[string]any{"dead_age": "24h"}}})
		if want(t, "prune by kind", r, http.StatusOK, ""); r.json(t)["dead"] != 1.0 || s.jobCount(t) != 1 || s.job(t, sms).State != errandtype.StateDead {
			t.Fatalf("prune by kind: %s", r.body)
		}
		want(t, "pruned job", s.op(t, "GET", "/api/v1/jobs/"+mail, nil), http.StatusNotFound, "not_found")
	})
}

func TestAPIStatsInsightsAndSchedules(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		s.deadJob(t, "mail", "billing", "timeout", nil)
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "mail", "queue": "billing"}), http.StatusCreated, "")
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "mail", "queue": "billing", "delay": "1h"}), http.StatusCreated, "")

		r := s.do(t, req{method: "GET", path: "/api/v1/stats", token: readerSecret})
		want(t, "stats", r, http.StatusOK, "")
		var sr struct {
			Queues   []errandtype.QueueStats `json:"queues"`
			Insights errand.Insights         `json:"insights"`
		}
		if err := json.Unmarshal(r.body, &sr); err != nil {
			t.Fatal(err)
		}
		if len(sr.Queues) != 1 || sr.Queues[0].Counts[errandtype.StateQueued] != 2 || len(sr.Insights.Kinds) != 1 {
			t.Fatalf("stats: %s", r.body)
		}
		ki := sr.Insights.Kinds[0]
		if ki.Queue != "billing" || ki.Kind != "mail" || ki.Ready != 1 || ki.Scheduled != 1 || ki.Dead != 1 || ki.DeadLastHour != 1 ||
			ki.FailedLastHour != 1 || len(ki.FailuresByClass) != 1 || ki.FailuresByClass[0].Class != "timeout" {
			t.Fatalf("insights: %+v", ki)
		}

		sch := s.do(t, req{method: "GET", path: "/api/v1/schedules", token: readerSecret})
		if want(t, "schedules", sch, http.StatusOK, ""); !strings.Contains(string(sch.body), `"schedules":[]`) {
			t.Fatalf("no schedules: %s", sch.body)
		}
		ss, ok := st.(errandstore.ScheduleStore)
		if !ok {
			t.Fatalf("%T keeps no schedules", st)
		}
		if _, err := ss.ScheduleUpsert(t.Context(), &errandstore.ScheduleUpsertParams{Name: "nightly", Spec: "0 3 * * *", Kind: "mail", Queue: "default",
			Missed: errandtype.MissedSkip, NextFireAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		sch = s.do(t, req{method: "GET", path: "/api/v1/schedules", token: readerSecret})
		var sl struct {
			Schedules []errandtype.ScheduleRecord `json:"schedules"`
		}
		if err := json.Unmarshal(sch.body, &sl); err != nil {
			t.Fatal(err)
		}
		if len(sl.Schedules) != 1 || sl.Schedules[0].Name != "nightly" || sl.Schedules[0].Spec != "0 3 * * *" || !sl.Schedules[0].NextFireAt.Equal(clock.Now().Add(time.Hour)) {
			t.Fatalf("schedules: %s", sch.body)
		}
		want(t, "schedules with a query", s.op(t, "GET", "/api/v1/schedules?x=1", nil), http.StatusBadRequest, "invalid_input")
	})
}

func TestAPIHideArgsInOperatorActions(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, &errandhttp.Options{API: &errandhttp.APIOptions{HideArgs: true}})
	id := s.deadJob(t, "charge", "default", "declined", map[string]string{"card": "4111"})
	fixed := s.op(t, "POST", "/api/v1/jobs/"+id+"/replay", map[string]any{"reason": "new card", "args": map[string]string{"card": "5555"}})
	want(t, "fix and replay", fixed, http.StatusOK, "")
	if j := s.job(t, id); !strings.Contains(string(j.Args), "5555") {
		t.Fatalf("args not replaced: %s", j.Args)
	}
	s.deadJob(t, "charge_again", "default", "declined", map[string]string{"card": "6666"})
	bulk := s.op(t, "POST", "/api/v1/replay", map[string]any{"reason": "retry", "dry_run": true})
	audit := s.op(t, "GET", "/api/v1/audit", nil)
	want(t, "audit", audit, http.StatusOK, "")
	for name, r := range map[string]response{"replay": fixed, "bulk replay": bulk, "audit": audit} {
		for _, card := range []string{"4111", "5555", "6666"} {
			if strings.Contains(string(r.body), card) {
				t.Errorf("%s shows hidden args: %s", name, r.body)
			}
		}
	}
	if !strings.Contains(string(audit.body), `"action":"replay_args"`) {
		t.Fatalf("audit lacks the fix-and-replay: %s", audit.body)
	}
}
