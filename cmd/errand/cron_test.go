//go:build unix

package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestCronOneJobPerTickAcrossProcesses runs three errand work processes
// with the same one-second schedule, kills one with SIGKILL halfway and
// starts it again, and checks that every tick from the first to the last
// has exactly one job: none repeated, none lost.
func TestCronOneJobPerTickAcrossProcesses(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		// The jobs are of a kind no worker runs, so they stay queued to
		// be counted.
		args := []string{"--exec", "other=true", "--cron", `tick=@every 1s tock {"n": 1}`, "--poll", "200ms"}
		var ws []*workerProc
		for range 3 {
			ws = append(ws, startWorker(t, db, args...).ready())
		}
		time.Sleep(5 * time.Second)
		ws[1].signal(syscall.SIGKILL)
		ws[1].wait(10 * time.Second)
		ws[1] = startWorker(t, db, args...).ready()
		time.Sleep(5 * time.Second)
		for _, w := range ws {
			w.signal(syscall.SIGTERM)
		}
		for _, w := range ws {
			if code := w.wait(30 * time.Second); code != 0 {
				t.Fatalf("worker exited %d", code)
			}
		}

		c := openTestClient(t, db)
		js, err := c.List(context.Background(), &errand.ListOpts{Kind: "tock", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		perTick := map[time.Time]int{}
		var ticks []time.Time
		for _, j := range js {
			if j.UniqueKey == nil || !strings.HasPrefix(*j.UniqueKey, "errand.cron:tick:") {
				t.Fatalf("job %s has unique key %v, want errand.cron:tick:TICK", j.ID, j.UniqueKey)
			}
			tick, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(*j.UniqueKey, "errand.cron:tick:"))
			if err != nil {
				t.Fatal(err)
			}
			if string(j.Args) != `{"n": 1}` && string(j.Args) != `{"n":1}` {
				t.Errorf("job %s args %s, want {\"n\": 1}", j.ID, j.Args)
			}
			if perTick[tick]++; perTick[tick] == 1 {
				ticks = append(ticks, tick)
			}
		}
		slices.SortFunc(ticks, time.Time.Compare)
		for tick, n := range perTick {
			if n != 1 {
				t.Errorf("tick %s has %d jobs, want 1", tick.Format(time.RFC3339), n)
			}
		}
		// About ten seconds of ticks; the edges depend on how fast the
		// processes started and stopped.
		if len(ticks) < 8 {
			t.Fatalf("%d ticks over about ten seconds: %v", len(ticks), ticks)
		}
		for i := 1; i < len(ticks); i++ {
			if d := ticks[i].Sub(ticks[i-1]); d != time.Second {
				t.Errorf("ticks %s and %s are %s apart: a tick was lost", ticks[i-1].Format(time.RFC3339), ticks[i].Format(time.RFC3339), d)
			}
		}

		// errand schedules shows the last tick and its job.
		r := ok(t, cli(t, "schedules", "--db", db, "--json"))
		var recs []errandtype.ScheduleRecord
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			t.Fatalf("schedules --json: %v\n%s", err, r.stdout)
		}
		last := ticks[len(ticks)-1]
		if len(recs) != 1 || recs[0].Name != "tick" || recs[0].Spec != "@every 1s" || recs[0].Kind != "tock" ||
			recs[0].LastFireAt == nil || !recs[0].LastFireAt.Equal(last) || !recs[0].NextFireAt.Equal(last.Add(time.Second)) ||
			recs[0].LastJobID == nil {
			t.Fatalf("schedules --json = %s, want tick last fired at %s", r.stdout, last.Format(time.RFC3339))
		}
		lastJob := ""
		for _, j := range js {
			if *j.UniqueKey == errand.ScheduleUniqueKey("tick", last) {
				lastJob = j.ID
			}
		}
		if *recs[0].LastJobID != lastJob {
			t.Fatalf("last job %s, want %s, the job of the last tick", *recs[0].LastJobID, lastJob)
		}
		t.Logf("%s: %d ticks, %s to %s, one job each", store, len(ticks), ticks[0].Format(time.RFC3339), last.Format(time.RFC3339))
	})
}

func TestSchedulesCommand(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	if r := ok(t, cli(t, "schedules", "--db", db)); r.stdout != "no schedules\n" {
		t.Errorf("schedules on none printed %q", r.stdout)
	}
	if r := ok(t, cli(t, "schedules", "--db", db, "--json")); r.stdout != "[]\n" {
		t.Errorf("schedules --json on none printed %q", r.stdout)
	}

	c := openTestClient(t, db)
	st := c.Store().(errandstore.ScheduleStore)
	next := time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC)
	if _, err := st.ScheduleUpsert(context.Background(), &errandstore.ScheduleUpsertParams{Name: "nightly",
		Spec: "CRON_TZ=Europe/Paris 0 9 * * *", Kind: "cleanup", Queue: "maint", Missed: errandtype.MissedCatchUp, NextFireAt: next}); err != nil {
		t.Fatal(err)
	}
	r := ok(t, cli(t, "schedules", "--db", db))
	line := findLine(r.stdout, "nightly", "CRON_TZ=Europe/Paris 0 9 * * *", "cleanup", "maint", "2030-01-01T08:00:00Z", "catch_up")
	if line == "" || !strings.HasPrefix(r.stdout, "NAME") {
		t.Fatalf("schedules printed\n%s", r.stdout)
	}
	if r := cli(t, "schedules", "--db", db, "extra"); r.code != 2 {
		t.Errorf("schedules with an argument: %s", r)
	}
}

func TestWorkCronUsage(t *testing.T) {
	db := tempDB(t)
	for _, args := range [][]string{
		{"--cron", "nightly"},
		{"--cron", "n=61 * * * * k"},
		{"--cron", "n=@every 100ms k"},
		{"--cron", "n=@hourly k", "--cron", "n=@daily k"},
		{"--cron", "n=@hourly k", "--once"},
	} {
		r := cli(t, append([]string{"work", "--db", db, "--exec", "k=true"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--cron") {
			t.Errorf("work %v: %s; want a usage error about --cron", args, r)
		}
	}
}
