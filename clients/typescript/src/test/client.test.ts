// Tests of the client against a real errand serve: ERRAND_URL and
// ERRAND_TOKEN (an operator token) name it. clients/typescript's Go test
// starts one on SQLite and one on PostgreSQL and runs these against each:
//
//	go test ./clients/typescript

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";

import { APIError, Client, JobError, LeaseLost, Worker, type Handler } from "../index.js";

const URL_ = process.env.ERRAND_URL;
const TOKEN = process.env.ERRAND_TOKEN;
const here = dirname(fileURLToPath(import.meta.url)); // dist/test
const pkg = join(here, "..", "..");

async function waitFor<T>(cond: () => Promise<T | undefined | false>, what: string, limitMs = 20_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what} not met within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("schema.d.ts is generated from api/openapi.yaml as it stands", () => {
  const out = join(mkdtempSync(join(tmpdir(), "errand-ts-")), "schema.d.ts");
  execFileSync(join(pkg, "node_modules", ".bin", "openapi-typescript"), [join(pkg, "..", "..", "api", "openapi.yaml"), "-o", out], { stdio: "pipe" });
  assert.equal(readFileSync(join(pkg, "src", "schema.d.ts"), "utf8"), readFileSync(out, "utf8"), "run npm run generate in clients/typescript");
});

const live = { skip: !(URL_ && TOKEN) ? "set ERRAND_URL and ERRAND_TOKEN (go test ./clients/typescript does)" : false, timeout: 60_000 };

function setup(t: TestContext) {
  const client = new Client(URL_!, TOKEN!);
  const kind = "ts_" + randomUUID().replaceAll("-", "").slice(0, 12);
  const stops: (() => Promise<void>)[] = [];
  const work = (handler: Handler, opts = {}) => {
    const w = new Worker(client, "default", { [kind]: handler }, { handleSignals: false, poll: 0.1, ...opts });
    const done = w.run();
    stops.push(async () => {
      w.stop();
      await done;
    });
    return w;
  };
  const state = async (id: string) => (await client.get(id)).state;
  // Stops the workers, also when the test fails: a worker left running
  // would keep the test process alive.
  const cleanup = async () => {
    for (const s of stops.splice(0)) await s();
  };
  t.after(cleanup);
  return { client, kind, work, state, cleanup };
}

test("enqueue is idempotent and readable", live, async (t) => {
  const { client, kind } = setup(t);
  const key = "order-" + randomUUID();
  const first = await client.enqueue(kind, { n: 1 }, { idempotencyKey: key, max_attempts: 5, tags: ["ts"] });
  assert.equal(first.duplicate, false);
  assert.deepEqual([first.job.id, first.job.kind, first.job.args, first.job.max_attempts], [key, kind, { n: 1 }, 5]);
  const again = await client.enqueue(kind, { n: 1 }, { idempotencyKey: key, max_attempts: 5, tags: ["ts"] });
  assert.equal(again.duplicate, true);
  assert.equal((await client.get(key)).state, "queued");
  const { jobs } = await client.list({ kind });
  assert.deepEqual(jobs.map((j) => j.id), [key]);
});

test("bad input is an error with its code", live, async (t) => {
  const { client, kind } = setup(t);
  await assert.rejects(client.enqueue(kind, {}, { max_attempts: -1 }), (e: unknown) => e instanceof APIError && e.status === 400 && e.code === "invalid_input");
  await assert.rejects(client.get("no-such-job-" + kind), (e: unknown) => e instanceof APIError && e.code === "not_found");
});

test("the worker acknowledges", live, async (t) => {
  const { client, kind, work, state, cleanup } = setup(t);
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push((await client.enqueue(kind, { i })).job.id);
  const seen: number[] = [];
  work((job) => void seen.push((job.args as { i: number }).i), { concurrency: 3 });
  for (const id of ids) await waitFor(async () => (await state(id)) === "succeeded", `${id} succeeded`);
  await cleanup();
  assert.deepEqual(seen.sort(), [0, 1, 2, 3, 4, 5]);
});

test("a JobError dead-letters with its class", live, async (t) => {
  const { client, kind, work, state, cleanup } = setup(t);
  const { job } = await client.enqueue(kind, {}, { max_attempts: 3 });
  work(() => {
    throw new JobError("the address is malformed", "bad_address", true);
  });
  await waitFor(async () => (await state(job.id)) === "dead", "dead");
  await cleanup();
  const got = await client.get(job.id);
  assert.deepEqual([got.attempt, got.last_error?.class], [1, "bad_address"]);
});

test("an exception is retried with its stack", live, async (t) => {
  const { client, kind, work, state, cleanup } = setup(t);
  const { job } = await client.enqueue(kind, {}, { max_attempts: 2, backoff_base: "1h" });
  work(function parseThePayload() {
    throw new TypeError("payload is not an object");
  });
  await waitFor(async () => (await state(job.id)) === "retrying", "retrying");
  await cleanup();
  const err = (await client.get(job.id)).errors[0];
  assert.equal(err.class, "error");
  assert.match(err.message, /TypeError: payload is not an object/);
  assert.match(err.stack ?? "", /parseThePayload/);
});

test("heartbeats keep the lease", live, async (t) => {
  const { client, kind, work, state, cleanup } = setup(t);
  const { job } = await client.enqueue(kind, {});
  work(() => new Promise((r) => setTimeout(r, 2500)), { lease: 1 });
  await waitFor(async () => (await state(job.id)) === "succeeded", "succeeded");
  await cleanup();
  assert.equal((await client.get(job.id)).attempt, 1, "the lease of 1s lapsed while the handler ran 2.5s");
});

test("a cancel request reaches the handler", live, async (t) => {
  const { client, kind, work, state, cleanup } = setup(t);
  const { job } = await client.enqueue(kind, {});
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  work(
    (_job, ctx) =>
      new Promise<void>((resolve, reject) => {
        started();
        const t = setTimeout(() => reject(new Error("no cancel request heard")), 20_000);
        ctx.cancelled.addEventListener("abort", () => {
          clearTimeout(t);
          resolve();
        });
      }),
    { lease: 1 },
  );
  await running;
  await client.cancel(job.id, "the customer left");
  await waitFor(async () => (await state(job.id)) === "cancelled", "cancelled");
  await cleanup();
});

test("a stale lease is LeaseLost", live, async (t) => {
  const { client, kind } = setup(t);
  const { job } = await client.enqueue(kind, {});
  const claimed = await client.claim("default", [kind]);
  assert.deepEqual(claimed.map((j) => j.id), [job.id]);
  await assert.rejects(client.ack(job.id, "0".repeat(32)), LeaseLost);
  await client.ack(job.id, claimed[0].lease_token);
  await assert.rejects(client.ack(job.id, claimed[0].lease_token), LeaseLost);
  assert.equal((await client.result(job.id, "1s")).state, "succeeded");
  assert.deepEqual(await client.claim("default", [kind]), []);
});

test("many outcomes at once", live, async (t) => {
  const { client, kind } = setup(t);
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push((await client.enqueue(kind, { i }, { max_attempts: 3, backoff_base: "1h" })).job.id);
  const token = new Map((await client.claim("default", [kind], { maxJobs: 4 })).map((j) => [j.id, j.lease_token]));
  assert.deepEqual([...token.keys()].sort(), [...ids].sort());
  const acked = await client.ackMany([{ id: ids[0], leaseToken: token.get(ids[0])! }, { id: ids[1], leaseToken: "0".repeat(32) }]);
  assert.deepEqual(acked.map((r) => [r.id, r.state, r.error?.code]), [[ids[0], "succeeded", undefined], [ids[1], undefined, "lease_lost"]]);
  const failed = await client.failMany([
    { id: ids[1], leaseToken: token.get(ids[1])!, message: "503 upstream", cls: "upstream_down" },
    { id: ids[2], leaseToken: token.get(ids[2])!, message: "no such user", permanent: true },
  ]);
  assert.deepEqual(failed.map((r) => [r.id, r.state]), [[ids[1], "retrying"], [ids[2], "dead"]]);
  assert.ok(failed[0].available_at, "a retry says when it runs");
  assert.equal((await client.get(ids[1])).last_error?.class, "upstream_down");
  await assert.rejects(client.failMany([{ id: ids[3], leaseToken: token.get(ids[3])!, message: "x", permanent: true, retryAfter: "1m" }]),
    (err: unknown) => err instanceof APIError && err.code === "invalid_input");
  assert.equal((await client.get(ids[3])).state, "running", "a refused batch wrote nothing");
});

test("SIGTERM drains", live, async (t) => {
  const { client, kind, state } = setup(t);
  const first = (await client.enqueue(kind, {}, { priority: -1 })).job;
  const second = (await client.enqueue(kind, {})).job;
  const script = `
    import { Client, Worker } from ${JSON.stringify(join(pkg, "dist", "index.js"))};
    const [url, token, kind] = process.argv.slice(1);
    const slow = async (job) => { console.log("started", job.id); await new Promise((r) => setTimeout(r, 1500)); };
    // A long poll: the loop waits on the busy slot when SIGTERM comes.
    await new Worker(new Client(url, token), "default", { [kind]: slow }, { poll: 30 }).run();
    console.log("drained");
  `;
  const p = spawn(process.execPath, ["--input-type=module", "-e", script, URL_!, TOKEN!, kind], { stdio: ["ignore", "pipe", "inherit"] });
  t.after(() => void p.kill());
  let out = "";
  p.stdout.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => p.on("exit", (code) => r(code)));
  await waitFor(async () => out.includes("started"), "the first job started", 20_000);
  p.kill("SIGTERM");
  assert.equal(await exited, 0);
  assert.deepEqual(out.trim().split("\n"), [`started ${first.id}`, "drained"]);
  assert.equal(await state(first.id), "succeeded");
  assert.equal(await state(second.id), "queued");
});
