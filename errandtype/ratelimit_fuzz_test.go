package errandtype

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseRateLimit: an accepted limit is valid and reads back from its
// String; a refused one is an *InputError that says what to write.
func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{
		"queue:emails=20/s", "kind:charge=100/m", "kind:sync=5/30s,burst=5", "queue:q=1/h", "queue:q=3/1m0s",
		"queue:q=1/1000ms", "kind:k=+7/s", "queue:emails=0/s", "queue:emails=20", "queue:emails=20/0s",
		"queue:emails=20/-1s", "queue:emails=20/s,burst=0", "queue:emails=20/s,max=3", "queue:=1/s", "job:x=1/s",
		"emails=20/s", "", "queue:a b=1/s", "kind:k=9223372036854775807/1ns", "queue:q=1/2562047h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseRateLimit(s)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field == "" || ie.Message == "" || !namesRateLimit(err.Error()) {
				t.Fatalf("ParseRateLimit(%q): %v (%T), want an *InputError on the rate limit", s, err, err)
			}
			return
		}
		if _, err := l.Spec(); err != nil {
			t.Fatalf("ParseRateLimit(%q) = %#v, which Spec refuses: %v", s, l, err)
		}
		back, err := ParseRateLimit(l.String())
		if err != nil || back != l {
			t.Fatalf("ParseRateLimit(%q) = %#v, written %q, read back as %#v, %v", s, l, l.String(), back, err)
		}
	})
}

// FuzzParseRetryBudget: an accepted budget is valid and reads back from
// its String; a refused one is an *InputError that says what to write.
func FuzzParseRetryBudget(f *testing.F) {
	for _, s := range []string{
		"charge=0.1", "charge=10%/5m,min=3", "charge=0.1/1m,min=10", "charge=0/1m,min=0", "charge=1e-3",
		"charge=0x1p-3", "charge=100%", "charge=-0.1", "charge=NaN", "charge=Inf", "charge=0.1/0s",
		"charge=0.1/-1m", "charge=0.1,min=-1", "charge=0.1,max=3", "=0.1", "charge", "", "a b=0.1",
		"charge=1e308", "charge=0.1/1m,min=9223372036854775807", "charge=%", "charge=-0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseRetryBudget(s)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field == "" || ie.Message == "" || !strings.Contains(err.Error(), "retry budget") && !strings.HasPrefix(err.Error(), "RetryBudgets") {
				t.Fatalf("ParseRetryBudget(%q): %v (%T), want an *InputError on the retry budget", s, err, err)
			}
			return
		}
		if _, err := b.Spec(); err != nil {
			t.Fatalf("ParseRetryBudget(%q) = %#v, which Spec refuses: %v", s, b, err)
		}
		back, err := ParseRetryBudget(b.String())
		if err != nil || back != b {
			t.Fatalf("ParseRetryBudget(%q) = %#v, written %q, read back as %#v, %v", s, b, b.String(), back, err)
		}
	})
}

// namesRateLimit reports whether a refusal names the rate limit: the flag,
// the config field or the limit's bucket.
func namesRateLimit(msg string) bool {
	for _, p := range []string{"rate limit", "RateLimits", "queue:", "kind:"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
