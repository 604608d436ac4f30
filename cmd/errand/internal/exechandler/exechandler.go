// Package exechandler runs a job as an external command: the handler behind
// `errand work --exec KIND=COMMAND`.
//
// The conventions (docs/design.md, "CLI and JSON conventions") are the contract
// with scripts written in any language:
//
//   - COMMAND is split on spaces into argv and run without a shell, as a
//     direct child of the worker, in a process group of its own (shared
//     only with its guard, see below, whose pid is the group's id: a
//     script kills its group with kill 0, not kill -- -$$).
//   - The job's args (JSON) arrive on stdin; ERRAND_JOB_ID, ERRAND_JOB_KIND,
//     ERRAND_ATTEMPT, ERRAND_MAX_ATTEMPTS and ERRAND_LEASE_TOKEN are in its
//     environment, and the job's trace context as TRACEPARENT and
//     TRACESTATE when it has one, with only these of the worker's: PATH, HOME, USER,
//     LOGNAME, LANG, LC_*, TZ, TMPDIR, and the names Options.Env lists. The
//     worker's own secrets (ERRAND_TOKEN, ERRAND_DB, a cloud key) stay out
//     of a command unless named.
//   - Every line the command writes to stdout or stderr becomes a log line
//     of the worker, tagged with the job id; the last 20 lines of stderr
//     become the error message of a failed attempt.
//   - Exit 0 succeeds; 75 (EX_TEMPFAIL) retries with class "tempfail"; 65
//     (EX_DATAERR) dead-letters with class "permanent"; any other status N
//     retries with class "exit_N"; death by a signal retries with class
//     "signal". A missing executable dead-letters with class "permanent":
//     retrying cannot make it appear.
//
// When the attempt's context ends (its timeout passes, or the worker loses
// the lease) the whole process group is killed, so a script's own children
// cannot outlive the attempt. For the same reason the group is killed when
// the command exits: whatever it left running in its group would otherwise
// run on after the job was acknowledged, outside any lease.
//
// # When the worker dies
//
// A worker that dies without cleaning up (SIGKILL, the OOM killer, a crash)
// must not leave its commands performing effects while another worker runs
// their jobs again once the leases expire. Two things tie a command to its
// worker:
//
//   - On every Unix system, a guard: a /bin/sh in the command's process
//     group (a sibling of the command, which stays the worker's direct
//     child), blocked reading a pipe whose other end only the worker holds.
//     However the worker dies, the kernel closes that end and the guard
//     kills the whole group with SIGKILL, the command's children included.
//     The guard starts first, in a new group, and the command joins that
//     group as it starts, so the command never runs unguarded, even for
//     the instant after its start. The guard ignores SIGHUP, SIGINT,
//     SIGQUIT and SIGTERM, so a script that signals its own group does not
//     remove it.
//   - On Linux, the parent-death signal: the kernel sends the command itself
//     SIGKILL when the worker dies, even where the guard could not start.
//
// What remains possible:
//
//   - A process that leaves the group (setsid, setpgid, a daemon that forks
//     twice) escapes the guard, and the group kill at the end of an attempt.
//     So does work the command hands to something else: a service it calls,
//     a job it submits elsewhere.
//   - Without its guard (no /bin/sh, which the worker logs once, or a
//     process of the group that SIGKILLed it), on Linux only the command
//     itself dies with the worker and its children run on; elsewhere
//     nothing dies with the worker.
//   - The kernel clears the parent-death signal of a command that is, or
//     execs, a set-user-ID or set-group-ID program or one with file
//     capabilities: only its guard covers it.
//   - Windows has no process groups, guard or parent-death signal: a
//     command outlives a worker that dies, and when an attempt ends only
//     the command itself is killed, not its children.
//
// Running the worker as the main process of a container, or as a systemd
// service (KillMode=control-group, the default), kills whatever it leaves
// behind, escaped processes included. Either way, a killed attempt may have
// done part of its work: key effects on the job id.
package exechandler

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Exit statuses with a meaning of their own, from BSD's sysexits.h.
const (
	// ExitTempFail (EX_TEMPFAIL) asks for a retry with class "tempfail".
	ExitTempFail = 75
	// ExitDataErr (EX_DATAERR) says the job can never succeed: it is
	// dead-lettered with class "permanent".
	ExitDataErr = 65
)

// Failure classes this handler names, besides errand's own "permanent" and
// "exit_N".
const (
	ClassTempFail = "tempfail"
	ClassSignal   = "signal"
)

const (
	// stderrTail is how many of the last stderr lines make the error
	// message.
	stderrTail = 20
	// maxLine bounds one logged line; the rest of a longer line is dropped
	// so one runaway write cannot flood the log or the error history.
	maxLine = 4096
	// DefaultWaitDelay is how long the handler waits, after the command
	// exits or is killed, for output still held open by a process that left
	// its group.
	DefaultWaitDelay = 2 * time.Second
)

// Handler runs jobs as an external command. It implements errand.Handler
// and is safe for concurrent use.
type Handler struct {
	argv      []string
	env       []string // names passed from the worker's environment besides the allowlist
	logger    *slog.Logger
	waitDelay time.Duration

	mu      sync.Mutex
	running map[int]started // commands started and not yet reaped, by pid

	noGuard sync.Once // warns once that startGuard failed
}

// started is a command started and not yet reaped, and its process group.
type started struct {
	p    *os.Process
	pgid int // 0: the group the command leads, whose id is its pid
}

// commandStarted runs right after each command starts: tests stall the
// worker there, to kill it at the first moment its command runs.
var commandStarted = func() {}

// Options configure a Handler.
type Options struct {
	// Logger receives the command's output, a line per line, tagged with
	// job_id and stream. Nil discards it.
	Logger *slog.Logger
	// WaitDelay bounds the wait for output after the command exits or is
	// killed. Zero means DefaultWaitDelay.
	WaitDelay time.Duration
	// Env names variables of the worker's environment that the command
	// receives besides those of [AllowedEnv].
	Env []string
}

// AllowedEnv are the variables of the worker's environment every command
// receives; a name ending in * stands for every name with that prefix.
var AllowedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_*", "TZ", "TMPDIR"}

// CheckEnvName refuses what cannot name an environment variable.
func CheckEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "= \t\n\x00") {
		return fmt.Errorf("%q is not a variable name; give a name such as AWS_REGION, without =VALUE", name)
	}
	return nil
}

// New returns a handler that runs command, split on spaces into argv. It
// returns an error when command is empty.
func New(command string, opts *Options) (*Handler, error) {
	argv := strings.Fields(command)
	if len(argv) == 0 {
		return nil, errors.New("command is empty; give the program to run, e.g. ./send_receipt.sh")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = DefaultWaitDelay
	}
	for _, name := range o.Env {
		if err := CheckEnvName(name); err != nil {
			return nil, err
		}
	}
	return &Handler{argv: argv, env: o.Env, logger: o.Logger, waitDelay: o.WaitDelay, running: map[int]started{}}, nil
}

// KillAll kills the process group of every command this handler is running
// and returns how many it killed. A worker that must exit at once (a second
// SIGTERM) calls it so that no command outlives it unsupervised: the jobs'
// leases expire and other workers run them again.
func (h *Handler) KillAll() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.running {
		if killGroup(c.p, c.pgid) == nil {
			n++
		}
	}
	return n
}

// Argv returns the command's argument vector.
func (h *Handler) Argv() []string { return append([]string(nil), h.argv...) }

// Work runs the command for one attempt of job. See the package
// documentation for how its exit is classified.
func (h *Handler) Work(ctx context.Context, job *errandtype.Job) error {
	log := h.logger.With("job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt)
	return h.run(ctx, log, job.Args, append(jobEnv(job), traceEnv(ctx, job)...), nil)
}

// run runs the command once, guarded and in its own process group, with
// stdin on its standard input and env added to the environment it passes
// on, and returns how it ended, classified. Its stdout goes to out when
// out is not nil, else to the log, line by line, as its stderr does.
func (h *Handler) run(ctx context.Context, log *slog.Logger, stdin []byte, env []string, out io.Writer) error {
	name := h.argv[0]
	cmd := exec.CommandContext(ctx, name, h.argv[1:]...)
	if cmd.Err != nil {
		// Not found: no guard to start, nothing to run.
		return startError(name, cmd.Err)
	}
	cmd.Env = append(passedEnv(os.Environ(), h.env), env...)
	cmd.WaitDelay = h.waitDelay

	pp, err := openPipes()
	if err != nil {
		return fmt.Errorf("exec %s: %w", name, err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pp.stdinR, pp.stdoutW, pp.stderrW

	// The guard starts before the command, which joins its process group,
	// so that no moment exists when the command runs unguarded.
	guard := h.newGuard()
	pgid := guard.pgid()
	cmd.SysProcAttr = newProcessGroup(pgid)
	cmd.Cancel = func() error { return killGroup(cmd.Process, pgid) }

	// On Linux the command is killed when the thread that starts it ends:
	// that thread must outlive the command (pinThread).
	unpin := pinThread()
	err = cmd.Start()
	closeAll(pp.stdinR, pp.stdoutW, pp.stderrW) // the child holds its own copies
	if err != nil {
		unpin()
		guard.stop()
		closeAll(pp.stdinW, pp.stdoutR, pp.stderrR)
		return startError(name, err)
	}
	commandStarted()

	h.mu.Lock()
	h.running[cmd.Process.Pid] = started{p: cmd.Process, pgid: pgid}
	h.mu.Unlock()

	log = log.With("pid", cmd.Process.Pid)
	wg, tail := pp.copy(stdin, log, out)

	waitErr := cmd.Wait()
	unpin()
	h.mu.Lock()
	_ = killGroup(cmd.Process, pgid)
	delete(h.running, cmd.Process.Pid)
	h.mu.Unlock()
	guard.stop()
	h.drain(wg, pp.stdinW, pp.stdoutR, pp.stderrR)
	closeAll(pp.stdoutR, pp.stderrR)

	return h.classify(ctx, log, name, cmd.ProcessState, waitErr, tail.String())
}

// newGuard starts a command's guard, and warns once if a guard cannot
// start: the command then runs without one (a nil guard).
func (h *Handler) newGuard() *guard {
	g, err := startGuard()
	if err != nil {
		h.noGuard.Do(func() {
			h.logger.Warn("exec guard did not start: if this worker dies, the processes of its commands may outlive it",
				"error", err.Error())
		})
	}
	return g
}

// commandPipes are a command's stdin, stdout and stderr. The handler owns
// the pipes rather than handing io.Writers to exec, so that Wait returns
// when the command itself exits, and the group can be killed before
// waiting for output that a leftover child holds open.
type commandPipes struct {
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW *os.File
}

// openPipes opens a command's three pipes, or none.
func openPipes() (*commandPipes, error) {
	var pp commandPipes
	var err error
	if pp.stdinR, pp.stdinW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if pp.stdoutR, pp.stdoutW, err = os.Pipe(); err != nil {
		closeAll(pp.stdinR, pp.stdinW)
		return nil, err
	}
	if pp.stderrR, pp.stderrW, err = os.Pipe(); err != nil {
		closeAll(pp.stdinR, pp.stdinW, pp.stdoutR, pp.stdoutW)
		return nil, err
	}
	return &pp, nil
}

// copy writes stdin to the command's stdin, copies its stdout to out (nil:
// logs each line), and logs each line of its stderr, keeping the last
// lines in the returned tail; wg is done once stdin is written and both
// outputs have ended.
func (pp *commandPipes) copy(stdin []byte, log *slog.Logger, out io.Writer) (wg *sync.WaitGroup, t *tail) {
	wg, t = new(sync.WaitGroup), newTail(stderrTail)
	wg.Go(func() {
		// A command that never reads stdin makes this write fail with
		// EPIPE once it exits; that is not an error of the attempt.
		_, _ = pp.stdinW.Write(stdin)
		pp.stdinW.Close()
	})
	wg.Go(func() {
		if out != nil {
			_, _ = io.Copy(out, pp.stdoutR)
			return
		}
		eachLine(pp.stdoutR, func(line string) { log.Info("exec stdout", "line", line) })
	})
	wg.Go(func() {
		eachLine(pp.stderrR, func(line string) {
			log.Warn("exec stderr", "line", line)
			t.add(line)
		})
	})
	return wg, t
}

// drain waits for the output readers to reach the end of their pipes, or
// for the wait delay when a process outside the group still holds them.
func (h *Handler) drain(wg *sync.WaitGroup, files ...*os.File) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(h.waitDelay)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// Closing the handler's ends unblocks the readers and the writer.
		closeAll(files...)
		<-done
	}
}

// classify turns how the command ended into the attempt's outcome.
func (h *Handler) classify(ctx context.Context, log *slog.Logger, name string, ps *os.ProcessState, waitErr error, stderr string) error {
	if ps == nil {
		return fmt.Errorf("exec %s: %w", name, waitErr)
	}
	if ps.Success() {
		// A success whose output could not be drained (exec.ErrWaitDelay)
		// is still a success: the command did its work and exited 0.
		return nil
	}
	if ctx.Err() != nil {
		// The worker killed it: errand classifies the cause (timeout, lease
		// lost, shutdown) from the context.
		return fmt.Errorf("%s was killed when the attempt ended: %w", name, context.Cause(ctx))
	}
	// The last lines of stderr are the message, as the command wrote
	// them; the class says how it ended. A command that wrote nothing to
	// stderr gets a message that says how it ended.
	ended := ending(name, ps)
	log.Warn("exec failed", "ended", ended)
	msg := stderr
	if msg == "" {
		msg = ended
	}
	err := errors.New(msg)
	if _, ok := signalOf(ps); ok {
		return errand.WithClass(ClassSignal, err)
	}
	code := ps.ExitCode()
	switch code {
	case ExitTempFail:
		return errand.WithClass(ClassTempFail, err)
	case ExitDataErr:
		return errand.Permanent(err)
	}
	return errand.WithClass("exit_"+strconv.Itoa(code), err)
}

// startError classifies a command that could not start. A missing or
// non-executable program is a deployment mistake that no retry fixes.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return errand.Permanent(fmt.Errorf("executable %s not found: fix the --exec command or install it, then replay the job", name))
	case errors.Is(err, fs.ErrPermission):
		return errand.Permanent(fmt.Errorf("%s is not executable: chmod +x it, then replay the job", name))
	case errors.Is(err, exec.ErrDot):
		return errand.Permanent(fmt.Errorf("%s resolves to the current directory; write ./%s", name, name))
	}
	return fmt.Errorf("start %s: %w", name, err)
}

// ending says how a command that failed ended: its exit status, or the
// signal that killed it.
func ending(name string, ps *os.ProcessState) string {
	if sig, ok := signalOf(ps); ok {
		return fmt.Sprintf("%s was killed by signal %d (%s)", name, int(sig), sig)
	}
	return fmt.Sprintf("%s exited with status %d", name, ps.ExitCode())
}

// passedEnv keeps the variables of environ that AllowedEnv or names lists.
func passedEnv(environ, names []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, allowed := range [][]string{AllowedEnv, names} {
			if slices.ContainsFunc(allowed, func(a string) bool { return envNameMatches(a, name) }) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

func envNameMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// jobEnv is what the command learns about its job besides the args.
func jobEnv(job *errandtype.Job) []string {
	token := ""
	if job.LeaseToken != nil {
		token = *job.LeaseToken
	}
	return []string{
		"ERRAND_JOB_ID=" + job.ID,
		"ERRAND_JOB_KIND=" + job.Kind,
		"ERRAND_ATTEMPT=" + strconv.Itoa(job.Attempt),
		"ERRAND_MAX_ATTEMPTS=" + strconv.Itoa(job.MaxAttempts),
		"ERRAND_LEASE_TOKEN=" + token,
	}
}

// traceEnv carries the attempt's W3C trace context to the command as
// TRACEPARENT and TRACESTATE, OpenTelemetry's environment carrier, so that
// the command's own spans join the job's trace: the attempt's span when
// tracing is on, else the context stored in the job's metadata. The
// propagator parses the stored one first, so that a malformed value
// reaches no command.
func traceEnv(ctx context.Context, job *errandtype.Job) []string {
	var prop propagation.TraceContext
	if !trace.SpanContextFromContext(ctx).IsValid() && len(job.Metadata) > 0 {
		var m map[string]any
		if json.Unmarshal(job.Metadata, &m) == nil {
			stored := propagation.MapCarrier{}
			for _, k := range prop.Fields() {
				if v, ok := m[k].(string); ok {
					stored[k] = v
				}
			}
			ctx = prop.Extract(ctx, stored)
		}
	}
	out := propagation.MapCarrier{}
	prop.Inject(ctx, out)
	var env []string
	if v := out.Get("traceparent"); v != "" {
		env = append(env, "TRACEPARENT="+v)
	}
	if v := out.Get("tracestate"); v != "" {
		env = append(env, "TRACESTATE="+v)
	}
	return env
}

// eachLine calls fn for every line read from r, without its line ending,
// cutting lines longer than maxLine. It reads to the end of r even when
// lines are cut, so the writer never blocks on a full pipe.
func eachLine(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, maxLine)
	var line []byte
	cut := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(chunk) > 0 && !cut {
			room := maxLine - len(line)
			if len(chunk) > room {
				chunk, cut = chunk[:room], true
			}
			line = append(line, chunk...)
		}
		if err != nil {
			if len(line) > 0 || cut {
				fn(finish(line, cut))
			}
			return
		}
		if !isPrefix {
			fn(finish(line, cut))
			line, cut = line[:0], false
		}
	}
}

func finish(line []byte, cut bool) string {
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	if cut {
		s += " [line cut]"
	}
	return s
}

// tail keeps the last n lines it was given.
type tail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.Join(t.lines, "\n"))
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

var _ errand.Handler = (*Handler)(nil)

// signalOf reports the signal that killed the process, if one did.
func signalOf(ps *os.ProcessState) (syscall.Signal, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}
