// Command errand-chaos runs errand's fault harness: worker processes, remote
// API workers and a seeded load against a store while a seeded nemesis
// injects faults, then checks errand's invariants and prints a report.
//
//	go run ./chaos/cmd/errand-chaos -store sqlite -duration 5m -seed 7
//	go run ./chaos/cmd/errand-chaos -store postgres -pg-url postgres://postgres@127.0.0.1:5432/test -duration 30m -seed 7 --json
//
// Exit 0 when every invariant held, 1 on a violation (the job ids are
// printed) or a harness failure, 2 on a usage error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/errandhq/errand/chaos"
)

func main() {
	if code, ok := chaos.RunRole(); ok {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("errand-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg chaos.Config
	fs.StringVar(&cfg.Store, "store", "sqlite", "the store under test: `sqlite` or postgres")
	fs.StringVar(&cfg.PostgresURL, "pg-url", os.Getenv("ERRAND_TEST_POSTGRES_URL"), "PostgreSQL server `URL` (a schema of the run's own is made and dropped); default $ERRAND_TEST_POSTGRES_URL")
	fs.BoolVar(&cfg.PGPrivate, "pg-private", false, "start a PostgreSQL cluster of the run's own (initdb, pg_ctl), so the nemesis can restart it")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the load and the nemesis's schedule")
	fs.DurationVar(&cfg.Duration, "duration", 0, "how long the load and the faults run, e.g. 5m (required)")
	fs.IntVar(&cfg.Workers, "workers", 3, "errand work processes")
	fs.IntVar(&cfg.RemoteWorkers, "remote-workers", 2, "workers claiming through errand serve's JSON API")
	fs.Float64Var(&cfg.Rate, "rate", 8, "enqueues per second")
	fs.DurationVar(&cfg.Lease, "lease", 0, "every worker's lease (default 3s)")
	faults := fs.String("faults", "", "comma-separated faults to inject (default all): "+strings.Join(chaos.FaultKinds, ","))
	fs.StringVar(&cfg.Dir, "dir", "", "keep the run's files in `DIR` (default a temporary directory, removed after a clean run)")
	fs.StringVar(&cfg.ErrandBin, "errand", "", "a built errand `binary` (default: go build ./cmd/errand)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	verbose := fs.Bool("v", false, "log progress to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: errand-chaos -duration DUR [-store sqlite|postgres] [-pg-url URL | -pg-private] [-seed N] [-faults LIST] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "errand-chaos takes no arguments, got %q; see -h\n", fs.Args())
		return 2
	}
	if cfg.Duration <= 0 {
		fmt.Fprintln(stderr, "give -duration, e.g. -duration 5m")
		return 2
	}
	if *faults != "" {
		cfg.Faults = strings.Split(*faults, ",")
	}
	self, err := os.Executable()
	if err == nil {
		cfg.Self = []string{self}
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if *verbose {
		cfg.Logf = func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "errand-chaos:", err)
		if errors.As(err, new(*chaos.UsageError)) {
			return 2
		}
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		rep.Write(stdout)
	}
	if !rep.OK() {
		fmt.Fprintf(stderr, "errand-chaos: invariants violated by %s\n", strings.Join(rep.ViolatingIDs(), " "))
		return 1
	}
	return 0
}
