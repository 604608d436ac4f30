package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/cmd/errand/internal/exechandler"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/faktory"
)

// defaultAddr is where errand serve listens unless told otherwise: the
// loopback interface, so that nothing is exposed by accident.
const defaultAddr = "127.0.0.1:8080"

// Names given to the tokens of --token and --read-token, recorded as the
// operator in the audit. A token file names each token itself.
const (
	flagOperatorName = "operator"
	flagReaderName   = "reader"
)

var serveCommand = &command{
	name:    "serve",
	args:    "[--addr HOST:PORT] [--token-file PATH | --no-auth] [--trust-proxy] [--faktory HOST:PORT [--faktory-password SECRET]] [--exec KIND=COMMAND... [--exec-env NAME...]] [--http KIND=URL...] [--dependency KIND=DEP...] [--cron 'NAME=SPEC KIND [JSON]'...] [flags]",
	summary: "serve the dashboard, the JSON API and /metrics (and run a worker with --exec or --http)",
	detail: `
errand serve answers HTTP on --addr (default 127.0.0.1:8080, the loopback
interface): the operator dashboard at /, the JSON API at /api/v1/, for
producers and for workers in any language (claim, heartbeat, ack and fail
by lease token), /metrics for Prometheus, /healthz and /readyz (degraded
past --ready-max-oldest-age or --ready-max-dead-growth), and /login and
/logout for browsers.

Tokens: --token-file PATH reads lines of ROLE NAME SECRET (role operator or
read; the name is recorded as the operator in the audit; the file must not
be readable by others). --token and --read-token (or ERRAND_TOKEN and
ERRAND_READ_TOKEN) add one operator token named operator and one read-only
token named reader; prefer the file or the environment, since other users
can see a process's arguments. Secrets are at least 16 characters and not
trivially predictable: openssl rand -hex 32 makes one. Every request needs
a token: Authorization: Bearer SECRET, or the cookie /login sets.

Without --token or --token-file, errand serve makes an operator token for
this run, writes it to a file only you can read, in your configuration
directory (serve-HOST-PORT.token under ~/.config/errand on Linux), prints
the file's path and the token, and removes the file when it stops:
another user of this machine cannot call the server. --no-auth serves
without tokens instead, each request an operator named local, on a
loopback address only: unsafe on a shared machine, where every local user
could then run jobs, with --exec commands, as you. /healthz answers
without a token; everything else, /readyz included, needs one.

Behind a TLS-terminating proxy, --trust-proxy believes its
X-Forwarded-Proto (the sign-in cookie is then Secure) and X-Forwarded-For
(the address whose failed sign-ins are throttled); without it, only this
server's own TLS counts. Give it only behind a proxy that sets both.

State-changing requests need an operator token, and browsers may send them
only from this server's own pages (cross-origin protection). Bodies over
--max-body are refused with 413.

With --exec KIND=COMMAND or --http KIND=URL it also runs a worker for those
kinds in this process, as errand work does (see errand help work for
--queue, --max-workers, --weight, --lease, --timeout, --delete-on-success
and --grace). With --cron 'NAME=SPEC KIND [JSON]' (repeatable) the worker also enqueues a job of KIND on every tick
of SPEC, and with --retain-succeeded AGE, --retain-dead AGE and --retain-kind
KIND=SUCCEEDED[:DEAD] it deletes finished jobs past those ages every hour (--retain-every) while it leads the cluster, as
errand work does. --cron and --retain alone run a worker that claims no
job: it fires the schedules and applies the retention only. --rate-limit
and --retry-budget limit the worker's claims as they limit errand work's;
the dashboard and /api/v1/limits show every limit's tokens.

Claims through the API follow the same rules as a worker's: the rate limits
and retry budgets the workers keep in the database, fair claims of a queue
with fairness keys, and circuit breakers. --dependency KIND=DEP (with
--breaker DEP=N/WINDOW/COOLDOWN[/PROBES]) names the dependency of a kind,
whether this process runs it or only remote workers do: while DEP's breaker
is open the API claims no job of KIND, and remote workers' failures and
acknowledgments of its jobs count toward the breaker.

With --faktory HOST:PORT it also speaks Faktory's work protocol there, so
that unchanged Faktory workers and producers (faktory-worker for Node.js,
Ruby, Go, ...) push, fetch, acknowledge and fail errand's jobs; see
docs/faktory.md. Like --addr it binds a loopback address unless told
otherwise, and a non-loopback address needs --faktory-password (or
ERRAND_FAKTORY_PASSWORD), which every Faktory client must then prove in
its HELLO.

SIGINT or SIGTERM stops accepting requests, lets requests in flight finish,
tells Faktory workers to terminate and waits up to --grace for them to
finish the jobs they hold, drains the worker for --grace, and exits 0.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		codecKeys := codecFlag(fs)
		addr := fs.String("addr", defaultAddr, "listen on `HOST:PORT`; a non-loopback address needs a token")
		token := fs.String("token", "", "operator `SECRET` (named operator), also $ERRAND_TOKEN")
		readToken := fs.String("read-token", "", "read-only `SECRET` (named reader), also $ERRAND_READ_TOKEN")
		tokenFile := fs.String("token-file", "", "read tokens from `PATH`: lines of ROLE NAME SECRET")
		noAuth := fs.Bool("no-auth", false, "serve without tokens on a loopback address: every local user is an operator (unsafe on a shared machine)")
		trustProxy := fs.Bool("trust-proxy", false, "believe X-Forwarded-Proto and X-Forwarded-For: only behind a proxy that sets them")
		origins := listFlag(fs, "trusted-origin", "also accept state-changing browser requests from `ORIGIN` (scheme://host[:port], repeatable), e.g. a proxy's public name")
		hideArgs := fs.Bool("hide-args", false, "leave job args out of job reads and listings (claims still carry them)")
		maxBody := intFlag(fs, "max-body", errandhttp.DefaultMaxBodyBytes, "refuse request bodies over `BYTES` with 413")
		execs := listFlag(fs, "exec", "also run jobs of KIND with COMMAND (`KIND=COMMAND`, repeatable)")
		execEnv := listFlag(fs, "exec-env", execEnvUsage)
		hooks := listFlag(fs, "http", "also deliver jobs of KIND by POSTing their envelope to URL (`KIND=URL`, repeatable)")
		kindFlags := addKindPolicyFlags(fs)
		queues := listFlag(fs, "queue", "the worker runs queue NAME with at most N jobs at once (`NAME=N`, repeatable; default default=10)")
		weights := addWeightFlags(fs)
		lease := durationFlag(fs, "lease", "the worker's lease `DUR` (default 30s)")
		grace := durationFlag(fs, "grace", "on SIGTERM, let the worker's running jobs, and the jobs Faktory workers hold, finish for `DUR` (default 30s)")
		crons := listFlag(fs, "cron", "enqueue a job of KIND on every tick of SPEC (`'NAME=SPEC KIND [JSON]'`, repeatable)")
		retention := addRetentionFlags(fs)
		limits := addLimitFlags(fs)
		breakers := addBreakerFlags(fs)
		ready := addReadyFlags(fs)
		faktoryAddr := fs.String("faktory", "", "also speak Faktory's work protocol on `HOST:PORT` (e.g. 127.0.0.1:7419); a non-loopback address needs --faktory-password")
		faktoryPassword := fs.String("faktory-password", "", "the `SECRET` Faktory clients must prove, also $ERRAND_FAKTORY_PASSWORD")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand serve takes flags only", pos[0])
			}
			if *maxBody < 1 {
				return usagef("--max-body must be positive, e.g. %d", errandhttp.DefaultMaxBodyBytes)
			}
			if isSet(fs, "lease") {
				if err := checkLeaseFlag(*lease); err != nil {
					return err
				}
			}
			tokens, err := serveTokens(*tokenFile, *token, *readToken)
			if err != nil {
				return err
			}
			loopback, err := isLoopback(*addr)
			if err != nil {
				return err
			}
			fopts, err := faktoryOptions(*faktoryAddr, *faktoryPassword, e)
			if err != nil {
				return err
			}
			if *noAuth && len(tokens) > 0 {
				return usagef("--no-auth serves without tokens; drop it, or drop --token, --read-token and --token-file")
			}
			if !loopback && len(tokens) == 0 {
				return usagef("--addr %s is not a loopback address: give --token-file (or --token) so that every request needs a token, or listen on 127.0.0.1", *addr)
			}
			generated := ""
			if !*noAuth && len(tokens) == 0 {
				generated = rand.Text() // 26 base32 characters: 130 random bits
				tokens = []errandhttp.Token{{Name: flagOperatorName, Secret: generated, Role: errandhttp.RoleOperator}}
			}
			handles := len(*execs)+len(*hooks) > 0
			if err := retention.check(); err != nil {
				return err
			}
			retain := retention.policy() != nil
			if !handles && (len(*queues) > 0 || len(*kindFlags.timeouts) > 0 || len(*kindFlags.deletes) > 0 || isSet(fs, "lease") || weights.set(fs) || limits.set()) {
				return usagef("--queue, --max-workers, --weight, --timeout, --delete-on-success, --lease, --rate-limit, --retry-budget and --concurrency-limit configure the worker's claims; add --exec KIND=COMMAND or --http KIND=URL, or drop them")
			}
			rates, budgets, err := limits.parse()
			if err != nil {
				return err
			}
			conc, err := limits.concurrency()
			if err != nil {
				return err
			}
			deps, policies, err := breakers.parse()
			if err != nil {
				return err
			}
			if !handles && len(*crons) == 0 && !retain && fopts == nil && isSet(fs, "grace") {
				return usagef("--grace configures the worker's drain and the Faktory workers'; add --exec, --http, --cron, --retain-succeeded/--retain-dead or --faktory, or drop it")
			}
			if !isSet(fs, "grace") {
				*grace = defaultGrace
			}
			schedules, err := parseCrons(*crons)
			if err != nil {
				return err
			}
			auth := &errandhttp.AuthOptions{Tokens: tokens, MaxBodyBytes: int64(*maxBody), TrustedOrigins: *origins, TrustProxy: *trustProxy}
			if _, err := errandhttp.NewAuth(auth); err != nil {
				return usagef("%v", err)
			}
			qs, err := parseQueues(*queues)
			if err != nil {
				return err
			}
			var shared errand.WorkerConfig // --max-workers and --weight
			if err := weights.apply(fs, qs, &shared); err != nil {
				return err
			}
			readyOpts, err := ready.options(fs)
			if err != nil {
				return err
			}
			obs := errandhttp.NewMetricsObserver()
			cfg := &errand.Config{Logger: e.logger, AllowUnknownKinds: true, Observer: obs, Breakers: policies}
			var kindNames []string
			var handlers []*exechandler.Handler
			if len(*execs)+len(*hooks)+len(deps)+len(*execEnv) > 0 {
				// A --dependency of a kind no --exec maps binds the API's
				// claims of it by remote workers.
				cfg.Kinds, kindNames, handlers, err = execKinds(&handlerFlags{execs: *execs, execEnv: *execEnv, hooks: *hooks}, kindFlags, deps, true, e)
				if err != nil {
					return err
				}
			}
			runsWorker := handles || len(schedules) > 0 || retain
			var wcfg *errand.WorkerConfig
			if runsWorker {
				wcfg = &errand.WorkerConfig{Queues: qs.concurrency, Lease: *lease, Schedules: schedules,
					MaxWorkers: shared.MaxWorkers, QueueWeights: shared.QueueWeights}
				wcfg.Retention = retention.policy()
				wcfg.RateLimits, wcfg.RetryBudgets, wcfg.ConcurrencyLimits = rates, budgets, conc
				workerDefaults(fs, wcfg, grace)
				// What the worker would refuse is refused before the
				// database is opened, and perhaps created.
				if err := errand.CheckWorker(cfg, wcfg); err != nil {
					return workerConfigError(err)
				}
			}
			if cfg.Codec, err = loadCodec(*codecKeys); err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mayCreate, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			h, err := errandhttp.New(c, &errandhttp.Options{
				Auth: auth,
				API:  &errandhttp.APIOptions{Logger: e.logger, HideArgs: *hideArgs},
				Dashboard: errandhttp.NewDashboard(c, &errandhttp.DashboardOptions{Identity: errandhttp.Identity, HideArgs: *hideArgs, Logger: e.logger,
					Retention: retention.policy()}),
				Metrics: errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Observer: obs}),
				Healthz: errandhttp.NewHealthz(),
				Readyz:  errandhttp.NewReadyz(c, readyOpts),
			})
			if err != nil {
				return err
			}
			ln, err := listen(*addr, "--addr")
			if err != nil {
				return err
			}
			if generated != "" {
				path, err := writeGeneratedToken(ln.Addr().String(), generated)
				if err != nil {
					ln.Close()
					return err
				}
				defer os.Remove(path)
				e.logger.Info("no --token or --token-file: generated an operator token for this run; every request needs it",
					"token_file", path, "sign_in", "http://"+ln.Addr().String()+"/login", "token", generated)
			}
			srv := &http.Server{
				Handler:           h,
				ReadHeaderTimeout: 10 * time.Second,
				ReadTimeout:       time.Minute,
				WriteTimeout:      time.Minute,
				IdleTimeout:       2 * time.Minute,
				MaxHeaderBytes:    64 << 10,
				ErrorLog:          slog.NewLogLogger(e.logger.Handler(), slog.LevelWarn),
			}
			var fsrv *faktory.Server
			if fopts != nil {
				if fsrv, err = startFaktory(c, *faktoryAddr, fopts, e); err != nil {
					ln.Close()
					return err
				}
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			e.logger.Info("serving", "addr", ln.Addr().String(), "api", "/api/v1/", "tokens", len(tokens), "kinds", strings.Join(kindNames, ","))

			var wg sync.WaitGroup
			var workErr error
			stopWorker := func() {}
			if runsWorker {
				w, err := c.NewWorker(wcfg)
				if err != nil {
					srv.Close()
					return workerConfigError(err)
				}
				// The worker drains when ctx ends, or when the server
				// fails.
				wctx, stopWork := context.WithCancel(ctx)
				defer stopWork()
				stopWorker = stopWork
				wg.Go(func() { workErr = runWorker(wctx, w, wcfg, qs, kindNames, *grace, handlers, e) })
			}

			var serveErr error
			select {
			case <-ctx.Done():
			case serveErr = <-served:
			}
			e.logger.Info("stopping: finishing requests in flight")
			if fsrv != nil {
				// Faktory workers learn at their next BEAT (every 15 s
				// for most clients) that they should stop.
				wg.Go(func() { stopFaktory(fsrv, *grace, e) })
			}
			shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutCtx); err != nil {
				srv.Close()
			}
			if serveErr != nil {
				e.logger.Error("server failed", "err", serveErr)
			}
			stopWorker()
			wg.Wait()
			if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
				return fmt.Errorf("serve: %w", serveErr)
			}
			return workErr
		}
	},
}

// serveTokens gathers the tokens of --token-file, --token and --read-token
// (or their environment variables).
func serveTokens(file, operator, reader string) ([]errandhttp.Token, error) {
	var ts []errandhttp.Token
	if file != "" {
		fts, err := errandhttp.ReadTokenFile(file)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		ts = fts
	}
	if operator == "" {
		operator = os.Getenv("ERRAND_TOKEN")
	}
	if reader == "" {
		reader = os.Getenv("ERRAND_READ_TOKEN")
	}
	if operator != "" {
		ts = append(ts, errandhttp.Token{Name: flagOperatorName, Secret: operator, Role: errandhttp.RoleOperator})
	}
	if reader != "" {
		ts = append(ts, errandhttp.Token{Name: flagReaderName, Secret: reader, Role: errandhttp.RoleRead})
	}
	return ts, nil
}

// listen listens on addr, which flag gave. A busy port names the address
// and the flag, not only the system's "bind: address already in use".
func listen(addr, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: address already in use; another process holds it: pass %s HOST:PORT", addr, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// writeGeneratedToken writes the token errand serve made for the server
// listening on addr to a file only its owner may read, in the user's
// configuration directory, named for addr so that servers on other ports
// keep theirs, and returns the file's path.
func writeGeneratedToken(addr, secret string) (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("generated token: %w; give --token-file or --token, or --no-auth", err)
	}
	dir := filepath.Join(base, "errand")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("generated token: %w; give --token-file or --token", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	path := filepath.Join(dir, "serve-"+strings.ReplaceAll(host, ":", "_")+"-"+port+".token")
	// A new file, mode 0600 from its creation, renamed over any old one:
	// the secret is never in a file others could open.
	f, err := os.CreateTemp(dir, ".serve-token-*")
	if err != nil {
		return "", fmt.Errorf("generated token: %w; give --token-file or --token", err)
	}
	_, err = f.WriteString(secret + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("generated token: %w; give --token-file or --token", err)
	}
	return path, nil
}

// isLoopback reports whether addr, given as --addr, listens on the
// loopback interface only: 127.0.0.0/8, ::1 or localhost. An empty host
// means every interface.
func isLoopback(addr string) (bool, error) {
	return isLoopbackFlag("--addr", addr, defaultAddr)
}

// isLoopbackFlag is isLoopback for the address of flag, whose default
// (or example) is example.
func isLoopbackFlag(flag, addr, example string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usagef("%s %q: write HOST:PORT, e.g. %s", flag, addr, example)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return false, usagef("%s %q: give a port from 0 to 65535, e.g. %s", flag, addr, example)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}
