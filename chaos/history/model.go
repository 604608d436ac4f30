package history

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/errandhq/errand/errandtype"
)

// leaseSlack widens the lease checks by the difference between the
// store's reading of the time and the recorder's, both taken within the
// call: the store keeps times to the microsecond, and reads them once per
// transaction.
const leaseSlack = int64(2 * time.Millisecond)

// unknownToken is the lease token of a claim whose outcome is unknown: no
// client holds it.
const unknownToken = "?"

// job is the model's state of one job. It is comparable, as porcupine's
// default equality needs.
type job struct {
	Exists     bool
	State      errandtype.JobState
	Attempt    int
	Max        int
	Token      string // of the running attempt
	LeaseUntil int64
	CancelReq  bool
}

// Model is errand's queue as porcupine checks it, partitioned per job: an
// operation on one job never depends on another's. A claim whose outcome
// is unknown names no job: it may have claimed any. The partitions leave
// such claims out, which can only make a history look worse than it is;
// [Check] adds them back to the history of each job that fails without
// them.
var Model = porcupine.NondeterministicModel{
	Partition:         func(ops []porcupine.Operation) [][]porcupine.Operation { return partition(ops).jobs },
	Init:              func() []any { return []any{job{}} },
	Step:              step,
	DescribeOperation: describeOp,
	DescribeState:     func(s any) string { return s.(job).String() },
}

// parts is a history split per job, in the order the jobs first appear,
// and the claims of unknown outcome, which name none.
type parts struct {
	jobs   [][]porcupine.Operation
	anyJob []porcupine.Operation
}

func partition(ops []porcupine.Operation) parts {
	var p parts
	at := map[string]int{}
	for _, o := range ops {
		id := o.Input.(input).JobID
		if id == "" {
			p.anyJob = append(p.anyJob, o)
			continue
		}
		i, ok := at[id]
		if !ok {
			i = len(p.jobs)
			at[id] = i
			p.jobs = append(p.jobs, nil)
		}
		p.jobs[i] = append(p.jobs[i], o)
	}
	return p
}

// withAnyJob returns a job's operations with the claims of unknown outcome
// that may have changed what they saw: those called before the last of
// them returned. A later one can take effect after all of them, or never.
func (p parts) withAnyJob(ops []porcupine.Operation) []porcupine.Operation {
	var last int64
	for _, o := range ops {
		if o.Output.(output).Result != Unknown {
			last = max(last, o.Return)
		}
	}
	out := slices.Clone(ops)
	for _, o := range p.anyJob {
		if o.Call <= last {
			out = append(out, o)
		}
	}
	return out
}

// step returns the states j may be in after the operation, none when the
// operation cannot have returned what it did.
func step(state, in, out any) []any {
	j, i, o := state.(job), in.(input), out.(output)
	var next []any
	for _, pre := range swept(j, o.ret) {
		for _, s := range apply(pre, i, o) {
			next = append(next, s)
		}
	}
	return next
}

// swept returns j, and j as a sweep leaves it when its lease may have
// ended before ret: any later operation may find it swept.
func swept(j job, ret int64) []job {
	if j.State != errandtype.StateRunning || j.LeaseUntil > ret+leaseSlack {
		return []job{j}
	}
	s := j
	s.Token, s.LeaseUntil = "", 0
	switch {
	case j.CancelReq:
		s.State = errandtype.StateCancelled
	case j.Attempt >= j.Max:
		s.State = errandtype.StateDead
	default:
		s.State = errandtype.StateRetrying
	}
	return []job{j, s}
}

// apply returns the states j may be in after i returned o.
func apply(j job, i input, o output) []job {
	if o.Result == Unknown {
		// Happened or not.
		if s, ok := happen(j, i, o); ok {
			return []job{j, s}
		}
		return []job{j}
	}
	if o.Result == Ok {
		if s, ok := happen(j, i, o); ok && (o.State == "" || o.State == s.State) {
			return []job{s}
		}
		return nil
	}
	var refused bool
	switch o.Result {
	case Duplicate:
		refused = i.Op == OpEnqueue && j.Exists
	case LeaseLost:
		// Not this lease, or one that may have ended within the call.
		refused = (i.Op == OpAck || i.Op == OpFail || i.Op == OpHeartbeat) &&
			(j.State != errandtype.StateRunning || j.Token != i.Token || j.LeaseUntil <= o.ret+leaseSlack)
	case Refused:
		_, ok := happen(j, i, o)
		refused = (i.Op == OpReplay || i.Op == OpCancel) && !ok
	}
	if refused {
		return []job{j}
	}
	return nil
}

// happen applies the operation's effect to j, and reports whether it can
// take effect at all.
func happen(j job, i input, o output) (job, bool) {
	waiting := j.Exists && j.State.Waiting()
	running := j.Exists && j.State == errandtype.StateRunning
	switch i.Op {
	case OpEnqueue:
		if j.Exists {
			return j, false
		}
		return job{Exists: true, State: errandtype.StateQueued, Max: i.MaxAttempts}, true
	case OpClaim:
		if !waiting || j.Attempt >= j.Max {
			return j, false
		}
		s := j
		s.State, s.Attempt = errandtype.StateRunning, j.Attempt+1
		if o.Result == Unknown {
			s.Token, s.LeaseUntil = unknownToken, i.call+int64(i.Lease)
			return s, true
		}
		s.Token, s.LeaseUntil = o.token, o.leaseUntil
		// Attempts are counted at claim, and bounded.
		return s, o.attempt == s.Attempt
	case OpAck, OpFail, OpHeartbeat:
		// The lease must be live at some instant of the call.
		if !running || j.Token != i.Token || j.LeaseUntil <= i.call-leaseSlack {
			return j, false
		}
		s := j
		if i.Op == OpHeartbeat {
			// A renewal of unknown outcome may have moved the lease's
			// end to any time: as far as this model goes, for ever. Its
			// other branch, the lease unchanged, covers the ends that
			// came sooner.
			s.LeaseUntil = o.leaseUntil
			if o.Result == Unknown {
				s.LeaseUntil = math.MaxInt64 / 2
			}
			return s, true
		}
		s.Token, s.LeaseUntil = "", 0
		switch {
		case i.Op == OpAck:
			s.State = errandtype.StateSucceeded
		case i.Final:
			s.State = errandtype.StateDead
		case j.CancelReq:
			s.State = errandtype.StateCancelled // a cancel request wins over a retry
		default:
			s.State = errandtype.StateRetrying
		}
		return s, true
	case OpReplay:
		if !j.Exists || (j.State != errandtype.StateDead && j.State != errandtype.StateCancelled) {
			return j, false
		}
		return job{Exists: true, State: errandtype.StateQueued, Max: j.Max}, true
	case OpCancel:
		s := j
		switch {
		case waiting:
			s.State = errandtype.StateCancelled
		case running:
			s.CancelReq = true
		default:
			return j, false
		}
		return s, true
	}
	return j, false
}

func (j job) String() string {
	if !j.Exists {
		return "absent"
	}
	s := fmt.Sprintf("%s #%d/%d", j.State, j.Attempt, j.Max)
	if j.State == errandtype.StateRunning {
		s += fmt.Sprintf(" lease %s until %s", short(j.Token), ms(j.LeaseUntil))
	}
	if j.CancelReq {
		s += " cancel requested"
	}
	return s
}

func describeOp(in, out any) string {
	i, o := in.(input), out.(output)
	s := string(i.Op) + " " + i.JobID
	switch i.Op {
	case OpEnqueue:
		s += fmt.Sprintf(" max %d", i.MaxAttempts)
	case OpAck, OpFail, OpHeartbeat:
		s += " lease " + short(i.Token)
		if i.Final {
			s += " final"
		}
	case OpClaim:
		s += " lease " + i.Lease.String()
	}
	s += " -> " + string(o.Result)
	if o.State != "" {
		s += " " + string(o.State)
	}
	switch {
	case i.Op == OpClaim && o.Result == Ok:
		s += fmt.Sprintf(" %s #%d until %s", short(o.token), o.attempt, ms(o.leaseUntil))
	case i.Op == OpHeartbeat && o.Result == Ok:
		s += " until " + ms(o.leaseUntil)
	}
	return s
}

func short(token string) string {
	if len(token) > 8 {
		return token[:8]
	}
	return token
}

// ms shows a time of the timeline.
func ms(t int64) string { return time.Duration(t).Round(time.Microsecond).String() }
