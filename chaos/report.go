package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Violation is one broken invariant, about one job (or batch, workflow,
// tick) when it names one.
type Violation struct {
	Invariant string `json:"invariant"`
	JobID     string `json:"job_id"`
	Detail    string `json:"detail"`
}

// InvariantResult is one invariant's verdict.
type InvariantResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// NotChecked says why the run could not check it (OK is then true:
	// nothing was found, as nothing was looked at).
	NotChecked string      `json:"not_checked,omitempty"`
	Violations []Violation `json:"violations"`
}

// Report is a run's outcome: what it did, what it injected, what held.
type Report struct {
	Seed     uint64 `json:"seed"`
	Store    string `json:"store"`
	Duration string `json:"duration"`
	Elapsed  string `json:"elapsed"`
	// Quiet is whether the drain reached quiet before its timeout.
	Quiet bool `json:"quiet"`
	// Ops counts the load's operations; Faults the faults injected, by
	// kind; Skipped the faults left out, with why.
	Ops     map[string]int    `json:"ops"`
	Faults  map[string]int    `json:"faults"`
	Skipped map[string]string `json:"skipped"`
	// Logged enqueues, jobs in the store, and their states.
	Logged int            `json:"logged_enqueues"`
	Jobs   int            `json:"jobs"`
	States map[string]int `json:"states"`
	// Waiting counts the jobs left waiting, by the legitimate reason.
	Waiting map[string]int `json:"waiting"`
	// Deliveries to the sink, and those beyond a job's first.
	Deliveries   int `json:"deliveries"`
	Redeliveries int `json:"redeliveries"`
	// StaleAcks are remote outcomes (ack or fail) sent after stalling
	// past the lease; StaleAcksFenced those refused. LeaseLostLogged counts the
	// worker processes' fenced outcomes.
	StaleAcks       int `json:"stale_acks"`
	StaleAcksFenced int `json:"stale_acks_fenced"`
	LeaseLostLogged int `json:"lease_lost_logged"`
	CronTicks       int `json:"cron_ticks"`
	// CronMaxGap is the longest time between two ticks' jobs.
	CronMaxGap string `json:"cron_max_gap"`
	cronGap    time.Duration
	// HistoryOps counts the linear queue's recorded operations; History
	// says why their check was left out, when it was.
	HistoryOps int               `json:"history_ops"`
	History    string            `json:"history_not_checked,omitempty"`
	Invariants []InvariantResult `json:"invariants"`
	// Dir keeps the run's files (logs, sink, database): a failed run's,
	// or the one Config.Dir named; null when removed.
	Dir *string `json:"dir"`
}

func (r *Report) finish(v map[string][]Violation) {
	for _, name := range invariants {
		vs := v[name]
		if vs == nil {
			vs = []Violation{}
		}
		res := InvariantResult{Name: name, OK: len(vs) == 0, Violations: vs}
		if name == invHistory {
			res.NotChecked = r.History
		}
		r.Invariants = append(r.Invariants, res)
	}
}

// OK reports whether every invariant held.
func (r *Report) OK() bool {
	for _, i := range r.Invariants {
		if !i.OK {
			return false
		}
	}
	return true
}

// ViolatingIDs lists the ids named by violations, sorted, each once.
func (r *Report) ViolatingIDs() []string {
	seen := map[string]bool{}
	var ids []string
	for _, i := range r.Invariants {
		for _, v := range i.Violations {
			if v.JobID != "" && !seen[v.JobID] {
				seen[v.JobID] = true
				ids = append(ids, v.JobID)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// Write prints the report on one screen.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "errand chaos: store %s, seed %d, load %s (elapsed %s), quiet %v\n", r.Store, r.Seed, r.Duration, r.Elapsed, r.Quiet)
	fmt.Fprintf(w, "ops:      %s\n", kv(r.Ops))
	fmt.Fprintf(w, "faults:   %s\n", kv(r.Faults))
	for _, k := range sortedKeys(r.Skipped) {
		fmt.Fprintf(w, "  not injected: %s: %s\n", k, r.Skipped[k])
	}
	fmt.Fprintf(w, "jobs:     %d in the store, %d logged enqueues; %s\n", r.Jobs, r.Logged, kv(r.States))
	fmt.Fprintf(w, "waiting:  %s\n", kv(r.Waiting))
	fmt.Fprintf(w, "sink:     %d deliveries, %d redeliveries; late remote outcomes %d (%d fenced); lease lost logged %d; cron ticks %d, longest gap %s\n",
		r.Deliveries, r.Redeliveries, r.StaleAcks, r.StaleAcksFenced, r.LeaseLostLogged, r.CronTicks, r.CronMaxGap)
	fmt.Fprintf(w, "history:  %d operations on the linear queue", r.HistoryOps)
	if r.History != "" {
		fmt.Fprintf(w, "; not checked: %s", r.History)
	}
	fmt.Fprintln(w)
	for _, i := range r.Invariants {
		mark := "ok  "
		switch {
		case !i.OK:
			mark = "FAIL"
		case i.NotChecked != "":
			mark = "skip"
		}
		fmt.Fprintf(w, "  %s %s", mark, i.Name)
		if !i.OK {
			fmt.Fprintf(w, " (%d violations)", len(i.Violations))
		}
		fmt.Fprintln(w)
		for n, v := range i.Violations {
			if n == 5 {
				fmt.Fprintf(w, "       ... %d more (--json lists all)\n", len(i.Violations)-5)
				break
			}
			fmt.Fprintf(w, "       %s: %s\n", v.JobID, v.Detail)
		}
	}
	if !r.OK() {
		fmt.Fprintf(w, "VIOLATIONS in jobs: %s\n", strings.Join(r.ViolatingIDs(), " "))
	}
	if r.Dir != nil {
		fmt.Fprintf(w, "files: %s\n", *r.Dir)
	}
}

func kv(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}
