package sim_test

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/chaos/sim"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

var (
	seedFlag  = flag.Int64("seed", -1, "run only this seed, printing its trace (reproduces a failure)")
	startFlag = flag.Uint64("sim.start", 1, "first seed of the range")
	seedsFlag = flag.Int("sim.seeds", 0, "number of seeds to run on SQLite (0: the default range); PostgreSQL runs a tenth as many")
	stepsFlag = flag.Int("sim.steps", sim.DefaultSteps, "operations per seed")
)

// defaultSeeds is the default range on SQLite, sized for 30 to 60 seconds
// on a 2-core machine (a seed of 100 steps takes about 0.1 s when the
// machine is quiet); PostgreSQL runs pgSeedsDiv times fewer.
const (
	defaultSeeds = 400
	pgSeedsDiv   = 10
)

// seeds returns the seeds to run: -seed alone, or a range of n (-sim.seeds
// unless set).
func seeds(n int) []uint64 {
	if *seedFlag >= 0 {
		return []uint64{uint64(*seedFlag)}
	}
	if *seedsFlag > 0 {
		n = *seedsFlag
	} else {
		n = max(2, n/raceDiv)
	}
	ss := make([]uint64, n)
	for i := range ss {
		ss[i] = *startFlag + uint64(i)
	}
	return ss
}

// pgSeeds returns the seeds to run on PostgreSQL: a tenth of SQLite's.
func pgSeeds() []uint64 {
	if *seedsFlag > 0 && *seedFlag < 0 {
		ss := seeds(0)
		return ss[:max(1, len(ss)/pgSeedsDiv)]
	}
	return seeds(defaultSeeds / pgSeedsDiv)
}

type openFunc func(t *testing.T, seed uint64, clock *errandtest.Clock) errandstore.Store

// runSeeds runs the seeds and returns the events of their runs, summed.
func runSeeds(t *testing.T, ss []uint64, open openFunc) map[string]int {
	start := time.Now()
	events := map[string]int{}
	for _, seed := range ss {
		clock := errandtest.NewClock(sim.Epoch)
		st := open(t, seed, clock)
		r, err := sim.Run(t.Context(), sim.Config{Store: st, Clock: clock, Seed: seed, Steps: *stepsFlag})
		st.Close()
		var f *sim.Failure
		if errors.As(err, &f) {
			t.Fatal(f)
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for e, n := range r.Events {
			events[e] += n
		}
		if *seedFlag >= 0 {
			for _, l := range r.Trace {
				t.Log(l)
			}
			t.Logf("seed %d: %d steps, %d jobs, ops %v", seed, r.Steps, r.Jobs, r.Ops)
		}
	}
	el := time.Since(start)
	t.Logf("%d seeds from %d, %d steps each, in %s (%s a seed)", len(ss), ss[0], *stepsFlag, el.Round(time.Millisecond), (el / time.Duration(len(ss))).Round(time.Microsecond))
	names := slices.Sorted(maps.Keys(events))
	for _, e := range names {
		t.Logf("%6d  %s", events[e], e)
	}
	return events
}

// mustHappen are the events a default range must exercise: a simulation
// that stopped producing them would pass without checking what they
// check. A run is deterministic, so their counts are too.
var mustHappen = []string{
	sim.EventDuplicate, sim.EventHeartbeatFenced, sim.EventOutcomeFenced, sim.EventReplayKeyHeld,
	"sweep running to retrying", "sweep running to dead", "sweep running to cancelled",
	"sweep queued past its deadline to dead", "sweep retrying past its deadline to dead",
	"outcome retry to cancelled", "outcome snooze to queued", "outcome interrupted to queued",
	"cancel running to running", "cancel queued to cancelled", "replay dead", "replay cancelled",
}

func checkCoverage(t *testing.T, events map[string]int) {
	if *seedFlag >= 0 || *seedsFlag > 0 || raceDiv > 1 {
		return // not the default range
	}
	for _, e := range mustHappen {
		if events[e] == 0 {
			t.Errorf("the default seed range never got to %q", e)
		}
	}
}

// openSQLite opens each seed's store on a fresh file in dir, removing the
// previous seed's.
func openSQLite(dir string) openFunc {
	return func(t *testing.T, seed uint64, clock *errandtest.Clock) errandstore.Store {
		path := filepath.Join(dir, "sim.db")
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
		s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: clock, Synchronous: "NORMAL"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestSimSQLite(t *testing.T) {
	checkCoverage(t, runSeeds(t, seeds(defaultSeeds), openSQLite(t.TempDir())))
}

// TestSimDeterministic checks what reproducing a seed relies on: a seed
// runs the same operations, with the same results, every time.
func TestSimDeterministic(t *testing.T) {
	var traces [2][]string
	for i := range traces {
		clock := errandtest.NewClock(sim.Epoch)
		st := openSQLite(t.TempDir())(t, 7, clock)
		r, err := sim.Run(t.Context(), sim.Config{Store: st, Clock: clock, Seed: 7})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		traces[i] = r.Trace
	}
	if !slices.Equal(traces[0], traces[1]) {
		t.Fatalf("seed 7 ran differently twice:\n%s\n---\n%s", strings.Join(traces[0], "\n"), strings.Join(traces[1], "\n"))
	}
}

func TestSimPostgres(t *testing.T) {
	url := pgtest.URL(t)
	_ = runSeeds(t, pgSeeds(), func(t *testing.T, seed uint64, clock *errandtest.Clock) errandstore.Store {
		s, err := postgres.Open(context.Background(), url, &postgres.Options{Clock: clock, Schema: pgtest.Schema(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
