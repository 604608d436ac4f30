package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// Workers here poll once an hour on a fake clock: only a token coming due
// (or a wake-up) can start a held-back job, and time passes only when the
// test moves it.

func startLimitedWorker(t *testing.T, c *errand.Client[*sql.Tx], slots int, rates []errand.RateLimit, budgets []errand.RetryBudget) {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{
		Queues:       map[string]int{errand.DefaultQueue: slots},
		PollInterval: time.Hour,
		PollOnly:     true,
		RateLimits:   rates,
		RetryBudgets: budgets,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
}

// ranSoFar collects the ids that run until none has for quiet.
func ranSoFar(ran <-chan string, quiet time.Duration) []string {
	var ids []string
	for {
		select {
		case id := <-ran:
			ids = append(ids, id)
		case <-time.After(quiet):
			return ids
		}
	}
}

func wantJob(t *testing.T, c *errand.Client[*sql.Tx], id string, state errandtype.JobState, attempt int) {
	t.Helper()
	j, err := c.Store().JobGet(context.Background(), &errandstore.JobGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != state || j.Attempt != attempt {
		t.Fatalf("job %s is %s at attempt %d, want %s at attempt %d", id, j.State, j.Attempt, state, attempt)
	}
}

// TestWorkerQueueRateLimit: a queue limited to one start a second starts
// one job, then sleeps until the next token is due (not a whole poll), and
// the jobs it holds back wait queued with no attempt used.
func TestWorkerQueueRateLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 10)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "k",
			Handler: attempts(ran, func(*errandtype.Job) error { return nil })}})})
		for i := range 3 {
			enqueue(t, c, "k", &errand.EnqueueOpts{ID: fmt.Sprintf("j%d", i), Priority: i})
		}
		startLimitedWorker(t, c, 5, []errand.RateLimit{{Queue: errand.DefaultQueue, Limit: 1, Per: time.Second}}, nil)
		waitAttempt(t, ran, "j0", "first token")
		// Held back: the queue sleeps for exactly the token's second.
		blockUntilAt(t, clock, clock.Now().Add(time.Second), 1)
		notYet(t, ran, "before the next token")
		wantJob(t, c, "j1", errandtype.StateQueued, 0)
		wantJob(t, c, "j2", errandtype.StateQueued, 0)
		clock.Advance(time.Second)
		waitAttempt(t, ran, "j1", "second token")
		blockUntilAt(t, clock, clock.Now().Add(time.Second), 1)
		notYet(t, ran, "before the third token")
		clock.Advance(time.Second)
		waitAttempt(t, ran, "j2", "third token")
	})
}

// TestWorkerKindRateLimit: a kind out of tokens is left out of the claim,
// and other kinds run meanwhile; it runs again when its token is due.
func TestWorkerKindRateLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 10)
		ok := attempts(ran, func(*errandtype.Job) error { return nil })
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "slow", Handler: ok}, {Name: "fast", Handler: ok}})})
		for i := range 3 {
			enqueue(t, c, "slow", &errand.EnqueueOpts{ID: fmt.Sprintf("slow%d", i), Priority: -1})
		}
		for i := range 3 {
			enqueue(t, c, "fast", &errand.EnqueueOpts{ID: fmt.Sprintf("fast%d", i)})
		}
		startLimitedWorker(t, c, 10, []errand.RateLimit{{Kind: "slow", Limit: 1, Per: time.Minute}}, nil)
		// One slow job (the claim takes no more than the slow kind's one
		// token), then the fast ones, with slow left out of the claim.
		got := map[string]bool{}
		for range 4 {
			select {
			case id := <-ran:
				got[id] = true
			case <-time.After(clockWait):
				t.Fatalf("ran %v, want one slow job and every fast one", got)
			}
		}
		if !got["slow0"] || !got["fast0"] || !got["fast1"] || !got["fast2"] {
			t.Fatalf("ran %v, want slow0 and every fast job", got)
		}
		// Idle, it sleeps until the slow kind's next token, a minute away.
		blockUntilAt(t, clock, clock.Now().Add(time.Minute), 1)
		notYet(t, ran, "before the slow kind's next token")
		wantJob(t, c, "slow1", errandtype.StateQueued, 0)
		clock.Advance(time.Minute)
		waitAttempt(t, ran, "slow1", "the slow kind's second token")
	})
}

// flakyClient returns a client whose kind "flaky" fails the first attempt
// of a job whose id starts with 'f', retrying in 200ms, and succeeds
// otherwise, with n such jobs enqueued (f0, f1, ...). Each attempt is
// reported on ran.
func flakyClient(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, ran chan<- string, n int) *errand.Client[*sql.Tx] {
	t.Helper()
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "flaky",
		Handler: attempts(ran, func(j *errandtype.Job) error {
			if j.Attempt == 1 && j.ID[0] == 'f' {
				return errand.RetryAfter(200*time.Millisecond, errors.New("downstream is down"))
			}
			return nil
		})}})})
	for i := range n {
		enqueue(t, c, "flaky", &errand.EnqueueOpts{ID: fmt.Sprintf("f%d", i)})
	}
	return c
}

// TestWorkerRetryBudget: with a budget of half a retry per first attempt
// and no minimum, six failing first attempts allow two retries (their
// three tokens faded a little by the time the retries come due; a retry
// takes a whole token): the other four wait, retrying, their attempts
// unused, until more first attempts give the budget a token.
func TestWorkerRetryBudget(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 20)
		c := flakyClient(t, s, clock, ran, 6)
		startLimitedWorker(t, c, 6, nil, []errand.RetryBudget{{Kind: "flaky", Ratio: 0.5, Window: time.Minute, Min: -1}})
		if ids := ranN(t, ran, 6); len(ids) != 6 {
			t.Fatalf("first attempts ran %v, want 6", ids)
		}
		// The retries come due in 200ms.
		blockUntilAt(t, clock, clock.Now().Add(200*time.Millisecond), 1)
		clock.Advance(200 * time.Millisecond)
		retried := ranN(t, ran, 2)
		// Over budget: the queue goes idle for a whole poll.
		blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
		if more := ranSoFar(ran, 200*time.Millisecond); len(more) != 0 {
			t.Fatalf("retries past the budget ran: %v (after %v)", more, retried)
		}
		waiting := 0
		for i := range 6 {
			id := fmt.Sprintf("f%d", i)
			j, err := c.Store().JobGet(context.Background(), &errandstore.JobGetParams{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if j.State == errandtype.StateRetrying {
				waiting++
				if j.Attempt != 1 {
					t.Errorf("held-back retry %s is at attempt %d, want 1", id, j.Attempt)
				}
			}
		}
		if waiting != 4 {
			t.Fatalf("%d retries wait, want 4", waiting)
		}
		// Two first attempts that succeed give the budget one token: one
		// more retry runs, at once.
		enqueue(t, c, "flaky", &errand.EnqueueOpts{ID: "ok1"})
		enqueue(t, c, "flaky", &errand.EnqueueOpts{ID: "ok2"})
		got := ranN(t, ran, 3)
		retries := 0
		for _, id := range got {
			if id[0] == 'f' {
				retries++
			}
		}
		if retries != 1 {
			t.Fatalf("after two more first attempts ran %v, want them and one retry", got)
		}
		blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
		if more := ranSoFar(ran, 200*time.Millisecond); len(more) != 0 {
			t.Fatalf("retries past the budget ran: %v", more)
		}
		ls, err := c.Limits(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 1 || ls[0].Name != "retry:flaky" || ls[0].Tokens >= 1 || ls[0].Tokens < 0 || ls[0].Denied == 0 {
			t.Fatalf("Limits = %+v, want retry:flaky spent, with claims held back", ls)
		}
	})
}

// TestWorkerRetryBudgetExact: ten concurrent failures against a budget of
// 4 retries (Min 4, no deposits) retry exactly four times. A second later
// the budget holds a fraction of a token, and a claim then (woken by a
// first attempt) takes no fifth retry; the next retry runs only when the
// budget holds a whole token again, at the wait the store said.
func TestWorkerRetryBudgetExact(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 30)
		c := flakyClient(t, s, clock, ran, 10)
		budget := errand.RetryBudget{Kind: "flaky", Window: time.Minute, Min: 4}
		spec := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Min: 4, Window: time.Minute}
		startLimitedWorker(t, c, 10, nil, []errand.RetryBudget{budget})
		ranN(t, ran, 10)
		t1 := clock.Now().Add(200 * time.Millisecond)
		blockUntilAt(t, clock, t1, 1)
		clock.Advance(200 * time.Millisecond)
		ranN(t, ran, 4)
		sleepsUntilEither(t, clock, spec, t1)
		notYet(t, ran, "past a spent budget")

		clock.Advance(time.Second)
		t2 := clock.Now()
		enqueue(t, c, "flaky", &errand.EnqueueOpts{ID: "ok1"})
		waitAttempt(t, ran, "ok1", "a first attempt beside retries over budget")
		// Spent at t1, it holds 4·(1-e^(-1/60)) ≈ 0.07 tokens now.
		_, _, wait := spec.Take(errandtype.LimiterState{Tokens: 0, At: t1}, t2, 1)
		blockUntilAt(t, clock, t2.Add(wait), 1)
		notYet(t, ran, "on a fraction of a token")
		ls, err := c.Limits(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 1 || ls[0].Tokens < 0 || ls[0].Tokens >= 1 {
			t.Fatalf("Limits = %+v, want retry:flaky holding 0 to 1 token", ls)
		}

		t3 := clock.Advance(wait)
		if id := ranN(t, ran, 1)[0]; id[0] != 'f' {
			t.Fatalf("when the budget holds a token again, %s ran; want a retry", id)
		}
		sleepsUntilEither(t, clock, spec, t3)
		notYet(t, ran, "past the token the budget regained")
	})
}

// sleepsUntilEither waits until the worker's queue, whose claim at spent
// took the last token of the budget spec, sleeps: until its poll an hour
// later or, after a claim the budget denied at that time, until the
// budget holds a token again.
func sleepsUntilEither(t *testing.T, clock *errandtest.Clock, spec errandtype.LimiterSpec, spent time.Time) {
	t.Helper()
	_, _, wait := spec.Take(errandtype.LimiterState{Tokens: 0, At: spent}, spent, 1)
	poll, token := spent.Add(time.Hour), spent.Add(wait)
	workerWaitFor(t, clockWait, func() bool {
		return slices.ContainsFunc(clock.Armed(), func(at time.Time) bool { return at.Equal(poll) || at.Equal(token) })
	})
}

// ranN waits for n attempts and returns their ids.
func ranN(t *testing.T, ran <-chan string, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		select {
		case id := <-ran:
			ids = append(ids, id)
		case <-time.After(clockWait):
			t.Fatalf("ran %v, want %d attempts", ids, n)
		}
	}
	return ids
}

// TestWorkerLimitsNeedTheirTargets: a limit on a queue the worker does not
// work, or a kind it does not handle, is refused, as is a store that keeps
// no limits.
func TestWorkerLimitsNeedTheirTargets(t *testing.T) {
	c := newClient(t, openStore(t, nil), &errand.Config{Kinds: kindsOf([]testKind{{Name: "k",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	for _, cfg := range []errand.WorkerConfig{
		{RateLimits: []errand.RateLimit{{Queue: "other", Limit: 1, Per: time.Second}}},
		{RateLimits: []errand.RateLimit{{Kind: "nope", Limit: 1, Per: time.Second}}},
		{RateLimits: []errand.RateLimit{{Kind: "k", Queue: "default", Limit: 1, Per: time.Second}}},
		{RateLimits: []errand.RateLimit{{Kind: "k", Limit: 0, Per: time.Second}}},
		{RateLimits: []errand.RateLimit{{Kind: "k", Limit: 1, Per: time.Second}, {Kind: "k", Limit: 2, Per: time.Second}}},
		{RetryBudgets: []errand.RetryBudget{{Kind: "nope", Ratio: 0.1}}},
		{RetryBudgets: []errand.RetryBudget{{Kind: "k", Ratio: -1}}},
	} {
		var ie *errandtype.InputError
		if _, err := c.NewWorker(&cfg); !errors.As(err, &ie) {
			t.Errorf("NewWorker(%+v) = %v, want an *InputError", cfg, err)
		}
	}
}

// TestWorkerWithoutLimitsTakesNoTokens: a worker without limits never
// touches the buckets (a take would create one).
func TestWorkerWithoutLimitsTakesNoTokens(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 1)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "k",
			Handler: attempts(ran, func(*errandtype.Job) error { return nil })}})})
		enqueue(t, c, "k", &errand.EnqueueOpts{ID: "j"})
		startLimitedWorker(t, c, 2, nil, nil)
		waitAttempt(t, ran, "j", "the job")
		ls, err := c.Limits(context.Background())
		if err != nil || len(ls) != 0 {
			t.Fatalf("Limits after a worker without limits = %v, %v; want none", ls, err)
		}
	})
}

// claimRecorder records the limit and the kinds left without retries of
// every claim.
type claimRecorder struct {
	*sqlite.Store
	mu     sync.Mutex
	claims []string
}

func (s *claimRecorder) note(p *errandstore.JobClaimParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, fmt.Sprintf("%d%v", p.Limit, p.SkipRetryKinds))
}

func (s *claimRecorder) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	s.note(p)
	return s.Store.JobClaimMany(ctx, p)
}

// TestWorkerRetryBudgetSplitsClaim: a worker with 10 free slots and a
// retry budget of 2 tokens claims 10 first attempts in one claim of 2
// (retries allowed) and one of the other 8 (retries left out), not in
// claims of 2.
func TestWorkerRetryBudgetSplitsClaim(t *testing.T) {
	clock := newTestClock()
	st := &claimRecorder{Store: openStore(t, clock)}
	ran := make(chan string, 10)
	release := make(chan struct{})
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "flaky",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			ran <- j.ID
			<-release
			return nil
		})}})})
	enqueueN(t, c, "flaky", 10)
	startLimitedWorker(t, c, 10, nil, []errand.RetryBudget{{Kind: "flaky", Ratio: 0.1, Window: time.Minute, Min: 2}})
	ranN(t, ran, 10)
	st.mu.Lock()
	claims := slices.Clone(st.claims)
	st.mu.Unlock()
	close(release)
	if want := []string{"2[]", "8[flaky]"}; !slices.Equal(claims, want) {
		t.Fatalf("claims (limit, kinds without retries): %v; want %v", claims, want)
	}
}
