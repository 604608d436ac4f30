package main

import (
	"context"
	"flag"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
)

// readyFlags are the thresholds past which /readyz reports degraded.
type readyFlags struct {
	maxOldestAge  *time.Duration
	maxDeadGrowth *string
}

func addReadyFlags(fs *flag.FlagSet) readyFlags {
	return readyFlags{
		maxOldestAge:  durationFlag(fs, "ready-max-oldest-age", "/readyz reports degraded while a queue's oldest ready job has waited longer than `DUR` (e.g. 5m; default: no limit)"),
		maxDeadGrowth: fs.String("ready-max-dead-growth", "", "/readyz reports degraded while more than N jobs of a queue died within PERIOD (`N/PERIOD`, e.g. 100/h; default: no limit)"),
	}
}

// options checks the flags and returns the /readyz options they give.
func (r readyFlags) options(fs *flag.FlagSet) (*errandhttp.ReadyOptions, error) {
	o := &errandhttp.ReadyOptions{}
	if isSet(fs, "ready-max-oldest-age") {
		if *r.maxOldestAge <= 0 {
			return nil, usagef("--ready-max-oldest-age must be positive, e.g. 5m")
		}
		o.MaxOldestReadyAge = *r.maxOldestAge
	}
	if isSet(fs, "ready-max-dead-growth") {
		g, err := errandhttp.ParseDeadGrowth(*r.maxDeadGrowth)
		if err != nil {
			return nil, usagef("--ready-max-dead-growth: %v", err)
		}
		o.MaxDeadGrowth = g
	}
	return o, nil
}

// metricsListenAddr reads --metrics-addr: host:port, or a port alone for
// the loopback address, so that metrics are not exposed by accident.
func metricsListenAddr(v string) (string, error) {
	if _, err := strconv.ParseUint(v, 10, 16); err == nil {
		return net.JoinHostPort("127.0.0.1", v), nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return "", usagef("--metrics-addr %q: give HOST:PORT or a port alone for 127.0.0.1, e.g. --metrics-addr 9464", v)
	}
	return v, nil
}

// metricsServer serves /metrics, /healthz and /readyz of one client.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// startMetrics listens on addr and serves the client's metrics and health
// until stop.
func startMetrics[TTx any](c *errand.Client[TTx], obs *errandhttp.MetricsObserver, ready *errandhttp.ReadyOptions, addr string, e *env) (*metricsServer, error) {
	ln, err := listen(addr, "--metrics-addr")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Observer: obs}))
	mux.Handle("GET /healthz", errandhttp.NewHealthz())
	mux.Handle("GET /readyz", errandhttp.NewReadyz(c, ready))
	m := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() { m.done <- m.srv.Serve(ln) }()
	e.logger.Info("serving metrics", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return m, nil
}

// stop ends the server, letting scrapes in progress finish for a moment.
func (m *metricsServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	<-m.done // http.ErrServerClosed
}

// retentionFlags are --retain-succeeded, --retain-dead and --retain-every,
// shared by work and serve: the leader's retention policy.
type retentionFlags struct {
	succeeded, dead, every *time.Duration
	kinds                  *[]string
}

func addRetentionFlags(fs *flag.FlagSet) retentionFlags {
	return retentionFlags{
		kinds:     listFlag(fs, "retain-kind", "when leading, prune jobs of KIND at their own ages instead of --retain-succeeded and --retain-dead (`KIND=SUCCEEDED[:DEAD]`, repeatable, e.g. email=1h)"),
		succeeded: durationFlag(fs, "retain-succeeded", "when leading, delete succeeded and cancelled jobs finished `AGE` ago, every hour (default keep them; see errand prune)"),
		dead:      durationFlag(fs, "retain-dead", "when leading, delete dead jobs that died `AGE` ago, every hour (default keep them)"),
		every:     durationFlag(fs, "retain-every", "prune as --retain-succeeded and --retain-dead say every `DUR` instead of every hour"),
	}
}

// check refuses a bad --retain-kind, and --retain-every without a policy
// to apply.
func (r retentionFlags) check() error {
	if _, err := retainKinds("--retain-kind", *r.kinds); err != nil {
		return err
	}
	if *r.every > 0 && r.policy() == nil {
		return usagef("--retain-every sets how often the retention policy prunes; add --retain-succeeded AGE, --retain-dead AGE or --retain-kind KIND=AGE")
	}
	return nil
}

// policy is the retention policy the flags give, nil when none is set.
func (r retentionFlags) policy() *errand.RetentionPolicy {
	kinds, _ := retainKinds("--retain-kind", *r.kinds)
	if *r.succeeded <= 0 && *r.dead <= 0 && len(kinds) == 0 {
		return nil
	}
	return &errand.RetentionPolicy{SucceededAge: *r.succeeded, DeadAge: *r.dead, Kinds: kinds, Interval: *r.every}
}

// retainKinds reads repeated KIND=SUCCEEDED[:DEAD] specs of flag: either
// age may be empty or 0 to leave that state to the default ages.
func retainKinds(flag string, specs []string) (map[string]errand.KindRetention, error) {
	var kinds map[string]errand.KindRetention
	for _, spec := range specs {
		kind, ages, ok := strings.Cut(spec, "=")
		if !ok || kind == "" {
			return nil, usagef("%s %q: write KIND=SUCCEEDED[:DEAD], e.g. %s email=1h or %s invoice=720h:2160h", flag, spec, flag, flag)
		}
		if err := nameError(flag, kind); err != nil {
			return nil, err
		}
		if _, dup := kinds[kind]; dup {
			return nil, usagef("%s names kind %q more than once; give each kind once", flag, kind)
		}
		succ, dead, _ := strings.Cut(ages, ":")
		var a errand.KindRetention
		for _, f := range []struct {
			v   string
			age *time.Duration
		}{{succ, &a.SucceededAge}, {dead, &a.DeadAge}} {
			if f.v == "" {
				continue
			}
			d, err := time.ParseDuration(f.v)
			if err != nil || d < 0 {
				return nil, usagef("%s %q: %q is not an age; give a Go duration such as 1h or 720h (or 0 for the default)", flag, spec, f.v)
			}
			*f.age = d
		}
		if a.SucceededAge == 0 && a.DeadAge == 0 {
			return nil, usagef("%s %q gives no age; give SUCCEEDED, :DEAD or both, e.g. %s %s=1h", flag, spec, flag, kind)
		}
		if kinds == nil {
			kinds = map[string]errand.KindRetention{}
		}
		kinds[kind] = a
	}
	return kinds, nil
}
