package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

func TestParseUniqueScope(t *testing.T) {
	for _, c := range []struct {
		in   string
		want errandtype.UniqueScope
		name string // String of the result
		bad  bool
	}{
		{in: "always", want: errandtype.UniqueAlways, name: "always"},
		{in: "until_finished", want: errandtype.UniqueUntilFinished, name: "until_finished"},
		{in: "until-succeeded", want: errandtype.UniqueUntilSucceeded, name: "until_succeeded"},
		{in: "queued,running,retrying", want: errandtype.UniqueUntilFinished, name: "until_finished"},
		{in: "queued, running, retrying, succeeded", want: errand.UniqueScopeOf(errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying, errandtype.StateSucceeded), name: "queued,running,retrying,succeeded"},
		{in: "queued,retrying", bad: true},                   // leaves out running
		{in: "queued,running,retrying,cancelled", bad: true}, // cancelled without dead
		{in: "queued,running,retrying,paused", bad: true},    // no such state
		{in: "sometimes", bad: true},
	} {
		got, err := errandtype.ParseUniqueScope(c.in)
		if c.bad {
			if !errors.Is(err, errandtype.ErrInvalid) {
				t.Errorf("ParseUniqueScope(%q) = %v, %v; want an *InputError", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want || got.String() != c.name {
			t.Errorf("ParseUniqueScope(%q) = %v (%d), %v; want %s (%d)", c.in, got, got, err, c.name, c.want)
		}
	}
	if errandtype.UniqueScope(0).String() != "always" || !errandtype.UniqueScope(0).Holds(errandtype.StateSucceeded) {
		t.Error("the zero scope is not always")
	}
	b, err := json.Marshal(struct{ S errandtype.UniqueScope }{errandtype.UniqueUntilSucceeded})
	if err != nil || string(b) != `{"S":"until_succeeded"}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var back struct{ S errandtype.UniqueScope }
	if err := json.Unmarshal(b, &back); err != nil || back.S != errandtype.UniqueUntilSucceeded {
		t.Fatalf("unmarshal: %v, %v", back.S, err)
	}
}

// TestMigrationsSpellTheRulesPredicates: the last migration of each store
// that creates the unique or the ordering index spells its predicate
// exactly as the queries render it, without which SQLite reads the table
// instead of the index; and the last default it gives unique_states is
// UniqueAlways. A new state changes both, and its migrations must follow.
func TestMigrationsSpellTheRulesPredicates(t *testing.T) {
	indexes := map[string]string{
		"UNIQUE INDEX errand_jobs_unique ON": errandstore.UniqueHeldSQL(),
		"INDEX errand_jobs_ordering ON":      errandstore.OrderingIndexSQL(),
	}
	defaultRE := regexp.MustCompile(`unique_states[^;,\n]*DEFAULT (\d+)`)
	for _, store := range []string{"sqlite", "postgres"} {
		files, err := filepath.Glob(filepath.Join(store, "migrations", "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s migrations: %v", store, err)
		}
		last := map[string]string{} // what each index's or default's last migration says
		for _, f := range files {   // Glob sorts: migration order
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for index := range indexes {
				if strings.Contains(string(b), index) {
					last[index] = filepath.Base(f) + "\n" + string(b)
				}
			}
			if m := defaultRE.FindAllStringSubmatch(string(b), -1); m != nil {
				last["default"] = m[len(m)-1][1]
			}
		}
		for index, pred := range indexes {
			if !strings.Contains(last[index], "WHERE "+pred+";") {
				name, _, _ := strings.Cut(last[index], "\n")
				t.Errorf("%s migration %s, the last to create %s, does not spell %q", store, name, index, pred)
			}
		}
		if want := strconv.Itoa(int(errandtype.UniqueAlways)); last["default"] != want {
			t.Errorf("%s migrations default unique_states to %s, want UniqueAlways, %s", store, last["default"], want)
		}
	}
}

// TestUniqueUntilFinishedThroughTheClient: two processes' clients enqueue
// one key at once: one job. While it waits the key returns it; once a
// worker ran it to success the key enqueues a new job.
func TestUniqueUntilFinishedThroughTheClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	ok := func(context.Context, *errandtype.Job) error { return nil }
	clients := []*errand.Client[*sql.Tx]{
		handlerClient(t, openStoreAt(t, path, nil), ok),
		handlerClient(t, openStoreAt(t, path, nil), ok),
	}
	opts := &errand.EnqueueOpts{Unique: &errand.UniqueOpts{Key: "sync:acct-7", Scope: errandtype.UniqueUntilFinished}}
	race := func() *errandtype.Job {
		const n = 12
		results := make([]*errand.EnqueueResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = clients[i%2].Enqueue(context.Background(), errand.RawArgs{KindName: "task"}, opts)
			})
		}
		wg.Wait()
		fresh := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("enqueue %d: %v", i, errs[i])
			}
			if !results[i].Duplicate {
				fresh++
			}
			if results[i].Job.ID != results[0].Job.ID {
				t.Fatalf("enqueue %d returned job %s, enqueue 0 job %s", i, results[i].Job.ID, results[0].Job.ID)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d enqueues reported a new job, want exactly 1", fresh)
		}
		return results[0].Job
	}
	first := race()
	if r := workOne(t, clients[0], nil); r.Result != errand.ResultSucceeded || *r.JobID != first.ID {
		t.Fatalf("work one: %+v, want job %s succeeded", r, first.ID)
	}
	second := race()
	if second.ID == first.ID {
		t.Fatalf("after success the key returned the finished job %s", first.ID)
	}
	if n := count(t, clients[0].Store().(interface{ DB() *sql.DB }).DB(), `SELECT count(*) FROM errand_jobs`); n != 2 {
		t.Fatalf("%d jobs, want 2", n)
	}
}

func TestEnqueueUniqueAndOrderingOptions(t *testing.T) {
	st := openStore(t, nil)
	kinds := errand.NewKinds()
	kinds.HandleRaw("ledger", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }),
		&errand.KindOpts{OrderingOnDead: errand.OrderingHoldOnDead})
	kinds.HandleRaw("task", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
	c := newClient(t, st, &errand.Config{Kinds: kinds})
	ctx := context.Background()
	for _, bad := range []*errand.EnqueueOpts{
		{UniqueKey: "a", Unique: &errand.UniqueOpts{Key: "a"}},
		{Unique: &errand.UniqueOpts{Scope: errandtype.UniqueUntilFinished}},
		{Unique: &errand.UniqueOpts{Key: "a", Scope: errand.UniqueScopeOf(errandtype.StateQueued)}},
		{Unique: &errand.UniqueOpts{Key: "a", Window: -1}},
		{OrderingKey: "k", OrderingOnDead: 7},
	} {
		before := rowCounts(t, st.DB())
		if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "task"}, bad); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("enqueue with %+v: %v; want an *InputError", bad, err)
		}
		if after := rowCounts(t, st.DB()); after != before {
			t.Errorf("a rejected enqueue wrote rows: %v -> %v", before, after)
		}
	}
	for _, c1 := range []struct {
		kind string
		opt  errand.OrderingOnDead
		want bool
	}{
		{"ledger", errand.OrderingOnDeadDefault, true},
		{"ledger", errand.OrderingReleaseOnDead, false},
		{"task", errand.OrderingOnDeadDefault, false},
		{"task", errand.OrderingHoldOnDead, true},
	} {
		j := enqueue(t, c, c1.kind, &errand.EnqueueOpts{OrderingKey: "k", OrderingOnDead: c1.opt})
		if j.OrderingHold != c1.want {
			t.Errorf("kind %s with %s: OrderingHold %v, want %v", c1.kind, c1.opt, j.OrderingHold, c1.want)
		}
	}
	if j := enqueue(t, c, "ledger", nil); j.OrderingHold {
		t.Error("a job without an ordering key holds one")
	}
}
