package errandtype

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// LimiterModeConcurrency is a concurrency limit's bucket: Rate is how many
// jobs of its kind may run at once across the cluster (an adaptive one's
// limit now, between Floor and Ceiling). It holds no tokens: a claim
// counts the kind's jobs running under a live lease in its own
// transaction, with the bucket's row locked (see [LimiterSpec.Admit]).
const LimiterModeConcurrency LimiterMode = "concurrency"

// ConcurrencyLimit caps how many jobs of a kind, or of every kind that
// calls a dependency, run at once across the whole cluster. A worker
// claims jobs of a limited kind only in a transaction that locks the
// limit's row in the database and counts the running jobs it limits, so
// concurrent claimers, in one process or many, never start more than the
// limit between them. Running means state running with a lease that has
// not expired: a worker killed with jobs running holds their slots only
// until their leases expire. A job over the limit stays queued, its
// attempt unused. Give the same limit to every worker that handles the
// kinds; a worker without it claims them freely.
type ConcurrencyLimit struct {
	// Kind is the kind limited (in every queue).
	Kind string
	// Dependency, instead of Kind, limits together every kind that
	// declares it (KindOpts.Dependency): a provider that takes at most so
	// many calls at once, whichever kind makes them.
	Dependency string
	// Limit is the most jobs of Kind running at once; an adaptive limit's
	// starting point.
	Limit int
	// Floor and Ceiling, both given, make the limit adaptive: it follows
	// the outcomes of the kind's jobs within these bounds by the rule of
	// adaptive rate limits (see [LimiterSpec.Adapt]).
	Floor, Ceiling int
	// Target, on an adaptive limit, is the latency a success should stay
	// within; zero: latency does not count.
	Target time.Duration
}

// Name is the limit's row: "concurrency:KIND" or
// "concurrency:dependency:NAME".
func (l ConcurrencyLimit) Name() string {
	if l.Dependency != "" {
		return ConcurrencyLimitPrefix + DependencyLimitPrefix + l.Dependency
	}
	return ConcurrencyLimitPrefix + l.Kind
}

// ConcurrencyLimitPrefix begins the name of a concurrency limit's row.
const ConcurrencyLimitPrefix = "concurrency:"

// Adaptive reports whether the limit is adaptive.
func (l ConcurrencyLimit) Adaptive() bool { return l.Ceiling > 0 }

// Spec checks the limit and returns its bucket's rule.
func (l ConcurrencyLimit) Spec() (LimiterSpec, error) {
	bad := func(msg string, args ...any) (LimiterSpec, error) {
		return LimiterSpec{}, &InputError{Field: "ConcurrencyLimits", Message: l.Name() + ": " + fmt.Sprintf(msg, args...)}
	}
	switch {
	case l.Kind != "" && l.Dependency != "":
		return bad("names kind %q and dependency %q; give one of them", l.Kind, l.Dependency)
	case l.Dependency != "":
		if err := CheckName("ConcurrencyLimits dependency", l.Dependency); err != nil {
			return LimiterSpec{}, err
		}
	case strings.HasPrefix(l.Kind, DependencyLimitPrefix):
		return bad("kind %q reads as a dependency's limit; set Dependency: %q instead", l.Kind, strings.TrimPrefix(l.Kind, DependencyLimitPrefix))
	default:
		if err := CheckName("ConcurrencyLimits kind", l.Kind); err != nil {
			return LimiterSpec{}, err
		}
	}
	if l.Limit < 1 || l.Limit > MaxLimiterTokens {
		return bad("limit %d; give 1 to %d jobs at once, e.g. kind:export=10", l.Limit, int(MaxLimiterTokens))
	}
	s := LimiterSpec{Mode: LimiterModeConcurrency, Rate: float64(l.Limit)}
	if l.Floor != 0 || l.Ceiling != 0 || l.Target != 0 {
		switch {
		case l.Floor < 1 || l.Ceiling < l.Limit || l.Floor > l.Limit || l.Ceiling > MaxLimiterTokens:
			return bad("floor %d and ceiling %d must hold the starting limit %d, with a floor of at least 1, e.g. floor=1,ceiling=%d", l.Floor, l.Ceiling, l.Limit, l.Limit*10)
		case l.Target < 0:
			return bad("target %s; give a positive latency or 0 for none", l.Target)
		}
		s.Floor, s.Ceiling = float64(l.Floor), float64(l.Ceiling)
		s.Target = l.Target.Truncate(time.Microsecond)
	}
	if err := s.Validate(); err != nil {
		return LimiterSpec{}, fmt.Errorf("%s: %w", l.Name(), err)
	}
	return s, nil
}

// String writes the limit as ParseConcurrencyLimit reads it.
func (l ConcurrencyLimit) String() string {
	s := "kind:" + l.Kind
	if l.Dependency != "" {
		s = DependencyLimitPrefix + l.Dependency
	}
	s += "=" + strconv.Itoa(l.Limit)
	if l.Floor > 0 || l.Ceiling > 0 {
		s += ",floor=" + strconv.Itoa(l.Floor) + ",ceiling=" + strconv.Itoa(l.Ceiling)
	}
	if l.Target > 0 {
		s += ",target=" + l.Target.String()
	}
	return s
}

// ParseConcurrencyLimit reads a concurrency limit written on a command
// line, as errand work --concurrency-limit takes it:
//
//	kind:NAME=N
//	dependency:NAME=N
//	kind:NAME=N,floor=F,ceiling=C[,target=DURATION]
//
// e.g. "kind:export=10", "dependency:stripe=20" (every kind that declares
// the dependency, together), "kind:sync=10,floor=2,ceiling=50,target=2s"
// (adaptive). Bad input is an *InputError that shows the form to use.
func ParseConcurrencyLimit(s string) (ConcurrencyLimit, error) {
	const form = "write kind:NAME=N or dependency:NAME=N, optionally adaptive with ,floor=F,ceiling=C[,target=2s], e.g. kind:export=10"
	bad := func(why string) (ConcurrencyLimit, error) {
		return ConcurrencyLimit{}, &InputError{Field: "concurrency limit", Message: fmt.Sprintf("%q %s; %s", s, why, form)}
	}
	target, rule, ok := strings.Cut(s, "=")
	var l ConcurrencyLimit
	if dep, isDep := strings.CutPrefix(target, DependencyLimitPrefix); isDep {
		l.Dependency = dep
	} else if kind, isKind := strings.CutPrefix(target, "kind:"); isKind {
		l.Kind = kind
	}
	if !ok || l.Kind == "" && l.Dependency == "" {
		return bad("names no kind:NAME or dependency:NAME")
	}
	n, opt, hasOpt := strings.Cut(rule, ",")
	var err error
	if l.Limit, err = strconv.Atoi(n); err != nil || l.Limit < 1 {
		return bad("has no limit N of at least 1")
	}
	if hasOpt {
		if why := readLimitOptions(opt, "", nil, &l.Floor, &l.Ceiling, &l.Target); why != "" {
			return bad(why)
		}
	}
	if _, err := l.Spec(); err != nil {
		return ConcurrencyLimit{}, err
	}
	return l, nil
}

// readLimitOptions reads the options of a limit written on a command line,
// comma-separated, each once: burst=B (when burst is not nil, named in
// burstForm), floor=F, ceiling=C and target=DURATION. It returns why an
// option is bad, or "".
func readLimitOptions(opts, burstForm string, burst, floor, ceiling *int, target *time.Duration) string {
	for more := true; more; {
		var o string
		o, opts, more = strings.Cut(opts, ",")
		key, val, _ := strings.Cut(o, "=")
		n, err := strconv.Atoi(val)
		switch {
		case key == "burst" && burst != nil && err == nil && n >= 1 && *burst == 0:
			*burst = n
		case key == "floor" && err == nil && n >= 1 && *floor == 0:
			*floor = n
		case key == "ceiling" && err == nil && n >= 1 && *ceiling == 0:
			*ceiling = n
		case key == "target" && *target == 0:
			if *target, err = time.ParseDuration(val); err != nil || *target <= 0 {
				return "has a target that is not a positive duration"
			}
		default:
			return fmt.Sprintf("has an option %q that is not %sfloor=F, ceiling=C or target=DURATION, each once with a number at least 1", o, burstForm)
		}
	}
	return ""
}

// validateConcurrency checks a concurrency limit's spec.
func (s LimiterSpec) validateConcurrency() error {
	if !finite(s.Rate) || s.Rate < 1 || s.Rate > MaxLimiterTokens {
		return &InputError{Field: "rate", Message: fmt.Sprintf("a concurrency limit must be 1 to %g jobs at once", float64(MaxLimiterTokens))}
	}
	if s.Burst != 0 || s.Min != 0 || s.Ratio != 0 || s.Window != 0 {
		return &InputError{Field: "rate", Message: "a concurrency limit takes its limit (Rate), Floor and Ceiling only"}
	}
	if (s.Floor != 0 || s.Ceiling != 0) && !(finite(s.Floor) && finite(s.Ceiling) && s.Floor >= 1 && s.Floor <= s.Rate && s.Rate <= s.Ceiling && s.Ceiling <= MaxLimiterTokens) {
		return &InputError{Field: "floor", Message: fmt.Sprintf("an adaptive concurrency limit's floor %g and ceiling %g must hold its starting limit %g, with a floor of at least 1", s.Floor, s.Ceiling, s.Rate)}
	}
	return nil
}

// Slots is how many jobs may run at once under a concurrency limit whose
// stored state is st: its limit now (an adaptive one's, rounded down),
// or none while a provider's reset time holds it.
func (s LimiterSpec) Slots(st LimiterState, now time.Time) int {
	if now.Before(st.HeldUntil) {
		return 0
	}
	return int(math.Floor(s.Rate + limiterEpsilon))
}

// Admit decides a claim of up to want jobs under a concurrency limit
// whose stored state is st, at now, with running jobs of its scope
// running under live leases: the room the claim may fill, and the rule
// from now on (s's own for a fixed limit, the stored limit within s's
// bounds for an adaptive one). Every store takes the room from here, in
// the transaction that locks the bucket's row and counts running, so
// that concurrent claimers take turns and never start more than the
// limit between them.
func (s LimiterSpec) Admit(st LimiterState, now time.Time, running, want int) (room int, cur LimiterSpec) {
	cur = s.Current(st.Rate)
	if !cur.Adaptive() {
		st.HeldUntil = time.Time{} // only an adaptive limit is held
	}
	return min(max(cur.Slots(st, now)-running, 0), max(want, 0)), cur
}
