//go:build unix

package main

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand/errandtype"
)

func TestPrintable(t *testing.T) {
	tests := []struct {
		in, want, lines string // lines: printableLines, when it differs
	}{
		{in: "pay-1 ünïcödé ✓ 日本 \ufffd C:\\dir", want: "pay-1 ünïcödé ✓ 日本 \ufffd C:\\dir"},
		{in: "\x1b]0;pwned\x07", want: `\x1b]0;pwned\x07`},
		{in: "\x1b[2J\x1b[H", want: `\x1b[2J\x1b[H`},
		{in: "a\tb\nc\rd", want: `a\tb\nc\rd`, lines: "a\tb\nc\\rd"},
		{in: "\x00\x7f\x08", want: `\x00\x7f\x08`},
		{in: "\u009b2J\u0085", want: `\u009b2J\u0085`},
		{in: "\u202egnp.exe\u2066\u2069\u200f\u061c", want: `\u202egnp.exe\u2066\u2069\u200f\u061c`},
		{in: "one\u2028two", want: `one\u2028two`},
		{in: "bad \xff\xc3 utf8", want: `bad \xff\xc3 utf8`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
		lines := tt.lines
		if lines == "" {
			lines = tt.want
		}
		if got := printableLines(tt.in); got != lines {
			t.Errorf("printableLines(%q) = %q, want %q", tt.in, got, lines)
		}
	}
}

// hostile is text a job's data may carry to an operator's terminal: it
// retitles the window, rings the bell, clears the screen, starts a C1
// control sequence, reverses the text that follows, and breaks a table's
// row and columns.
const hostile = "x\x1b]0;pwned\x07\x1b[2J\u009b31m\u202eab\tc\nd\re\x7f"

// rawControls lists the characters in out that a terminal would act on: C0
// controls other than newline and tab, DEL, C1 controls, bidirectional
// controls, line separators, and bytes that are not UTF-8.
func rawControls(out string) []string {
	var found []string
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && size == 1,
			r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r < 0xa0,
			r == '\u2028', r == '\u2029', unicode.Is(unicode.Bidi_Control, r):
			found = append(found, out[i:i+size])
		}
		i += size
	}
	return found
}

// TestHostileDataIsEscaped plants hostile strings in every field the
// human-readable output shows, with SQL, as data from an older errand or a
// careless application would be: the output of jobs, inspect, stats,
// workers, replay, cancel and enqueue, and the error line, carry no control
// character, and each table row stays on one line; --json gives back every
// string exactly.
func TestHostileDataIsEscaped(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	now := time.Now().UTC().Truncate(time.Second)
	us := now.UnixMicro()
	marshal := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	lastErr := errandtype.LastError{Class: "error" + hostile, Message: "failed: " + hostile, At: now}
	attempts := []errandtype.AttemptError{{Attempt: 1, At: now, Class: "error" + hostile, Message: "failed:\n" + hostile, Stack: "goroutine 1:\n\tmain.go:1" + hostile}}
	argsJSON := marshal(map[string]string{"note": hostile})
	conn, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	plant := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	deadID, queuedID := "dead"+hostile, "queued"+hostile
	for _, j := range []struct{ id, state, key string }{{deadID, "dead", "key-dead"}, {queuedID, "queued", "key-queued"}} {
		plant(`INSERT INTO errand_jobs (id, queue, kind, args, state, attempt, max_attempts, available_at,
			lease_owner, unique_key, ordering_key, progress, created_at, last_error, errors, tags)
			VALUES (?, ?, ?, ?, ?, 1, 3, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			j.id, "q"+hostile, "k"+hostile, argsJSON, j.state, us, "w"+hostile, j.key, "o"+hostile, argsJSON, us,
			marshal(lastErr), marshal(attempts), marshal([]string{"t" + hostile, "plain"}))
	}
	plant(`INSERT INTO errand_audit (action, job_id, replay, prior_state, operator, reason, at) VALUES ('replay', ?, 1, 'dead', ?, ?, ?)`,
		deadID, "op"+hostile, "why"+hostile, us)
	plant(`INSERT INTO errand_workers (id, host, pid, queues, heartbeat_interval_us, started_at, heartbeat_at)
		VALUES (?, ?, 42, ?, 1000000, ?, ?)`,
		"worker"+hostile, "host"+hostile, marshal([]errandtype.WorkerQueue{{Name: "q" + hostile, Concurrency: 2}}), us, us)
	conn.Close()

	clean := func(args []string, r result) {
		t.Helper()
		for _, out := range []string{r.stdout, r.stderr} {
			if found := rawControls(out); len(found) > 0 {
				t.Errorf("errand %q printed raw control characters %q:\n%s", args, found, out)
			}
		}
	}
	run := func(args ...string) result {
		t.Helper()
		args = append(args, "--db", db)
		r := ok(t, cli(t, args...))
		clean(args, r)
		return r
	}

	if r := run("jobs"); strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("jobs printed %d lines for 2 jobs:\n%s", strings.Count(r.stdout, "\n"), r.stdout)
	}
	// A table of one queue, a blank line, a table of one queue and kind.
	if r := run("stats"); strings.Count(r.stdout, "\n") != 5 {
		t.Errorf("stats printed %d lines for 1 queue and 1 kind:\n%s", strings.Count(r.stdout, "\n"), r.stdout)
	}
	if r := run("workers"); strings.Count(r.stdout, "\n") != 2 {
		t.Errorf("workers printed %d lines for 1 worker:\n%s", strings.Count(r.stdout, "\n"), r.stdout)
	}
	r := run("inspect", deadID)
	for _, want := range []string{`k` + printable(hostile), "    stack:\n      goroutine 1:\n      \tmain.go:1x", `by op` + printable(hostile)} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect lacks %q:\n%s", want, r.stdout)
		}
	}

	// --json gives back the exact strings.
	var js []errandtype.Job
	if err := json.Unmarshal([]byte(run("jobs", "--json").stdout), &js); err != nil || len(js) != 2 {
		t.Fatalf("jobs --json: %v", err)
	}
	if js[0].ID != deadID || js[1].ID != queuedID || js[0].Kind != "k"+hostile || js[0].Queue != "q"+hostile {
		t.Errorf("jobs --json changed the strings: %q %q %q %q", js[0].ID, js[1].ID, js[0].Kind, js[0].Queue)
	}
	var in struct {
		errandtype.Job
		ReplaysAudit []errandtype.ReplayRecord `json:"replays_audit"`
	}
	if err := json.Unmarshal([]byte(run("inspect", deadID, "--json").stdout), &in); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in.Errors, attempts) || !reflect.DeepEqual(in.Tags, []string{"t" + hostile, "plain"}) ||
		*in.LeaseOwner != "w"+hostile || *in.OrderingKey != "o"+hostile || in.LastError.Message != lastErr.Message ||
		len(in.ReplaysAudit) != 1 || in.ReplaysAudit[0].Operator != "op"+hostile || in.ReplaysAudit[0].Reason != "why"+hostile {
		t.Errorf("inspect --json changed the strings: %+v", in)
	}
	var args map[string]string
	if err := json.Unmarshal(in.Args, &args); err != nil || args["note"] != hostile {
		t.Errorf("inspect --json args = %s (%v)", in.Args, err)
	}
	var ws []errandtype.WorkerRecord
	if err := json.Unmarshal([]byte(run("workers", "--json").stdout), &ws); err != nil || len(ws) != 1 {
		t.Fatalf("workers --json: %v", err)
	}
	if ws[0].ID != "worker"+hostile || ws[0].Host != "host"+hostile || ws[0].Queues[0].Name != "q"+hostile {
		t.Errorf("workers --json changed the strings: %+v", ws[0])
	}

	// The confirmations and the error line.
	if r := run("enqueue", "k", "--key", "key-queued"); r.stdout != printable(queuedID)+"\n" {
		t.Errorf("enqueue of a duplicate printed %q", r.stdout)
	}
	if r := run("cancel", queuedID, "--reason", "r"); !strings.HasPrefix(r.stdout, "cancelled queued") {
		t.Errorf("cancel printed %q", r.stdout)
	}
	if r := run("replay", deadID, "--reason", "r"); !strings.HasPrefix(r.stdout, "replayed dead") {
		t.Errorf("replay printed %q", r.stdout)
	}
	cancelAgain := []string{"cancel", queuedID, "--reason", "r", "--db", db}
	r = cli(t, cancelAgain...)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("cancel of a cancelled job: %s", r)
	}
	clean(cancelAgain, r)
}

// TestHandlerOutputIsEscaped runs a job whose command writes control
// sequences to its stderr, which becomes the attempt's error message: jobs
// and inspect print it escaped, and inspect --json gives it back exactly.
func TestHandlerOutputIsEscaped(t *testing.T) {
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		id := enqueue(t, db, "shout", `{"note": "\u009b2J \u202e"}`)
		cmd := script(t, `printf 'title\033]0;pwned\007\033[2J\nclear\302\2332J\n' >&2; exit 1`)
		parseWork(t, cli(t, "work", "--once", "--db", db, "--exec", "shout="+cmd))
		for _, args := range [][]string{{"jobs"}, {"inspect", id}, {"stats"}} {
			args = append(args, "--db", db)
			r := ok(t, cli(t, args...))
			if found := rawControls(r.stdout + r.stderr); len(found) > 0 {
				t.Errorf("errand %q printed raw control characters %q:\n%s", args, found, r)
			}
		}
		r := ok(t, cli(t, "inspect", id, "--db", db))
		if !strings.Contains(r.stdout, `title\x1b]0;pwned\x07\x1b[2J`+"\n      clear\\u009b2J") {
			t.Errorf("inspect does not show the message escaped, line by line:\n%s", r.stdout)
		}
		var in errandtype.Job
		if err := json.Unmarshal([]byte(ok(t, cli(t, "inspect", id, "--db", db, "--json")).stdout), &in); err != nil {
			t.Fatal(err)
		}
		if len(in.Errors) != 1 || !strings.Contains(in.Errors[0].Message, "title\x1b]0;pwned\x07\x1b[2J\nclear\u009b2J") {
			t.Errorf("inspect --json error history %+v, want the command's stderr exactly", in.Errors)
		}
	})
}

// TestJSONForTerminal: encoded JSON keeps no character a terminal acts on,
// and decodes to exactly the strings that were encoded.
func TestJSONForTerminal(t *testing.T) {
	in := map[string]string{hostile: hostile + "\u2066\u0085"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonForTerminal(b)
	if found := rawControls(string(got)); len(found) > 0 {
		t.Errorf("jsonForTerminal left %q in %s", found, got)
	}
	var out map[string]string
	if err := json.Unmarshal(got, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("jsonForTerminal(%s) = %s, decodes to %q (%v), want %q", b, got, out, err, in)
	}
	plain := []byte(`{"id": "pay-1", "note": "ünïcödé ✓"}`)
	if got := jsonForTerminal(plain); string(got) != string(plain) {
		t.Errorf("jsonForTerminal changed %s to %s", plain, got)
	}
}
