package main

import (
	"errors"
	"flag"
	"math"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// breakerFlags are the circuit breaker flags shared by errand work and
// serve: which dependency each mapped kind calls, and each dependency's
// breaker policy.
type breakerFlags struct {
	deps, policies *[]string
}

func addBreakerFlags(fs *flag.FlagSet) breakerFlags {
	return breakerFlags{
		deps: listFlag(fs, "dependency", "jobs of KIND call dependency DEP: its circuit breaker stops claims of them while DEP is down (`KIND=DEP`, repeatable)"),
		policies: listFlag(fs, "breaker", "open DEP's breaker after N failures in a row within WINDOW, for COOLDOWN, then let PROBES jobs test it "+
			"(`DEP=N/WINDOW/COOLDOWN[/PROBES]`, repeatable; default 5/1m/30s/1)"),
	}
}

// parse returns the dependency of each kind and the policy of each
// dependency that --breaker names.
func (b breakerFlags) parse() (map[string]string, map[string]*errandtype.BreakerPolicy, error) {
	deps, err := parseDependencies(*b.deps)
	if err != nil {
		return nil, nil, err
	}
	named := map[string]bool{}
	for _, dep := range deps {
		named[dep] = true
	}
	var policies map[string]*errandtype.BreakerPolicy
	for _, spec := range *b.policies {
		dep, rest, ok := strings.Cut(spec, "=")
		parts := strings.Split(rest, "/")
		if !ok || dep == "" || len(parts) < 3 || len(parts) > 4 {
			return nil, nil, usagef("--breaker %q: write DEP=N/WINDOW/COOLDOWN[/PROBES], e.g. --breaker smtp=5/1m/30s", spec)
		}
		if !named[dep] {
			return nil, nil, usagef("--breaker names dependency %q, which no --dependency KIND=%s declares", dep, dep)
		}
		if _, dup := policies[dep]; dup {
			return nil, nil, usagef("--breaker names dependency %q twice; give one policy per dependency", dep)
		}
		p, err := parseBreakerPolicy(spec, parts)
		if err != nil {
			return nil, nil, err
		}
		if policies == nil {
			policies = map[string]*errandtype.BreakerPolicy{}
		}
		policies[dep] = p
	}
	return deps, policies, nil
}

// parseDependencies reads --dependency KIND=DEP: the dependency of each
// kind.
func parseDependencies(specs []string) (map[string]string, error) {
	deps := map[string]string{}
	for _, spec := range specs {
		kind, dep, ok := strings.Cut(spec, "=")
		if !ok || kind == "" || dep == "" {
			return nil, usagef("--dependency %q: write KIND=DEP, e.g. --dependency send_receipt=smtp", spec)
		}
		for _, name := range []string{kind, dep} {
			if err := nameError("--dependency", name); err != nil {
				return nil, err
			}
		}
		if _, dup := deps[kind]; dup {
			return nil, usagef("--dependency names kind %q twice; a kind calls one dependency", kind)
		}
		deps[kind] = dep
	}
	return deps, nil
}

// parseBreakerPolicy reads the N/WINDOW/COOLDOWN[/PROBES] of --breaker
// spec, split at its slashes into parts.
func parseBreakerPolicy(spec string, parts []string) (*errandtype.BreakerPolicy, error) {
	var p errandtype.BreakerPolicy
	var err error
	if p.Threshold, err = atoi32(parts[0]); err != nil || p.Threshold < 1 {
		return nil, usagef("--breaker %q: the failure threshold %q must be a whole number of at least 1 and at most %d", spec, parts[0], math.MaxInt32)
	}
	if p.Window, err = time.ParseDuration(parts[1]); err != nil || p.Window <= 0 {
		return nil, usagef("--breaker %q: the window %q must be a positive Go duration such as 1m", spec, parts[1])
	}
	if p.Cooldown, err = time.ParseDuration(parts[2]); err != nil || p.Cooldown <= 0 {
		return nil, usagef("--breaker %q: the cool-down %q must be a positive Go duration such as 30s", spec, parts[2])
	}
	if len(parts) == 4 {
		if p.Probes, err = atoi32(parts[3]); err != nil || p.Probes < 1 {
			return nil, usagef("--breaker %q: the probes %q must be a whole number of at least 1 and at most %d", spec, parts[3], math.MaxInt32)
		}
	}
	// The library's bounds (a window of at least 1ms, ...), named here
	// rather than when the worker starts.
	var ie *errandtype.InputError
	if err := p.Validate("breaker"); errors.As(err, &ie) {
		return nil, usagef("--breaker %q: %s %s", spec, strings.TrimPrefix(ie.Field, "breaker."), ie.Message)
	}
	return &p, nil
}
