package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzBreakerFlags: a --dependency and a --breaker accepted give a policy
// the library accepts, which reads back from DEP=N/WINDOW/COOLDOWN/PROBES;
// refused ones are usage errors that name the flag.
func FuzzBreakerFlags(f *testing.F) {
	for _, c := range [][2]string{
		{"send_receipt=smtp", "smtp=5/1m/30s"}, {"k=smtp", "smtp=5/1m/30s/2"}, {"k=smtp", "smtp=1/1ms/1ms/1"},
		{"k=smtp", "smtp=0/1m/30s"}, {"k=smtp", "smtp=5/0s/30s"}, {"k=smtp", "smtp=5/1m/-1s"}, {"k=smtp", "smtp=5/1m"},
		{"k=smtp", "smtp=5/1m/30s/0"}, {"k=smtp", "smtp=5/1m/30s/1/1"}, {"k=smtp", "other=5/1m/30s"},
		{"k=smtp", "smtp=2147483647/1m/30s"}, {"k=smtp", "smtp=5/1ns/30s"}, {"k=smtp", "smtp=5/1m/876000h"},
		{"k=", "=5/1m/30s"}, {"=smtp", "smtp=5/1m/30s"}, {"k=a b", "a b=5/1m/30s"}, {"k", "smtp"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, dep, breaker string) {
		if len(dep)+len(breaker) > 300 {
			return
		}
		b := breakerFlags{deps: &[]string{dep}, policies: &[]string{breaker}}
		deps, policies, err := b.parse()
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, "--dependency") && !strings.Contains(ue.msg, "--breaker") {
				t.Fatalf("--dependency %q --breaker %q: %v (%T), want a usage error naming the flag", dep, breaker, err, err)
			}
			return
		}
		if len(deps) != 1 || len(policies) != 1 {
			t.Fatalf("--dependency %q --breaker %q: deps %v, policies %v; want one of each", dep, breaker, deps, policies)
		}
		for name, p := range policies {
			if err := p.Validate("breaker"); err != nil {
				t.Fatalf("--breaker %q accepted as %+v, which the library refuses: %v", breaker, *p, err)
			}
			again := name + "=" + strconv.Itoa(p.Threshold) + "/" + p.Window.String() + "/" + p.Cooldown.String() + "/" + strconv.Itoa(p.Probes)
			if p.Probes == 0 {
				again = name + "=" + strconv.Itoa(p.Threshold) + "/" + p.Window.String() + "/" + p.Cooldown.String()
			}
			b := breakerFlags{deps: &[]string{dep}, policies: &[]string{again}}
			_, back, err := b.parse()
			if err != nil || *back[name] != *p {
				t.Fatalf("--breaker %q = %+v, written %q, read back as %v, %v", breaker, *p, again, back[name], err)
			}
		}
	})
}
