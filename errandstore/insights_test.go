package errandstore

import (
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// TestAssembleInsights pins the arithmetic every store's figures go
// through: depth by bucket and the oldest ready age, throughput per minute
// over each window, failure rates over failures plus successes, classes
// most frequent first, and nearest-rank percentiles.
func TestAssembleInsights(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := &errandtype.InsightsData{
		Now: now,
		Depth: []errandtype.DepthCount{
			{Queue: "q", Kind: "k", Bucket: errandtype.BucketReady, Jobs: 3, OldestAvailableAt: now.Add(-90 * time.Second)},
			{Queue: "q", Kind: "k", Bucket: errandtype.BucketDead, Jobs: 2},
			{Queue: "a", Kind: "z", Bucket: errandtype.BucketHeld, Jobs: 1},
		},
		Finished: []errandtype.FinishedCount{
			{Queue: "q", Kind: "k", State: errandtype.StateSucceeded, Last1m: 2, Last5m: 10, Last1h: 6},
			{Queue: "q", Kind: "k", State: errandtype.StateDead, Last1m: 1, Last5m: 5, Last1h: 54, Last24h: 60},
			{Queue: "q", Kind: "k", State: errandtype.StateCancelled, Last1m: 100, Last5m: 100, Last1h: 100},
		},
		Failures: []errandtype.FailureCount{
			{Queue: "q", Kind: "k", Class: "timeout", Failures: 1, Retried: 1},
			{Queue: "q", Kind: "k", Class: "error", Failures: 3, Retried: 2},
		},
	}
	for i := 1; i <= 100; i++ {
		d.Samples = append(d.Samples, errandtype.TimingSample{Queue: "q", Kind: "k", Run: time.Duration(i) * time.Second, Wait: time.Second})
	}
	ins := AssembleInsights(d)
	if len(ins.Kinds) != 2 || ins.Kinds[0].Queue != "a" || ins.Kinds[1].Kind != "k" {
		t.Fatalf("kinds %+v; want a/z then q/k", ins.Kinds)
	}
	if ins.Kinds[0].Held != 1 || ins.Kinds[0].FailuresByClass == nil {
		t.Fatalf("a/z = %+v; want 1 held and an empty (not nil) class list", ins.Kinds[0])
	}
	k := ins.Kinds[1]
	if k.Ready != 3 || k.Dead != 2 || k.OldestReadyAgeSeconds != 90 {
		t.Fatalf("depth %+v; want 3 ready, oldest 90s, 2 dead", k)
	}
	if want := (errandtype.Throughput{Last1m: 3, Last5m: 3, Last1h: 1}); k.Throughput != want {
		t.Fatalf("throughput %+v; want %+v (cancelled jobs not counted)", k.Throughput, want)
	}
	if k.SucceededLastHour != 6 || k.DeadLastHour != 54 || k.DeadLastDay != 60 || k.FailedLastHour != 4 || k.RetriesLastHour != 3 {
		t.Fatalf("counts %+v", k)
	}
	if k.FailureRate != 0.4 || k.FailuresByClass[0].Class != "error" || k.FailuresByClass[0].Rate != 0.3 {
		t.Fatalf("failure rate %v, classes %+v; want 0.4, error first at 0.3", k.FailureRate, k.FailuresByClass)
	}
	if want := (errandtype.Percentiles{Samples: 100, P50Seconds: 50, P99Seconds: 99}); k.RunTime != want {
		t.Fatalf("run time %+v; want %+v", k.RunTime, want)
	}
}
