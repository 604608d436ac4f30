package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/sqlite"
)

// TestSchedulerRetriesSoonWhenTheStoreIsAway: a scheduler that cannot read
// the store's clock looks again a second later, not a minute later, so
// ticks resume within a second of the store's return.
func TestSchedulerRetriesSoonWhenTheStoreIsAway(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	t0 := time.Date(2026, 1, 1, 0, 59, 30, 0, time.UTC)
	clk := errandtest.NewClock(t0)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), &sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var away atomic.Bool
	spec, ticks, err := schedule.Stored("@hourly", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := schedule.New(schedule.Config{Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), Wake: func(string) {},
		Now: func(ctx context.Context) (time.Time, error) {
			if away.Load() {
				return time.Time{}, errors.New("store away")
			}
			return st.Now(ctx)
		}},
		[]schedule.Entry{{Name: "hourly", Spec: spec, Ticks: ticks, Missed: errandtype.MissedSkip, Grace: 10 * time.Second,
			Job: func(tick time.Time, catchUp bool) (*errandstore.JobInsertParams, error) {
				return &errandstore.JobInsertParams{ID: "tick-" + tick.Format(time.RFC3339), UniqueKey: "cron:hourly:" + tick.Format(time.RFC3339), Queue: "default", Kind: "tick",
					Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1}, nil
			}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); sc.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Bounds on waits that, were the scheduler wrong, would never end.
	waitCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	next := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	if err := clk.BlockUntilAt(waitCtx, next, 1); err != nil {
		t.Fatalf("the scheduler does not sleep until the next tick: %v (armed %v)", err, clk.Armed())
	}
	away.Store(true)
	clk.Set(next)
	if err := clk.BlockUntilAt(waitCtx, next.Add(time.Second), 1); err != nil {
		t.Fatalf("with the store away, the scheduler does not look again a second later: %v (armed %v)", err, clk.Armed())
	}
	away.Store(false)
	clk.Set(next.Add(time.Second))
	waitFor := time.Now().Add(30 * time.Second)
	for {
		if _, err := st.JobGet(ctx, &errandstore.JobGetParams{ID: "tick-2026-01-01T01:00:00Z"}); err == nil {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatal("the tick due while the store was away did not fire once it came back")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
