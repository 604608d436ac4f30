package history

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/errandhq/errand/errandtype"
)

// hist builds a history by hand; times are milliseconds.
type hist struct{ ops []porcupine.Operation }

func (h *hist) add(client int, call, ret int64, in Input, out output) {
	ms := int64(time.Millisecond)
	out.ret = ret * ms
	if out.leaseUntil != 0 {
		out.leaseUntil *= ms
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: input{Input: in, call: call * ms}, Call: call * ms, Output: out, Return: ret * ms})
}

func (h *hist) history() History { return History{ops: h.ops} }

func ok(st errandtype.JobState) output { return output{Output: Output{Result: Ok, State: st}} }

// claimed is a claim's result: token, attempt, lease until (ms).
func claimed(token string, attempt int, until int64) output {
	return output{Output: Output{Result: Ok}, token: token, attempt: attempt, leaseUntil: until}
}

// renewed is a heartbeat's result: the lease's new end (ms).
func renewed(until int64) output {
	return output{Output: Output{Result: Ok}, leaseUntil: until}
}

func enqueued(h *hist) {
	h.add(0, 0, 1, Input{Op: OpEnqueue, JobID: "j1", MaxAttempts: 2}, ok(""))
	h.add(0, 2, 3, Input{Op: OpClaim, JobID: "j1", Lease: 100 * time.Millisecond}, claimed("A", 1, 103))
}

// TestCheckTwoAcksOfOneClaim guards the checker's ability to fail: two
// clients both acking the same claim is no run of errand's state machine.
func TestCheckTwoAcksOfOneClaim(t *testing.T) {
	var h hist
	enqueued(&h)
	h.add(0, 10, 11, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
	h.add(1, 12, 13, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
	viz := filepath.Join(t.TempDir(), "two-acks.html")
	err := Check(h.history(), Options{VisualizationPath: viz})
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("two acks of one claim: got %v, want a *Violation", err)
	}
	if v.JobID != "j1" || len(v.Linearized) != 3 || len(v.Stuck) != 1 || !strings.Contains(v.Stuck[0], "client 1") {
		t.Errorf("counterexample: %v", v)
	}
	if fi, err := os.Stat(viz); err != nil || fi.Size() == 0 {
		t.Errorf("visualization %s: %v", viz, err)
	}
	t.Log(v)
}

// TestCheckCases pins what the model accepts and refuses.
func TestCheckCases(t *testing.T) {
	lease := Input{Op: OpClaim, JobID: "j1", Lease: 100 * time.Millisecond}
	for _, c := range []struct {
		name  string
		ops   func(h *hist)
		legal bool
	}{
		{"ack", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 11, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
			h.add(1, 12, 13, Input{Op: OpAck, JobID: "j1", Token: "A"}, output{Output: Output{Result: LeaseLost}})
		}, true},
		{"concurrent acks, the second one lost", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 20, Input{Op: OpAck, JobID: "j1", Token: "A"}, output{Output: Output{Result: LeaseLost}})
			h.add(1, 11, 15, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
		}, true},
		{"ack after the lease ended", func(h *hist) {
			enqueued(h)
			h.add(0, 200, 201, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
		}, false},
		{"stale ack after a sweep and a new claim", func(h *hist) {
			enqueued(h)
			h.add(1, 150, 151, lease, claimed("B", 2, 251))
			h.add(0, 160, 161, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
		}, false},
		{"sweep and a new claim, the stale ack refused", func(h *hist) {
			enqueued(h)
			h.add(1, 150, 151, lease, claimed("B", 2, 251))
			h.add(0, 160, 161, Input{Op: OpAck, JobID: "j1", Token: "A"}, output{Output: Output{Result: LeaseLost}})
			h.add(1, 170, 171, Input{Op: OpAck, JobID: "j1", Token: "B"}, ok(""))
		}, true},
		{"lease lost while live", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 11, Input{Op: OpAck, JobID: "j1", Token: "A"}, output{Output: Output{Result: LeaseLost}})
		}, false},
		{"claim past the attempts", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 11, Input{Op: OpFail, JobID: "j1", Token: "A"}, ok(errandtype.StateRetrying))
			h.add(1, 12, 13, lease, claimed("B", 2, 113))
			h.add(1, 14, 15, Input{Op: OpFail, JobID: "j1", Token: "B"}, ok(errandtype.StateRetrying))
			h.add(1, 16, 17, lease, claimed("C", 3, 117))
		}, false},
		{"attempt not counted at claim", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 11, Input{Op: OpFail, JobID: "j1", Token: "A"}, ok(errandtype.StateRetrying))
			h.add(1, 12, 13, lease, claimed("B", 1, 113))
		}, false},
		{"unknown ack, then a claim", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 1000, Input{Op: OpAck, JobID: "j1", Token: "A"}, output{Output: Output{Result: Unknown}})
			h.add(1, 150, 151, lease, claimed("B", 2, 251))
		}, true},
		{"unknown ack, then a replay", func(h *hist) {
			enqueued(h)
			h.add(0, 10, 1000, Input{Op: OpFail, JobID: "j1", Token: "A", Final: true}, output{Output: Output{Result: Unknown}})
			h.add(1, 20, 21, Input{Op: OpReplay, JobID: "j1"}, ok(errandtype.StateQueued))
		}, true},
		{"unknown claim, then the job dead of its lease", func(h *hist) {
			h.add(0, 0, 1, Input{Op: OpEnqueue, JobID: "j1", MaxAttempts: 1}, ok(""))
			h.add(1, 2, 1000, Input{Op: OpClaim, Lease: 100 * time.Millisecond}, output{Output: Output{Result: Unknown}})
			h.add(0, 200, 201, Input{Op: OpReplay, JobID: "j1"}, ok(errandtype.StateQueued))
		}, true},
		{"replay of a queued job", func(h *hist) {
			h.add(0, 0, 1, Input{Op: OpEnqueue, JobID: "j1", MaxAttempts: 1}, ok(""))
			h.add(0, 2, 3, Input{Op: OpReplay, JobID: "j1"}, ok(errandtype.StateQueued))
		}, false},
		{"cancel request wins over a retry", func(h *hist) {
			enqueued(h)
			h.add(1, 5, 6, Input{Op: OpCancel, JobID: "j1"}, ok(errandtype.StateRunning))
			h.add(0, 10, 11, Input{Op: OpFail, JobID: "j1", Token: "A"}, ok(errandtype.StateCancelled))
			h.add(1, 12, 13, Input{Op: OpCancel, JobID: "j1"}, output{Output: Output{Result: Refused}})
		}, true},
		{"heartbeat, then an ack past the first lease", func(h *hist) {
			enqueued(h)
			h.add(0, 50, 51, Input{Op: OpHeartbeat, JobID: "j1", Token: "A", Lease: 100 * time.Millisecond}, renewed(151))
			h.add(0, 120, 121, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
		}, true},
		{"heartbeat of unknown outcome, then an ack past the first lease", func(h *hist) {
			enqueued(h)
			h.add(0, 50, 1000, Input{Op: OpHeartbeat, JobID: "j1", Token: "A", Lease: 100 * time.Millisecond}, output{Output: Output{Result: Unknown}})
			h.add(1, 120, 121, Input{Op: OpAck, JobID: "j1", Token: "A"}, ok(""))
		}, true},
		{"stale heartbeat renewed", func(h *hist) {
			enqueued(h)
			h.add(1, 150, 151, lease, claimed("B", 2, 251))
			h.add(0, 160, 161, Input{Op: OpHeartbeat, JobID: "j1", Token: "A", Lease: 100 * time.Millisecond}, renewed(261))
		}, false},
		{"replay of no job", func(h *hist) {
			h.add(0, 0, 1, Input{Op: OpReplay, JobID: "j1"}, output{Output: Output{Result: Refused}})
		}, true},
		{"duplicate before the enqueue", func(h *hist) {
			h.add(0, 0, 1, Input{Op: OpEnqueue, JobID: "j1", MaxAttempts: 1}, output{Output: Output{Result: Duplicate}})
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h hist
			c.ops(&h)
			err := Check(h.history(), Options{})
			if c.legal && err != nil {
				t.Errorf("legal history refused: %v", err)
			}
			var v *Violation
			if !c.legal && !errors.As(err, &v) {
				t.Errorf("illegal history: got %v, want a *Violation", err)
			}
		})
	}
}
