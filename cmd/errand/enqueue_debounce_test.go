//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestEnqueueDebounce runs the binary: a second enqueue of a debounce key
// prints the pending job's id and says it absorbed it, the job takes the
// newest args, and inspect shows the key and the count; bad debounce flags
// exit 2 naming the flag.
func TestEnqueueDebounce(t *testing.T) {
	db := tempDB(t)
	flags := []string{"--debounce-key", "user:42", "--debounce-window", "1h"}
	first := enqueue(t, db, append([]string{"reindex", `{"v":1}`}, flags...)...)
	r := ok(t, cli(t, append([]string{"enqueue", "reindex", `{"v":2}`, "--db", db, "--json"}, flags...)...))
	var out struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
		Absorbed  bool   `json:"absorbed"`
		Job       struct {
			Args        json.RawMessage `json:"args"`
			DebounceKey string          `json:"debounce_key"`
			Absorbed    int             `json:"absorbed"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	var args bytes.Buffer
	if err := json.Compact(&args, out.Job.Args); err != nil {
		t.Fatal(err)
	}
	if out.ID != first || !out.Absorbed || !out.Duplicate || out.Job.DebounceKey != "user:42" || out.Job.Absorbed != 1 || args.String() != `{"v":2}` {
		t.Fatalf("second enqueue of %s --json = %s", first, r.stdout)
	}
	if r := ok(t, cli(t, "inspect", first, "--db", db)); !strings.Contains(r.stdout, "user:42 (absorbed 1 enqueues)") {
		t.Errorf("inspect lacks the debounce key and count:\n%s", r.stdout)
	}
	for args, line := range map[string]string{
		"--debounce-window 1s": "--debounce-window needs a non-empty --debounce-key",
		"--debounce-key k":     "--debounce-key needs --debounce-window",
		"--debounce-key k --debounce-window 1s --debounce-mode sooner": "--debounce-mode",
		"--debounce-key k --debounce-window 1s --id x":                 "--id",
		"--debounce-key k --debounce-window 1s --delay 1m":             "--debounce-window",
	} {
		r := cli(t, append([]string{"enqueue", "reindex", "--db", db}, strings.Fields(args)...)...)
		if r.code != 2 || !strings.Contains(r.stderr, line) {
			t.Errorf("enqueue %s: %s; want exit 2 naming %q", args, r, line)
		}
	}
}
