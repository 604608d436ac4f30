package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPauseCommands: errand pause keeps a queue's or a kind's pause with
// who and why, errand pauses and errand stats show it, errand resume lifts
// it, and both land in the audit; bad input changes nothing.
func TestPauseCommands(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "enqueue", "mail", "--queue", "emails", "--db", db))
	if r := ok(t, cli(t, "pause", "--queue", "emails", "--reason", "provider outage", "--operator", "ana", "--db", db)); r.stdout != "queue emails: paused\n" {
		t.Fatalf("pause: %q", r.stdout)
	}
	r := ok(t, cli(t, "pause", "--queue", "emails", "--reason", "again", "--operator", "bo", "--db", db, "--json"))
	var out struct {
		Pause struct {
			Scope, Name, Operator, Reason string
		} `json:"pause"`
		Changed bool `json:"changed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Changed || out.Pause.Operator != "ana" || out.Pause.Reason != "provider outage" {
		t.Fatalf("second pause: %s (%v); want the first pause, unchanged", r.stdout, err)
	}
	ok(t, cli(t, "pause", "--kind", "mail", "--reason", "bad deploy", "--db", db))
	if r := ok(t, cli(t, "pauses", "--db", db)); !strings.Contains(r.stdout, "queue  emails") || !strings.Contains(r.stdout, "kind   mail") {
		t.Fatalf("pauses:\n%s", r.stdout)
	}
	if r := ok(t, cli(t, "stats", "--db", db)); !strings.Contains(r.stdout, "queue emails paused since") || !strings.Contains(r.stdout, "by ana: provider outage") {
		t.Fatalf("stats of a paused queue:\n%s", r.stdout)
	}
	if r := ok(t, cli(t, "resume", "--queue", "emails", "--reason", "back", "--db", db)); r.stdout != "queue emails: resumed\n" {
		t.Fatalf("resume: %q", r.stdout)
	}
	if r := ok(t, cli(t, "resume", "--queue", "emails", "--reason", "back", "--db", db, "--json")); !strings.Contains(r.stdout, `"changed": false`) {
		t.Fatalf("second resume: %q", r.stdout)
	}
	if r := ok(t, cli(t, "stats", "--db", db)); !strings.Contains(r.stdout, "1 job of kind mail in queue emails: the kind is paused") {
		t.Fatalf("stats of a paused kind:\n%s", r.stdout)
	}
	audit := ok(t, cli(t, "audit", "--db", db))
	if strings.Count(audit.stdout, "pause") < 2 || !strings.Contains(audit.stdout, "resume") {
		t.Fatalf("audit:\n%s", audit.stdout)
	}

	for _, args := range [][]string{
		{"pause", "--reason", "x"},                                // no target
		{"pause", "--queue", "q", "--kind", "k", "--reason", "x"}, // two
		{"pause", "--queue", "q"},                                 // no reason
		{"resume", "--kind", "mail"},                              // no reason
		{"pause", "--queue", "bad name\x01", "--reason", "x"},     // a name no queue has
	} {
		if r := cli(t, append(args, "--db", db)...); r.code != 2 {
			t.Errorf("errand %s: %s; want a usage error", strings.Join(args, " "), r)
		}
	}
	if r := ok(t, cli(t, "pauses", "--db", db, "--json")); !strings.Contains(r.stdout, `"name": "mail"`) || strings.Count(r.stdout, `"scope"`) != 1 {
		t.Fatalf("pauses after refusals:\n%s", r.stdout)
	}
}
