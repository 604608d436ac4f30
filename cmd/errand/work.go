package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/cmd/errand/internal/exechandler"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Defaults of the long-running worker.
const (
	defaultConcurrency = 10
	defaultGrace       = 30 * time.Second
)

var workCommand = &command{
	name:    "work",
	args:    "--exec KIND=COMMAND... [--exec-many KIND=COMMAND... [--many-max KIND=N...]] [--exec-env NAME...] --http KIND=URL... [--queue NAME=N...] [--max-workers N [--weight NAME=W...]] [--grace DUR] [--lease DUR] [--poll DUR] [--poll-only] [--heartbeat DUR] [--leader-ttl DUR] [--timeout KIND=DUR...] [--delete-on-success KIND...] [--dependency KIND=DEP... [--breaker DEP=N/WINDOW/COOLDOWN[/PROBES]...]] [--cron 'NAME=SPEC KIND [JSON]'...] [--rate-limit queue:NAME=N/PER...] [--retry-budget KIND=RATIO...] [--concurrency-limit kind:NAME=N|dependency:NAME=N...] [--retain-succeeded AGE] [--retain-dead AGE] [--retain-kind KIND=SUCCEEDED[:DEAD]...] [--retain-every DUR] [--priority-aging QUEUE=STEP[:FLOOR]...] [--metrics-addr ADDR [--ready-max-oldest-age DUR] [--ready-max-dead-growth N/PERIOD]] [--codec-keys-file PATH] [--once]",
	summary: "run jobs of mapped kinds with commands or webhooks until stopped, or one job with --once",
	detail: `
Each --exec maps a kind to a command, split on spaces and run without a
shell, in a process group of its own. Only mapped kinds are claimed. The
command gets the job's args on stdin and ERRAND_JOB_ID, ERRAND_ATTEMPT,
ERRAND_LEASE_TOKEN (and the job's trace context as TRACEPARENT and
TRACESTATE, when it has one) in its environment, with only PATH, HOME, USER,
LOGNAME, LANG, LC_*, TZ and TMPDIR of this process's: --exec-env NAME
(repeatable; NAME* for a prefix) passes more, so ERRAND_DB, ERRAND_TOKEN
and other secrets stay out unless named. Its output goes to this log. Exit 0
succeeds; 75 retries (class tempfail); 65 dead-letters (class permanent);
any other status N retries (class exit_N); a signal retries (class signal).
Past its --timeout the command's whole process group is killed and the
attempt retries with class timeout. On Unix, if this worker dies, even by
SIGKILL, each command's process group is killed with it; a process that
left the group (setsid) runs on.

Each --exec-many maps a kind to a command run once for a group of its
jobs, those one claim returned, at most --many-max KIND=N of them (default
100), in the same way: its stdin is the jobs' envelopes (id, kind, args,
attempt, lease_token, ...) as one JSON array, ERRAND_JOB_KIND and
ERRAND_JOB_COUNT are in its environment, and its stdout must be one JSON
array with an outcome per job, in any order: {"id": ID, "ok": true}, or
{"id": ID, "message": TEXT, "class": CLASS, "retry_after": DUR,
"permanent": BOOL} (all but id optional) for a failure. A job it gives no
outcome for ends as its exit says: as --exec's exit, or, after exit 0, a
retry with class bad_output; so does every job when its stdout is not such
an array.

Each --http maps a kind to a webhook: the job's envelope (id, kind, args,
attempt, lease_token, ...) is POSTed as JSON to URL, which is fixed here
and never taken from a job. 2xx succeeds; 429 and 503 retry after their
Retry-After; 408 and other 5xx retry; other 4xx dead-letter the job (class
http_NNN); a timeout (--timeout, default 30s) retries with class timeout.
--delete-on-success KIND deletes each job of KIND in the write that
records its success, instead of keeping it as succeeded: the cheapest
acknowledgment, at the cost of the job's record (docs/retention.md).

Without --once, errand work runs until stopped. Each --queue NAME=N runs
queue NAME with at most N jobs at once, with slots of its own, so a backlog
in one queue cannot starve another (default: default=10; NAME alone means
N=10). With --max-workers N the worker runs at most N jobs at once over
all its queues, each still within its own slots; while the queues together
have more ready work than N, freed capacity goes to them by --weight
NAME=W (default 1): with critical=6, default=3 and low=1, starts split
6:3:1, the lowest weight is never starved, and an idle queue's share goes
to the others. It claims only as many jobs as it has free slots, renews each lease
every third of --lease while the command runs, and looks for jobs every
--poll when idle. Jobs enqueued in this process start at once, and so do
jobs enqueued by other processes: PostgreSQL announces them with
LISTEN/NOTIFY, and on SQLite the worker checks the file for other
processes' commits (every 2ms, on Linux only after a write to the WAL). --poll-only turns listening off, for a
PostgreSQL pooler in transaction mode with no direct connection for LISTEN
(ERRAND_LISTEN_DB names one), or to spend no CPU on those checks; polling
alone then finds every job.

Every worker competes for the cluster's leadership, a lease on the
database's clock that the leader renews every third of --leader-ttl
(default 15s). The leader sweeps expired leases every few seconds, so a job
whose worker died is recovered even when nobody claims from its queue, and
prunes workers stopped for a day from the registry. A leader that cannot
renew stops leading before its lease ends; a draining leader resigns at
once. errand workers shows the leader.

With --metrics-addr it serves, on ADDR (a port alone means 127.0.0.1),
/metrics for Prometheus (this worker's counters of jobs started and
finished by outcome, run times and failures by class, and the queue gauges
read from the database), /healthz and /readyz; --ready-max-oldest-age and
--ready-max-dead-growth make /readyz answer 503 past those thresholds. See
docs/scaling.md.

Each --cron 'NAME=SPEC KIND [JSON]' is a recurring job: on every tick of
SPEC the worker enqueues a job of KIND with JSON as its args (default {})
into the default queue. SPEC is a cron expression of five fields, or six
with seconds first ("0 3 * * *", "*/10 * * * * *"), a descriptor (@hourly,
@daily, @weekly, @monthly, @yearly), or @every DURATION (at least 1s), with
an optional CRON_TZ=ZONE prefix (UTC otherwise). KIND need not be one this
worker runs. However many workers run the same NAME, each tick enqueues one
job, and the next tick is kept in the database, so a restart neither loses
nor repeats one; ticks missed while no worker ran are skipped (a tick up to
10s late still runs). A changed SPEC for a NAME starts afresh from now.
errand schedules lists them.

Each --rate-limit queue:NAME=N/PER, kind:NAME=N/PER or
dependency:NAME=N/PER starts at most N jobs of queue NAME, of kind NAME, or
of the kinds declared with --dependency KIND=NAME (one rate for all of them),
per PER (s, m, h or a duration) across every worker of the database: the
tokens are held in the database, so two workers share the rate. A job over the limit is not claimed: it stays
queued, its attempt unused, and the queue sleeps until a token is due.
,burst=B lets B start at once after a quiet spell (default a tenth of a
second's worth, at least 1). Each --concurrency-limit kind:NAME=N runs at
most N jobs of kind NAME at once across every worker of the database
(dependency:NAME=N: of the kinds declared with --dependency KIND=NAME,
together): a claim counts the running jobs under a lock in the database,
and a job over the limit stays queued, its attempt unused; a worker killed
with jobs running holds their slots until their leases expire.
,floor=F,ceiling=C[,target=DUR] makes it adaptive, as an adaptive rate
limit is. Each --retry-budget KIND=RATIO[/WINDOW][,min=N]
lets KIND's retries start only while they stay within RATIO of its first
attempts over about WINDOW (default 1m), plus N per window (default 10) so
that a quiet kind can still retry; over budget its retries wait, queued,
and its first attempts still run. Give every worker the same limits: a
limit follows the last worker that used it. errand limits shows them.

It logs to stderr: one line per job outcome with job_id, kind, attempt,
duration and class, leadership changes, and a summary at exit.

The first SIGTERM or SIGINT drains: claiming stops at once, running jobs get
--grace to finish, then the rest are cancelled (their process groups killed)
and given back: queued, available at once, the interrupted attempt not
counted. Then errand work exits 0. A second signal exits at once with status
1: running commands are killed and nothing is given back; their leases
expire and another worker runs the jobs again.

--dependency KIND=DEP says that jobs of KIND call DEP (an SMTP relay, a
payment API), which several kinds may share. When DEP's jobs fail N times
in a row within WINDOW (exit 75 or any other retryable failure, or a
timeout; not exit 65), DEP's circuit breaker opens for COOLDOWN in the
database: no worker, in this process or another, claims jobs of its kinds,
which wait with their attempts unused. Then up to PROBES jobs test DEP: a
success closes the breaker, a failure opens it again. --breaker
DEP=N/WINDOW/COOLDOWN[/PROBES] sets the policy (default 5/1m/30s/1); errand
breakers shows the breakers and resets one.

With --once it claims one job, runs it, prints one JSON line:
{"result": "idle"|"succeeded"|"retrying"|"dead"|"cancelled"|"lease_lost", "job_id", "attempt",
"kind", "class", "error", "available_at"} (null where it does not apply: an idle
claim has no job), and exits 0 whenever an outcome was recorded. The claim
honours the rate limits and retry budgets the workers keep in the database
(nothing within them is ready: result "idle") and the circuit breakers of
--dependency: a kind whose DEP's breaker is open is not claimed, and the
outcome counts toward its breaker. --rate-limit and --retry-budget with
--once record those limits in the database first, as a long-running worker
does, so the claim stays within them.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		codecKeys := codecFlag(fs)
		once := fs.Bool("once", false, "claim and run one job, print its result, then exit")
		execs := listFlag(fs, "exec", "run jobs of KIND with COMMAND (`KIND=COMMAND`, repeatable)")
		execMany := listFlag(fs, "exec-many", "run jobs of KIND in groups, each group with one run of COMMAND: envelopes on stdin, outcomes on stdout (`KIND=COMMAND`, repeatable)")
		manyMax := listFlag(fs, "many-max", "give each run of --exec-many KIND's command at most N jobs (`KIND=N`, repeatable; default 100)")
		execEnv := listFlag(fs, "exec-env", execEnvUsage)
		hooks := listFlag(fs, "http", "deliver jobs of KIND by POSTing their envelope to URL (`KIND=URL`, repeatable)")
		kindFlags := addKindPolicyFlags(fs)
		queues := listFlag(fs, "queue", "work queue NAME with at most N jobs at once (`NAME=N`, repeatable; default default=10)")
		weights := addWeightFlags(fs)
		lease := durationFlag(fs, "lease", "lease `DUR`, renewed every third of it while the command runs (default 30s)")
		grace := durationFlag(fs, "grace", "on SIGTERM, let running jobs finish for `DUR` before giving them back (default 30s)")
		poll := durationFlag(fs, "poll", "when idle, look for jobs every `DUR` (default 1s)")
		pollOnly := fs.Bool("poll-only", false, "find jobs from other processes by polling alone, without LISTEN or SQLite's checks for commits")
		leaderTTL := durationFlag(fs, "leader-ttl", "lease `DUR` of the cluster's leadership, renewed every third of it (default 15s)")
		crons := listFlag(fs, "cron", "enqueue a job of KIND on every tick of SPEC (`'NAME=SPEC KIND [JSON]'`, repeatable)")
		retention := addRetentionFlags(fs)
		agingF := agingFlag(fs)
		limits := addLimitFlags(fs)
		breakers := addBreakerFlags(fs)
		heartbeat := durationFlag(fs, "heartbeat", "record in the worker registry every `DUR` that this worker is alive (default 5s; errand workers shows it gone after three missed)")
		metricsAddr := fs.String("metrics-addr", "", "serve /metrics, /healthz and /readyz on `ADDR` (HOST:PORT, or a port alone for 127.0.0.1; default: off)")
		readyF := addReadyFlags(fs)

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; map kinds with --exec KIND=COMMAND", pos[0])
			}
			if len(*execs) == 0 && len(*execMany) == 0 && len(*hooks) == 0 {
				return usagef("give at least one --exec KIND=COMMAND or --http KIND=URL: errand work --exec send_receipt=./send_receipt.sh")
			}
			if isSet(fs, "lease") {
				if err := checkLeaseFlag(*lease); err != nil {
					return err
				}
			}
			if isSet(fs, "poll") && *poll < errandstore.MinInterval {
				return usagef("--poll %s is too short; give at least %s, e.g. 1s", *poll, errandstore.MinInterval)
			}
			if isSet(fs, "heartbeat") && *heartbeat < errandstore.MinInterval {
				return usagef("--heartbeat %s is too short; give at least %s, e.g. 5s", *heartbeat, errandstore.MinInterval)
			}
			if isSet(fs, "leader-ttl") && *leaderTTL < 30*time.Millisecond {
				return usagef("--leader-ttl must be at least 30ms, e.g. 15s")
			}
			if err := retention.check(); err != nil {
				return err
			}
			if *once {
				for _, name := range []string{"grace", "poll", "poll-only", "heartbeat", "leader-ttl", "metrics-addr", "cron", "max-workers", "weight", "retain-succeeded", "retain-dead", "retain-kind", "retain-every"} {
					if isSet(fs, name) {
						return usagef("--%s applies to the long-running worker; drop it or drop --once", name)
					}
				}
			}
			for _, name := range []string{"ready-max-oldest-age", "ready-max-dead-growth"} {
				if isSet(fs, name) && *metricsAddr == "" {
					return usagef("--%s sets a threshold of /readyz, which only --metrics-addr serves; add --metrics-addr 9464", name)
				}
			}
			readyOpts, err := readyF.options(fs)
			if err != nil {
				return err
			}
			var listen string
			var obs *errandhttp.MetricsObserver
			if *metricsAddr != "" {
				if listen, err = metricsListenAddr(*metricsAddr); err != nil {
					return err
				}
				obs = errandhttp.NewMetricsObserver()
			}
			qs, err := parseQueues(*queues)
			if err != nil {
				return err
			}
			schedules, err := parseCrons(*crons)
			if err != nil {
				return err
			}
			rates, budgets, err := limits.parse()
			if err != nil {
				return err
			}
			conc, err := limits.concurrency()
			if err != nil {
				return err
			}
			if *once && len(conc) > 0 {
				return usagef("--concurrency-limit bounds a long-running worker's claims; drop it with --once")
			}
			aging, err := parseAging(*agingF)
			if err != nil {
				return err
			}
			cfg := &errand.WorkerConfig{PriorityAging: aging, Queues: qs.concurrency, Lease: *lease, PollInterval: *poll, PollOnly: *pollOnly,
				HeartbeatInterval: *heartbeat, LeaderTTL: *leaderTTL, Schedules: schedules, Retention: retention.policy(),
				RateLimits: rates, RetryBudgets: budgets, ConcurrencyLimits: conc}
			if err := weights.apply(fs, qs, cfg); err != nil {
				return err
			}
			if cfg.MaxWorkers > errand.MaxConcurrency {
				return usagef("--max-workers %d is too many; give at most %d", cfg.MaxWorkers, errand.MaxConcurrency)
			}
			deps, policies, err := breakers.parse()
			if err != nil {
				return err
			}
			hf := &handlerFlags{execs: *execs, execMany: *execMany, manyMax: *manyMax, execEnv: *execEnv, hooks: *hooks}
			kinds, kindNames, handlers, err := execKinds(hf, kindFlags, deps, false, e)
			if err != nil {
				return err
			}
			// A schedule may enqueue kinds that other workers run.
			clientCfg := &errand.Config{Kinds: kinds, Logger: e.logger, AllowUnknownKinds: len(schedules) > 0, Breakers: policies}
			if obs != nil {
				clientCfg.Observer = obs // a nil *MetricsObserver would make a non-nil Observer
			}
			// What the worker would refuse is refused before the database
			// is opened, and perhaps created.
			if err := errand.CheckWorker(clientCfg, cfg); err != nil {
				return workerConfigError(err)
			}
			if clientCfg.Codec, err = loadCodec(*codecKeys); err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mayCreate, clientCfg)
			if err != nil {
				return err
			}
			var forced bool
			defer func() {
				if !forced {
					closeDB()
					return
				}
				// After a second signal the process exits at once: a
				// connection stuck in a stalled database must not hold it.
				closed := make(chan struct{})
				go func() { closeDB(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(time.Second):
				}
			}()
			if *once {
				return workOnce(ctx, c, &errand.WorkOneOpts{Queues: qs.names, Lease: *lease, RateLimits: rates, RetryBudgets: budgets}, e)
			}
			if listen != "" {
				m, err := startMetrics(c, obs, readyOpts, listen, e)
				if err != nil {
					return err
				}
				defer m.stop()
			}
			workerDefaults(fs, cfg, grace)
			w, err := c.NewWorker(cfg)
			if err != nil {
				return workerConfigError(err)
			}
			err = runWorker(ctx, w, cfg, qs, kindNames, *grace, handlers, e)
			forced = errors.Is(err, errSecondSignal)
			return err
		}
	},
}

// parseCrons reads the --cron flags.
func parseCrons(flags []string) ([]*errand.Schedule, error) {
	var out []*errand.Schedule
	seen := map[string]bool{}
	for _, f := range flags {
		s, err := errand.ParseScheduleFlag(f, nil)
		if err != nil {
			return nil, usagef("--cron: %v", err)
		}
		if seen[s.Name()] {
			return nil, usagef("--cron names schedule %q twice; give each its own name", s.Name())
		}
		seen[s.Name()] = true
		out = append(out, s)
	}
	return out, nil
}

// workOnce claims, runs and records one job, and prints what happened.
func workOnce(ctx context.Context, c *errand.Client[*sql.Tx], opts *errand.WorkOneOpts, e *env) error {
	res, err := c.WorkOne(ctx, opts)
	if err != nil {
		return workerConfigError(err)
	}
	b, err := json.Marshal(onceResultOf(res))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", jsonForTerminal(b))
	return err
}

// onceResult is what work --once prints: every field of the result, null
// when it does not apply (an idle claim has no job, attempt or kind; a
// success no class, error or next run).
type onceResult struct {
	Result      errand.Result `json:"result"`
	JobID       *string       `json:"job_id"`
	Attempt     *int          `json:"attempt"`
	Kind        *string       `json:"kind"`
	Class       *string       `json:"class"`
	Error       *string       `json:"error"`
	AvailableAt *time.Time    `json:"available_at"`
}

func onceResultOf(r *errand.WorkResult) onceResult {
	text := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	out := onceResult{Result: r.Result, JobID: r.JobID, Kind: text(r.Kind), Class: text(r.Class), Error: text(r.Error), AvailableAt: r.AvailableAt}
	if r.JobID != nil {
		out.Attempt = &r.Attempt
	}
	return out
}

// workerDefaults fills in the lease, the poll interval and the grace
// period that the flags left unset, as the worker would, so that the
// "worker started" line reports what is in effect.
func workerDefaults(fs *flag.FlagSet, cfg *errand.WorkerConfig, grace *time.Duration) {
	if cfg.Lease == 0 {
		cfg.Lease = errand.DefaultLease
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = errand.DefaultPollInterval
	}
	if !isSet(fs, "grace") {
		*grace = defaultGrace
	}
}

// errSecondSignal reports a stop that a second signal cut short.
var errSecondSignal = errors.New("second signal")

// runWorker runs w until ctx ends, then drains it for grace. It returns nil
// after a drain, whether or not jobs had to be given back; it returns an
// error when a second signal (forceStop) cut the drain short.
func runWorker(ctx context.Context, w *errand.Worker, cfg *errand.WorkerConfig, qs queueFlags, kinds []string, grace time.Duration, handlers []*exechandler.Handler, e *env) error {
	// The worker's own context never ends: a stop is always a drain.
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	start := time.Now()
	queues := qs.String()
	if len(kinds) == 0 {
		queues = "" // a worker of schedules or retention alone claims no job
	}
	e.logger.Info("worker started", "worker_id", w.ID(), "queues", queues, "kinds", strings.Join(kinds, ","),
		"poll", cfg.PollInterval.String(), "poll_only", cfg.PollOnly, "lease", cfg.Lease.String(), "grace", grace.String(),
		"max_workers", cfg.MaxWorkers, "weights", weightsString(cfg.QueueWeights))

	<-ctx.Done()
	e.logger.Info("draining: claiming stopped, waiting for running jobs", "running", w.Stats().JobsRunning, "grace", grace.String())
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(graceCtx) }()
	select {
	case err := <-stopped:
		// A grace period that ran out is not a failure: the worker gave
		// the jobs back. Stop fails only for jobs it could not give back
		// (the database unreachable), which run again after their leases.
		if err != nil {
			e.logger.Warn("drain could not give every job back; they run again once their leases expire", "err", err)
		}
	case <-forceStop(ctx):
		// Record nothing more, so the kill below is not written as the
		// jobs' failure: their leases expire as if this process had died.
		w.Abandon()
		killed := 0
		for _, h := range handlers {
			killed += h.KillAll()
		}
		logSummary(e, w, start, "worker stopped at once")
		return fmt.Errorf("%w: stopped without draining; killed %d running commands, whose jobs run again once their leases expire (within %s)", errSecondSignal, killed, cfg.Lease)
	}
	logSummary(e, w, start, "worker stopped")
	return nil
}

func logSummary(e *env, w *errand.Worker, start time.Time, msg string) {
	up := time.Since(start)
	st := w.Stats()
	idleRate := 0.0
	if up > 0 {
		idleRate = float64(st.IdleClaims) / up.Seconds()
	}
	e.logger.Info(msg, "worker_id", w.ID(), "uptime", approx(up), "jobs_run", st.JobsCompleted,
		"given_back", st.JobsGivenBack, "leases_lost", st.LeasesLost, "running", st.JobsRunning,
		"claims", st.Claims, "idle_claims", st.IdleClaims,
		"idle_claims_per_second", strconv.FormatFloat(idleRate, 'f', 2, 64),
		"outcome_writes", st.OutcomeWrites)
}

// weightsString shows queue weights as NAME=W,..., sorted by name.
func weightsString(weights map[string]int) string {
	parts := make([]string, 0, len(weights))
	for q, w := range weights {
		parts = append(parts, fmt.Sprintf("%s=%d", q, w))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// queueFlags are the --queue flags: names in the order given, and each
// queue's concurrency.
type queueFlags struct {
	names       []string
	concurrency map[string]int
}

func (q queueFlags) String() string {
	names := append([]string(nil), q.names...)
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, q.concurrency[n])
	}
	return strings.Join(parts, ",")
}

// parseQueues reads --queue NAME=N flags; NAME alone means N=10, and no
// flag at all means default=10. --once claims from every named queue and
// ignores N.
func parseQueues(specs []string) (queueFlags, error) {
	if len(specs) == 0 {
		specs = []string{errand.DefaultQueue}
	}
	q := queueFlags{concurrency: map[string]int{}}
	for _, spec := range specs {
		name, n := spec, defaultConcurrency
		if i := strings.LastIndexByte(spec, '='); i >= 0 {
			v, err := strconv.ParseInt(spec[i+1:], 10, 32)
			if err != nil || v < 1 || v > errand.MaxConcurrency {
				return queueFlags{}, usagef("--queue %q: write NAME=N with N at least 1 and at most %d, e.g. --queue reports=2", spec, errand.MaxConcurrency)
			}
			name, n = spec[:i], int(v)
		}
		if name == "" {
			return queueFlags{}, usagef("--queue %q names no queue; write NAME=N, e.g. --queue reports=2", spec)
		}
		if err := nameError("--queue", name); err != nil {
			return queueFlags{}, err
		}
		if _, dup := q.concurrency[name]; dup {
			return queueFlags{}, usagef("--queue names queue %q twice; give it once", name)
		}
		q.names = append(q.names, name)
		q.concurrency[name] = n
	}
	return q, nil
}

// nameError is the usage error for a queue, kind or dependency name that
// flag gave and the library would refuse, or nil.
func nameError(flag, name string) error {
	var ie *errandtype.InputError
	if err := errand.ValidateName(name); errors.As(err, &ie) {
		return usagef("%s: %s", flag, ie.Message)
	}
	return nil
}

// execEnvUsage is --exec-env's, for errand work and errand serve.
const execEnvUsage = "also pass variable `NAME` of this process's environment to --exec commands (repeatable; NAME* passes every name with the prefix)"

// kindPolicyFlags are the policies of the kinds --exec and --http map, in
// errand work and errand serve.
type kindPolicyFlags struct {
	timeouts *[]string
	deletes  *[]string
}

func addKindPolicyFlags(fs *flag.FlagSet) kindPolicyFlags {
	return kindPolicyFlags{
		timeouts: listFlag(fs, "timeout", "fail an attempt of KIND with class timeout after DUR (`KIND=DUR`, repeatable)"),
		deletes:  listFlag(fs, "delete-on-success", "delete each job of `KIND` as it succeeds instead of keeping it (repeatable; see docs/retention.md)"),
	}
}

// handlerFlags are the flags that map kinds to handlers.
type handlerFlags struct {
	execs, execMany, manyMax, execEnv, hooks []string
}

// execKinds builds a kind with an exec handler for every --exec (a many
// handler for every --exec-many) and a webhook for every --http, with the
// policies --timeout and --delete-on-success give, and returns their
// names, in flag order, and the exec handlers too.
//
// A --dependency of a kind that no --exec or --http maps is a usage error,
// unless declare: then the kind is declared with its dependency, for the
// claims of remote workers through errand serve's API.
func execKinds(hf *handlerFlags, policies kindPolicyFlags, deps map[string]string, declare bool, e *env) (*errand.Kinds, []string, []*exechandler.Handler, error) {
	ks := &kindSet{byName: map[string]errand.Handler{}, hookURLs: map[string]string{}, timeoutOf: map[string]time.Duration{}, deletes: map[string]bool{}, manyMax: map[string]int{}}
	if err := ks.addExecs(hf.execs, hf.execMany, hf.execEnv, e); err != nil {
		return nil, nil, nil, err
	}
	if err := ks.addManyMax(hf.manyMax); err != nil {
		return nil, nil, nil, err
	}
	if err := ks.addHooks(hf.hooks); err != nil {
		return nil, nil, nil, err
	}
	if err := ks.addTimeouts(*policies.timeouts); err != nil {
		return nil, nil, nil, err
	}
	for _, kind := range *policies.deletes {
		if _, known := ks.byName[kind]; !known {
			return nil, nil, nil, usagef("--delete-on-success names kind %q, which no --exec or --http maps", kind)
		}
		ks.deletes[kind] = true
	}
	var declared []string
	for kind := range deps {
		if _, known := ks.byName[kind]; !known {
			if !declare {
				return nil, nil, nil, usagef("--dependency names kind %q, which no --exec or --http maps", kind)
			}
			declared = append(declared, kind)
		}
	}
	slices.Sort(declared)
	for kind, url := range ks.hookURLs {
		h, err := errandhttp.NewWebhook(url, &errandhttp.WebhookOptions{Timeout: ks.timeoutOf[kind]})
		if err != nil {
			return nil, nil, nil, usagef("--http %s=%s: %v", kind, url, err)
		}
		ks.byName[kind] = h
	}
	kinds := errand.NewKinds()
	for _, name := range ks.order {
		opts := errand.KindOpts{Timeout: ks.timeoutOf[name], Dependency: deps[name], DeleteOnSuccess: ks.deletes[name]}
		if n, many := ks.manyMax[name]; many {
			errand.HandleManyRaw(kinds, name, runMany(ks.byName[name].(*exechandler.Handler)), &errand.ManyOpts{KindOpts: opts, Max: n})
			continue
		}
		kinds.HandleRaw(name, ks.byName[name], &opts)
	}
	for _, name := range declared {
		kinds.HandleRaw(name, nil, &errand.KindOpts{Dependency: deps[name]})
	}
	return kinds, append(ks.order, declared...), ks.execs, nil
}

// kindSet is the kinds that --exec and --http map, as execKinds reads
// them.
type kindSet struct {
	byName    map[string]errand.Handler // a webhook's is nil until its timeout is known
	order     []string                  // flag order
	execs     []*exechandler.Handler
	hookURLs  map[string]string
	timeoutOf map[string]time.Duration
	deletes   map[string]bool // --delete-on-success
	manyMax   map[string]int  // the kinds of --exec-many, and their --many-max (0: the default)
}

// addExecs reads --exec KIND=COMMAND, --exec-many KIND=COMMAND and
// --exec-env NAME.
func (ks *kindSet) addExecs(execs, execMany, execEnv []string, e *env) error {
	if len(execEnv) > 0 && len(execs)+len(execMany) == 0 {
		return usagef("--exec-env passes variables to the commands of --exec; add --exec KIND=COMMAND or drop it")
	}
	for _, name := range execEnv {
		if err := exechandler.CheckEnvName(name); err != nil {
			return usagef("--exec-env: %v", err)
		}
	}
	for _, f := range []struct {
		flag  string
		specs []string
	}{{"--exec", execs}, {"--exec-many", execMany}} {
		for _, spec := range f.specs {
			kind, command, ok := strings.Cut(spec, "=")
			if !ok || kind == "" || strings.TrimSpace(command) == "" {
				return usagef("%s %q: write KIND=COMMAND, e.g. %s send_receipt=./send_receipt.sh", f.flag, spec, f.flag)
			}
			if err := nameError(f.flag, kind); err != nil {
				return err
			}
			if _, dup := ks.byName[kind]; dup {
				return usagef("%s maps kind %q twice; give one command per kind", f.flag, kind)
			}
			h, err := exechandler.New(command, &exechandler.Options{Logger: e.logger, Env: execEnv})
			if err != nil {
				return usagef("%s %q: %v", f.flag, spec, err)
			}
			ks.byName[kind] = h
			ks.order = append(ks.order, kind)
			ks.execs = append(ks.execs, h)
			if f.flag == "--exec-many" {
				ks.manyMax[kind] = 0
			}
		}
	}
	return nil
}

// addManyMax reads --many-max KIND=N for kinds of --exec-many.
func (ks *kindSet) addManyMax(specs []string) error {
	for _, spec := range specs {
		kind, n, ok := strings.Cut(spec, "=")
		if _, many := ks.manyMax[kind]; !ok || !many {
			return usagef("--many-max %q: write KIND=N for a kind of --exec-many, e.g. --many-max send_receipt=20", spec)
		}
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 || v > errand.MaxConcurrency {
			return usagef("--many-max %q: give N from 1 to %d, e.g. --many-max %s=20", spec, errand.MaxConcurrency, kind)
		}
		ks.manyMax[kind] = v
	}
	return nil
}

// runMany is the many handler of a kind of --exec-many: one run of h's
// command for the jobs of a call.
func runMany(h *exechandler.Handler) func(ctx context.Context, jobs []*errand.ManyJob[errand.RawArgs]) []error {
	return func(ctx context.Context, jobs []*errand.ManyJob[errand.RawArgs]) []error {
		js := make([]*errandtype.Job, len(jobs))
		for i, j := range jobs {
			js[i] = j.Job
		}
		return h.WorkMany(ctx, js)
	}
}

// addHooks reads --http KIND=URL; the webhooks are built once their
// timeouts are known.
func (ks *kindSet) addHooks(hooks []string) error {
	for _, spec := range hooks {
		kind, url, ok := strings.Cut(spec, "=")
		if !ok || kind == "" || strings.TrimSpace(url) == "" {
			return usagef("--http %q: write KIND=URL, e.g. --http send_receipt=https://billing.internal/receipts", spec)
		}
		if err := nameError("--http", kind); err != nil {
			return err
		}
		if _, dup := ks.byName[kind]; dup {
			return usagef("--exec and --http map kind %q more than once; give one handler per kind", kind)
		}
		if _, err := errandhttp.NewWebhook(url, nil); err != nil {
			return usagef("--http %q: %v", spec, err)
		}
		ks.byName[kind] = nil
		ks.hookURLs[kind] = url
		ks.order = append(ks.order, kind)
	}
	return nil
}

// addTimeouts reads --timeout KIND=DUR for kinds already mapped.
func (ks *kindSet) addTimeouts(timeouts []string) error {
	for _, spec := range timeouts {
		kind, dur, ok := strings.Cut(spec, "=")
		if !ok || kind == "" {
			return usagef("--timeout %q: write KIND=DUR, e.g. --timeout send_receipt=30s", spec)
		}
		if _, known := ks.byName[kind]; !known {
			return usagef("--timeout names kind %q, which no --exec or --http maps", kind)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 {
			return usagef("--timeout %q: want a positive Go duration such as 250ms, 30s or 1h", spec)
		}
		ks.timeoutOf[kind] = d
	}
	return nil
}

// retentionFlagError names the --retain flags in a retention policy's
// input error.
func retentionFlagError(err error) error {
	var ie *errandtype.InputError
	if errors.As(err, &ie) {
		switch ie.Field {
		case "Retention.succeeded_age":
			return usagef("--retain-succeeded: %s", ie.Message)
		case "Retention.dead_age":
			return usagef("--retain-dead: %s", ie.Message)
		case "Retention.Interval":
			return usagef("--retain-every: %s", ie.Message)
		}
		if strings.HasPrefix(ie.Field, "Retention.kinds") {
			return usagef("--retain-kind: %s", ie.Message)
		}
	}
	return err
}

// checkLeaseFlag refuses a --lease the worker would refuse, before any
// database is opened.
func checkLeaseFlag(d time.Duration) error {
	switch {
	case d < errand.MinLease:
		return usagef("--lease %s is too short; give at least %s, e.g. 30s", d, errand.MinLease)
	case d > errand.MaxLease:
		return usagef("--lease %s is longer than %s, so a crashed worker's job would wait that long to run again; give at most %s, e.g. 30s: the lease is renewed every third of it while the command runs", d, errand.MaxLease, errand.MaxLease)
	}
	return nil
}
