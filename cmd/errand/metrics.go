package main

import (
	"context"
	"flag"
	"net"
	"net/http"
	"strconv"
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
}

func addRetentionFlags(fs *flag.FlagSet) retentionFlags {
	return retentionFlags{
		succeeded: durationFlag(fs, "retain-succeeded", "when leading, delete succeeded and cancelled jobs finished `AGE` ago, every hour (default keep them; see errand prune)"),
		dead:      durationFlag(fs, "retain-dead", "when leading, delete dead jobs that died `AGE` ago, every hour (default keep them)"),
		every:     durationFlag(fs, "retain-every", "prune as --retain-succeeded and --retain-dead say every `DUR` instead of every hour"),
	}
}

// check refuses --retain-every without a policy to apply.
func (r retentionFlags) check() error {
	if *r.every > 0 && r.policy() == nil {
		return usagef("--retain-every sets how often the retention policy prunes; add --retain-succeeded AGE or --retain-dead AGE")
	}
	return nil
}

// policy is the retention policy the flags give, nil when neither is set.
func (r retentionFlags) policy() *errand.RetentionPolicy {
	if *r.succeeded <= 0 && *r.dead <= 0 {
		return nil
	}
	return &errand.RetentionPolicy{SucceededAge: *r.succeeded, DeadAge: *r.dead, Interval: *r.every}
}
