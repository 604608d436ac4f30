// Command fieldnotes is errand's reference application: a small
// document-publishing service in which a fixed demo author pays for a
// document from a simulated wallet, and a worker delivers the receipt through
// errand.
//
// Each payment and its receipt job commit in one SQLite transaction
// ([errand.Client.EnqueueTx]); the worker writes the receipt to a sink table
// through errand's effect ledger ([errand.Once]) in a transaction of
// its own, committed before the queue acknowledgment, so the crash window
// between effect and acknowledgment is real and the ledger is what keeps the
// receipt single. See README.md for the two exercises.
//
// main alone decides the exit code: 0 on success, 1 on a runtime error, 2 on
// a usage error.
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
)

const usage = `fieldnotes: errand's reference application (payment + receipt outbox)

usage: fieldnotes COMMAND DB [flags]

commands:
  init DB                                   create the schema and seed documents and the wallet (idempotent)
  pay DB [--document ID]                    pay for a document (default document-7); prints the payment id
  work DB [--crash-after-effect] [--unavailable]
                                            claim one receipt job, deliver it, acknowledge; prints one JSON line
  jobs DB [--json]                          list receipt jobs
  receipts DB [--json]                      list delivered receipts (the sink)
  replay DB JOB_ID [--reason TEXT]          start a new delivery cycle for a dead job
  serve DB [--addr 127.0.0.1:4318]          the HTTP API (loopback only: no authentication)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return
	}
	// One line, whatever the error: a wrapped driver error may span several.
	fmt.Fprintln(os.Stderr, "fieldnotes: "+strings.Join(strings.Fields(err.Error()), " "))
	var ue *usageError
	if errors.As(err, &ue) {
		os.Exit(2)
	}
	os.Exit(1)
}

// Run runs one fieldnotes command. stdout receives results only; logs and
// errors go to stderr (errors by the caller, as the returned error).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("give a command (init, pay, work, jobs, receipts, replay or serve); run fieldnotes help for the list")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "init":
		return runInit(ctx, rest, stdout)
	case "pay":
		return runPay(ctx, rest, stdout)
	case "work":
		return runWork(ctx, rest, stdout)
	case "jobs":
		return runJobs(ctx, rest, stdout)
	case "receipts":
		return runReceipts(ctx, rest, stdout)
	case "replay":
		return runReplay(ctx, rest, stdout)
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usagef("unknown command %q; run fieldnotes help for the list", cmd)
}

// usageError is a mistake in the command line: main exits 2 for it.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// flags is one command's flag set. It reports errors instead of printing
// them, so every error is one line, and prints its help to stdout on -h.
type flags struct {
	*flag.FlagSet
	synopsis string
	stdout   io.Writer
}

func newFlags(name, synopsis string, stdout io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, synopsis: synopsis, stdout: stdout}
}

// parse parses flags wherever they stand among the positional arguments
// ("replay DB ID --reason x" and "replay --reason x DB ID" alike) and checks
// that the positional arguments are the ones named.
func (f *flags) parse(args []string, names ...string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(f.stdout, "usage: fieldnotes %s\n", f.synopsis)
				f.SetOutput(f.stdout)
				f.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%s: %s; run fieldnotes %s -h", f.Name(), flagMessage(err), f.Name())
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < len(names) {
		return nil, usagef("%s: missing %s; run fieldnotes %s -h", f.Name(), names[len(pos)], f.Name())
	}
	if len(pos) > len(names) {
		return nil, usagef("%s: unexpected argument %q; run fieldnotes %s -h", f.Name(), pos[len(names)], f.Name())
	}
	return pos, nil
}

// flagMessage rewrites the flag package's message to name flags as the
// usage spells them (--json, not -json) and to say what a value must be.
func flagMessage(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag --" + strings.TrimLeft(name, "-")
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "flag --" + strings.TrimLeft(name, "-") + " needs a value"
	}
	msg = strings.Replace(msg, " for flag -", " for --", 1)
	msg = strings.Replace(msg, " for -", " for --", 1) // boolean flags
	return strings.Replace(msg, ": parse error", ": want true or false", 1)
}
