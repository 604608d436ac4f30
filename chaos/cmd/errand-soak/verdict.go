package main

import (
	"fmt"
	"math"
)

// rule is how a series is judged: the tolerance its last quarter may
// exceed its second quarter by before the run counts it as growth.
type rule string

const (
	ruleMemory     rule = "memory"     // q4 mean <= q2 mean * 1.25
	ruleGoroutines rule = "goroutines" // q4 mean <= q2 mean + max(10%, 20)
	ruleHandles    rule = "handles"    // fds and connections: q4 mean <= q2 mean + max(10%, 5)
	ruleBounded    rule = "bounded"    // table sizes and rows: q4 max <= 1.5 * q2 max
	ruleBacklog    rule = "backlog"    // waiting jobs: q4 max <= 1.5 * q2 max + one second of load
	ruleInfo       rule = "info"       // reported, not judged (throughput)
)

// tolerance states a rule in words, for the report and the docs.
func (r rule) tolerance() string {
	switch r {
	case ruleMemory:
		return "q4 mean <= 1.25 x q2 mean"
	case ruleGoroutines:
		return "q4 mean <= q2 mean + max(10%, 20)"
	case ruleHandles:
		return "q4 mean <= q2 mean + max(10%, 5)"
	case ruleBounded:
		return "q4 max <= 1.5 x q2 max"
	case ruleBacklog:
		return "q4 max <= 1.5 x q2 max + rate"
	}
	return "not judged"
}

// summary is one series over the run, split in quarters: the first is
// warm-up, the second the baseline, the last what is compared with it.
type summary struct {
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	Rule     rule    `json:"rule"`
	Samples  int     `json:"samples"`
	First    float64 `json:"first"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Q2Mean   float64 `json:"q2_mean"`
	Q4Mean   float64 `json:"q4_mean"`
	Q2Max    float64 `json:"q2_max"`
	Q4Max    float64 `json:"q4_max"`
	Verdict  string  `json:"verdict"` // flat, grew, or info
	Limit    float64 `json:"limit"`   // what the judged figure had to stay within
	Judged   float64 `json:"judged"`  // the judged figure: q4 mean or q4 max
	Describe string  `json:"tolerance"`
}

// minSamples is the fewest samples a verdict needs: two a quarter.
const minSamples = 8

// judge summarises values under r. slack is the backlog rule's absolute
// allowance (the load of one second).
func judge(name, unit string, r rule, values []float64, slack float64) summary {
	s := summary{Name: name, Unit: unit, Rule: r, Samples: len(values), Describe: r.tolerance()}
	n := len(values)
	all := finite(values)
	s.Samples = len(all)
	if len(all) == 0 {
		s.Verdict = "no samples"
		return s
	}
	s.First, s.Min, s.Max = all[0], all[0], all[0]
	for _, v := range all {
		s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	}
	// Quarters by time, so a failed reading leaves a gap, not a shift.
	q2, q4 := finite(values[n/4:n/2]), finite(values[n-n/4:])
	if len(q2) == 0 || len(q4) == 0 {
		s.Verdict = fmt.Sprintf("too few samples (%d)", len(all))
		return s
	}
	s.Q2Mean, s.Q4Mean = mean(q2), mean(q4)
	s.Q2Max, s.Q4Max = maxOf(q2), maxOf(q4)
	switch r {
	case ruleMemory:
		s.Judged, s.Limit = s.Q4Mean, s.Q2Mean*1.25
	case ruleGoroutines:
		s.Judged, s.Limit = s.Q4Mean, s.Q2Mean+math.Max(s.Q2Mean*0.10, 20)
	case ruleHandles:
		s.Judged, s.Limit = s.Q4Mean, s.Q2Mean+math.Max(s.Q2Mean*0.10, 5)
	case ruleBounded:
		s.Judged, s.Limit = s.Q4Max, s.Q2Max*1.5
	case ruleBacklog:
		s.Judged, s.Limit = s.Q4Max, s.Q2Max*1.5+slack
	default:
		s.Verdict = "info"
		return s
	}
	s.Verdict = "flat"
	if s.Judged > s.Limit {
		s.Verdict = "grew"
	}
	return s
}

// finite drops the failed readings (NaN).
func finite(vs []float64) []float64 {
	out := make([]float64, 0, len(vs))
	for _, v := range vs {
		if !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

func mean(vs []float64) float64 {
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

func maxOf(vs []float64) float64 {
	m := vs[0]
	for _, v := range vs[1:] {
		m = math.Max(m, v)
	}
	return m
}
