// Graphile Worker's side of bench/cmd/compare: one measure per process.
//
//   node runner.mjs '{"measure":"work","url":"postgres://...","schema":"s","jobs":20000,"batch":1000,"concurrency":1000}'
//
// The schema must exist (compare creates a fresh one and drops it
// afterwards). The runner migrates it first, untimed, then runs the
// measure and prints one line of JSON on stdout:
//
//   work, bulk: {"version":"0.18.0","settings":{...},"seconds":1.23,"perSec":16260}
//   latency:    {"version":"0.18.0","settings":{...},"firstMs":4.1,"latenciesMs":[...]}
//
// Measures, as compare measures errand and River:
//   work:    jobs enqueued beforehand (addJobs, batch a call), the
//            schema's tables analyzed when "analyze" is true, then timed
//            from starting the worker to the last job's completion being
//            written (Graphile deletes a job when it completes).
//   bulk:    jobs enqueued with addJobs, batch a call, timed.
//   latency: an idle worker; warmup+samples single jobs (runner.addJob),
//            each timed from just before the call to the task's start,
//            5 ms apart; the first warmup are not counted, but the very
//            first is reported apart.
//
// Errors go to stderr, with exit status 1.

// Graphile Worker logs a line for every successful job unless this is set
// when the module loads: with no-op jobs that would be most of the work.
process.env.NO_LOG_SUCCESS = "1";

const { run, makeWorkerUtils, Logger } = await import("graphile-worker");
const { EventEmitter } = await import("node:events");
const { readFile } = await import("node:fs/promises");

const version = JSON.parse(
  await readFile(new URL("./node_modules/graphile-worker/package.json", import.meta.url), "utf8"),
).version;

const workTimeoutMs = 5 * 60 * 1000; // compare's workTimeout
const startTimeoutMs = 10 * 1000; // compare's wait for one latency job

const req = JSON.parse(process.argv[2] ?? "{}");
for (const k of ["measure", "url", "schema"]) {
  if (!req[k]) fail(`missing "${k}" in the request`);
}

// The worker's settings: Graphile Worker at its best documented settings for
// throughput, at the comparison's concurrency.
//
// https://worker.graphile.org/docs/performance lists the settings of its
// fastest run (localQueue, batched completion, a pool one larger than the
// concurrency) and explains them under "Batching"; each option's own
// documentation is in node_modules/graphile-worker/dist/index.d.ts
// (GraphileConfig.WorkerOptions).
const concurrency = req.concurrency ?? 1000;
const settings = {
  connectionString: req.url,
  schema: req.schema,
  // The comparison's concurrency: errand's one queue runs this many jobs
  // at once, and it is River's MaxWorkers.
  concurrentJobs: concurrency,
  // The local queue fetches and locks a batch of jobs in one statement and
  // hands them to the pool's workers without a round trip each; it is
  // refetched only when empty. The docs' starting point is
  // concurrentJobs + 1 and "a much higher number" for very fast jobs (their
  // fastest run: 500 at concurrency 24), and Graphile warns below
  // concurrentJobs. 5 x concurrentJobs: at 20,000 jobs, sizes from
  // concurrentJobs + 1 to 10 x measured within 6% of one another here
  // (bench/RESULTS.md, 2026-12-05 22:51).
  localQueue: { size: req.localQueueSize ?? 5 * concurrency },
  // Batch completions: 0 ms gathers those of one event-loop turn into one
  // statement, as in the docs' fastest run.
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
  // The docs advise max(10, concurrentJobs + 2) connections, for workers that
  // each fetch and complete their own jobs; with the local queue and batched
  // completion one fetch and one completion serve many jobs (the docs'
  // fastest run had 25 for 24 jobs at once), and this server takes 100
  // connections in all. 10, Graphile's default: 4, 25 and 50 measured within
  // 6% of it here (bench/RESULTS.md). Graphile warns that it is below
  // concurrentJobs.
  maxPoolSize: req.maxPoolSize ?? 10,
  // Prepared statements on: the default, and turning them off costs "a
  // minor performance penalty" (the 0.17 release notes).
  preparedStatements: true,
  // New jobs are announced by LISTEN/NOTIFY; the poll is the fallback
  // (default 2000 ms), as River's FetchPollInterval is.
  pollInterval: req.pollInterval ?? 2000,
};

// Only warnings and errors, to stderr.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

function preset(events) {
  return {
    preset: { worker: { ...settings, logger, ...(events ? { events } : {}) } },
    noHandleSignals: true,
  };
}

function fail(message) {
  process.stderr.write(`graphile runner: ${message}\n`);
  process.exit(1);
}

const now = () => process.hrtime.bigint();
const seconds = (ns) => Number(ns) / 1e9;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withUtils(fn) {
  const utils = await makeWorkerUtils({ ...preset(), schema: req.schema, connectionString: req.url });
  try {
    await utils.migrate();
    return await fn(utils);
  } finally {
    await utils.release();
  }
}

async function addJobs(utils, n, batch) {
  for (let done = 0; done < n; done += batch) {
    const specs = [];
    for (let i = 0; i < Math.min(batch, n - done); i++) specs.push({ identifier: "noop", payload: { enqueued_at: 0 } });
    await utils.addJobs(specs);
  }
}

// analyze has PostgreSQL take the statistics of every table of the schema,
// as autovacuum does of a table that changed.
async function analyze(utils) {
  await utils.withPgClient(async (c) => {
    const { rows } = await c.query("select tablename from pg_tables where schemaname = $1", [req.schema]);
    for (const { tablename } of rows) await c.query(`analyze "${req.schema}"."${tablename}"`);
  });
}

// withTimeout rejects if p has not settled within ms.
function withTimeout(p, ms, what) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(what)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function work() {
  const { jobs, batch } = req;
  return withUtils(async (utils) => {
    await addJobs(utils, jobs, batch);
    if (req.analyze) await analyze(utils);
    const events = new EventEmitter();
    let succeeded = 0;
    let allRan;
    const ran = new Promise((r) => (allRan = r));
    events.on("job:success", () => {
      if (++succeeded === jobs) allRan();
    });
    const start = now();
    const runner = await run({ ...preset(events), taskList: { noop: async () => {} } }, undefined, []);
    try {
      await withTimeout(ran, workTimeoutMs, `graphile: ${succeeded} of ${jobs} jobs done after 5m`);
      // job:success is emitted before the completion is written (and with
      // completeJobBatchDelay, the write is batched): wait for the table to
      // be empty, that is every job's completion written, as errand and
      // River are timed to their last recorded outcome.
      for (;;) {
        const { rows } = await utils.withPgClient((c) =>
          c.query(`select exists (select 1 from "${req.schema}"._private_jobs) as left`),
        );
        if (!rows[0].left) break;
        if (seconds(now() - start) > workTimeoutMs / 1000) throw new Error("graphile: jobs left in the table after 5m");
        await sleep(1);
      }
      const s = seconds(now() - start);
      return { seconds: s, perSec: jobs / s };
    } finally {
      await runner.stop();
    }
  });
}

async function bulk() {
  const { jobs, batch } = req;
  return withUtils(async (utils) => {
    const start = now();
    await addJobs(utils, jobs, batch);
    const s = seconds(now() - start);
    return { seconds: s, perSec: jobs / s };
  });
}

async function latency() {
  const { warmup, samples } = req;
  return withUtils(async () => {
    let started = null;
    const task = async (payload) => {
      if (started && payload.enqueued_at) started(Number(now() - BigInt(payload.enqueued_at)) / 1e6);
    };
    const runner = await run({ ...preset(), taskList: { noop: task } }, undefined, []);
    try {
      await sleep(200); // let the worker settle into idling
      const out = { firstMs: 0, latenciesMs: [] };
      for (let i = 0; i < warmup + samples; i++) {
        const got = new Promise((r) => (started = r));
        await runner.addJob("noop", { enqueued_at: now().toString() });
        const ms = await withTimeout(got, startTimeoutMs, "a job did not start within 10s");
        if (i === 0) out.firstMs = ms;
        if (i >= warmup) out.latenciesMs.push(ms);
        await sleep(5);
      }
      return out;
    } finally {
      await runner.stop();
    }
  });
}

const measures = { work, bulk, latency };
if (!measures[req.measure]) fail(`unknown measure "${req.measure}"`);
try {
  const out = await measures[req.measure]();
  const { connectionString, schema, ...shown } = settings;
  process.stdout.write(JSON.stringify({ version, settings: shown, ...out }) + "\n");
  process.exit(0);
} catch (e) {
  fail(e?.stack ?? String(e));
}
