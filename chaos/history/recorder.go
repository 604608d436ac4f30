package history

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/errandhq/errand/errandtype"
)

// Op names an operation on a job.
type Op string

const (
	// OpEnqueue inserts job JobID with MaxAttempts.
	OpEnqueue Op = "enqueue"
	// OpClaim claims jobs, each held for Lease; its completion names them
	// ([Call.Claimed]).
	OpClaim Op = "claim"
	// OpAck records the success of job JobID's attempt under Token.
	OpAck Op = "ack"
	// OpHeartbeat renews job JobID's lease Token for Lease; a successful
	// one completes with the lease's new end (Output.LeaseUntil).
	OpHeartbeat Op = "heartbeat"
	// OpFail records the failure of job JobID's attempt under Token: a
	// retry, or with Final the job's death (the client's retry policy
	// decided it was the last attempt).
	OpFail Op = "fail"
	// OpReplay replays job JobID.
	OpReplay Op = "replay"
	// OpCancel cancels job JobID, or asks its running attempt to stop.
	OpCancel Op = "cancel"
)

// Input is what a client asks.
type Input struct {
	Op    Op
	JobID string
	// Token is the lease token an ack, a fail or a heartbeat presents.
	Token string
	// MaxAttempts is an enqueued job's.
	MaxAttempts int
	// Final marks a fail that ends the job dead rather than retrying it.
	Final bool
	// Lease is how long a claim or a heartbeat holds its jobs.
	Lease time.Duration
}

// Result is how an operation ended.
type Result string

const (
	Ok Result = "ok"
	// Duplicate: an enqueue found the job already there.
	Duplicate Result = "duplicate"
	// LeaseLost: an ack, a fail or a heartbeat presented a token that was not the
	// job's live lease ([errandtype.ErrLeaseLost]); nothing was written.
	LeaseLost Result = "lease_lost"
	// Refused: the job's state forbids a replay or a cancel
	// ([errandtype.StateError]), or there is no such job
	// ([errandtype.ErrNotFound]); nothing was written.
	Refused Result = "refused"
	// Unknown: the call failed without saying whether it happened.
	Unknown Result = "unknown"
)

// Output is what a completed operation returned.
type Output struct {
	Result Result
	// State is the job's state the call returned: the state a fail, a
	// cancel or a replay left it in. Empty leaves it unchecked.
	State errandtype.JobState
	// LeaseUntil is the new end of the lease a heartbeat renewed.
	LeaseUntil time.Time
}

// Claim is one job a claim returned.
type Claim struct {
	JobID      string
	Token      string
	Attempt    int
	LeaseUntil time.Time
}

// ClaimOf returns the Claim of a job a store's claim returned.
func ClaimOf(j *errandtype.Job) Claim {
	c := Claim{JobID: j.ID, Attempt: j.Attempt}
	if j.LeaseToken != nil {
		c.Token = *j.LeaseToken
	}
	if j.LeaseUntil != nil {
		c.LeaseUntil = *j.LeaseUntil
	}
	return c
}

// ResultOf maps a store call's error to the Result to record: nil is Ok,
// [errandtype.ErrLeaseLost] LeaseLost, a [*errandtype.StateError] and
// [errandtype.ErrNotFound] Refused, and any other error Unknown, since a call that failed otherwise (a
// connection lost, a deadline passed) may have committed.
func ResultOf(err error) Result {
	var se *errandtype.StateError
	switch {
	case err == nil:
		return Ok
	case errors.Is(err, errandtype.ErrLeaseLost):
		return LeaseLost
	case errors.As(err, &se), errors.Is(err, errandtype.ErrNotFound):
		return Refused
	}
	return Unknown
}

// input and output are what the model steps on: the client's Input and
// Output with the times of the call, on the Recorder's timeline
// (nanoseconds since it started).
type input struct {
	Input
	call int64
}

type output struct {
	Output
	ret int64
	// A claim's lease.
	token      string
	attempt    int
	leaseUntil int64
}

// Recorder collects a history from concurrent clients. It is safe for
// concurrent use. Clients are numbered from 0; each runs one operation at
// a time.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	jobs  map[string]bool
}

// NewRecorder returns a Recorder whose timeline starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), jobs: map[string]bool{}}
}

func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// at places a store's time (a lease's end) on the timeline.
func (r *Recorder) at(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Call is an operation invoked and not yet recorded as completed.
type Call struct {
	r      *Recorder
	client int
	in     input
	done   bool
}

// Begin records that client invokes in, now. Complete the call with one of
// its methods when it returns.
func (r *Recorder) Begin(client int, in Input) *Call {
	return &Call{r: r, client: client, in: input{Input: in, call: r.now()}}
}

// Done records the completion of an operation other than a claim.
func (c *Call) Done(out Output) {
	o := output{Output: out, ret: c.r.now()}
	if c.in.Op == OpHeartbeat && out.Result == Ok {
		o.leaseUntil = c.r.at(out.LeaseUntil)
		o.LeaseUntil = time.Time{} // comparable without its location
	}
	c.record(c.in, o)
}

// Err records the completion of an operation other than a claim by its
// store error, as [ResultOf] maps it, with the job's state when st is not
// empty.
func (c *Call) Err(err error, st errandtype.JobState) {
	c.Done(Output{Result: ResultOf(err), State: st})
}

// Claimed records the completion of a claim that returned jobs: one
// operation per job, in the job's history. A claim that returned none is
// not recorded.
func (c *Call) Claimed(jobs []Claim) {
	ret := c.r.now()
	for _, j := range jobs {
		in := c.in
		in.JobID = j.JobID
		c.record(in, output{Output: Output{Result: Ok}, ret: ret, token: j.Token, attempt: j.Attempt, leaseUntil: c.r.at(j.LeaseUntil)})
	}
	c.done = true
}

// Unknown records that the call failed without saying whether it
// happened. An unknown claim may have claimed any job.
func (c *Call) Unknown() {
	c.record(c.in, output{Output: Output{Result: Unknown}})
}

func (c *Call) record(in input, out output) {
	if c.done && in.Op != OpClaim {
		panic("history: a Call completed twice")
	}
	c.done = true
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if in.JobID != "" {
		c.r.jobs[in.JobID] = true
	}
	c.r.ops = append(c.r.ops, porcupine.Operation{ClientId: c.client, Input: in, Call: in.call, Output: out, Return: out.ret})
}

// History is a recorded history.
type History struct {
	ops []porcupine.Operation
	// jobs are the ids the history names, sorted.
	jobs []string
}

// History returns the operations recorded so far. An unknown outcome
// returns at the end of the history: it may take effect any time after its
// call.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := slices.Clone(r.ops)
	end := r.now()
	for i := range ops {
		if o := ops[i].Output.(output); o.Result == Unknown {
			o.ret = end
			ops[i].Output, ops[i].Return = o, end
		}
	}
	jobs := make([]string, 0, len(r.jobs))
	for id := range r.jobs {
		jobs = append(jobs, id)
	}
	slices.Sort(jobs)
	return History{ops: ops, jobs: jobs}
}

// Len is the number of operations in h.
func (h History) Len() int { return len(h.ops) }
