package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/errandhq/errand"
)

// FuzzParseQueues: --queue flags (one a line) accepted name valid, distinct
// queues with a concurrency in bounds, which read back from NAME=N; refused
// ones are usage errors that name --queue.
func FuzzParseQueues(f *testing.F) {
	for _, s := range []string{
		"default", "reports=2", "reports=2\nemails", "a=1\na=2", "=3", "q=0", "q=-1", "q=+5", "q=1001",
		"q=2147483648", "a=b=3", "a b=2", "q=", "q=1\nr=10000", ".", "a,b=2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 300 {
			return
		}
		specs := strings.Split(s, "\n")
		q, err := parseQueues(specs)
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, "--queue") {
				t.Fatalf("--queue %q: %v (%T), want a usage error naming --queue", specs, err, err)
			}
			return
		}
		if len(q.names) != len(specs) || len(q.concurrency) != len(specs) {
			t.Fatalf("--queue %q = %v, want one queue a flag", specs, q)
		}
		again := make([]string, len(q.names))
		for i, name := range q.names {
			n := q.concurrency[name]
			if err := errand.ValidateName(name); err != nil || n < 1 || n > errand.MaxConcurrency {
				t.Fatalf("--queue %q accepted queue %q with %d: %v", specs, name, n, err)
			}
			again[i] = name + "=" + strconv.Itoa(n)
		}
		back, err := parseQueues(again)
		if err != nil || back.String() != q.String() {
			t.Fatalf("--queue %q = %v, written %q, read back as %v, %v", specs, q, again, back, err)
		}
	})
}

// FuzzParseCrons: two --cron flags accepted are two schedules of distinct
// names; refused ones are usage errors that name --cron.
func FuzzParseCrons(f *testing.F) {
	for _, c := range [][2]string{
		{`nightly=0 3 * * * cleanup {"days": 30}`, "heartbeat=@every 30s ping"},
		{"a=@hourly k", "a=@daily k"}, {"a=@hourly k", "b=CRON_TZ=Europe/Paris 0 9 * * * k"},
		{"a=@hourly k", "b=TZ= k"}, {"a=@hourly 42", "b"}, {"", ""},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a)+len(b) > 300 {
			return
		}
		scheds, err := parseCrons([]string{a, b})
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, "--cron") {
				t.Fatalf("--cron %q --cron %q: %v (%T), want a usage error naming --cron", a, b, err, err)
			}
			return
		}
		if len(scheds) != 2 || scheds[0].Name() == scheds[1].Name() {
			t.Fatalf("--cron %q --cron %q: %d schedules, want two of distinct names", a, b, len(scheds))
		}
	})
}
