package storetest

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

func TestClock(t *testing.T) {
	c := NewClock(T0)
	if got := c.Now(); !got.Equal(T0) {
		t.Fatalf("Now = %v, want %v", got, T0)
	}
	if got := c.Advance(time.Minute); !got.Equal(T0.Add(time.Minute)) || !c.Now().Equal(got) {
		t.Fatalf("Advance returned %v, Now %v; want %v", got, c.Now(), T0.Add(time.Minute))
	}
	c.Set(T0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Microsecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(T0.Add(400 * time.Microsecond)) {
		t.Errorf("after 400 concurrent advances: %v, want %v", got, T0.Add(400*time.Microsecond))
	}
	var _ errandstore.Clock = c
}

func fullJob() *errandtype.Job {
	return &errandtype.Job{
		ID: "a", Queue: "q", Kind: "k", Args: json.RawMessage(`{"a": 1, "b": [1, 2]}`), ArgsVersion: 1,
		Priority: 1, State: errandtype.StateRunning, Attempt: 1, MaxAttempts: 3,
		BackoffBase: errandtype.Duration(time.Second), BackoffMax: errandtype.Duration(time.Minute),
		AvailableAt: T0, Deadline: ptr(T0), BasePriority: ptr(3), StartBy: ptr(T0), LeaseToken: ptr("t"), LeaseUntil: ptr(T0), LeaseOwner: ptr("w"),
		UniqueKey: ptr("u"), UniqueScope: ptr(errandtype.UniqueUntilFinished), UniqueWindowStart: ptr(T0),
		DebounceKey: ptr("d"), Absorbed: 2,
		OrderingKey: ptr("o"), OrderingHold: true, FairnessKey: ptr("f"), HeldBy: ptr("h"), HeldByBreaker: ptr("smtp"), Progress: json.RawMessage(`{"p": 1}`), CreatedAt: T0,
		AttemptedAt: ptr(T0), FinishedAt: ptr(T0), LastError: &errandtype.LastError{Class: "c", Message: "m", At: T0},
		Errors:  []errandtype.AttemptError{{Attempt: 1, At: T0, Class: "c", Message: "m", Stack: "s"}},
		Replays: 1, Tags: []string{"x"}, BatchID: ptr("b"), Seq: 1, CancelRequestedAt: ptr(T0),
		WorkflowID: ptr("wf"), Output: json.RawMessage(`{"o": 1}`), Metadata: json.RawMessage(`{"traceparent": "t"}`),
	}
}

// TestJobDiff checks that the suite's record comparison sees a change in
// every field of a job, and sees none where only the representation differs.
func TestJobDiff(t *testing.T) {
	later := T0.Add(time.Microsecond)
	changes := map[string]func(j *errandtype.Job){
		"ID":                func(j *errandtype.Job) { j.ID = "b" },
		"Queue":             func(j *errandtype.Job) { j.Queue = "r" },
		"Kind":              func(j *errandtype.Job) { j.Kind = "l" },
		"Args":              func(j *errandtype.Job) { j.Args = json.RawMessage(`{"a": 2, "b": [1, 2]}`) },
		"ArgsVersion":       func(j *errandtype.Job) { j.ArgsVersion = 2 },
		"Priority":          func(j *errandtype.Job) { j.Priority = 0 },
		"State":             func(j *errandtype.Job) { j.State = errandtype.StateQueued },
		"Attempt":           func(j *errandtype.Job) { j.Attempt = 2 },
		"MaxAttempts":       func(j *errandtype.Job) { j.MaxAttempts = 4 },
		"BackoffBase":       func(j *errandtype.Job) { j.BackoffBase = 0 },
		"BackoffMax":        func(j *errandtype.Job) { j.BackoffMax = errandtype.Duration(time.Hour) },
		"AvailableAt":       func(j *errandtype.Job) { j.AvailableAt = later },
		"Deadline":          func(j *errandtype.Job) { j.Deadline = nil },
		"BasePriority":      func(j *errandtype.Job) { j.BasePriority = nil },
		"StartBy":           func(j *errandtype.Job) { j.StartBy = ptr(later) },
		"LeaseToken":        func(j *errandtype.Job) { j.LeaseToken = ptr("u") },
		"LeaseUntil":        func(j *errandtype.Job) { j.LeaseUntil = ptr(later) },
		"LeaseOwner":        func(j *errandtype.Job) { j.LeaseOwner = nil },
		"UniqueKey":         func(j *errandtype.Job) { j.UniqueKey = ptr("v") },
		"UniqueScope":       func(j *errandtype.Job) { j.UniqueScope = ptr(errandtype.UniqueAlways) },
		"UniqueWindowStart": func(j *errandtype.Job) { j.UniqueWindowStart = ptr(later) },
		"DebounceKey":       func(j *errandtype.Job) { j.DebounceKey = nil },
		"Absorbed":          func(j *errandtype.Job) { j.Absorbed = 3 },
		"OrderingKey":       func(j *errandtype.Job) { j.OrderingKey = nil },
		"OrderingHold":      func(j *errandtype.Job) { j.OrderingHold = false },
		"FairnessKey":       func(j *errandtype.Job) { j.FairnessKey = ptr("g") },
		"HeldBy":            func(j *errandtype.Job) { j.HeldBy = nil },
		"HeldByBreaker":     func(j *errandtype.Job) { j.HeldByBreaker = nil },
		"Progress":          func(j *errandtype.Job) { j.Progress = nil },
		"CreatedAt":         func(j *errandtype.Job) { j.CreatedAt = later },
		"AttemptedAt":       func(j *errandtype.Job) { j.AttemptedAt = ptr(later) },
		"FinishedAt":        func(j *errandtype.Job) { j.FinishedAt = nil },
		"LastError":         func(j *errandtype.Job) { j.LastError = &errandtype.LastError{Class: "c", Message: "m", At: later} },
		"Errors": func(j *errandtype.Job) {
			j.Errors = []errandtype.AttemptError{{Attempt: 1, Replay: 1, At: T0, Class: "c", Message: "m", Stack: "s"}}
		},
		"Replays":           func(j *errandtype.Job) { j.Replays = 0 },
		"Tags":              func(j *errandtype.Job) { j.Tags = []string{} },
		"BatchID":           func(j *errandtype.Job) { j.BatchID = nil },
		"Seq":               func(j *errandtype.Job) { j.Seq = 2 },
		"CancelRequestedAt": func(j *errandtype.Job) { j.CancelRequestedAt = ptr(later) },
		"WorkflowID":        func(j *errandtype.Job) { j.WorkflowID = ptr("wf2") },
		"Output":            func(j *errandtype.Job) { j.Output = nil },
		"Metadata":          func(j *errandtype.Job) { j.Metadata = nil },
	}
	if n := reflect.TypeFor[errandtype.Job]().NumField(); n != len(changes) {
		t.Fatalf("errandtype.Job has %d fields and this test changes %d: cover the new field", n, len(changes))
	}
	for name, change := range changes {
		j := fullJob()
		change(j)
		if d := jobDiff(fullJob(), j); len(d) != 1 {
			t.Errorf("changing %s: diff %q, want one difference", name, d)
		}
	}
	// Same instants in another zone and the same JSON spelled differently
	// are the same record.
	j := fullJob()
	zone := time.FixedZone("x", 3600)
	j.AvailableAt = T0.In(zone)
	j.Deadline = ptr(T0.In(zone))
	j.Errors[0].At = T0.In(zone)
	j.Args = json.RawMessage(`{"b":[1,2],"a":1}`)
	if d := jobDiff(fullJob(), j); len(d) != 0 {
		t.Errorf("equal records reported different: %q", d)
	}
}
