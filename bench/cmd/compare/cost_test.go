package main

import (
	"context"
	"strings"
	"testing"

	"github.com/errandhq/errand/chaos/pgtopology"
)

// TestCost runs the cost measure on a few jobs on a private server and
// checks that every figure was computed and adds up: each job inserted
// once and updated twice (claim, ack), index entries and WAL counted,
// statements and client calls seen, each update followed to its row. It
// takes a couple of minutes: the statistics need 10 s to settle after
// each phase.
func TestCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server and waits for its statistics")
	}
	if err := pgtopology.Available(); err != nil {
		t.Skip(err)
	}
	const jobs = 300
	o, err := parseFlags([]string{"-cost", "-jobs", "300", "-reps", "1"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := measureCost(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.walinspect {
		t.Fatal("the private server has no pg_walinspect")
	}
	cpu := map[string]float64{}
	for v, cv := range costVariants {
		if len(rep.runs[v]) != 1 {
			t.Fatalf("%s: %d runs, want 1", cv.name, len(rep.runs[v]))
		}
		run := rep.runs[v][0]
		if len(run.indexes) == 0 {
			t.Errorf("%s: no indexes of %s listed", cv.name, cv.table)
		}
		for ph, phase := range costPhases {
			f := run.phases[ph]
			name := cv.name + " " + phase
			ins, upd, del := f["tab.ins."+cv.table], f["tab.upd."+cv.table], f["tab.del."+cv.table]
			wantIns, wantUpd, wantDel := float64(jobs), 0.0, 0.0
			switch {
			case phase == "work" && cv.deleting: // the claim updates, the ack deletes
				wantIns, wantUpd, wantDel = 0, jobs, jobs
			case phase == "work":
				wantIns, wantUpd = 0, 2*jobs
			}
			if ins != wantIns || upd != wantUpd || del != wantDel {
				t.Errorf("%s: %s rows inserted %v, updated %v, deleted %v; want %v, %v and %v", name, cv.table, ins, upd, del, wantIns, wantUpd, wantDel)
			}
			for _, k := range []string{"wal.records", "wal.bytes", "wal.write", "stmt.calls", "client.queries", "walinspect.n", "grow." + cv.table, "cpu.wall"} {
				if f[k] <= 0 {
					t.Errorf("%s: %s = %v, want more than 0", name, k, f[k])
				}
			}
			// CPU time is counted in ticks of 10 ms, which a phase of 300
			// jobs may not reach; it is never negative, and over every
			// run it is there.
			for _, k := range []string{"cpu.server", "cpu.client"} {
				if f[k] < 0 {
					t.Errorf("%s: %s = %v, want 0 or more", name, k, f[k])
				}
				cpu[k] += f[k]
			}
			if got := sum(f, "walrel.entries.", nil); got < jobs {
				t.Errorf("%s: %v index entries written, want at least one a job", name, got)
			}
			// The WAL read back is the WAL pg_stat_wal counted, give or
			// take a background process's report.
			if a, b := f["walinspect.n"], f["wal.records"]; a < 0.9*b || a > 1.1*b {
				t.Errorf("%s: %v WAL records read back, pg_stat_wal counted %v", name, a, b)
			}
			if phase != "work" {
				continue
			}
			// Every job's claim and ack, each followed to its row.
			var nth [3]float64
			for k, n := range f {
				if rest, ok := strings.CutPrefix(k, "sig."); ok {
					switch rest[:2] {
					case "1|":
						nth[1] += n
					case "2|":
						nth[2] += n
					default:
						nth[0] += n
					}
				}
			}
			want := [3]float64{0, jobs, jobs}
			if cv.deleting {
				want[2] = 0
			}
			if nth != want {
				t.Errorf("%s: updates by order in their row %v; want %v (none unplaced, then firsts and seconds)", name, nth, want)
			}
		}
	}
	if cpu["cpu.server"] <= 0 || cpu["cpu.client"] <= 0 {
		t.Errorf("CPU counted over every run: %v, want some of both", cpu)
	}
	var text, md strings.Builder
	tables := rep.tables()
	printCostTables(&text, rep.heading(), tables)
	writeCostMarkdown(&md, rep.heading(), tables)
	for _, want := range []string{"Enqueue, per job", "Work (claim, no-op, ack)", "errand_jobs and its indexes",
		"the claim", "the ack", "statements by calls", "WAL by record type", "WAL by relation"} {
		if !strings.Contains(text.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text.String())
	}
}

// TestWALAnalysis follows a row through two updates in pg_walinspect's
// words: the second on another page, and a HOT one.
func TestWALAnalysis(t *testing.T) {
	f := phaseFigures{}
	a := newWALAnalysis("jobs", f)
	a.db = 5
	a.rels[100] = walRel{name: "jobs"}
	a.rels[101] = walRel{name: "jobs_pkey", index: true, table: "jobs"}
	a.rels[102] = walRel{name: "jobs_state", index: true, table: "jobs"}
	for _, r := range []walRecord{
		{xid: 7, rmgr: "Heap", typ: "LOCK", length: 54, desc: "off 3: xid 7: flags 0x00 LOCK_ONLY EXCL_LOCK KEYS_UPDATED",
			blockRef: "blkref #0: rel 1663/5/100 fork main blk 0"},
		{xid: 7, rmgr: "Heap", typ: "UPDATE", length: 71, desc: "off 3 xmax 7 flags 0x60 ; new off 1 xmax 0",
			blockRef: "blkref #0: rel 1663/5/100 fork main blk 4 (FPW); hole: offset: 236, length: 804 blkref #1: rel 1663/5/100 fork main blk 0"},
		{xid: 7, rmgr: "Btree", typ: "INSERT_LEAF", length: 64, desc: "off 2", blockRef: "blkref #0: rel 1663/5/101 fork main blk 1"},
		{xid: 7, rmgr: "Btree", typ: "SPLIT_L", length: 900, desc: "level 0", blockRef: "blkref #0: rel 1663/5/102 fork main blk 1"},
		{xid: 7, rmgr: "Transaction", typ: "COMMIT", length: 34},
		{xid: 8, rmgr: "Heap", typ: "HOT_UPDATE", length: 69, desc: "off 1 xmax 8 flags 0x40 ; new off 2 xmax 0",
			blockRef: "blkref #0: rel 1663/5/100 fork main blk 4"},
		{xid: 9, rmgr: "Heap2", typ: "PRUNE", length: 60, blockRef: "blkref #0: rel 1663/1/1259 fork main blk 5"},
		{xid: 8, rmgr: "Transaction", typ: "COMMIT", length: 34},
	} {
		a.add(r)
	}
	a.finish()
	for k, want := range map[string]float64{
		"sig.1||moved|jobs_pkey, jobs_state": 1,
		"sig.2|HOT||":                        1,
		"walrow.moved":                       1,
		"walrel.entries.jobs_pkey":           1,
		"walrel.entries.jobs_state":          1,
		"walrel.fpi.jobs":                    1,
		"walrel.n.jobs":                      3,
		"walrel.n.(other relations)":         1,
		"walrel.n.(no relation)":             2,
		"walrec.n.Heap LOCK (LOCK_ONLY EXCL_LOCK KEYS_UPDATED)": 1,
		"walinspect.n":     8,
		"walinspect.bytes": 54 + 71 + 64 + 900 + 34 + 69 + 60 + 34,
	} {
		if f[k] != want {
			t.Errorf("%s = %v, want %v", k, f[k], want)
		}
	}
}

// TestProcCPU reads a process's CPU seconds from a /proc/PID/stat line,
// its ended children's included, whatever its name holds.
func TestProcCPU(t *testing.T) {
	line := "4242 (postgres: app db 127.0.0.1(5) idle) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 300 25 20 0 1 0 100 1000 10"
	comm, seconds, ok := procCPU(line)
	if !ok || comm != "postgres: app db 127.0.0.1(5) idle" || seconds != 5 {
		t.Errorf("procCPU = %q, %v, %v; want the name, 5 s (150+25+300+25 ticks), true", comm, seconds, ok)
	}
	for _, bad := range []string{"", "4242 postgres S 1", "4242 (postgres) S 1 2 3"} {
		if _, _, ok := procCPU(bad); ok {
			t.Errorf("procCPU(%q) read a line it should refuse", bad)
		}
	}
}
