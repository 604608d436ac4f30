package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/chaos"
	"github.com/errandhq/errand/chaos/pgtopology"
)

func TestMain(m *testing.M) {
	// The harness starts its clock-skewed worker as this binary.
	if code, ok := chaos.RunRole(); ok {
		os.Exit(code)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	errandBin string
	buildErr  error
)

// errandBinary builds cmd/errand once for the tests of this package.
func errandBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "errand-chaos-bin-"); err != nil {
			buildErr = err
			return
		}
		errandBin = filepath.Join(binDir, "errand")
		out, err := exec.Command("go", "build", "-o", errandBin, "github.com/errandhq/errand/cmd/errand").CombinedOutput()
		if err != nil {
			buildErr = err
			errandBin = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/errand: %v: %s", buildErr, errandBin)
	}
	return errandBin
}

// short runs the harness for about a minute with a fixed seed and fails
// with the report on any violation.
func short(t *testing.T, cfg chaos.Config) {
	if testing.Short() {
		t.Skip("the chaos run takes about a minute; -short leaves it out")
	}
	cfg.Seed = 20261205
	if cfg.Duration == 0 {
		cfg.Duration = 40 * time.Second
	}
	cfg.ErrandBin = errandBinary(t)
	cfg.Self = []string{os.Args[0]}
	cfg.Logf = t.Logf
	rep, err := chaos.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	if !rep.OK() {
		t.Fatalf("invariants violated:\n%s", b.String())
	}
	faults := cfg.Faults
	if faults == nil {
		faults = chaos.FaultKinds
	}
	for _, f := range faults {
		if _, skipped := rep.Skipped[f]; !skipped && rep.Faults[f] == 0 {
			t.Fatalf("the run never injected %s:\n%s", f, b.String())
		}
	}
	if rep.Ops["enqueued"] == 0 {
		t.Fatalf("the run enqueued nothing:\n%s", b.String())
	}
	t.Logf("\n%s", b.String())
}

func TestChaosSQLite(t *testing.T) {
	short(t, chaos.Config{Store: "sqlite"})
}

func TestChaosPostgres(t *testing.T) {
	url := os.Getenv("ERRAND_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("ERRAND_TEST_POSTGRES_URL is not set")
	}
	short(t, chaos.Config{Store: "postgres", PostgresURL: url})
}

// TestChaosPostgresRestart restarts a PostgreSQL cluster of the run's own
// under load: the one fault the shared server cannot take.
func TestChaosPostgresRestart(t *testing.T) {
	if err := pgtopology.Available(); err != nil {
		t.Skip(err)
	}
	short(t, chaos.Config{Store: "postgres", PGPrivate: true, Duration: 20 * time.Second,
		Faults: []string{"db_restart", "db_terminate", "conn_cut", "kill_worker"}})
}
