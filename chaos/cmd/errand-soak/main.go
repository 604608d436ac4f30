package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad input: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// config is the command's flags.
type config struct {
	store    string
	pgURL    string
	private  bool
	duration time.Duration
	rate     int
	workers  int
	sample   time.Duration
	dir      string
	errand   string
	json     bool
}

// parse reads the flags and checks them.
func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("errand-soak", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &config{}
	fs.StringVar(&c.store, "store", "", "store to soak: `sqlite` or postgres")
	fs.StringVar(&c.pgURL, "pg-url", os.Getenv("ERRAND_TEST_POSTGRES_URL"), "PostgreSQL `URL` for -store postgres (default $ERRAND_TEST_POSTGRES_URL)")
	fs.BoolVar(&c.private, "pg-private", false, "run PostgreSQL as a private cluster at its default settings (autovacuum on) instead of -pg-url")
	fs.DurationVar(&c.duration, "duration", time.Hour, "how long to run, `DUR`")
	fs.IntVar(&c.rate, "rate", 200, "jobs enqueued per second, `N`")
	fs.IntVar(&c.workers, "workers", 2, "errand work processes, `N`")
	fs.DurationVar(&c.sample, "sample", 30*time.Second, "sample every `DUR`")
	fs.StringVar(&c.dir, "dir", "", "keep the run in `DIR`: database, logs, samples.csv (and the PostgreSQL schema)")
	fs.StringVar(&c.errand, "errand", "", "run the errand binary at `PATH` (default: build ./cmd/errand)")
	fs.BoolVar(&c.json, "json", false, "print the report as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: errand-soak -store sqlite|postgres [-pg-url URL | -pg-private] [-duration 1h] [-rate 200] [-workers 2] [-sample 30s] [-dir DIR] [-errand PATH] [--json]")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil, usagef("")
		}
		return nil, usagef("%v; see errand-soak -h", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: errand-soak takes flags only", fs.Arg(0))
	}
	switch c.store {
	case "sqlite":
		if c.private {
			return nil, usagef("-pg-private is for -store postgres")
		}
	case "postgres":
		if c.private {
			break
		}
		if !strings.HasPrefix(c.pgURL, "postgres://") && !strings.HasPrefix(c.pgURL, "postgresql://") {
			return nil, usagef("-store postgres needs -pg-url postgres://user@host:5432/db (or ERRAND_TEST_POSTGRES_URL), or -pg-private")
		}
	case "":
		return nil, usagef("give -store sqlite or -store postgres")
	default:
		return nil, usagef("-store %q: use sqlite or postgres", c.store)
	}
	switch {
	case c.rate < 1 || c.rate > 10000:
		return nil, usagef("-rate %d: give 1 to 10000 jobs a second", c.rate)
	case c.workers < 1 || c.workers > 16:
		return nil, usagef("-workers %d: give 1 to 16", c.workers)
	case c.sample < 500*time.Millisecond:
		return nil, usagef("-sample %s is too short: give at least 500ms", c.sample)
	case c.duration < minSamples*c.sample:
		return nil, usagef("-duration %s gives fewer than %d samples of -sample %s: lengthen -duration or shorten -sample", c.duration, minSamples, c.sample)
	}
	if c.errand != "" {
		if fi, err := os.Stat(c.errand); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, usagef("-errand %s is not an executable file: give the path of a built errand, or leave -errand out to build ./cmd/errand", c.errand)
		}
	}
	return c, nil
}

// run is the command: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.msg != "" {
			fmt.Fprintln(stderr, "errand-soak:", ue.msg)
		}
		return 2
	}
	rep, err := soak(ctx, cfg, stderr)
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "errand-soak:", ue.msg)
		return 2
	}
	if rep != nil {
		werr := rep.writeText
		if cfg.json {
			werr = rep.writeJSON
		}
		if err := werr(stdout); err != nil {
			fmt.Fprintln(stderr, "errand-soak:", err)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "errand-soak:", err)
		return 1
	}
	if len(rep.Grew) > 0 {
		fmt.Fprintf(stderr, "errand-soak: grew: %s\n", strings.Join(rep.Grew, ", "))
		return 1
	}
	return 0
}
