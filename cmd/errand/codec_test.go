package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCodecKeysFile: with the keys file, the CLI seals what it enqueues
// and shows it plain; without it, it shows which key a job needs and never
// the ciphertext, and a worker without the key gives the job back; a bad
// keys file is a usage error.
func TestCodecKeysFile(t *testing.T) {
	db := tempDB(t)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("# the sealing key first\nk1=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(codecKeysEnv, keys)
	id := enqueue(t, db, "charge", `{"card":"4111-SECRET"}`)
	if r := ok(t, cli(t, "inspect", id, "--db", db)); !strings.Contains(r.stdout, "4111-SECRET") {
		t.Fatalf("inspect with the key:\n%s", r.stdout)
	}

	t.Setenv(codecKeysEnv, "")
	r := ok(t, cli(t, "inspect", id, "--db", db))
	if strings.Contains(r.stdout, "SECRET") || !strings.Contains(r.stdout, "encrypted with key k1") {
		t.Fatalf("inspect without the key:\n%s", r.stdout)
	}
	if w := parseWork(t, ok(t, cli(t, "work", "--once", "--exec", "charge=true", "--db", db))); w.Result != "interrupted" || w.Class != "codec_key_missing" {
		t.Fatalf("work without the key: %+v; want the job given back", w)
	}
	if j := inspect(t, db, id); j.State != "queued" || j.Attempt != 0 {
		t.Fatalf("job after a worker without the key: %+v; want queued, no attempt used", j)
	}

	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("k1=c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "work", "--once", "--codec-keys-file", bad, "--exec", "charge=true", "--db", db); r.code != 2 || !strings.Contains(r.stderr, "16, 24 or 32") {
		t.Fatalf("work with a short key: %s; want a usage error naming the key sizes", r)
	}
}

// TestCodecAudit: the audit of a replay with corrected args shows them
// plain with the keys file, and without it the key they need, never the
// sealed value.
func TestCodecAudit(t *testing.T) {
	db := tempDB(t)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("k1=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(codecKeysEnv, keys)
	id := enqueue(t, db, "charge", `{"card":"4111-OLD"}`)
	ok(t, cli(t, "cancel", id, "--reason", "wrong card", "--db", db))
	ok(t, cli(t, "replay", id, "--reason", "fixed card", "--args", `{"card":"4111-SECRET"}`, "--db", db))
	if r := ok(t, cli(t, "audit", "--db", db)); !strings.Contains(r.stdout, "4111-OLD") || !strings.Contains(r.stdout, "4111-SECRET") {
		t.Fatalf("audit with the key:\n%s", r.stdout)
	}
	t.Setenv(codecKeysEnv, "")
	if r := ok(t, cli(t, "audit", "--db", db)); strings.Contains(r.stdout, "SECRET") || strings.Contains(r.stdout, `"ct"`) || !strings.Contains(r.stdout, "encrypted with key k1") {
		t.Fatalf("audit without the key:\n%s", r.stdout)
	}
}
