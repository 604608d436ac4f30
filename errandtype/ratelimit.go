package errandtype

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// RateLimit caps how many jobs of a queue, of a kind, or of the kinds that
// call a dependency, start per interval
// across the whole cluster: the tokens are held in the database (see
// [github.com/errandhq/errand/errandstore.LimiterStore]), so two processes share one rate instead of each getting
// all of it. A worker takes tokens before it claims and claims no more jobs
// than it got, so a job over the limit is never claimed: it waits, queued,
// without using an attempt. Give the same limits to every worker that
// works the queue or kind; when two workers give different ones, the
// bucket follows whichever took from it last.
type RateLimit struct {
	// Queue names the queue limited, Kind the kind (in every queue), or
	// Dependency what kinds call (their
	// [github.com/errandhq/errand.KindOpts].Dependency, e.g.
	// "payments-api"): exactly one of them. A dependency's limit is one
	// rate shared by every kind that declares it.
	Queue      string
	Kind       string
	Dependency string
	// Limit jobs start per Per at most, e.g. 20 per second.
	Limit int
	Per   time.Duration
	// Burst is how many may start at once after a quiet spell, at least 1.
	// Default: a tenth of a second's worth of Limit/Per, at least 1, so
	// that starts are spread evenly and no interval of Per sees more than
	// Limit+Burst of them.
	Burst int
	// Floor and Ceiling, both given, make a kind's or a dependency's limit
	// adaptive: its rate, in jobs per Per like Limit, starts at Limit and
	// follows the outcomes of the jobs of the kind (of every kind of the
	// dependency) within these bounds (see
	// LimiterSpec.Adapt). Its burst follows the rate; Burst must be 0.
	Floor, Ceiling int
	// Target, on an adaptive limit, is the latency a success should stay
	// within: most successes slower than it lower the rate like a
	// throttle. Zero: latency does not count.
	Target time.Duration
}

// Name is the limit's bucket: "queue:NAME", "kind:NAME" or
// "dependency:NAME".
func (l RateLimit) Name() string {
	switch {
	case l.Queue != "":
		return "queue:" + l.Queue
	case l.Dependency != "":
		return DependencyLimitPrefix + l.Dependency
	}
	return "kind:" + l.Kind
}

// DependencyLimitPrefix begins the name of a dependency's rate limit
// bucket.
const DependencyLimitPrefix = "dependency:"

// Spec checks the limit and returns its bucket's rule, defaults applied.
func (l RateLimit) Spec() (LimiterSpec, error) {
	if err := l.checkScope(); err != nil {
		return LimiterSpec{}, err
	}
	if l.Limit < 1 || l.Per <= 0 {
		return LimiterSpec{}, &InputError{Field: "RateLimits", Message: fmt.Sprintf("%s: %d per %s; give a Limit of at least 1 per a positive Per, e.g. 20 per 1s", l.Name(), l.Limit, l.Per)}
	}
	rate := float64(l.Limit) / l.Per.Seconds()
	burst := l.Burst
	if burst == 0 {
		burst = max(1, int(math.Floor(rate/10)))
	}
	if burst < 1 {
		return LimiterSpec{}, &InputError{Field: "RateLimits", Message: fmt.Sprintf("%s: burst %d; give at least 1", l.Name(), l.Burst)}
	}
	s := LimiterSpec{Mode: LimiterModeRate, Rate: rate, Burst: float64(burst)}
	if l.Floor != 0 || l.Ceiling != 0 || l.Target != 0 {
		if err := l.checkAdaptive(); err != nil {
			return LimiterSpec{}, err
		}
		s.Floor, s.Ceiling = float64(l.Floor)/l.Per.Seconds(), float64(l.Ceiling)/l.Per.Seconds()
		s.Target = l.Target.Truncate(time.Microsecond)
		s = s.Current(0)
	}
	if err := s.Validate(); err != nil {
		return LimiterSpec{}, fmt.Errorf("%s: %w", l.Name(), err)
	}
	return s, nil
}

// checkScope checks that the limit names one queue, kind or dependency.
func (l RateLimit) checkScope() error {
	field, name, n := "", "", 0
	for _, s := range []struct{ field, name string }{{"queue", l.Queue}, {"kind", l.Kind}, {"dependency", l.Dependency}} {
		if s.name != "" {
			field, name, n = s.field, s.name, n+1
		}
	}
	if n != 1 {
		return &InputError{Field: "RateLimits", Message: fmt.Sprintf("a rate limit names a Queue, a Kind or a Dependency, exactly one (got queue %q, kind %q, dependency %q)", l.Queue, l.Kind, l.Dependency)}
	}
	return CheckName("RateLimits "+field, name)
}

// checkAdaptive checks an adaptive limit's own fields.
func (l RateLimit) checkAdaptive() error {
	switch {
	case l.Queue != "":
		return &InputError{Field: "RateLimits", Message: fmt.Sprintf("%s: only a kind's or a dependency's limit can be adaptive, since its jobs' outcomes move it; drop Floor, Ceiling and Target or limit a kind or a dependency", l.Name())}
	case l.Floor < 1 || l.Ceiling < l.Limit || l.Floor > l.Limit:
		return &InputError{Field: "RateLimits", Message: fmt.Sprintf("%s: floor %d and ceiling %d must hold the starting limit %d, with a floor of at least 1, e.g. floor=1,ceiling=%d", l.Name(), l.Floor, l.Ceiling, l.Limit, max(l.Limit*10, 1))}
	case l.Burst != 0:
		return &InputError{Field: "RateLimits", Message: fmt.Sprintf("%s: an adaptive limit's burst follows its rate; drop Burst", l.Name())}
	case l.Target < 0:
		return &InputError{Field: "RateLimits", Message: fmt.Sprintf("%s: target %s; give a positive latency or 0 for none", l.Name(), l.Target)}
	}
	return nil
}

// Adaptive reports whether the limit is adaptive.
func (l RateLimit) Adaptive() bool { return l.Ceiling > 0 }

// String writes the limit as ParseRateLimit reads it.
func (l RateLimit) String() string {
	s := l.Name() + "=" + strconv.Itoa(l.Limit) + "/" + perString(l.Per)
	if l.Burst > 0 {
		s += ",burst=" + strconv.Itoa(l.Burst)
	}
	if l.Floor > 0 || l.Ceiling > 0 {
		s += ",floor=" + strconv.Itoa(l.Floor) + ",ceiling=" + strconv.Itoa(l.Ceiling)
	}
	if l.Target > 0 {
		s += ",target=" + l.Target.String()
	}
	return s
}

func perString(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// ParseRateLimit reads a rate limit written on a command line, as errand
// work --rate-limit and errand serve --rate-limit take it:
//
//	queue:NAME=N/PER[,burst=B]
//	kind:NAME=N/PER[,burst=B]
//	kind:NAME=N/PER,floor=F,ceiling=C[,target=DURATION]
//	dependency:NAME=N/PER[,burst=B], or adaptive as a kind's
//
// PER is s, m or h, or a Go duration: "queue:emails=20/s",
// "kind:charge=100/m", "kind:sync=5/30s,burst=5",
// "kind:webhook=50/s,floor=5,ceiling=500,target=2s" (adaptive),
// "dependency:payments-api=100/s" (every kind that calls it). Bad input
// is an *InputError that shows the form to use.
func ParseRateLimit(s string) (RateLimit, error) {
	const form = "write queue:NAME=N/PER, kind:NAME=N/PER or dependency:NAME=N/PER, with PER s, m, h or a duration and options ,burst=B or (a kind's or dependency's, adaptive) ,floor=F,ceiling=C[,target=2s], e.g. queue:emails=20/s"
	bad := func(why string) (RateLimit, error) {
		return RateLimit{}, &InputError{Field: "rate limit", Message: fmt.Sprintf("%q %s; %s", s, why, form)}
	}
	target, rule, ok := strings.Cut(s, "=")
	scope, name, ok2 := strings.Cut(target, ":")
	if !ok || !ok2 || name == "" {
		return bad("names no queue, kind or dependency")
	}
	var l RateLimit
	switch scope {
	case "queue":
		l.Queue = name
	case "kind":
		l.Kind = name
	case "dependency":
		l.Dependency = name
	default:
		return bad("limits neither a queue, a kind nor a dependency")
	}
	rule, opt, hasOpt := strings.Cut(rule, ",")
	n, per, ok := strings.Cut(rule, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 1 {
		return bad("has no rate N/PER with N at least 1")
	}
	l.Limit = limit
	if l.Per, err = parsePer(per); err != nil {
		return bad("has no interval PER")
	}
	if hasOpt {
		if why := readLimitOptions(opt, "burst=B, ", &l.Burst, &l.Floor, &l.Ceiling, &l.Target); why != "" {
			return bad(why)
		}
	}
	if _, err := l.Spec(); err != nil {
		return RateLimit{}, err
	}
	return l, nil
}

// parsePer reads s, m, h or a Go duration.
func parsePer(s string) (time.Duration, error) {
	switch s {
	case "s":
		return time.Second, nil
	case "m":
		return time.Minute, nil
	case "h":
		return time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = fmt.Errorf("not positive")
	}
	return d, err
}

// RetryBudget caps the retries of a kind to a fraction of its first
// attempts, across the whole cluster, so that an outage of what the kind
// calls cannot multiply the load on it: over budget, the kind's retries
// wait, queued, until first attempts (or time) give the budget tokens.
// The budget is held in the database (see [github.com/errandhq/errand/errandstore.LimiterStore]): its level is
// Min plus Ratio times the kind's first attempts of about the last Window,
// less its retries of about the last Window (each counting e^-age/Window).
// A worker claims a retry of the kind only with a whole token of the
// budget, taken in the store's transaction, so that concurrent claims
// never retry more than the budget holds; it leaves the kind's retries out
// of its claims while the budget has none; first attempts are never held
// back. Give the same budget to every
// worker that runs the kind: first attempts claimed by a worker without
// it deposit nothing.
type RetryBudget struct {
	// Kind is the kind budgeted.
	Kind string
	// Ratio is the retries allowed per first attempt, e.g. 0.1 for one
	// retry for every ten first attempts.
	Ratio float64
	// Window is how long first attempts and retries count. Default 1m.
	Window time.Duration
	// Min is the retries a kind may make in about a Window even with no
	// first attempts, so that a quiet kind can still retry. Default 10;
	// a negative Min means 0.
	Min int
}

// Defaults of RetryBudget.
const (
	DefaultRetryBudgetWindow = time.Minute
	DefaultRetryBudgetMin    = 10
)

// Name is the budget's bucket: "retry:KIND".
func (b RetryBudget) Name() string { return "retry:" + b.Kind }

// Spec checks the budget and returns its bucket's rule, defaults applied.
func (b RetryBudget) Spec() (LimiterSpec, error) {
	if err := CheckName("RetryBudgets kind", b.Kind); err != nil {
		return LimiterSpec{}, err
	}
	w := b.Window
	if w == 0 {
		w = DefaultRetryBudgetWindow
	}
	m := b.Min
	if m == 0 {
		m = DefaultRetryBudgetMin
	}
	s := LimiterSpec{Mode: LimiterModeRetryBudget, Ratio: b.Ratio, Window: w, Min: float64(max(m, 0))}
	if err := s.Validate(); err != nil {
		return LimiterSpec{}, fmt.Errorf("retry budget of %s: %w", b.Kind, err)
	}
	return s, nil
}

// ParseRetryBudget reads a retry budget written on a command line, as
// errand work --retry-budget and errand serve --retry-budget take it:
//
//	KIND=RATIO[/WINDOW][,min=N]
//
// RATIO is a fraction or a percentage, WINDOW a Go duration (default 1m),
// N the retries a quiet kind may make per window (default 10):
// "charge=0.1", "charge=10%/5m,min=3". Bad input is an *InputError that
// shows the form to use.
func ParseRetryBudget(s string) (RetryBudget, error) {
	const form = "write KIND=RATIO[/WINDOW][,min=N], e.g. charge=0.1/1m,min=10"
	bad := func(why string) (RetryBudget, error) {
		return RetryBudget{}, &InputError{Field: "retry budget", Message: fmt.Sprintf("%q %s; %s", s, why, form)}
	}
	kind, rule, ok := strings.Cut(s, "=")
	if !ok || kind == "" {
		return bad("names no kind")
	}
	b := RetryBudget{Kind: kind}
	rule, opt, hasOpt := strings.Cut(rule, ",")
	ratio, window, hasWindow := strings.Cut(rule, "/")
	var err error
	if b.Ratio, err = parseRatio(ratio); err != nil {
		return bad("has no RATIO, a fraction such as 0.1 or a percentage such as 10%")
	}
	if hasWindow {
		if b.Window, err = time.ParseDuration(window); err != nil || b.Window <= 0 {
			return bad("has a WINDOW that is not a positive duration")
		}
	}
	if hasOpt {
		if b.Min, err = parseBudgetMin(opt); err != nil {
			return bad("has a minimum that is not min=N with N at least 0")
		}
	}
	if _, err := b.Spec(); err != nil {
		return RetryBudget{}, err
	}
	return b, nil
}

// parseRatio reads a budget's RATIO: a fraction or a percentage, finite
// and not negative.
func parseRatio(s string) (float64, error) {
	div := 1.0
	if pct, isPct := strings.CutSuffix(s, "%"); isPct {
		s, div = pct, 100
	}
	r, err := strconv.ParseFloat(s, 64)
	r /= div
	if err == nil && (r < 0 || math.IsNaN(r) || math.IsInf(r, 0)) {
		err = errors.New("out of range")
	}
	return r, err
}

// parseBudgetMin reads a budget's min=N, N at least 0, as RetryBudget.Min
// keeps it: -1 for zero, since 0 is the default.
func parseBudgetMin(opt string) (int, error) {
	m, ok := strings.CutPrefix(opt, "min=")
	n, err := strconv.Atoi(m)
	if !ok || err != nil || n < 0 {
		return 0, errors.New("not min=N")
	}
	if n == 0 {
		return -1, nil // zero, not the default
	}
	return n, nil
}

// String writes the budget as ParseRetryBudget reads it.
func (b RetryBudget) String() string {
	s := b.Kind + "=" + strconv.FormatFloat(b.Ratio, 'g', -1, 64)
	if b.Window != 0 {
		s += "/" + b.Window.String()
	}
	switch {
	case b.Min < 0:
		s += ",min=0"
	case b.Min > 0:
		s += ",min=" + strconv.Itoa(b.Min)
	}
	return s
}
