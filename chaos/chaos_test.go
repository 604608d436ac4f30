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
)

func TestMain(m *testing.M) {
	// The harness starts its clock-skewed worker as this binary.
	if code, ok := chaos.RunRole(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

var (
	buildOnce sync.Once
	errandBin string
	buildErr  error
)

// errandBinary builds cmd/errand once for the tests of this package.
func errandBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "errand-chaos-bin-")
		if err != nil {
			buildErr = err
			return
		}
		errandBin = filepath.Join(dir, "errand")
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
	cfg.Duration = 40 * time.Second
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
	if rep.Faults["kill_worker"]+rep.Faults["stop_worker"] == 0 || rep.Ops["enqueued"] == 0 {
		t.Fatalf("the run injected no process fault or enqueued nothing:\n%s", b.String())
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
