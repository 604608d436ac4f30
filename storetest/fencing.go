package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var fencingCases = []testCase{
	{"StaleWritesChangeNothing", testFencingStaleWrites},
	{"ClaimAtExactExpiry", testFencingClaimAtExactExpiry},
	{"HeartbeatExtends", testFencingHeartbeatExtends},
	{"Progress", testFencingProgress},
}

// fencedOp is one write that must present a live lease.
type fencedOp struct {
	name string
	// do attempts the write for job id with token and returns its error.
	do func(e *env, id, token string) error
	// effectKey is the ledger entry the write would create, if any.
	effectKey string
}

func outcomeOp(kind errandstore.OutcomeKind) fencedOp {
	return fencedOp{name: "outcome-" + string(kind), do: func(e *env, id, token string) error {
		o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: id, LeaseToken: token}, Kind: kind, Delay: time.Minute}
		if kind != errandstore.OutcomeSucceeded && kind != errandstore.OutcomeSnooze {
			class := errand.ClassError
			switch kind {
			case errandstore.OutcomeInterrupted:
				class = errand.ClassInterrupted
			case errandstore.OutcomeCancelled:
				class = errandstore.ClassCancelled
			}
			o.Error = &errandtype.AttemptError{Attempt: 1, Class: class, Message: "stale"}
		}
		r := e.record(o)[0]
		if r.Err == nil {
			return fmt.Errorf("applied: state %s", r.State)
		}
		return r.Err
	}}
}

var fencedOps = []fencedOp{
	{name: "heartbeat", do: func(e *env, id, token string) error {
		rs, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{{ID: id, LeaseToken: token}}, Lease: time.Hour})
		if err != nil {
			return fmt.Errorf("call failed: %w", err)
		}
		if len(rs) != 1 {
			return fmt.Errorf("%d results for 1 lease", len(rs))
		}
		if rs[0].Err == nil {
			return fmt.Errorf("renewed until %v", rs[0].LeaseUntil)
		}
		return rs[0].Err
	}},
	{name: "progress", do: func(e *env, id, token string) error {
		return e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: id, LeaseToken: token, Progress: json.RawMessage(`{"page":9}`)})
	}},
	outcomeOp(errandstore.OutcomeSucceeded),
	outcomeOp(errandstore.OutcomeRetry),
	outcomeOp(errandstore.OutcomeDead),
	outcomeOp(errandstore.OutcomeSnooze),
	outcomeOp(errandstore.OutcomeInterrupted),
	outcomeOp(errandstore.OutcomeCancelled),
	{name: "effect-begin", effectKey: "begin", do: func(e *env, id, token string) error {
		_, err := e.s.EffectBegin(e.ctx, &errandstore.EffectParams{Key: "begin", JobID: id, LeaseToken: token})
		return err
	}},
	{name: "effect-record-tx", effectKey: "record", do: func(e *env, id, token string) error {
		err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
			_, err := tx.EffectRecord(ctx, &errandstore.EffectRecordParams{Key: "record", JobID: id, LeaseToken: token})
			return err
		})
		return err
	}},
}

// testFencingStaleWrites checks guarantee 3: every fenced write by a worker
// that does not hold a live lease reports ErrLeaseLost and changes nothing.
func testFencingStaleWrites(t *testing.T, h harness) {
	for _, c := range []struct {
		name string
		// stale makes the claimed jobs' leases stale and returns the token
		// to present for job i.
		stale func(e *env, js []*errandtype.Job, i int) string
		once  func(e *env, js []*errandtype.Job)
	}{
		{name: "wrong-token", stale: func(_ *env, _ []*errandtype.Job, _ int) string { return "not-the-token" }},
		{name: "empty-token", stale: func(_ *env, _ []*errandtype.Job, _ int) string { return "" }},
		{name: "other-jobs-token", stale: func(_ *env, js []*errandtype.Job, i int) string { return token(js[(i+1)%len(js)]) }},
		{
			name:  "lease-expired",
			once:  func(e *env, _ []*errandtype.Job) { e.clock.Advance(lease + time.Second) },
			stale: func(_ *env, js []*errandtype.Job, i int) string { return token(js[i]) },
		},
		{
			// lease_until > now is required: at lease_until the lease is over.
			name:  "at-lease-until",
			once:  func(e *env, _ []*errandtype.Job) { e.clock.Advance(lease) },
			stale: func(_ *env, js []*errandtype.Job, i int) string { return token(js[i]) },
		},
		{
			name: "job-finished",
			once: func(e *env, js []*errandtype.Job) {
				for _, j := range js {
					e.recordOK(succeeded(j))
				}
			},
			stale: func(_ *env, js []*errandtype.Job, i int) string { return token(js[i]) },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := open(t, h)
			var names []string
			for _, op := range fencedOps {
				names = append(names, op.name)
			}
			e.insertIDs(names...)
			js := e.claim(len(names))
			if len(js) != len(names) {
				t.Fatalf("claimed %d of %d jobs", len(js), len(names))
			}
			byID := map[string]int{}
			for i, j := range js {
				byID[j.ID] = i
			}
			if c.once != nil {
				c.once(e, js)
			}
			for _, op := range fencedOps {
				if c.name == "empty-token" && op.effectKey != "" {
					// An empty token is not a lease: EffectRecordTx takes
					// it as unfenced, EffectBegin as bad input.
					continue
				}
				i := byID[op.name]
				before := e.get(op.name)
				err := op.do(e, op.name, c.stale(e, js, i))
				if !errors.Is(err, errandtype.ErrLeaseLost) {
					t.Errorf("%s: got %v, want ErrLeaseLost", op.name, err)
				}
				e.unchanged(op.name, before)
				if op.effectKey != "" {
					if eff, err := e.s.EffectGet(e.ctx, &errandstore.EffectGetParams{Key: op.effectKey}); !errors.Is(err, errandtype.ErrNotFound) {
						t.Errorf("%s: ledger entry %+v, %v after a stale write; want ErrNotFound", op.name, eff, err)
					}
				}
			}
		})
	}
}

// testFencingClaimAtExactExpiry checks that a claim at the instant a lease
// expires takes the job over, and the old holder's acknowledgment then
// changes nothing.
func testFencingClaimAtExactExpiry(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	first := e.claimOne("a")
	now := e.clock.Advance(lease)
	second := e.claimOne("a")
	if second.Attempt != 2 || token(second) == token(first) {
		t.Fatalf("reclaim: attempt %d, token %q (first %q); want attempt 2 and a new token", second.Attempt, token(second), token(first))
	}
	expired := errandtype.AttemptError{Attempt: 1, At: now, Class: errandstore.ClassLeaseExpired}
	if len(second.Errors) != 1 {
		t.Fatalf("history after the lease expired: %+v, want one lease_expired entry", second.Errors)
	}
	expired.Message = second.Errors[0].Message
	want := claimed(first, token(second), now, lease, owner)
	want.Attempt = 2
	want.AvailableAt = now
	want.Errors = []errandtype.AttemptError{expired}
	want.LastError = lastErr(expired)
	same(t, "job reclaimed at lease expiry", want, second)

	before := e.get("a")
	if r := e.record(succeeded(first))[0]; !errors.Is(r.Err, errandtype.ErrLeaseLost) {
		t.Fatalf("acknowledge with the first token: %+v, want ErrLeaseLost", r)
	}
	e.unchanged("stale acknowledgment", before)
	if r := e.recordOK(succeeded(second)); r.State != errandtype.StateSucceeded {
		t.Errorf("acknowledge with the new token: state %s, want succeeded", r.State)
	}
}

func testFencingHeartbeatExtends(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b", "c")
	js := e.claim(3)
	if len(js) != 3 {
		t.Fatalf("claimed %d of 3", len(js))
	}
	a, b, c := js[0], js[1], js[2]
	now := e.clock.Advance(20 * time.Second)
	rs, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{
		Leases: []errandstore.JobLease{leaseOf(a), {ID: b.ID, LeaseToken: "stale"}, leaseOf(c), {ID: "missing", LeaseToken: token(a)}},
		Lease:  time.Minute,
	})
	if err != nil {
		t.Fatalf("JobHeartbeatMany: %v", err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results for 4 leases", len(rs))
	}
	for i, want := range []error{nil, errandtype.ErrLeaseLost, nil, errandtype.ErrLeaseLost} {
		if !errors.Is(rs[i].Err, want) || (want == nil) != (rs[i].Err == nil) {
			t.Errorf("heartbeat %d: err %v, want %v", i, rs[i].Err, want)
		}
	}
	for _, i := range []int{0, 2} {
		if !rs[i].LeaseUntil.Equal(now.Add(time.Minute)) {
			t.Errorf("heartbeat %d: lease_until %v, want %v", i, rs[i].LeaseUntil, now.Add(time.Minute))
		}
	}
	wantA := *a
	wantA.LeaseUntil = ptr(now.Add(time.Minute))
	same(t, "renewed job", &wantA, e.get(a.ID))
	e.unchanged("job with a stale heartbeat", b)

	// Past the first lease, inside the renewed one, the holder still owns
	// the job; b, not renewed, is lost.
	e.clock.Advance(30 * time.Second)
	if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: a.ID, LeaseToken: token(a), Progress: json.RawMessage(`1`)}); err != nil {
		t.Errorf("progress inside the renewed lease: %v", err)
	}
	if r := e.record(succeeded(b))[0]; !errors.Is(r.Err, errandtype.ErrLeaseLost) {
		t.Errorf("acknowledge past an unrenewed lease: %+v, want ErrLeaseLost", r)
	}
	// A renewal may also shorten the lease: it is now+Lease.
	now = e.now()
	rs, err = e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{leaseOf(a)}, Lease: time.Second})
	if err != nil || rs[0].Err != nil || !rs[0].LeaseUntil.Equal(now.Add(time.Second)) {
		t.Errorf("short renewal: %+v, %v; want lease_until %v", rs, err, now.Add(time.Second))
	}
	if _, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{leaseOf(a)}}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("heartbeat with a zero lease: %v, want ErrInvalid", err)
	}
}

func testFencingProgress(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	for _, p := range []string{`{"page": 3, "cursor": "x"}`, `{"page": 4}`} {
		if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: j.ID, LeaseToken: token(j), Progress: json.RawMessage(p)}); err != nil {
			t.Fatalf("JobSetProgress: %v", err)
		}
		want := *j
		want.Progress = json.RawMessage(p)
		same(t, "job after progress "+p, &want, e.get("a"))
	}
	if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: j.ID, LeaseToken: token(j), Progress: json.RawMessage(`{"page":`)}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("progress that is not JSON: %v, want ErrInvalid", err)
	}
	// The checkpoint survives into the next attempt, which resumes from it.
	e.recordOK(retry(j, 0))
	j = e.claimOne("a")
	if !sameJSON(j.Progress, []byte(`{"page": 4}`)) {
		t.Errorf("progress on the next attempt: %s, want {\"page\": 4}", j.Progress)
	}
}
