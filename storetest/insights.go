package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var insightsCases = []testCase{
	{"ExactFigures", testInsightsExact},
	{"Empty", testInsightsEmpty},
	{"FailuresWhateverTheState", testInsightsFailuresWhateverTheState},
}

func (e *env) insights() *errand.Insights {
	e.t.Helper()
	d, err := e.s.JobInsights(e.ctx, &errandstore.JobInsightsParams{})
	if err != nil {
		e.t.Fatalf("JobInsights: %v", err)
	}
	if !d.Now.Equal(e.now()) {
		e.t.Errorf("JobInsights: Now %s, want the store's clock %s", d.Now, e.now())
	}
	return errand.AssembleInsights(d)
}

func testInsightsEmpty(t *testing.T, h harness) {
	e := open(t, h)
	got := e.insights()
	if len(got.Kinds) != 0 {
		t.Errorf("insights of an empty store: %+v", got.Kinds)
	}
}

// testInsightsExact builds a queue whose every figure is known, on the
// fake clock, and compares the whole result.
func testInsightsExact(t *testing.T, h harness) {
	e := open(t, h)
	e.fillExactInsightsQueue()
	// 56s later: ok1 finished 61s ago, ok2 and f1 56s ago.
	e.clock.Advance(56 * time.Second)
	e.wantExactInsights()

	// An hour and a minute on, the last hour is empty; the day still
	// counts both deaths.
	e.clock.Advance(time.Hour + time.Minute)
	later := e.insights()
	a := later.Kinds[0]
	if a.Kind != "a" || a.SucceededLastHour != 0 || a.FailedLastHour != 0 || a.DeadLastHour != 0 || a.DeadLastDay != 2 ||
		a.Throughput != (errand.Throughput{}) || a.RunTime.Samples != 0 || len(a.FailuresByClass) != 0 {
		t.Errorf("insights an hour later: %+v", a)
	}
	// rt is still retrying, so its failure stays visible until it is an
	// hour old; now it is not.
	if b := later.Kinds[1]; b.FailedLastHour != 0 || b.RetriesLastHour != 0 {
		t.Errorf("kind b an hour later: %+v", b)
	}
}

// claimFrom claims one job of queue, and checks that it is id.
func (e *env) claimFrom(queue, id string) *errandtype.Job {
	e.t.Helper()
	js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{queue}, Limit: 1, Lease: lease, Owner: owner})
	if len(js) != 1 || js[0].ID != id {
		e.t.Fatalf("claim: got %v, want %s", ids(js), id)
	}
	return js[0]
}

// failRetry records that j's attempt failed with class, to retry after
// delay.
func (e *env) failRetry(j *errandtype.Job, class string, delay time.Duration) {
	e.t.Helper()
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeRetry, Delay: delay,
		Error: &errandtype.AttemptError{Attempt: j.Attempt, Class: class, Message: "failed"}})
}

// fillExactInsightsQueue fills queue q, over two hours of the fake clock,
// with the jobs of kinds a and b whose figures testInsightsExact knows.
func (e *env) fillExactInsightsQueue() {
	t := e.t
	t.Helper()
	job := func(id, kind string) *errandstore.JobInsertParams {
		p := newJob(id)
		p.Queue, p.Kind = "q", kind
		return p
	}
	claim := func(id string) *errandtype.Job { return e.claimFrom("q", id) }

	// Two hours before: a job dies (in the last day, not the last hour).
	e.insert(job("old", "a"))
	e.recordOK(dead(claim("old")))
	e.clock.Advance(2 * time.Hour)

	// Two successes: waited 2s and ran 3s; waited 4s and ran 1s.
	e.insert(job("ok1", "a"))
	e.clock.Advance(2 * time.Second)
	j := claim("ok1")
	e.clock.Advance(3 * time.Second)
	e.recordOK(succeeded(j))
	e.insert(job("ok2", "a"))
	e.clock.Advance(4 * time.Second)
	j = claim("ok2")
	e.clock.Advance(time.Second)
	e.recordOK(succeeded(j))

	// f1 fails with timeout, is retried at once, and dies.
	p := job("f1", "a")
	p.MaxAttempts = 2
	e.insert(p)
	e.failRetry(claim("f1"), "timeout", 0)
	e.recordOK(dead(claim("f1")))
	// rt fails and waits an hour; run is running.
	e.insert(job("rt", "b"))
	e.failRetry(claim("rt"), errand.ClassError, time.Hour)
	e.insert(job("run", "b"))
	claim("run")
	// Waiting: a cancelled job, a scheduled one, two of one ordering key
	// (the second held), and a ready one.
	e.insert(job("can", "a"))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "can", Operator: "ana", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	sch := job("sch", "b")
	sch.Delay = time.Hour
	k1, k2 := job("k1", "b"), job("k2", "b")
	k1.OrderingKey, k2.OrderingKey = "x", "x"
	e.insert(sch, k1, k2, job("rdy", "a"))
}

// wantExactInsights compares the whole of the insights of
// fillExactInsightsQueue's queue, 56s after it was filled, with its known
// figures.
func (e *env) wantExactInsights() {
	t := e.t
	t.Helper()
	got := e.insights()
	want := &errand.Insights{At: e.now(), Kinds: []errand.KindInsights{{
		Queue: "q", Kind: "a",
		Ready: 1, OldestReadyAgeSeconds: 56,
		Throughput:        errand.Throughput{Last1m: 2, Last5m: 3.0 / 5, Last1h: 3.0 / 60},
		SucceededLastHour: 2,
		FailedLastHour:    2, FailureRate: 0.5,
		FailuresByClass: []errand.ClassFailures{
			{Class: errand.ClassPermanent, Failures: 1, Rate: 0.25},
			{Class: "timeout", Failures: 1, Rate: 0.25},
		},
		RetriesLastHour: 1,
		Dead:            2, DeadLastHour: 1, DeadLastDay: 2,
		RunTime:  errand.Percentiles{Samples: 2, P50Seconds: 1, P99Seconds: 3},
		WaitTime: errand.Percentiles{Samples: 2, P50Seconds: 2, P99Seconds: 4},
	}, {
		Queue: "q", Kind: "b",
		Ready: 1, Scheduled: 1, Retrying: 1, Held: 1, Running: 1, OldestReadyAgeSeconds: 56,
		FailedLastHour: 1, FailureRate: 1,
		FailuresByClass: []errand.ClassFailures{{Class: errand.ClassError, Failures: 1, Rate: 1}},
		RetriesLastHour: 1,
	}}}
	if !got.At.Equal(want.At) {
		t.Errorf("At %s, want %s", got.At, want.At)
	}
	got.At = want.At
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("insights:\n got %s\nwant %s", g, w)
	}
}

// testInsightsFailuresWhateverTheState checks that a failure of the last
// hour is counted whatever its job did since: replayed (back to queued,
// then running and dead again), snoozed or given back on drain after a
// retry, cancelled while retrying and replayed. An entry that dead-lettered its job in an earlier
// delivery cycle stays a failure that was not retried.
func testInsightsFailuresWhateverTheState(t *testing.T, h harness) {
	e := open(t, h)
	// Each job has a queue of its own, so that each claim takes the one
	// meant.
	job := func(id string, maxAttempts int) {
		p := newJob(id)
		p.Queue, p.MaxAttempts = id, maxAttempts
		e.insert(p)
	}
	claim := func(id string) *errandtype.Job { t.Helper(); return e.claimFrom(id, id) }
	fail, check := e.failRetry, e.wantFailuresLastHour
	job("r", 2)
	fail(claim("r"), "timeout", 0)
	e.recordOK(dead(claim("r")))
	check("dead", 2, 1, map[string]int{"timeout": 1, errand.ClassPermanent: 1})

	e.replayFixed("r")
	check("replayed", 2, 1, map[string]int{"timeout": 1, errand.ClassPermanent: 1})

	job("s", 3)
	fail(claim("s"), errand.ClassError, 0)
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(claim("s")), Kind: errandstore.OutcomeSnooze, Delay: time.Hour})
	check("snoozed after a retry", 3, 2, map[string]int{"timeout": 1, errand.ClassPermanent: 1, errand.ClassError: 1})

	// Given back on drain after a retry: the interrupted entry is no
	// failure, the one before it is.
	job("d", 3)
	fail(claim("d"), errand.ClassError, 0)
	d := claim("d")
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(d), Kind: errandstore.OutcomeInterrupted,
		Error: &errandtype.AttemptError{Attempt: d.Attempt, Class: errand.ClassInterrupted, Message: "worker stopping"}})
	check("given back after a retry", 4, 3, map[string]int{"timeout": 1, errand.ClassPermanent: 1, errand.ClassError: 2})

	job("c", 3)
	fail(claim("c"), errand.ClassError, time.Hour)
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "c", Operator: "ana", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	e.replayFixed("c")
	check("cancelled while retrying, replayed", 5, 4, map[string]int{"timeout": 1, errand.ClassPermanent: 1, errand.ClassError: 3})

	// The replayed job runs again, fails and dies again: its first death is
	// still not a retry.
	e.clock.Advance(time.Minute)
	fail(claim("r"), "timeout", 0)
	check("replayed, failed again", 6, 5, map[string]int{"timeout": 2, errand.ClassPermanent: 1, errand.ClassError: 3})
	e.recordOK(dead(claim("r")))
	check("replayed, dead again", 7, 5, map[string]int{"timeout": 2, errand.ClassPermanent: 2, errand.ClassError: 3})

	// An hour after the first failures, only the replayed job's second
	// cycle is left.
	e.clock.Advance(time.Hour - time.Second)
	check("an hour later", 2, 1, map[string]int{"timeout": 1, errand.ClassPermanent: 1})
}

// replayFixed replays dead or cancelled job id.
func (e *env) replayFixed(id string) {
	e.t.Helper()
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: id, Operator: "ana", Reason: "fixed"}); err != nil {
		e.t.Fatalf("replay %s: %v", id, err)
	}
}

// wantFailuresLastHour checks the insights' failures of the last hour,
// summed over kinds, when: failed, retried, and by class.
func (e *env) wantFailuresLastHour(when string, failed, retried int, byClass map[string]int) {
	e.t.Helper()
	var gotFailed, gotRetried int
	classes := map[string]int{}
	for _, ki := range e.insights().Kinds {
		gotFailed += ki.FailedLastHour
		gotRetried += ki.RetriesLastHour
		for _, c := range ki.FailuresByClass {
			classes[c.Class] += c.Failures
		}
	}
	if gotFailed != failed || gotRetried != retried || !reflect.DeepEqual(classes, byClass) {
		e.t.Errorf("%s: failed %d, retried %d, by class %v; want %d, %d, %v",
			when, gotFailed, gotRetried, classes, failed, retried, byClass)
	}
}
