package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// defaultDemoDB is the demo's own database, recreated on every run so the
// demo never touches the jobs of ./errand.db.
const defaultDemoDB = "./errand-demo.db"

var demoCommand = &command{
	name:    "demo",
	args:    "[flags]",
	summary: "enqueue, work and list a few jobs on a fresh demo database",
	detail: `
The demo runs three jobs of built-in kinds: one succeeds, one fails once
with a retryable error and succeeds on its retry, and one fails
permanently and is dead-lettered. It works them until none is left, then
prints the jobs and the queue summary. The database (default
` + defaultDemoDB + `) is recreated on every run; inspect it afterwards with
the other subcommands and --db.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := fs.String("db", defaultDemoDB, "the demo's SQLite file `PATH`, recreated on every run")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; demo takes only --db", pos[0])
			}
			if strings.TrimSpace(*db) == "" {
				// Empty, --db would fall back to $ERRAND_DB or ./errand.db:
				// real jobs, which the demo must never touch.
				return usagef("--db is empty; give the demo's own file path, or leave --db out for %s", defaultDemoDB)
			}
			if isPostgres(*db) {
				return usagef("the demo runs on SQLite only; give --db a file path, or leave it out for %s", defaultDemoDB)
			}
			if err := removeDemoDB(ctx, *db); err != nil {
				return err
			}
			st, err := openSQLite(ctx, *db, mayCreate)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.DB().ExecContext(ctx, `CREATE TABLE `+demoMarker+` (note TEXT)`); err != nil {
				return fmt.Errorf("mark demo database: %w", err)
			}
			return runDemo(ctx, e.stdout, st, *db)
		}
	},
}

// demoMarker is a table only demo databases have: the demo deletes a file
// only when it finds it, so --db pointed at real jobs cannot destroy them.
const demoMarker = "errand_demo"

// removeDemoDB deletes an earlier demo database, and refuses to delete any
// other file.
func removeDemoDB(ctx context.Context, path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ok, err := isDemoDB(ctx, path)
	if err != nil || !ok {
		return fmt.Errorf("%s exists and is not a database an earlier demo made; the demo deletes and recreates its database, so give it another --db path", path)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("recreate demo database: %w", err)
		}
	}
	return nil
}

func isDemoDB(ctx context.Context, path string) (bool, error) {
	// The sqlite package registers the "sqlite3" driver.
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return false, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, demoMarker).Scan(&n)
	return n == 1, err
}

// The demo's kinds run in this process: errand work --exec does the same
// with an external command. Each args type names its kind.

type greetArgs struct {
	Name string `json:"name"`
}

func (greetArgs) Kind() string { return "greet" }

type flakyArgs struct {
	FailTimes int `json:"fail_times"`
}

func (flakyArgs) Kind() string { return "flaky" }

type chargeArgs struct {
	Card string `json:"card"`
}

func (chargeArgs) Kind() string { return "charge" }

func demoKinds() *errand.Kinds {
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args greetArgs) error {
		return nil
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args flakyArgs) error {
		if job.Attempt <= args.FailTimes {
			return errand.WithClass("upstream_unavailable", errors.New("the upstream service answered 503"))
		}
		return nil
	}, nil)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args chargeArgs) error {
		return errand.Permanent(errand.WithClass("card_declined", errors.New("the card was declined: retrying cannot change that")))
	}, nil)
	return kinds
}

func runDemo(ctx context.Context, w io.Writer, st *sqlite.Store, path string) error {
	c, err := errand.NewClient(st, &errand.Config{Kinds: demoKinds(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	if err := demoEnqueue(ctx, w, c, path); err != nil {
		return err
	}
	deadID, err := demoWork(ctx, w, c)
	if err != nil {
		return err
	}
	if err := demoReport(ctx, w, c); err != nil {
		return err
	}
	if deadID != "" {
		fmt.Fprintf(w, "\nthe dead job keeps its args and every attempt's error; look at it, and replay it:\n")
		fmt.Fprintf(w, "  %s inspect %s --db %s\n", progName(), deadID, path)
		fmt.Fprintf(w, "  %s replay %s --reason \"card updated\" --db %s\n", progName(), deadID, path)
	}
	return nil
}

// demoEnqueue enqueues the demo's three jobs and says what each will do.
func demoEnqueue(ctx context.Context, w io.Writer, c *errand.Client[*sql.Tx], path string) error {
	// A short backoff so the retry comes round within the demo.
	fast := &errand.EnqueueOpts{BackoffBase: 300 * time.Millisecond, BackoffMax: time.Second}
	jobs := []struct {
		args  errand.JobArgs
		about string
	}{
		{greetArgs{Name: "Ada"}, "succeeds"},
		{flakyArgs{FailTimes: 1}, "fails once with a retryable error, then succeeds"},
		{chargeArgs{Card: "4000-0000-0000-0002"}, "fails permanently and is dead-lettered"},
	}
	params := make([]errand.EnqueueParams, len(jobs))
	for i, j := range jobs {
		params[i] = errand.EnqueueParams{Args: j.args, Opts: fast}
	}
	res, err := c.EnqueueMany(ctx, params)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "errand demo: a fresh database at %s\n\nenqueued %d jobs:\n", path, len(res))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, r := range res {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", jobs[i].args.Kind(), r.Job.ID, jobs[i].about)
	}
	return tw.Flush()
}

// demoWork works the jobs one at a time, waiting for retries to come due,
// prints each attempt and returns the id of the job that died.
func demoWork(ctx context.Context, w io.Writer, c *errand.Client[*sql.Tx]) (deadID string, err error) {
	fmt.Fprintf(w, "\nworking them one at a time:\n")
	for range 20 {
		r, err := c.WorkOne(ctx, &errand.WorkOneOpts{Lease: 10 * time.Second})
		if err != nil {
			return "", err
		}
		if r.Result == errand.ResultIdle {
			wait, more, err := untilNextDue(ctx, c)
			if err != nil || !more {
				break
			}
			fmt.Fprintf(w, "  (waiting %s for the retry to come due)\n", approx(wait))
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		line := fmt.Sprintf("  %-7s attempt %d  %s", r.Kind, r.Attempt, r.Result)
		if r.Class != "" {
			line += ", class " + r.Class
		}
		if r.AvailableAt != nil {
			now, _ := c.Store().Now(ctx)
			line += ", runs again " + relative(now, *r.AvailableAt)
		}
		if r.Result == errand.ResultDead {
			deadID = *r.JobID
		}
		fmt.Fprintln(w, line)
	}
	return deadID, nil
}

// demoReport prints the jobs and queues as errand list and errand stats
// would.
func demoReport(ctx context.Context, w io.Writer, c *errand.Client[*sql.Tx]) error {
	all, err := c.List(ctx, nil)
	if err != nil {
		return err
	}
	now, err := c.Store().Now(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\njobs:\n")
	if err := writeJobsTable(w, all, now); err != nil {
		return err
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nqueues:\n")
	return writeStatsTable(w, stats)
}

// untilNextDue returns how long until the next queued or retrying job is
// due, and whether there is one.
func untilNextDue(ctx context.Context, c *errand.Client[*sql.Tx]) (time.Duration, bool, error) {
	waiting, err := c.List(ctx, &errand.ListOpts{States: errandstore.WaitingStates})
	if err != nil || len(waiting) == 0 {
		return 0, false, err
	}
	now, err := c.Store().Now(ctx)
	if err != nil {
		return 0, false, err
	}
	next := waiting[0].AvailableAt
	for _, j := range waiting[1:] {
		if j.AvailableAt.Before(next) {
			next = j.AvailableAt
		}
	}
	wait := max(next.Sub(now), 0) + 10*time.Millisecond
	return wait, true, nil
}

// progName is how the user ran errand, for commands the demo suggests:
// "go run ./cmd/errand" when go run built it into a temporary directory.
func progName() string {
	if strings.Contains(os.Args[0], "go-build") {
		return "go run ./cmd/errand"
	}
	return "errand"
}
