package sim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
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

// defaultSeeds is the default range on SQLite, a thousand seeds: a seed of
// 100 steps costs about 0.1 s of CPU, spread over the CPUs; PostgreSQL runs
// pgSeedsDiv times fewer.
const (
	defaultSeeds = 1000
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

// openFunc opens a seed's store; the store's Close and the test's cleanup
// dispose of it.
type openFunc func(t *testing.T, seed uint64, clock *errandtest.Clock) (errandstore.Store, error)

// runSeeds runs the seeds, spread over one goroutine a CPU (each seed is a
// run of its own, so the spread changes no result), and returns the events
// of their runs, summed.
func runSeeds(t *testing.T, ss []uint64, open openFunc) map[string]int {
	start := time.Now()
	shards := min(runtime.GOMAXPROCS(0), len(ss))
	found := make([]map[string]int, shards)
	failed := make([]error, shards)
	var wg sync.WaitGroup
	for i := range shards {
		wg.Go(func() {
			found[i] = map[string]int{}
			for j := i; j < len(ss); j += shards {
				if failed[i] = runSeed(t, ss[j], open, found[i]); failed[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range failed {
		if err != nil {
			t.Fatal(err)
		}
	}
	events := map[string]int{}
	for _, f := range found {
		for e, n := range f {
			events[e] += n
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

// runSeed runs one seed, adding its events to events.
func runSeed(t *testing.T, seed uint64, open openFunc, events map[string]int) error {
	clock := errandtest.NewClock(sim.Epoch)
	st, err := open(t, seed, clock)
	if err != nil {
		return fmt.Errorf("seed %d: open: %w", seed, err)
	}
	r, err := sim.Run(t.Context(), sim.Config{Store: st, Clock: clock, Seed: seed, Steps: *stepsFlag})
	st.Close()
	var f *sim.Failure
	if errors.As(err, &f) {
		return f
	}
	if err != nil {
		return fmt.Errorf("seed %d: %w", seed, err)
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
	return nil
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

// openSQLite opens each seed's store on a fresh file in dir, removed when
// the seed is done: a copy of a file migrated once, since migrating costs
// more than a short seed.
func openSQLite(dir string) openFunc {
	template := sync.OnceValues(func() ([]byte, error) {
		path := filepath.Join(dir, "template.db")
		s, err := sqlite.Open(context.Background(), path, nil)
		if err != nil {
			return nil, err
		}
		if err := s.Close(); err != nil {
			return nil, err
		}
		return os.ReadFile(path)
	})
	return func(t *testing.T, seed uint64, clock *errandtest.Clock) (errandstore.Store, error) {
		db, err := template()
		if err != nil {
			return nil, fmt.Errorf("migrate the template: %w", err)
		}
		path := filepath.Join(dir, fmt.Sprintf("sim-%d.db", seed))
		if err := os.WriteFile(path, db, 0o600); err != nil {
			return nil, err
		}
		s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: clock, Synchronous: "NORMAL"})
		if err != nil {
			return nil, err
		}
		return removing{s, path}, nil
	}
}

// removing is a SQLite store whose Close removes its files.
type removing struct {
	*sqlite.Store
	path string
}

func (r removing) Close() error {
	err := r.Store.Close()
	for _, f := range []string{r.path, r.path + "-wal", r.path + "-shm"} {
		if rerr := os.Remove(f); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
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
		st, err := openSQLite(t.TempDir())(t, 7, clock)
		if err != nil {
			t.Fatal(err)
		}
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
	_ = runSeeds(t, pgSeeds(), func(t *testing.T, seed uint64, clock *errandtest.Clock) (errandstore.Store, error) {
		return postgres.Open(context.Background(), url, &postgres.Options{Clock: clock, Schema: pgtest.Schema(t, url)})
	})
}
