package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
)

// Exit codes: main alone exits, with the code report chooses.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// usageError is bad input on the command line: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// report prints err as the one line an operator reads, escaped for the
// terminal (an error may quote a job's id or a command's stderr), and
// returns the exit code: 2 for bad input (ours or the library's), 1 for
// anything else.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "errand: "+printable(oneLine(err.Error())))
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, errandtype.ErrInvalid) {
		return exitUsage
	}
	return exitRuntime
}

// oneLine folds a multi-line message (a command's stderr, say) into one
// line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.TrimSpace(s)), " ")
}

// env is what every subcommand writes to.
type env struct {
	stdout io.Writer
	stderr io.Writer
	logger *slog.Logger
}

// command is one subcommand. setup declares its flags on fs and returns the
// function that runs it with the positional arguments; help calls setup
// only to list the flags.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string
	detail  string
	setup   func(fs *flag.FlagSet, e *env) func(ctx context.Context, pos []string) error
}

// commands in the order help lists them.
var commands []*command

func init() {
	commands = []*command{
		enqueueCommand, workCommand, workersCommand, schedulesCommand, limitsCommand, breakersCommand, pauseCommand, resumeCommand, pausesCommand, jobsCommand, inspectCommand, replayCommand,
		cancelCommand, signalCommand, batchesCommand, batchCommand, workflowsCommand, workflowCommand, pruneCommand, auditCommand, statsCommand, serveCommand, migrateCommand, benchCommand, demoCommand,
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Run runs the errand command line args (without the program name), writing
// results to stdout and logs to stderr. A nil error means success; report
// turns an error into its line and exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e := &env{
		stdout: stdout,
		stderr: stderr,
		logger: slog.New(slog.NewTextHandler(stderr, nil)),
	}
	if len(args) == 0 {
		return usagef("give a subcommand (%s); errand help describes them", commandNames())
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(e, args[1:])
	}
	if strings.HasPrefix(name, "-") {
		return usagef("give the subcommand first, then its flags: errand SUBCOMMAND %s ...", name)
	}
	c := lookupCommand(name)
	if c == nil {
		return usagef("unknown subcommand %q: use one of %s", name, commandNames())
	}
	fs := newFlagSet(c.name)
	run := c.setup(fs, e)
	pos, err := parseArgs(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(e.stdout, c)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if err := run(ctx, pos); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func runHelp(e *env, args []string) error {
	switch len(args) {
	case 0:
		printHelp(e.stdout)
		return nil
	case 1:
		c := lookupCommand(args[0])
		if c == nil {
			return usagef("help: unknown subcommand %q: use one of %s", args[0], commandNames())
		}
		printCommandHelp(e.stdout, c)
		return nil
	}
	return usagef("help: give at most one subcommand, e.g. errand help enqueue")
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `errand runs durable background jobs: enqueued in your database, worked under
fenced leases, retried on a jittered schedule, dead-lettered for you to replay.

usage: errand SUBCOMMAND [ARGS] [FLAGS]

subcommands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help\tthis help, or a subcommand's: errand help enqueue\n")
	tw.Flush()
	fmt.Fprint(w, `
Flags may come before or after arguments; -- ends the flags.
Database: --db PATH or ERRAND_DB (default ./errand.db), or a postgres:// URL
(schema ERRAND_SCHEMA, default errand; behind PgBouncer in transaction mode,
ERRAND_LISTEN_DB names the server itself for LISTEN). enqueue, batch enqueue, workflow
enqueue, work, serve, migrate and bench create and migrate it; the other
subcommands never do: they open only a database that errand has migrated
(demo makes its own, ./errand-demo.db).
Exit status: 0 success, 1 runtime error, 2 usage error.
`)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: errand %s %s\n\n%s\n", c.name, c.args, c.summary)
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.detail))
	}
	fs := newFlagSet(c.name)
	c.setup(fs, &env{stdout: io.Discard, stderr: io.Discard, logger: slog.New(slog.DiscardHandler)})
	fmt.Fprintf(w, "\nflags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
			name = ""
		}
		fmt.Fprintf(tw, "  --%s %s\t%s\n", f.Name, name, usage)
	})
	tw.Flush()
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("errand "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by report
	return fs
}

// parseArgs parses flags that may come before, between or after positional
// arguments, and returns the positional ones. "--" ends the flags.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // fs.Parse names it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, flagError(fs.Name(), err)
	}
	return pos, nil
}

// flagError rewrites the flag package's messages to name flags as users
// type them and to point at the help.
func flagError(cmd string, err error) error {
	msg := err.Error()
	hint := "; see " + strings.Replace(cmd, "errand ", "errand help ", 1)
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		return usagef("unknown flag --%s%s", name, hint)
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		return usagef("flag --%s needs a value%s", name, hint)
	}
	if m, ok := strings.CutPrefix(msg, "invalid value "); ok {
		msg = "invalid value " + strings.Replace(m, " for flag -", " for --", 1)
	} else {
		msg = strings.Replace(msg, " for -", " for --", 1) // boolean flags
	}
	if strings.HasPrefix(msg, "invalid boolean value") {
		msg = strings.Replace(msg, ": parse error", ": want true or false", 1)
	}
	return usagef("%s%s", msg, hint)
}

// durationValue is a flag in Go duration syntax that must not be negative.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a Go duration such as 250ms, 30s or 1h")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*v.d = d
	return nil
}

func durationFlag(fs *flag.FlagSet, name, usage string) *time.Duration {
	d := new(time.Duration)
	fs.Var(durationValue{d}, name, usage)
	return d
}

// intValue is an integer flag with a message that says what it wants.
type intValue struct{ n *int }

func (v intValue) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v intValue) Set(s string) error {
	n, err := atoi32(s)
	switch {
	case errors.Is(err, strconv.ErrRange) && strings.HasPrefix(s, "-"):
		return fmt.Errorf("want a whole number down to %d", math.MinInt32)
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("want a whole number up to %d", math.MaxInt32)
	case err != nil:
		return errors.New("want a whole number")
	}
	*v.n = n
	return nil
}

// atoi32 parses a whole number that fits in 32 bits, as the stores keep
// counts and limits.
func atoi32(s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int(n), err
}

func intFlag(fs *flag.FlagSet, name string, value int, usage string) *int {
	n := &value
	fs.Var(intValue{n}, name, usage)
	return n
}

// listValue is a repeatable string flag.
type listValue struct{ list *[]string }

func (v listValue) String() string {
	if v.list == nil {
		return ""
	}
	return strings.Join(*v.list, ",")
}

func (v listValue) Set(s string) error {
	*v.list = append(*v.list, s)
	return nil
}

func listFlag(fs *flag.FlagSet, name, usage string) *[]string {
	l := new([]string)
	fs.Var(listValue{l}, name, usage)
	return l
}

// isSet reports whether the flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// defaultDB is the database when neither --db nor ERRAND_DB names one.
const defaultDB = "./errand.db"

func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "database: a SQLite file `PATH` or a postgres:// URL (default $ERRAND_DB, then "+defaultDB+")")
}

// dbPath resolves the database from the flag, then ERRAND_DB, then the
// default.
func dbPath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv("ERRAND_DB"); v != "" {
		return v
	}
	return defaultDB
}

// openMode says whether a subcommand may create or migrate the database.
type openMode int

const (
	// mustExist is for subcommands that read or change existing jobs (jobs,
	// inspect, stats, workers, replay, cancel): they open only a database
	// errand has migrated, create and migrate nothing, and say so when the
	// path or schema names none, instead of turning another application's
	// database, or a mistyped one, into an empty queue.
	mustExist openMode = iota
	// mayCreate is for subcommands that start a database's life: enqueue,
	// work (a worker may start before any job exists), migrate and bench.
	mayCreate
)

// isPostgres reports whether the database names a PostgreSQL server.
func isPostgres(db string) bool {
	lower := strings.ToLower(db)
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// openStore opens the database named by --db or ERRAND_DB: a postgres://
// URL opens the PostgreSQL store (in the schema ERRAND_SCHEMA names, default
// errand), anything else a SQLite file. Both are seen with *sql.Tx
// transactions, PostgreSQL through its database/sql view, so that one
// client type serves every subcommand; the CLI never enqueues inside a
// transaction of its own, and the view opens no connection of its own
// until one is used.
func openStore(ctx context.Context, flagValue string, mode openMode, logger *slog.Logger) (errandstore.TxStore[*sql.Tx], error) {
	db := dbPath(flagValue)
	if isPostgres(db) {
		if _, err := url.Parse(db); err != nil {
			return nil, usagef("the database URL in --db or ERRAND_DB does not parse (%v); write it as postgres://user@host:5432/dbname", errors.Unwrap(err))
		}
		schema := os.Getenv("ERRAND_SCHEMA")
		if !errandtype.StorableText(schema) {
			return nil, usagef("ERRAND_SCHEMA is not valid UTF-8 without NUL bytes; name the schema your application uses, e.g. errand")
		}
		st, err := postgres.Open(ctx, db, &postgres.Options{Schema: schema, Logger: logger, NoMigrate: mode == mustExist,
			ListenURL: os.Getenv("ERRAND_LISTEN_DB")})
		if errors.Is(err, errandtype.ErrNoSchema) {
			if schema == "" {
				schema = postgres.DefaultSchema
			}
			return nil, fmt.Errorf("no errand tables in schema %q at %s; set ERRAND_SCHEMA to the schema your application uses (unset means %s), or run errand migrate to create it",
				schema, redactURL(db), postgres.DefaultSchema)
		}
		if err != nil {
			return nil, fmt.Errorf("database %s: %w", redactURL(db), err)
		}
		return st.SQL(nil), nil
	}
	return openSQLite(ctx, db, mode)
}

// openSQLite opens the SQLite file at path.
func openSQLite(ctx context.Context, path string, mode openMode) (*sqlite.Store, error) {
	if strings.Contains(path, "://") {
		return nil, usagef("database %q (--db or ERRAND_DB) is neither a postgres:// URL nor a file path; give a SQLite file path such as %s, or a postgres:// URL", path, defaultDB)
	}
	if mode == mustExist {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s; pass --db (or set ERRAND_DB) to the database your application uses, or enqueue a job to create it", path)
		}
	}
	st, err := sqlite.Open(ctx, path, &sqlite.Options{NoMigrate: mode == mustExist})
	if errors.Is(err, errandtype.ErrNoSchema) {
		return nil, fmt.Errorf("no errand database at %s (no errand tables); pass --db (or set ERRAND_DB) to the database your application uses, or run errand migrate to create one", path)
	}
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	return st, nil
}

// redactURL hides a password in a database URL before it is printed.
func redactURL(db string) string {
	u, err := url.Parse(db)
	if err != nil {
		return "the PostgreSQL URL"
	}
	return u.Redacted()
}

// openClient opens the store and a client over it with the given config.
func openClient(ctx context.Context, flagValue string, mode openMode, cfg *errand.Config) (*errand.Client[*sql.Tx], func(), error) {
	if cfg.Codec == nil {
		codec, err := loadCodec("")
		if err != nil {
			return nil, nil, err
		}
		cfg.Codec = codec
	}
	st, err := openStore(ctx, flagValue, mode, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	c, err := errand.NewClient(st, cfg)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return c, func() {
		c.Close() // sends pending wake-ups to other processes' workers
		st.Close()
	}, nil
}

// jobError turns the library's errors about one job into the line an
// operator reads.
func jobError(id string, err error) error {
	var se *errandtype.StateError
	switch {
	case errors.Is(err, errandtype.ErrNotFound):
		return fmt.Errorf("no job with id %s", id)
	case errors.As(err, &se) && se.Reason != "":
		// A job in a state the operation accepts, refused all the same:
		// the reason says why and what to do instead.
		return fmt.Errorf("job %s is %s; %s", id, se.State, se.Reason)
	case errors.As(err, &se):
		names := make([]string, len(se.Allowed))
		for i, s := range se.Allowed {
			names[i] = string(s)
		}
		list := strings.Join(names, " or ")
		if n := len(names); n > 2 {
			list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
		}
		verb := map[string]string{"replay": "replayed", "cancel": "cancelled"}[se.Op]
		if verb == "" {
			verb = se.Op + "ed"
		}
		return fmt.Errorf("job %s is %s; only %s jobs can be %s", id, se.State, list, verb)
	}
	return opsInputError(err) // an input error names the flag to change
}

// onePositional checks for exactly one positional argument, named what.
func onePositional(pos []string, what, cmd string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usagef("give the %s: errand %s %s", what, cmd, strings.ToUpper(what))
	case 1:
		return pos[0], nil
	}
	return "", usagef("unexpected argument %q after the %s; see errand help %s", pos[1], what, cmd)
}

// writeJSON prints v as one indented JSON value, with the characters a
// terminal acts on written as \u escapes (see jsonForTerminal): the values
// a decoder reads are exact.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(jsonForTerminal(b.Bytes()))
	return err
}

// formatTime prints t in RFC 3339, UTC, to the second.
func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// approx prints a duration at a precision a person reads.
func approx(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// relative says when t is from now: "in 3m12s" or "5s ago".
func relative(now, t time.Time) string {
	if t.After(now) {
		return "in " + approx(t.Sub(now))
	}
	return approx(now.Sub(t)) + " ago"
}
