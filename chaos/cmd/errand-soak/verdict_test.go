package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ramp is n values from a to b.
func ramp(n int, a, b float64) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = a + (b-a)*float64(i)/float64(n-1)
	}
	return vs
}

// noisy is n values around level, each within +-spread of it.
func noisy(n int, level, spread float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed))
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = level + spread*(2*r.Float64()-1)
	}
	return vs
}

// sawtooth is a table that fills for period samples and is pruned back.
func sawtooth(n, period int, floor, step float64) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = floor + step*float64(i%period)
	}
	return vs
}

func TestJudge(t *testing.T) {
	gap := noisy(120, 300, 30, 7)
	gap[40], gap[100] = math.NaN(), math.NaN()
	for _, tc := range []struct {
		name   string
		rule   rule
		values []float64
		slack  float64
		want   string
	}{
		{"leaking memory", ruleMemory, ramp(120, 100e6, 200e6), 0, "grew"},
		{"noisy flat memory", ruleMemory, noisy(120, 100e6, 15e6, 1), 0, "flat"},
		{"memory that grew early then held", ruleMemory, append(ramp(30, 20e6, 100e6), noisy(90, 100e6, 10e6, 2)...), 0, "flat"},
		{"goroutine leak of one a sample", ruleGoroutines, ramp(120, 50, 170), 0, "grew"},
		{"goroutines busy then idle", ruleGoroutines, noisy(120, 60, 15, 3), 0, "flat"},
		{"fd leak", ruleHandles, ramp(120, 20, 40), 0, "grew"},
		{"fds in a band", ruleHandles, noisy(120, 20, 3, 4), 0, "flat"},
		{"connections with a gap", ruleHandles, gap, 0, "flat"},
		{"table without retention", ruleBounded, ramp(120, 1e6, 50e6), 0, "grew"},
		{"table pruned back", ruleBounded, sawtooth(120, 20, 1e6, 1e5), 0, "flat"},
		{"backlog falling behind", ruleBacklog, ramp(120, 0, 5000), 100, "grew"},
		{"small backlog", ruleBacklog, noisy(120, 10, 10, 5), 100, "flat"},
		{"throughput", ruleInfo, ramp(120, 1, 1000), 0, "info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := judge("s", "u", tc.rule, tc.values, tc.slack)
			if s.Verdict != tc.want {
				t.Fatalf("verdict %q, want %q (q2 mean %g, q4 mean %g, q2 max %g, q4 max %g, limit %g)",
					s.Verdict, tc.want, s.Q2Mean, s.Q4Mean, s.Q2Max, s.Q4Max, s.Limit)
			}
		})
	}
}

func TestJudgeTooFewSamples(t *testing.T) {
	if s := judge("s", "u", ruleMemory, []float64{1, 2, 3}, 0); s.Verdict == "flat" || s.Verdict == "grew" {
		t.Fatalf("3 samples judged %q", s.Verdict)
	}
	if s := judge("s", "u", ruleMemory, []float64{math.NaN(), math.NaN()}, 0); s.Verdict != "no samples" {
		t.Fatalf("no readings judged %q", s.Verdict)
	}
}
