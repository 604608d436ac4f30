package main

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// plantFinished sets a job's state and finish time directly, as if it had
// finished long ago.
func plantFinished(t *testing.T, db, id, state, class string, finished time.Time) {
	t.Helper()
	conn, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Exec(`UPDATE errand_jobs SET state = ?, attempt = 1, finished_at = ?,
		last_error = json_object('class', ?, 'message', 'failed', 'at', '2026-01-01T00:00:00Z') WHERE id = ?`,
		state, finished.UnixMicro(), class, id)
	if err != nil {
		t.Fatal(err)
	}
}

// TestBulkReplayPruneAndAudit runs the operator commands on one database:
// a bulk replay by filter, a replay with corrected args, a prune that
// leaves live jobs alone, and the audit of all of them.
func TestBulkReplayPruneAndAudit(t *testing.T) {
	db := tempDB(t)
	old := time.Now().Add(-48 * time.Hour)
	for _, j := range []struct{ id, kind, state, class string }{
		{"d1", "mail", "dead", "timeout"}, {"d2", "mail", "dead", "permanent"}, {"d3", "sms", "dead", "timeout"},
		{"s1", "mail", "succeeded", ""}, {"q1", "mail", "queued", ""},
	} {
		enqueue(t, db, j.kind, `{"to": "x"}`, "--id", j.id)
		if j.state != "queued" {
			plantFinished(t, db, j.id, j.state, j.class, old)
		}
	}

	r := ok(t, cli(t, "replay", "--state", "dead", "--class", "timeout", "--dry-run", "--db", db))
	if !strings.HasPrefix(r.stdout, "would replay 2 dead jobs\n") || !strings.Contains(r.stdout, "d1") || !strings.Contains(r.stdout, "d3") {
		t.Errorf("dry run printed %q", r.stdout)
	}
	r = ok(t, cli(t, "replay", "--state", "dead", "--kind", "mail", "--class", "timeout", "--since", "72h",
		"--rate", "100/s", "--reason", "provider back", "--operator", "ana", "--json", "--db", db))
	var res errand.ReplayManyResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != "d1" || res.Jobs[0].State != errandtype.StateQueued {
		t.Fatalf("bulk replay: %s (%v)", r.stdout, err)
	}
	ok(t, cli(t, "replay", "d2", "--args", `{"to": "y"}`, "--reason", "address fixed", "--db", db))
	var args struct{ To string }
	if j := inspect(t, db, "d2"); json.Unmarshal(j.Args, &args) != nil || args.To != "y" {
		t.Errorf("args after replay with --args: %s", j.Args)
	}

	for _, bad := range [][]string{
		{"replay", "--state", "dead", "--limit", "1001", "--reason", "r"},
		{"replay", "--state", "queued", "--reason", "r"},
		{"replay", "--state", "dead", "--rate", "fast", "--reason", "r"},
		{"replay", "--state", "dead", "--since", "yesterday", "--reason", "r"},
		{"replay", "d3", "--state", "dead", "--reason", "r"},
		{"replay", "--state", "dead"},
		{"prune"},
		{"prune", "--succeeded-after", "720h", "--dead-after", "1h"},
		{"prune", "--succeeded-after", "1h", "--batch", "1001"},
		{"audit", "--limit", "1001"},
		{"audit", "--action", "delete"},
	} {
		if r := cli(t, append(bad, "--db", db)...); r.code != 2 || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("errand %q: %s; want exit 2 with one line", bad, r)
		}
	}

	r = ok(t, cli(t, "prune", "--succeeded-after", "24h", "--dead-after", "87600h", "--dry-run", "--db", db))
	if r.stdout != "would prune 1 job: 1 succeeded, 0 cancelled, 0 dead; 0 batches, 0 workflows\n" {
		t.Errorf("prune --dry-run of the succeeded job printed %q", r.stdout)
	}
	r = ok(t, cli(t, "prune", "--succeeded-after", "24h", "--dead-after", "24h", "--dry-run", "--db", db))
	if r.stdout != "would prune 2 jobs: 1 succeeded, 0 cancelled, 1 dead; 0 batches, 0 workflows\n" {
		t.Errorf("prune --dry-run printed %q", r.stdout)
	}
	r = ok(t, cli(t, "prune", "--succeeded-after", "24h", "--dead-after", "24h", "--json", "--db", db))
	var pr errandstore.PruneResult
	if err := json.Unmarshal([]byte(r.stdout), &pr); err != nil || pr != (errandstore.PruneResult{Succeeded: 1, Dead: 1}) {
		t.Fatalf("prune: %s (%v); want the succeeded job and d3", r.stdout, err)
	}
	left := map[string]string{}
	for _, j := range listJobs(t, db) {
		left[j.ID] = j.State
	}
	if len(left) != 3 || left["q1"] != "queued" || left["d1"] != "queued" || left["d2"] != "queued" {
		t.Errorf("jobs after prune: %v", left)
	}

	r = ok(t, cli(t, "audit", "--json", "--db", db))
	var audit []errandtype.AuditRecord
	if err := json.Unmarshal([]byte(r.stdout), &audit); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, string(a.Action))
	}
	if strings.Join(actions, ",") != "prune,replay_args,bulk_replay" || audit[2].Operator != "ana" {
		t.Errorf("audit: %s", r.stdout)
	}
	r = ok(t, cli(t, "audit", "--job", "d2", "--db", db))
	if !strings.Contains(r.stdout, "replay_args  d2") || !strings.Contains(r.stdout, "address fixed") {
		t.Errorf("audit of d2 printed %q", r.stdout)
	}

	r = ok(t, cli(t, "stats", "--json", "--db", db))
	var stats struct {
		Queues []struct {
			Queue string                `json:"queue"`
			Kinds []errand.KindInsights `json:"kinds"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &stats); err != nil || len(stats.Queues) != 1 || len(stats.Queues[0].Kinds) != 1 ||
		stats.Queues[0].Kinds[0].Kind != "mail" || stats.Queues[0].Kinds[0].Ready != 3 {
		t.Errorf("stats --json: %s (%v); want kind mail with 3 ready", r.stdout, err)
	}
}

// TestPruneRetainKind runs errand prune --retain-kind: a kind's own age
// replaces the default for its jobs alone, and a bad spec is a usage error
// that deletes nothing.
func TestPruneRetainKind(t *testing.T) {
	db := tempDB(t)
	old := time.Now().Add(-48 * time.Hour)
	for _, j := range []struct{ id, kind, state string }{
		{"m1", "mail", "succeeded"}, {"s1", "sms", "succeeded"}, {"m2", "mail", "dead"},
	} {
		enqueue(t, db, j.kind, `{}`, "--id", j.id)
		plantFinished(t, db, j.id, j.state, "timeout", old)
	}
	for _, bad := range [][]string{
		{"--retain-kind", "mail"},
		{"--retain-kind", "=1h"},
		{"--retain-kind", "mail=soon"},
		{"--retain-kind", "mail=-1h"},
		{"--retain-kind", "mail=:"},
		{"--retain-kind", "mail=1h", "--retain-kind", "mail=2h"},
		{"--retain-kind", "mail=720h:1h"},
		{"--retain-kind", "mail=720h", "--dead-after", "1h"},
	} {
		if r := cli(t, append(append([]string{"prune"}, bad...), "--db", db)...); r.code != 2 || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, "--retain-kind") || r.stdout != "" {
			t.Errorf("errand prune %q: %s; want exit 2 with one line naming --retain-kind", bad, r)
		}
	}
	if n := len(listJobs(t, db)); n != 3 {
		t.Fatalf("refused prunes left %d jobs, want 3", n)
	}
	r := ok(t, cli(t, "prune", "--succeeded-after", "87600h", "--retain-kind", "sms=24h", "--dry-run", "--db", db))
	if r.stdout != "would prune 1 job: 1 succeeded, 0 cancelled, 0 dead; 0 batches, 0 workflows\n" {
		t.Errorf("prune --retain-kind sms=24h --dry-run printed %q", r.stdout)
	}
	r = ok(t, cli(t, "prune", "--retain-kind", "mail=24h", "--json", "--db", db))
	var pr errandstore.PruneResult
	if err := json.Unmarshal([]byte(r.stdout), &pr); err != nil || pr != (errandstore.PruneResult{Succeeded: 1}) {
		t.Fatalf("prune --retain-kind mail=24h: %s (%v); want m1 alone", r.stdout, err)
	}
	left := map[string]string{}
	for _, j := range listJobs(t, db) {
		left[j.ID] = j.State
	}
	if len(left) != 2 || left["s1"] != "succeeded" || left["m2"] != "dead" {
		t.Errorf("jobs after prune --retain-kind: %v, want s1 and m2", left)
	}
}
