package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// smtpClient returns a client whose kind "send_email" depends on "smtp",
// run by h, with a breaker that opens after 3 failures for 47 seconds (a
// time no other timer of a worker is armed for) and a backoff of 30 to 60
// minutes, so that no failed job comes due while the breaker decides.
func smtpClient(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, h errand.HandlerFunc) *errand.Client[*sql.Tx] {
	t.Helper()
	kinds := errand.NewKinds()
	kinds.HandleRaw("send_email", h, &errand.KindOpts{Dependency: "smtp", MaxAttempts: 10,
		RetryPolicy: &errand.RetryPolicy{Base: time.Hour, Max: time.Hour}})
	kinds.HandleRaw("audit_log", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
	return newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds,
		Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {Threshold: 3, Window: time.Minute, Cooldown: 47 * time.Second}}})
}

// TestBreakerStopsAttemptsUntilDependencyRecovers: with smtp down, jobs of
// its kind fail until the breaker opens, after 3 failures; then no worker,
// this one or another process's, attempts them, and the rest keep every
// attempt. Once smtp is back and the cool-down is over, one probe runs,
// succeeds and closes the breaker, and every job succeeds with attempts
// left.
func TestBreakerStopsAttemptsUntilDependencyRecovers(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var down atomic.Bool
		down.Store(true)
		var mu sync.Mutex
		attempts := map[string]int{}
		h := errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			mu.Lock()
			attempts[j.ID]++
			mu.Unlock()
			if down.Load() {
				return errors.New("dial smtp: connection refused")
			}
			return nil
		})
		total := func() int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, a := range attempts {
				n += a
			}
			return n
		}
		c := smtpClient(t, s, clock, h)
		var ids []string
		for range 6 {
			ids = append(ids, enqueue(t, c, "send_email", nil).ID)
		}
		t0 := clock.Now()
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1},
			PollInterval: time.Hour, PollOnly: true, Owner: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop(context.Background()) })

		// The third failure opens the breaker; the idle queue then sleeps
		// until the cool-down ends, not a whole poll.
		openUntil := t0.Add(47 * time.Second)
		blockUntilAt(t, clock, openUntil, 1)
		if n := total(); n != 3 {
			t.Fatalf("%d attempts before the breaker opened, want 3", n)
		}
		bs, err := c.Breakers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) != 1 || bs[0].Dependency != "smtp" || bs[0].State != errandtype.BreakerOpen || !bs[0].OpenUntil.Equal(openUntil) {
			t.Fatalf("breakers %+v, want smtp open until %s", bs, openUntil)
		}

		// Another process's worker sees the breaker too: woken, it claims
		// nothing of smtp's, and sleeps until the same time. A job of a kind
		// without the dependency still runs.
		c2 := smtpClient(t, s, clock, h)
		other := enqueue(t, c2, "audit_log", nil)
		w2, err := c2.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 4},
			PollInterval: time.Hour, PollOnly: true, Owner: "w2"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w2.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w2.Stop(context.Background()) })
		workerWaitFor(t, clockWait, func() bool { return getJob(t, c, other.ID).State == errandtype.StateSucceeded })
		c.Wake()
		blockUntilAt(t, clock, openUntil, 2)
		// Within the cool-down, w2 claims again (for a new job of another
		// kind, which it runs) and still leaves smtp's jobs alone, though
		// they come first in the queue.
		clock.Advance(30 * time.Second)
		another := enqueue(t, c2, "audit_log", nil)
		workerWaitFor(t, clockWait, func() bool { return getJob(t, c, another.ID).State == errandtype.StateSucceeded })
		blockUntilAt(t, clock, openUntil, 2)
		if n := total(); n != 3 {
			t.Fatalf("%d attempts while the breaker was open, want still 3", n)
		}
		failed := 0
		for _, id := range ids {
			j := getJob(t, c, id)
			switch {
			case j.State == errandtype.StateRetrying && j.Attempt == 1:
				failed++
			case j.State == errandtype.StateQueued && j.Attempt == 0:
			default:
				t.Errorf("job %s is %s at attempt %d while the breaker is open", id, j.State, j.Attempt)
			}
		}
		if failed != 3 {
			t.Errorf("%d jobs failed once, want 3", failed)
		}

		// smtp recovers; at the end of the cool-down a probe runs and
		// closes the breaker, and the queued jobs run.
		down.Store(false)
		clock.Set(openUntil)
		workerWaitFor(t, clockWait, func() bool {
			n := 0
			for _, id := range ids {
				if getJob(t, c, id).State == errandtype.StateSucceeded {
					n++
				}
			}
			return n == 3
		})
		bs, err = c.Breakers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if bs[0].State != errandstore.BreakerClosed || bs[0].Trips != 1 {
			t.Errorf("breaker after the probe: %+v, want closed after 1 trip", *bs[0])
		}
		// The jobs that failed run when their backoff ends.
		clock.Advance(time.Hour)
		workerWaitFor(t, clockWait, func() bool {
			for _, id := range ids {
				if getJob(t, c, id).State != errandtype.StateSucceeded {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			j := getJob(t, c, id)
			if j.Attempt > 2 || j.Attempt >= j.MaxAttempts {
				t.Errorf("job %s succeeded at attempt %d of %d", id, j.Attempt, j.MaxAttempts)
			}
		}
		if n := total(); n != 9 {
			t.Errorf("%d attempts in all, want 9 (3 failures, 6 successes)", n)
		}
	})
}

// TestBreakerNeedsNoStoreWithoutDependencies: a worker whose kinds name no
// dependency never asks its store about breakers, so a store without them
// serves it; one whose kinds name a dependency is refused such a store.
func TestBreakerNeedsNoStoreWithoutDependencies(t *testing.T) {
	st := struct{ errandstore.TxStore[*sql.Tx] }{openStore(t, nil)} // hides BreakerStore
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	if _, err := c.NewWorker(nil); err != nil {
		t.Fatalf("worker without dependencies: %v", err)
	}
	kinds := errand.NewKinds()
	kinds.HandleRaw("send_email", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), &errand.KindOpts{Dependency: "smtp"})
	c = newClient(t, st, &errand.Config{Kinds: kinds})
	if _, err := c.NewWorker(nil); !errors.Is(err, errandtype.ErrInvalid) {
		t.Fatalf("worker with a dependency on a store without breakers: %v, want an *InputError", err)
	}
}

// TestBreakerDependencyDown: a handler of a kind that declares no
// dependency blames one with errand.DependencyDown; its failures count, and
// the open breaker holds back the jobs of the kind that declares it.
func TestBreakerDependencyDown(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var refunds atomic.Int32
		kinds := errand.NewKinds()
		kinds.HandleRaw("charge", errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
			return errand.DependencyDown("payments", errors.New("payments api: 503"))
		}), &errand.KindOpts{RetryPolicy: &errand.RetryPolicy{Base: time.Hour, Max: time.Hour}})
		kinds.HandleRaw("refund", errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
			refunds.Add(1)
			return nil
		}), &errand.KindOpts{Dependency: "payments"})
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds,
			Breakers: map[string]*errandtype.BreakerPolicy{"payments": {Threshold: 2, Cooldown: 47 * time.Second}}})
		charge1 := enqueue(t, c, "charge", nil)
		enqueue(t, c, "charge", nil)
		refund := enqueue(t, c, "refund", nil)
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1},
			PollInterval: time.Hour, PollOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop(context.Background()) })
		blockUntilAt(t, clock, clock.Now().Add(47*time.Second), 1)
		if n := refunds.Load(); n != 0 {
			t.Errorf("%d refunds ran with payments' breaker open, want 0", n)
		}
		if j := getJob(t, c, refund.ID); j.State != errandtype.StateQueued || j.Attempt != 0 {
			t.Errorf("refund is %s at attempt %d, want queued at 0", j.State, j.Attempt)
		}
		if j := getJob(t, c, charge1.ID); j.State != errandtype.StateRetrying || j.LastError.Class != errand.ClassDependencyDown {
			t.Errorf("charge is %s with %+v, want retrying with class dependency_down", j.State, j.LastError)
		}
	})
}

// TestBreakerConfigRefusals: bad breaker settings are refused when the
// client is made, naming the field to fix.
func TestBreakerConfigRefusals(t *testing.T) {
	st := openStore(t, nil)
	for _, c := range []struct {
		name  string
		cfg   *errand.Config
		field string
	}{
		{"negative threshold", &errand.Config{Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {Threshold: -1}}}, "Breakers.smtp.Threshold"},
		{"sub-millisecond cool-down", &errand.Config{Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {Cooldown: time.Microsecond}}}, "Breakers.smtp.Cooldown"},
		{"nil policy", &errand.Config{Breakers: map[string]*errandtype.BreakerPolicy{"smtp": nil}}, "Breakers.smtp"},
		{"bad dependency name", &errand.Config{Breakers: map[string]*errandtype.BreakerPolicy{"s m t p": {}}}, "Breakers key"},
		{"bad kind dependency", func() *errand.Config {
			ks := errand.NewKinds()
			ks.HandleRaw("send", nil, &errand.KindOpts{Dependency: "has space"})
			return &errand.Config{Kinds: ks}
		}(), "Kinds.send.Dependency"},
	} {
		_, err := errand.NewClient(st, c.cfg)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%s: %v, want an *InputError for %s", c.name, err, c.field)
		}
	}
	if _, err := errand.NewClient(st, &errand.Config{Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {}}}); err != nil {
		t.Errorf("a zero policy (the defaults): %v", err)
	}
}

// TestDependencyDownKeepsClassification: DependencyDown names the
// dependency and keeps what else the error says.
func TestDependencyDownKeepsClassification(t *testing.T) {
	var je *errand.JobError
	err := errand.DependencyDown("smtp", errors.New("refused"))
	if !errors.As(err, &je) || je.Dependency() != "smtp" || je.Class() != errand.ClassDependencyDown || je.IsPermanent() {
		t.Errorf("DependencyDown: %+v", je)
	}
	err = errand.Permanent(errand.DependencyDown("smtp", errand.WithClass("relay_gone", errors.New("gone"))))
	if !errors.As(err, &je) || je.Dependency() != "smtp" || je.Class() != "relay_gone" || !je.IsPermanent() {
		t.Errorf("Permanent(DependencyDown(WithClass)): class %s permanent %v dependency %q", je.Class(), je.IsPermanent(), je.Dependency())
	}
	if err := errand.DependencyDown("smtp", errand.Snooze(time.Second)); !errors.As(err, &je) || je.Dependency() != "" || je.SnoozeDelay() != time.Second {
		t.Errorf("DependencyDown of a snooze: %+v", je)
	}
}

// failingSecondClaim fails every claim after its first.
type failingSecondClaim struct {
	*sqlite.Store
	claims atomic.Int32
}

func (f *failingSecondClaim) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if f.claims.Add(1) >= 2 {
		return nil, errors.New("connection reset by peer")
	}
	return f.Store.JobClaimMany(ctx, p)
}

// TestClaimReturnsProbeWhenLaterClaimFails: a remote claim that took a
// half-open breaker's probe job and then failed its other claim returns
// the probe job rather than the error, which would leave the job running
// under a lease nobody holds and its probe slot taken.
func TestClaimReturnsProbeWhenLaterClaimFails(t *testing.T) {
	clock := newTestClock()
	st := &failingSecondClaim{Store: openStore(t, clock)}
	c := smtpClient(t, st, clock, errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }))
	ctx := context.Background()
	for range 3 {
		if _, err := st.BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: "smtp", Event: errandstore.BreakerFailure,
			Policy: errandtype.BreakerPolicy{Threshold: 3, Window: time.Minute, Cooldown: 47 * time.Second}}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(48 * time.Second) // half-open
	probe := enqueue(t, c, "send_email", nil)
	enqueue(t, c, "audit_log", nil)
	jobs, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"send_email", "audit_log"}, Limit: 2, Owner: "remote-1"})
	if err != nil || len(jobs) != 1 || jobs[0].ID != probe.ID {
		j := getJob(t, c, probe.ID)
		t.Fatalf("Claim = %d jobs, %v; want the probe job %s alone (it is %s at attempt %d)", len(jobs), err, probe.ID, j.State, j.Attempt)
	}
}

// tripSMTP opens smtp's breaker as smtpClient's policy says: 3 failures.
func tripSMTP(t *testing.T, s errandstore.TxStore[*sql.Tx]) {
	t.Helper()
	for range 3 {
		if _, err := s.(errandstore.BreakerStore).BreakerUpdate(context.Background(), &errandstore.BreakerUpdateParams{Dependency: "smtp",
			Event: errandstore.BreakerFailure, Policy: errandtype.BreakerPolicy{Threshold: 3, Window: time.Minute, Cooldown: 47 * time.Second}}); err != nil {
			t.Fatal(err)
		}
	}
}

// smtpBreaker returns smtp's breaker.
func smtpBreaker(t *testing.T, c *errand.Client[*sql.Tx]) errandtype.BreakerRecord {
	t.Helper()
	bs, err := c.Breakers(context.Background())
	if err != nil || len(bs) != 1 {
		t.Fatalf("Breakers = %v, %v; want smtp's", bs, err)
	}
	return *bs[0]
}

// claimSMTP claims up to n jobs of send_email through c, as a remote
// worker does, with a lease longer than the test.
func claimSMTP(t *testing.T, c *errand.Client[*sql.Tx], n int) []*errandtype.Job {
	t.Helper()
	js, err := c.Claim(context.Background(), &errand.ClaimOpts{Kinds: []string{"send_email"}, Limit: n, Lease: time.Hour, Owner: "remote-1"})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestLateProbeReleaseLeavesNewProbeItsSlot: a probe that reports after
// the cool-down has had its slot presumed lost and given to another probe;
// its report, one that says nothing of the dependency, gives back no slot,
// so the breaker still runs no more than its one probe at a time.
func TestLateProbeReleaseLeavesNewProbeItsSlot(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := smtpClient(t, s, clock, nil)
		tripSMTP(t, s)
		for range 4 {
			enqueue(t, c, "send_email", nil)
		}
		clock.Advance(47 * time.Second)
		first := claimSMTP(t, c, 1)
		if len(first) != 1 {
			t.Fatalf("claim after the cool-down took %d jobs; want the probe", len(first))
		}
		if n := len(claimSMTP(t, c, 1)); n != 0 {
			t.Fatalf("claim beside a running probe took %d jobs; want none", n)
		}
		// The probe does not report within the cool-down: its slot goes to
		// another probe.
		clock.Advance(47 * time.Second)
		if n := len(claimSMTP(t, c, 1)); n != 1 {
			t.Fatalf("claim after the first probe's time took %d jobs; want a new probe", n)
		}
		// The first probe fails permanently, which says nothing of smtp.
		if _, err := c.Fail(ctx, first[0].ID, *first[0].LeaseToken, &errand.FailOpts{Permanent: true, Message: "bad address"}); err != nil {
			t.Fatal(err)
		}
		if b := smtpBreaker(t, c); b.State != errandtype.BreakerHalfOpen || b.Probes != 1 {
			t.Fatalf("breaker after the late report: %s with %d probes; want half_open with the new probe's 1", b.State, b.Probes)
		}
		if n := len(claimSMTP(t, c, 1)); n != 0 {
			t.Fatalf("claim beside the new probe took %d jobs; want none", n)
		}
	})
}

// TestProbeAckedThroughAnotherClientClosesBreaker: a remote worker's
// probe, claimed through one API server and acknowledged through another
// (one whose last look at the breaker found it closed), closes the
// breaker.
func TestProbeAckedThroughAnotherClientClosesBreaker(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		granting := smtpClient(t, s, clock, nil)
		other := smtpClient(t, s, clock, nil)
		enqueue(t, other, "send_email", nil)
		js := claimSMTP(t, other, 1) // other sees smtp healthy
		if len(js) != 1 {
			t.Fatalf("claim took %d jobs; want 1", len(js))
		}
		if _, err := other.Ack(ctx, js[0].ID, *js[0].LeaseToken); err != nil {
			t.Fatal(err)
		}
		tripSMTP(t, s)
		enqueue(t, other, "send_email", nil)
		clock.Advance(47 * time.Second)
		probe := claimSMTP(t, granting, 1)
		if len(probe) != 1 {
			t.Fatalf("claim after the cool-down took %d jobs; want the probe", len(probe))
		}
		if _, err := other.Ack(ctx, probe[0].ID, *probe[0].LeaseToken); err != nil {
			t.Fatal(err)
		}
		if b := smtpBreaker(t, granting); b.State != errandstore.BreakerClosed {
			t.Fatalf("breaker after the probe succeeded: %s with %d probes; want closed", b.State, b.Probes)
		}
	})
}

// TestUnreportedProbeForgotten: a probe claimed for a remote worker that
// never reports (it died, or reported through another API server) is
// forgotten once its slot's time is long past, rather than kept for the
// life of the process.
func TestUnreportedProbeForgotten(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c := smtpClient(t, s, clock, nil)
		for i := range 2 {
			tripSMTP(t, s)
			enqueue(t, c, "send_email", nil)
			clock.Advance(47 * time.Second)
			if probe := claimSMTP(t, c, 1); len(probe) != 1 {
				t.Fatalf("claim %d after the cool-down took %d jobs; want the probe", i, len(probe))
			}
			clock.Advance(errand.MaxLease + time.Hour) // no report comes
		}
		if n := errand.OutsideProbes(c); n != 1 {
			t.Fatalf("the client keeps %d probes; want the last one only", n)
		}
	})
}

// TestProbeLosingLeaseGivesBackItsOwnSlot: a probe of smtp whose handler
// blames another dependency, payments, and whose lease is then found lost
// says nothing of either: the slot it gives back is smtp's, and payments'
// running probe keeps its own.
func TestProbeLosingLeaseGivesBackItsOwnSlot(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		bs := s.(errandstore.BreakerStore)
		other := remoteClient(t, s, clock)
		c := smtpClient(t, s, clock, func(ctx context.Context, j *errandtype.Job) error {
			// Another worker's acknowledgment takes the job from this one.
			if _, err := other.Ack(ctx, j.ID, *j.LeaseToken); err != nil {
				return err
			}
			return errand.DependencyDown("payments", errors.New("payments: 503"))
		})
		tripSMTP(t, s)
		for range errandtype.DefaultBreakerThreshold {
			if _, err := bs.BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: "payments", Event: errandstore.BreakerFailure}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(47 * time.Second)
		if r, err := bs.BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: "payments", Event: errandstore.BreakerProbe}); err != nil || !r.Applied {
			t.Fatalf("probe of payments: %+v, %v; want granted", r, err)
		}
		enqueue(t, c, "send_email", nil)
		if r := workOne(t, c, nil); r.Result != errand.ResultLeaseLost {
			t.Fatalf("WorkOne of the probe: %s; want lease_lost", r.Result)
		}
		probes := map[string]int{}
		list, err := c.Breakers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range list {
			probes[b.Dependency] = b.Probes
		}
		if probes["smtp"] != 0 || probes["payments"] != 1 {
			t.Fatalf("probes running after the lost probe: %v; want smtp 0, payments still 1", probes)
		}
	})
}

// countingStore counts the reads of breakers and of jobs, and the
// breakers' updates.
type countingStore struct {
	*sqlite.Store
	lists, gets, updates atomic.Int32
}

func (s *countingStore) BreakerList(ctx context.Context, p *errandstore.BreakerListParams) (*errandstore.BreakerListResult, error) {
	s.lists.Add(1)
	return s.Store.BreakerList(ctx, p)
}

func (s *countingStore) BreakerUpdate(ctx context.Context, p *errandstore.BreakerUpdateParams) (*errandstore.BreakerUpdateResult, error) {
	s.updates.Add(1)
	return s.Store.BreakerUpdate(ctx, p)
}

func (s *countingStore) JobGet(ctx context.Context, p *errandstore.JobGetParams) (*errandtype.Job, error) {
	s.gets.Add(1)
	return s.Store.JobGet(ctx, p)
}
