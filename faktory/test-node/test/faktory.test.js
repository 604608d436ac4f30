// The unchanged faktory-worker client against errand serve --faktory.
// The Go test beside this folder starts the server and sets FAKTORY_URL
// (with the server's password), ERRAND_URL and ERRAND_TOKEN.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client, Worker } from "faktory-worker";

const FAKTORY_URL = required("FAKTORY_URL");
const ERRAND_URL = required("ERRAND_URL");
const ERRAND_TOKEN = required("ERRAND_TOKEN");

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./faktory/test-node/`);
  return v;
}

const client = new Client({ url: FAKTORY_URL });
after(() => client.close());

// api calls errand's JSON API on the same server.
async function api(method, path, body) {
  const res = await fetch(ERRAND_URL + path, {
    method,
    headers: { Authorization: `Bearer ${ERRAND_TOKEN}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function errandJob(id) {
  const { status, body } = await api("GET", `/api/v1/jobs/${encodeURIComponent(id)}`);
  assert.equal(status, 200, `GET /api/v1/jobs/${id}: ${JSON.stringify(body)}`);
  return body;
}

// waitFor polls fn until it returns a truthy value, for at most ms.
async function waitFor(what, fn, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// work runs a worker of one fresh queue with registry until the test ends.
async function work(t, queue, registry) {
  const worker = new Worker({ url: FAKTORY_URL, queues: [queue], concurrency: 2, registry, timeout: 5 });
  worker.on("error", () => {}); // the tests assert on outcomes instead
  await worker.work();
  t.after(() => worker.stop());
  return worker;
}

const fresh = (name) => `${name}-${randomUUID().slice(0, 8)}`;

test("a pushed job is worked and succeeds in errand", async (t) => {
  const queue = fresh("q");
  const seen = [];
  await work(t, queue, { add: async (a, b) => { seen.push(a + b); } });
  const job = client.job("add", 2, 3);
  job.queue = queue;
  const jid = await job.push();
  await waitFor("the job to run", () => seen.length === 1);
  assert.deepEqual(seen, [5]);
  const done = await waitFor("the ACK", async () => {
    const j = await errandJob(jid);
    return j.state === "succeeded" && j;
  });
  assert.equal(done.kind, "add");
  assert.equal(done.queue, queue);
  assert.deepEqual(done.args, [2, 3]);
  assert.match(done.lease_owner, /^faktory:/); // the worker that ran it
});

test("a job pushed with at runs no earlier", async (t) => {
  const queue = fresh("q");
  const at = new Date(Date.now() + 2500);
  let ranAt = null;
  await work(t, queue, { later: async () => { ranAt = new Date(); } });
  const job = client.job("later");
  job.queue = queue;
  job.at = at;
  const jid = await job.push();
  const queued = await errandJob(jid);
  assert.equal(queued.state, "queued");
  assert.equal(new Date(queued.available_at).getTime(), at.getTime());
  await waitFor("the scheduled job to run", () => ranAt !== null);
  assert.ok(ranAt.getTime() >= at.getTime() - 50, `ran at ${ranAt.toISOString()}, before ${at.toISOString()}`);
});

test("a failing job retries and errand shows its failure", async (t) => {
  const queue = fresh("q");
  const failures = [];
  let calls = 0;
  await work(t, queue, {
    flaky: () => async ({ job }) => {
      calls += 1;
      if (calls === 1) {
        const e = new Error("upstream said 503");
        e.code = "EUPSTREAM";
        throw e;
      }
      failures.push(job.failure);
    },
  });
  const job = client.job("flaky");
  job.queue = queue;
  job.retry = 3;
  const jid = await job.push();
  const failed = await waitFor("the failure in errand", async () => {
    const j = await errandJob(jid);
    return j.errors.length === 1 && j;
  });
  assert.equal(failed.errors[0].class, "eupstream");
  assert.equal(failed.errors[0].message, "upstream said 503");
  assert.match(failed.errors[0].stack, /upstream said 503/);
  assert.equal(failed.max_attempts, 4);
  const done = await waitFor("the retry to succeed", async () => {
    const j = await errandJob(jid);
    return j.state === "succeeded" && j;
  });
  assert.equal(done.attempt, 2);
  assert.equal(failures.length, 1);
  assert.equal(failures[0].retry_count, 0);
  assert.equal(failures[0].errtype, "eupstream");
  assert.equal(failures[0].message, "upstream said 503");
  assert.ok(Array.isArray(failures[0].backtrace) && failures[0].backtrace.length > 0);
});

test("a job without retries is dead in errand, and replayed from its API", async (t) => {
  const queue = fresh("q");
  let calls = 0;
  await work(t, queue, {
    once: async () => {
      calls += 1;
      if (calls === 1) throw new Error("bad input");
    },
  });
  const job = client.job("once");
  job.queue = queue;
  job.retry = 0;
  const jid = await job.push();
  const dead = await waitFor("the job to be dead", async () => {
    const j = await errandJob(jid);
    return j.state === "dead" && j;
  });
  assert.equal(dead.last_error.message, "bad input");
  const listed = await api("GET", `/api/v1/jobs?state=dead&queue=${queue}`);
  assert.deepEqual(listed.body.jobs.map((j) => j.id), [jid]);
  const replay = await api("POST", `/api/v1/jobs/${jid}/replay`, { reason: "input fixed" });
  assert.equal(replay.status, 200, JSON.stringify(replay.body));
  const done = await waitFor("the replayed job to succeed", async () => {
    const j = await errandJob(jid);
    return j.state === "succeeded" && j;
  });
  assert.equal(done.id, jid);
  assert.equal(done.replays, 1);
  assert.equal(calls, 2);
});

test("custom fields round-trip", async (t) => {
  const queue = fresh("q");
  const custom = { tenant: "acme", trace: { id: "abc", sampled: true }, n: [1, 2.5, null] };
  let got = null;
  await work(t, queue, { tagged: () => async ({ job }) => { got = job; } });
  const job = client.job("tagged", "x");
  job.queue = queue;
  job.custom = custom;
  job.priority = 8;
  job.reserveFor = 120;
  const jid = await job.push();
  await waitFor("the job to run", () => got !== null);
  assert.equal(got.jid, jid);
  assert.deepEqual(got.custom, custom);
  assert.deepEqual(got.args, ["x"]);
  assert.equal(got.priority, 8);
  assert.equal(got.reserve_for, 120);
  assert.equal(got.retry, 25);
  assert.ok(!Number.isNaN(Date.parse(got.created_at)));
  const inErrand = await errandJob(jid);
  assert.deepEqual(inErrand.metadata.faktory.custom, custom);
});

test("a job enqueued through errand's API is worked by a Faktory worker", async (t) => {
  const queue = fresh("q");
  let got = null;
  await work(t, queue, { resize: async (...args) => { got = args; } });
  const res = await api("POST", "/api/v1/jobs", { kind: "resize", queue, args: { image: 7 } });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor("the job to run", () => got !== null);
  assert.deepEqual(got, [{ image: 7 }]);
});

test("PUSHB answers the jobs it refused", async () => {
  const queue = fresh("q");
  const ok = { jid: fresh("bulk"), jobtype: "k", args: [], queue };
  const bad = { jid: fresh("bulk"), jobtype: "k", args: [], queue, priority: 12 };
  const refused = await client.pushBulk([ok, bad]);
  assert.deepEqual(Object.keys(refused), [bad.jid]);
  assert.match(refused[bad.jid].reason, /priority: 12 is out of range/);
  assert.equal((await errandJob(ok.jid)).state, "queued");
});

test("INFO reports errand's queues", async () => {
  const queue = fresh("q");
  const job = client.job("k");
  job.queue = queue;
  await job.push();
  const info = await client.info();
  assert.equal(info.server.description, "errand");
  assert.equal(info.faktory.queues[queue], 1);
});

test("the password is required", async () => {
  const url = new URL(FAKTORY_URL);
  assert.ok(url.password, "the server under test has a password");
  url.password = "not-the-password";
  const wrong = new Client({ url: url.toString() });
  await assert.rejects(wrong.connect(), /invalid password/);
  await wrong.close();
  url.password = "";
  const none = new Client({ url: url.toString() });
  await assert.rejects(none.connect(), /needs a password/);
  await none.close();
  assert.ok(await client.connect());
});

test("an unsupported command is refused by name, the connection usable", async () => {
  await assert.rejects(client.send(["MUTATE", JSON.stringify({ cmd: "clear", target: "dead" })]), /MUTATE is not supported by errand/);
  await assert.rejects(client.send(["QUEUE", "PAUSE", "default"]), /QUEUE is not supported by errand/);
  assert.equal(await client.send(["BEAT", JSON.stringify({ wid: "nobody" })]).catch((e) => e.message), "ERR BEAT: wid \"nobody\" is not this connection's worker; send the wid given in HELLO");
  assert.equal((await client.info()).server.description, "errand");
});
