// A client of errand's JSON API: enqueue and read jobs, and work them.
// Its types are generated from the API's contract, api/openapi.yaml
// (npm run generate), so a change of the contract is a change here.

import { hostname } from "node:os";
import type { components } from "./schema.js";

type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type JobRequest = Schemas["JobRequest"];
export type ClaimedJob = Schemas["Envelope"];
export type Heartbeat = Schemas["HeartbeatResponse"];
export type Outcome = Schemas["OutcomeResponse"];
export type AckManyResult = Schemas["AckManyResponse"]["results"][number];
export type FailManyResult = Schemas["FailManyResponse"]["results"][number];
export type JobResult = Schemas["JobResult"];
export type JobState = Schemas["JobState"];
export type ErrorCode = Schemas["Error"]["error"]["code"];

/** An error answer of the API: its HTTP status, code and message. */
export class APIError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "APIError";
  }
}

/** 409 lease_lost: the job no longer runs under this lease; stop working on it. */
export class LeaseLost extends APIError {
  constructor(status: number, code: string, message: string) {
    super(status, code, message);
    this.name = "LeaseLost";
  }
}

/** Thrown by a handler to fail its job with a class, for good (permanent)
 * or after retryAfter (a duration such as "30s"). */
export class JobError extends Error {
  constructor(
    message: string,
    readonly cls = "error",
    readonly permanent = false,
    readonly retryAfter?: string,
  ) {
    super(message);
    this.name = "JobError";
  }
}

/** What a failed attempt reports: a message, and a class, a stack, and
 * whether to give up (permanent) or retry after a duration such as "30s". */
export type Failure = { message: string; cls?: string; stack?: string; permanent?: boolean; retryAfter?: string };

/** The job fields an enqueue may set besides its kind and args. */
export type EnqueueOptions = Omit<JobRequest, "kind" | "args"> & { idempotencyKey?: string };

/** The JSON API at baseURL, called with an operator or reader token. */
export class Client {
  private readonly base: string;

  constructor(
    baseURL: string,
    private readonly token: string,
    private readonly timeoutMs = 30_000,
  ) {
    this.base = baseURL.replace(/\/+$/, "") + "/api/v1";
  }

  private async call<T>(method: string, path: string, body?: unknown, query?: Record<string, string | number | undefined>, headers?: Record<string, string>, timeoutMs?: number): Promise<{ status: number; data: T }> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const h: Record<string, string> = { Authorization: `Bearer ${this.token}`, Accept: "application/json", ...headers };
    if (body !== undefined) h["Content-Type"] = "application/json";
    const resp = await fetch(url, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs ?? this.timeoutMs),
    });
    const text = await resp.text();
    if (!resp.ok) {
      let code = `http_${resp.status}`;
      let message = text;
      try {
        const e = JSON.parse(text).error;
        code = e.code;
        message = e.message;
      } catch {
        // not the API's JSON error: keep the status and the text
      }
      throw code === "lease_lost" ? new LeaseLost(resp.status, code, message) : new APIError(resp.status, code, message);
    }
    return { status: resp.status, data: (text ? JSON.parse(text) : undefined) as T };
  }

  private static job(id: string, action = ""): string {
    return "/jobs/" + encodeURIComponent(id) + (action ? "/" + action : "");
  }

  // Producers.

  /** Enqueues a job of kind with args: the job, and whether it existed
   * already (its id, Idempotency-Key or unique key). */
  async enqueue(kind: string, args?: Record<string, unknown>, opts: EnqueueOptions = {}): Promise<{ job: Job; duplicate: boolean }> {
    const { idempotencyKey, ...fields } = opts;
    const body: JobRequest = { ...fields, kind, ...(args === undefined ? {} : { args }) };
    const headers = idempotencyKey ? { "Idempotency-Key": idempotencyKey } : undefined;
    const { data } = await this.call<Schemas["EnqueueResponse"]>("POST", "/jobs", body, undefined, headers);
    return { job: data.job, duplicate: data.duplicate };
  }

  async get(id: string): Promise<Job> {
    return (await this.call<Job>("GET", Client.job(id))).data;
  }

  /** A page of jobs, and the cursor of the next (null on the last). */
  async list(filter: { state?: string; queue?: string; kind?: string; limit?: number; cursor?: string } = {}): Promise<{ jobs: Job[]; nextCursor: string | null }> {
    const { data } = await this.call<{ jobs: Job[]; next_cursor: string | null }>("GET", "/jobs", undefined, filter);
    return { jobs: data.jobs, nextCursor: data.next_cursor };
  }

  /** What a finished job came to; APIError 409 not_finished when it has not
   * finished within wait (a duration such as "10s"). */
  async result(id: string, wait = "0s"): Promise<JobResult> {
    return (await this.call<JobResult>("GET", Client.job(id, "result"), undefined, { wait }, undefined, this.timeoutMs + seconds(wait) * 1000)).data;
  }

  async cancel(id: string, reason: string): Promise<Job> {
    return (await this.call<Job>("POST", Client.job(id, "cancel"), { reason })).data;
  }

  // Workers.

  /** Claims up to maxJobs jobs of kinds from queue; [] when none waits. */
  async claim(queue: string, kinds: string[], opts: { lease?: string; maxJobs?: number; worker?: string } = {}): Promise<ClaimedJob[]> {
    const body: Schemas["ClaimRequest"] = { kinds, lease: opts.lease ?? "30s", max_jobs: opts.maxJobs ?? 1, ...(opts.worker ? { worker: opts.worker } : {}) };
    const { status, data } = await this.call<{ jobs: ClaimedJob[] } | undefined>("POST", "/queues/" + encodeURIComponent(queue) + "/claim", body);
    return status === 204 || !data ? [] : data.jobs;
  }

  async heartbeat(id: string, leaseToken: string, lease = "30s"): Promise<Heartbeat> {
    return (await this.call<Heartbeat>("POST", Client.job(id, "heartbeat"), { lease_token: leaseToken, lease })).data;
  }

  async ack(id: string, leaseToken: string): Promise<Outcome> {
    return (await this.call<Outcome>("POST", Client.job(id, "ack"), { lease_token: leaseToken })).data;
  }

  async fail(id: string, leaseToken: string, f: Failure): Promise<Outcome> {
    return (await this.call<Outcome>("POST", Client.job(id, "fail"), failBody(leaseToken, f))).data;
  }

  /** Acknowledges 1 to 100 leases in one transaction: one result per lease,
   * in order, its state or a lease_lost error with nothing written for it. */
  async ackMany(leases: { id: string; leaseToken: string }[]): Promise<AckManyResult[]> {
    const body: Schemas["AckManyRequest"] = { jobs: leases.map((l) => ({ id: l.id, lease_token: l.leaseToken })) };
    return (await this.call<Schemas["AckManyResponse"]>("POST", "/ack", body)).data.results;
  }

  /** Records 1 to 100 failed attempts in one transaction, each as fail
   * records one: results as ackMany's, with available_at for a retry. A bad
   * entry is an APIError and nothing is written. */
  async failMany(failures: ({ id: string; leaseToken: string } & Failure)[]): Promise<FailManyResult[]> {
    const body: Schemas["FailManyRequest"] = { jobs: failures.map((f) => ({ id: f.id, ...failBody(f.leaseToken, f) })) };
    return (await this.call<Schemas["FailManyResponse"]>("POST", "/fail", body)).data.results;
  }
}

/** The body of a failure under leaseToken, as the API takes it. */
function failBody(leaseToken: string, f: Failure): Schemas["FailRequest"] {
  const body: Schemas["FailRequest"] = { lease_token: leaseToken, message: f.message };
  if (f.cls) body.class = f.cls;
  if (f.stack) body.stack = f.stack;
  if (f.permanent) body.permanent = true;
  if (f.retryAfter) body.retry_after = f.retryAfter;
  return body;
}

/** What a handler may watch: cancelled aborts when an operator cancels the
 * job (the job ends cancelled), leaseLost when another worker may run it
 * (nothing more is recorded). */
export interface JobContext {
  cancelled: AbortSignal;
  leaseLost: AbortSignal;
}

export type Handler = (job: ClaimedJob, ctx: JobContext) => Promise<void> | void;

export interface WorkerOptions {
  concurrency?: number;
  /** Lease in seconds; renewed every third of it. */
  lease?: number;
  /** Seconds between claims while the queue is empty. */
  poll?: number;
  name?: string;
  /** Drain on SIGTERM (default true). */
  handleSignals?: boolean;
}

/** Claims jobs of the handlers' kinds from queue, at most concurrency at
 * once, renewing each lease every third of it. A handler that returns
 * acknowledges its job; one that throws fails it (a JobError says how).
 * run() works until stop() or SIGTERM, then drains: no new claim, running
 * jobs finish. */
export class Worker {
  private stopping = false;
  private wakeUp: (() => void) | undefined;
  private readonly running = new Set<Promise<void>>();
  private readonly concurrency: number;
  private readonly lease: number;
  private readonly poll: number;
  private readonly name: string;

  constructor(
    private readonly client: Client,
    private readonly queue: string,
    private readonly handlers: Record<string, Handler>,
    private readonly opts: WorkerOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? 1;
    if (this.concurrency < 1) throw new RangeError("concurrency must be at least 1");
    this.lease = opts.lease ?? 30;
    this.poll = opts.poll ?? 1;
    this.name = opts.name ?? `${hostname()}-${process.pid}`;
  }

  /** Stops claiming; run() resolves once the running jobs have finished. */
  stop(): void {
    this.stopping = true;
    this.wakeUp?.();
  }

  async run(): Promise<void> {
    const onTerm = () => this.stop();
    if (this.opts.handleSignals ?? true) process.on("SIGTERM", onTerm);
    try {
      while (!this.stopping) {
        const free = this.concurrency - this.running.size;
        if (free === 0) {
          await Promise.race([...this.running, this.sleep(this.poll)]);
          continue;
        }
        let jobs: ClaimedJob[] = [];
        try {
          jobs = await this.client.claim(this.queue, Object.keys(this.handlers).sort(), { lease: duration(this.lease), maxJobs: free, worker: this.name });
        } catch {
          // the server is unreachable or refused: claim again after a poll
        }
        for (const job of jobs) {
          const p: Promise<void> = this.runJob(job).finally(() => this.running.delete(p));
          this.running.add(p);
        }
        if (jobs.length === 0) await this.sleep(this.poll);
      }
      await Promise.all(this.running);
    } finally {
      process.off("SIGTERM", onTerm);
    }
  }

  private sleep(seconds: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, seconds * 1000);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wakeUp = done;
    });
  }

  private async runJob(job: ClaimedJob): Promise<void> {
    const cancelled = new AbortController();
    const leaseLost = new AbortController();
    const beat = setInterval(() => void this.heartbeat(job, cancelled, leaseLost), (this.lease / 3) * 1000);
    let err: unknown;
    try {
      await this.handlers[job.kind](job, { cancelled: cancelled.signal, leaseLost: leaseLost.signal });
    } catch (e) {
      err = e ?? new Error("the handler threw " + String(e));
    } finally {
      clearInterval(beat);
    }
    if (leaseLost.signal.aborted) return; // another worker may run it: record nothing
    try {
      if (cancelled.signal.aborted) {
        await this.client.fail(job.id, job.lease_token, { message: "cancelled by an operator", cls: "cancelled" });
      } else if (err === undefined) {
        await this.client.ack(job.id, job.lease_token);
      } else if (err instanceof JobError) {
        await this.client.fail(job.id, job.lease_token, { message: err.message, cls: err.cls, permanent: err.permanent, retryAfter: err.retryAfter, stack: err.stack });
      } else {
        const e = err instanceof Error ? err : new Error(String(err));
        await this.client.fail(job.id, job.lease_token, { message: `${e.name}: ${e.message}`, cls: "error", stack: e.stack });
      }
    } catch {
      // not recorded (the lease was lost meanwhile, or the server is
      // unreachable): the lease expires and the job runs again
    }
  }

  private async heartbeat(job: ClaimedJob, cancelled: AbortController, leaseLost: AbortController): Promise<void> {
    if (leaseLost.signal.aborted) return;
    try {
      const hb = await this.client.heartbeat(job.id, job.lease_token, duration(this.lease));
      if (hb.cancel_requested) cancelled.abort();
    } catch (e) {
      if (e instanceof LeaseLost) leaseLost.abort();
      // otherwise: try again at the next beat, while the lease lasts
    }
  }
}

/** seconds as a Go duration string, to the millisecond. */
function duration(seconds: number): string {
  return `${Math.max(1, Math.round(seconds * 1000))}ms`;
}

/** The seconds of a Go duration string such as "10s", "1m30s", "250ms". */
function seconds(d: string): number {
  const units: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };
  let total = 0;
  for (const m of d.matchAll(/([0-9.]+)(ms|s|m|h)/g)) total += Number(m[1]) * units[m[2]];
  return total;
}
