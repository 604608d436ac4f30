package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// RoleEnv names the role a harness process runs as. The harness starts the
// clock-skewed worker by running its own executable (the errand-chaos
// command, or a test binary) with RoleEnv=skew-worker.
const RoleEnv = "ERRAND_CHAOS_ROLE"

// RunRole runs the role RoleEnv names, if any, and reports its exit code;
// ok is false when the process has no role and should go on as usual.
func RunRole() (code int, ok bool) {
	switch os.Getenv(RoleEnv) {
	case "":
		return 0, false
	case "skew-worker":
		if err := skewWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "skew-worker:", err)
			return 1, true
		}
		return 0, true
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: the only role is skew-worker\n", RoleEnv, os.Getenv(RoleEnv))
		return 2, true
	}
}

// skewClock is the system clock moved by a fixed offset: a host whose clock
// is wrong. Timers run at the real rate.
type skewClock struct {
	clock.System
	by time.Duration
}

func (c skewClock) Now() time.Time { return time.Now().Add(c.by) }

// skewWorker is an errand worker, built from the library, whose clock (and,
// on SQLite, whose store's clock) is off by CHAOS_SKEW. It delivers every
// kind to the sink as a webhook worker does.
func skewWorker() error {
	skew, err := time.ParseDuration(os.Getenv("CHAOS_SKEW"))
	if err != nil {
		return fmt.Errorf("CHAOS_SKEW: %w", err)
	}
	lease, err := time.ParseDuration(os.Getenv("CHAOS_LEASE"))
	if err != nil {
		return fmt.Errorf("CHAOS_LEASE: %w", err)
	}
	sinkURL := os.Getenv("CHAOS_SINK")
	kinds := strings.Split(os.Getenv("CHAOS_KINDS"), ",")
	db := os.Getenv("ERRAND_DB")
	clk := skewClock{by: skew}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	ks := errand.NewKinds()
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, k := range kinds {
		ks.HandleRaw(k, errand.HandlerFunc(func(ctx context.Context, job *errandtype.Job) error {
			return postDelivery(ctx, hc, sinkURL+"/deliver?via=skew", job.Envelope())
		}), nil)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := &errand.Config{Kinds: ks, Clock: clk, Logger: logger, AllowUnknownKinds: true}
	// On PostgreSQL the store keeps the server's clock: only the host is
	// wrong. A SQLite store's clock is the process's, skewed with it.
	var storeClock errandstore.Clock = clk
	if strings.HasPrefix(db, "postgres") {
		storeClock = nil
	}
	c, err := openClient(ctx, db, os.Getenv("ERRAND_SCHEMA"), storeClock, true, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := c.NewWorker(&errand.WorkerConfig{Lease: lease, PollInterval: 500 * time.Millisecond,
		LeaderTTL: 3 * time.Second, SweepInterval: time.Second, Owner: "skew-" + fmt.Sprint(os.Getpid())})
	if err != nil {
		return err
	}
	if err := w.Start(context.Background()); err != nil {
		return err
	}
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.Stop(grace)
}

// postDelivery posts a job's envelope to the sink, and turns the answer into
// the handler's result as errand's webhook worker does: 2xx succeeds, 4xx is
// permanent, anything else retries.
func postDelivery(ctx context.Context, hc *http.Client, url string, env errandtype.Envelope) error {
	b, err := json.Marshal(env)
	if err != nil {
		return errand.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return errand.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return errand.WithClass("network", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode/100 == 4:
		return errand.Permanent(errand.WithClass(fmt.Sprintf("http_%d", resp.StatusCode), fmt.Errorf("sink: %s", bytes.TrimSpace(body))))
	default:
		return errand.WithClass(fmt.Sprintf("http_%d", resp.StatusCode), fmt.Errorf("sink: %s", bytes.TrimSpace(body)))
	}
}
