package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// The tests run the leader in a synctest bubble, whose clock moves only when
// every goroutine waits: clock.System is then a fake clock, and the times
// recorded below are exact offsets from the bubble's start.

// store is a Store that answers elections with elect and records, as
// offsets from start, when each duty was called and with what.
type store struct {
	start time.Time
	elect func(ctx context.Context, n int) (*errandtype.Leader, error)

	mu          sync.Mutex
	elections   []time.Duration
	sweeps      []time.Duration
	prunes      []errandstore.WorkerPruneParams
	turnPrunes  []errandstore.FairTurnPruneParams
	resigned    []errandstore.LeaderResignParams
	electParams []errandstore.LeaderElectParams
	events      []string // sweeps and AfterSweep calls, in order
}

func newStore(elect func(ctx context.Context, n int) (*errandtype.Leader, error)) *store {
	return &store{start: time.Now(), elect: elect}
}

func (s *store) at() time.Duration { return time.Since(s.start) }

func (s *store) LeaderElect(ctx context.Context, p *errandstore.LeaderElectParams) (*errandtype.Leader, error) {
	s.mu.Lock()
	n := len(s.elections)
	s.elections = append(s.elections, s.at())
	s.electParams = append(s.electParams, *p)
	s.mu.Unlock()
	return s.elect(ctx, n)
}

func (s *store) LeaderResign(_ context.Context, p *errandstore.LeaderResignParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resigned = append(s.resigned, *p)
	return nil
}

func (s *store) LeaderGet(context.Context, *errandstore.LeaderGetParams) (*errandtype.Leader, error) {
	return nil, errandtype.ErrNotFound
}

func (s *store) JobSweep(context.Context, *errandstore.JobSweepParams) (errandstore.SweepResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweeps = append(s.sweeps, s.at())
	s.events = append(s.events, "sweep")
	return errandstore.SweepResult{}, nil
}

func (s *store) WorkerPrune(_ context.Context, p *errandstore.WorkerPruneParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prunes = append(s.prunes, *p)
	return 0, nil
}

func (s *store) FairTurnPrune(_ context.Context, p *errandstore.FairTurnPruneParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turnPrunes = append(s.turnPrunes, *p)
	return 0, nil
}

func (s *store) event(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, name)
}

// snapshot returns copies of what the store recorded.
func (s *store) snapshot() (elections, sweeps []time.Duration, prunes int, resigned []errandstore.LeaderResignParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.elections), slices.Clone(s.sweeps), len(s.prunes), slices.Clone(s.resigned)
}

// wins answers every election: the caller leads.
func wins(context.Context, int) (*errandtype.Leader, error) {
	return &errandtype.Leader{Name: "errand", Holder: "w1", Leading: true}, nil
}

// winsFirst answers the first election with a win and every later one
// with later.
func winsFirst(later func(ctx context.Context) (*errandtype.Leader, error)) func(context.Context, int) (*errandtype.Leader, error) {
	return func(ctx context.Context, n int) (*errandtype.Leader, error) {
		if n == 0 {
			return wins(ctx, n)
		}
		return later(ctx)
	}
}

const ttl = 30 * time.Second

func config(s *store) Config {
	return Config{
		Store: s, FairTurns: s, Clock: clock.System{}, Logger: slog.New(slog.DiscardHandler),
		ID: "w1", Name: "errand", TTL: ttl,
		SweepInterval:    time.Second,
		WorkerPruneAfter: time.Hour, FairTurnPruneAfter: 2 * time.Hour,
	}
}

// run starts l in the bubble and returns a function that stops it and
// waits for Run to return.
func run(l *Leader) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// sleepTo sleeps until offset d of the bubble's start and lets every
// goroutine settle. Offsets fall between the leader's ticks, so that what
// is due at a tick has happened.
func sleepTo(s *store, d time.Duration) {
	time.Sleep(d - s.at())
	synctest.Wait()
}

// TestLeaderRenewsEveryThirdOfTheTTL: a candidate calls for election at
// once, then every TTL/3, naming its leadership, itself and the TTL.
func TestLeaderRenewsEveryThirdOfTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		stop := run(New(config(s)))
		sleepTo(s, 35*time.Second)
		stop()
		elections, _, _, _ := s.snapshot()
		want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}
		if !slices.Equal(elections, want) {
			t.Errorf("elections at %v, want %v", elections, want)
		}
		if p := s.electParams[0]; p.Name != "errand" || p.Holder != "w1" || p.TTL != ttl {
			t.Errorf("election params %+v, want errand, w1, %v", p, ttl)
		}
	})
}

// TestLeaderDutiesRunOnElectionThenOnSchedule: the sweep, the prunes and
// retention run at once on election, then the sweep every SweepInterval,
// the prunes every pruneEvery and retention every RetentionEvery, with the
// configured ages.
func TestLeaderDutiesRunOnElectionThenOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		cfg := config(s)
		cfg.SweepInterval = 10 * time.Second
		var retained []time.Duration
		var mu sync.Mutex
		cfg.Retention = func(context.Context) {
			mu.Lock()
			defer mu.Unlock()
			retained = append(retained, s.at())
		}
		cfg.RetentionEvery = 2 * time.Minute
		l := New(cfg)
		stop := run(l)

		sleepTo(s, time.Second)
		if !l.Leading() {
			t.Fatal("not leading after winning the election")
		}
		_, sweeps, prunes, _ := s.snapshot()
		mu.Lock()
		retentions := len(retained)
		mu.Unlock()
		if !slices.Equal(sweeps, []time.Duration{0}) || prunes != 1 || retentions != 1 {
			t.Fatalf("on election: sweeps at %v, %d prunes, %d retention runs; want one of each at once", sweeps, prunes, retentions)
		}

		sleepTo(s, pruneEvery+time.Second)
		stop()
		_, sweeps, prunes, _ = s.snapshot()
		if len(sweeps) != 31 || sweeps[1] != 10*time.Second || sweeps[30] != pruneEvery {
			t.Errorf("sweeps at %v, want every 10s from 0 to %v", sweeps, pruneEvery)
		}
		if prunes != 2 || len(s.turnPrunes) != 2 {
			t.Errorf("%d registry and %d fair-turn prunes in %v, want 2 each (on election and after %v)", prunes, len(s.turnPrunes), pruneEvery+time.Second, pruneEvery)
		}
		if s.prunes[0].OlderThan != time.Hour || s.turnPrunes[0].IdleFor != 2*time.Hour {
			t.Errorf("prunes with OlderThan %v and IdleFor %v, want the configured 1h and 2h", s.prunes[0].OlderThan, s.turnPrunes[0].IdleFor)
		}
		want := []time.Duration{0, 2 * time.Minute, 4 * time.Minute}
		if !slices.Equal(retained, want) {
			t.Errorf("retention at %v, want %v", retained, want)
		}
	})
}

// TestLeaderRunsAfterSweepInOrder: each sweep is followed by the
// AfterSweep duties, in their order.
func TestLeaderRunsAfterSweepInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		cfg := config(s)
		cfg.AfterSweep = []func(context.Context){
			func(context.Context) { s.event("batches") },
			func(context.Context) { s.event("workflows") },
		}
		stop := run(New(cfg))
		sleepTo(s, 1500*time.Millisecond)
		stop()
		want := []string{"sweep", "batches", "workflows", "sweep", "batches", "workflows"}
		if !slices.Equal(s.events, want) {
			t.Errorf("duties ran %v, want %v", s.events, want)
		}
	})
}

// TestCandidateThatLosesRunsNoDuties: a worker that another leads never
// sweeps, prunes, nor resigns.
func TestCandidateThatLosesRunsNoDuties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(func(context.Context, int) (*errandtype.Leader, error) {
			return &errandtype.Leader{Name: "errand", Holder: "w2"}, nil
		})
		l := New(config(s))
		stop := run(l)
		sleepTo(s, 65*time.Second)
		leading := l.Leading()
		stop()
		elections, sweeps, prunes, resigned := s.snapshot()
		if leading || len(sweeps) != 0 || prunes != 0 || len(resigned) != 0 {
			t.Errorf("leading %v, sweeps %v, %d prunes, resigned %v; want none", leading, sweeps, prunes, resigned)
		}
		if len(elections) != 7 { // at 0, 10s, ..., 60s
			t.Errorf("elections at %v, want a candidate to call every 10s", elections)
		}
	})
}

// TestLeaderStepsDownWhenAnotherLeads: a renewal that reports another
// holder ends the leadership and its duties at once, and a worker that
// no longer leads does not resign.
func TestLeaderStepsDownWhenAnotherLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(winsFirst(func(context.Context) (*errandtype.Leader, error) {
			return &errandtype.Leader{Name: "errand", Holder: "w2"}, nil
		}))
		cfg := config(s)
		cfg.SweepInterval = 3 * time.Second // no sweep falls on a renewal
		l := New(cfg)
		stop := run(l)
		sleepTo(s, 10*time.Second+time.Millisecond)
		if l.Leading() {
			t.Error("still leading after a renewal that another worker won")
		}
		sleepTo(s, time.Minute)
		stop()
		_, sweeps, _, resigned := s.snapshot()
		if want := []time.Duration{0, 3 * time.Second, 6 * time.Second, 9 * time.Second}; !slices.Equal(sweeps, want) {
			t.Errorf("sweeps at %v, want %v: every 3s until the lost renewal at 10s", sweeps, want)
		}
		if len(resigned) != 0 {
			t.Errorf("resigned %v after another worker took over, want no resignation", resigned)
		}
	})
}

// TestLeaderStopsAtItsShareOfTheLease: when renewals fail, the leader
// retries every TTL/9 and stops leading at the start of its last good
// election plus TTL minus a third of it, before the store's lease ends.
func TestLeaderStopsAtItsShareOfTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(winsFirst(func(context.Context) (*errandtype.Leader, error) {
			return nil, errors.New("store away")
		}))
		l := New(config(s))
		stop := run(l)
		sleepTo(s, 20*time.Second-time.Millisecond)
		if !l.Leading() {
			t.Fatal("stopped leading before its share of the lease ended")
		}
		elections, _, _, _ := s.snapshot()
		if len(elections) < 3 || elections[1] != 10*time.Second || elections[2] != 10*time.Second+ttl/9 {
			t.Errorf("elections at %v, want a renewal at 10s retried %v later", elections, ttl/9)
		}
		sleepTo(s, 20*time.Second+time.Millisecond)
		if l.Leading() {
			t.Fatal("still leading past TTL - TTL/3 without a renewal")
		}
		sleepTo(s, time.Minute)
		stop()
		_, sweeps, _, _ := s.snapshot()
		if last := sweeps[len(sweeps)-1]; last >= 20*time.Second {
			t.Errorf("swept at %v, after its share of the lease ended at 20s", last)
		}
	})
}

// TestLeaderCutsOffAHangingRenewal: a renewal that hangs is abandoned at
// the end of the leader's share of the lease, and the leadership ends
// there, not when the store answers.
func TestLeaderCutsOffAHangingRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(winsFirst(func(ctx context.Context) (*errandtype.Leader, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}))
		l := New(config(s))
		stop := run(l)
		sleepTo(s, 20*time.Second+time.Millisecond)
		leading := l.Leading()
		sleepTo(s, 25*time.Second)
		elections, sweeps, _, _ := s.snapshot()
		stop()
		if leading {
			t.Error("still leading while its renewal hangs past its share of the lease")
		}
		// The hanging call was cut off at 20s, and the candidate tried again
		// a ninth of the TTL later, as after any failed renewal.
		if want := []time.Duration{0, 10 * time.Second, 20*time.Second + ttl/9}; !slices.Equal(elections, want) {
			t.Errorf("elections at %v, want %v", elections, want)
		}
		if last := sweeps[len(sweeps)-1]; last >= 20*time.Second {
			t.Errorf("swept at %v, after its share of the lease ended at 20s", last)
		}
	})
}

// TestLeaderResignsWhenItStops: a worker leading when it stops resigns its
// lease so that another may lead at once, and runs no duty after.
func TestLeaderResignsWhenItStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		l := New(config(s))
		stop := run(l)
		sleepTo(s, 5*time.Second+time.Millisecond)
		stop()
		leading := l.Leading()
		_, sweeps, _, resigned := s.snapshot()
		want := []errandstore.LeaderResignParams{{Name: "errand", Holder: "w1"}}
		if !slices.Equal(resigned, want) || leading {
			t.Errorf("resigned %v, leading %v after stop; want %v, not leading", resigned, leading, want)
		}
		sleepTo(s, time.Minute)
		if _, after, _, _ := s.snapshot(); len(after) != len(sweeps) {
			t.Errorf("swept at %v after the worker stopped", after[len(sweeps):])
		}
	})
}

// keeper is a TableKeeper whose upkeep takes took, recording when each was
// asked for.
type keeper struct {
	s    *store
	took time.Duration
	mu   sync.Mutex
	at   []time.Duration
}

func (k *keeper) TableKeep(ctx context.Context, _ *errandstore.TableKeepParams) (errandstore.TableKeepResult, error) {
	k.mu.Lock()
	k.at = append(k.at, k.s.at())
	k.mu.Unlock()
	select {
	case <-time.After(k.took):
	case <-ctx.Done():
	}
	return errandstore.TableKeepResult{Done: true}, nil
}

// TestLeaderKeepsTheTableBesideItsSweeps: the leader asks for the jobs
// table's upkeep on election and then every KeepEvery after the last one
// returned, and an upkeep that takes long (a vacuum of a large table)
// delays no sweep.
func TestLeaderKeepsTheTableBesideItsSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		k := &keeper{s: s, took: 25 * time.Second}
		cfg := config(s)
		cfg.Keeper = k
		stop := run(New(cfg))
		sleepTo(s, 40*time.Second+500*time.Millisecond)
		stop()
		_, sweeps, _, _ := s.snapshot()
		if len(sweeps) != 41 {
			t.Errorf("%d sweeps in 40.5s with a 25s upkeep running, want 41 (one a second from 0)", len(sweeps))
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if want := []time.Duration{0, 25*time.Second + KeepEvery}; !slices.Equal(k.at, want) {
			t.Errorf("upkeep asked for at %v, want %v", k.at, want)
		}
	})
}

// noteKeeper is a TableKeeper that never keeps, always for the same reason.
type noteKeeper struct{}

func (noteKeeper) TableKeep(context.Context, *errandstore.TableKeepParams) (errandstore.TableKeepResult, error) {
	return errandstore.TableKeepResult{Note: "this role may not vacuum", Dead: 20000}, nil
}

// countHandler counts the records logged with each message.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Message]++
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// TestLeaderSaysAKeeperNoteOnce: a reason the store gives for not keeping
// its table is logged once, not at every check.
func TestLeaderSaysAKeeperNoteOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		h := &countHandler{n: map[string]int{}}
		cfg := config(s)
		cfg.Keeper, cfg.Logger = noteKeeper{}, slog.New(h)
		stop := run(New(cfg))
		sleepTo(s, 10*KeepEvery+time.Second)
		stop()
		h.mu.Lock()
		defer h.mu.Unlock()
		if n := h.n["jobs table upkeep skipped"]; n != 1 {
			t.Errorf("the note was logged %d times over 11 checks, want once", n)
		}
	})
}

// failKeeper is a TableKeeper that fails until ok, recording when it was
// asked.
type failKeeper struct {
	s  *store
	mu sync.Mutex
	at []time.Duration
	ok bool
}

func (k *failKeeper) TableKeep(context.Context, *errandstore.TableKeepParams) (errandstore.TableKeepResult, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.at = append(k.at, k.s.at())
	if k.ok {
		return errandstore.TableKeepResult{}, nil
	}
	return errandstore.TableKeepResult{}, errors.New("canceling statement due to statement timeout")
}

// TestLeaderBacksOffAFailingKeeper: upkeep that fails is asked for again
// after twice the wait each time, and at KeepEvery again once it succeeds.
func TestLeaderBacksOffAFailingKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(wins)
		k := &failKeeper{s: s}
		cfg := config(s)
		cfg.Keeper = k
		stop := run(New(cfg))
		// Failures at 0, then waits of 2, 4, 8 and 16 KeepEvery.
		sleepTo(s, 30*KeepEvery+time.Second)
		k.mu.Lock()
		k.ok = true
		k.mu.Unlock()
		// The next call, at 62 KeepEvery (a wait of 32), succeeds; the one
		// after comes KeepEvery later.
		sleepTo(s, 63*KeepEvery+time.Second)
		stop()
		k.mu.Lock()
		defer k.mu.Unlock()
		want := []time.Duration{0, 2 * KeepEvery, 6 * KeepEvery, 14 * KeepEvery, 30 * KeepEvery, 62 * KeepEvery, 63 * KeepEvery}
		if !slices.Equal(k.at, want) {
			t.Errorf("upkeep asked for at %v, want %v", k.at, want)
		}
	})
}
