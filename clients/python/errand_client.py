"""A client of errand's JSON API: enqueue and read jobs, and work them.

Standard library only. The API's contract is api/openapi.yaml in errand's
repository; this module follows it.

    client = Client("http://127.0.0.1:8080", token)
    client.enqueue("email", {"to": "a@example.com"}, idempotency_key="welcome-42")

    def send(job, ctx):
        ...  # ctx.cancelled is set when an operator cancels the job

    Worker(client, "default", {"email": send}, concurrency=4).run()  # until SIGTERM
"""

import json
import signal
import socket
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "Worker", "JobError", "APIError", "LeaseLost", "Context"]


class APIError(Exception):
    """An error answer of the API: its HTTP status, code and message."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class LeaseLost(APIError):
    """409 lease_lost: the job no longer runs under this lease; stop working on it."""


class JobError(Exception):
    """Raised by a handler to fail its job with a class, at once for good
    (permanent) or after retry_after (a duration such as "30s")."""

    def __init__(self, message, cls="error", permanent=False, retry_after=None):
        super().__init__(message)
        self.cls, self.permanent, self.retry_after = cls, permanent, retry_after


class Client:
    """The JSON API at base_url, called with an operator or reader token."""

    def __init__(self, base_url, token, timeout=30.0):
        self.base = base_url.rstrip("/") + "/api/v1"
        self.token, self.timeout = token, timeout

    def _call(self, method, path, body=None, query=None, headers=None, timeout=None):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None}, doseq=True)
        data = None
        req_headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            req_headers["Content-Type"] = "application/json"
        req_headers.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=req_headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                code, message = err["code"], err["message"]
            except (ValueError, KeyError, TypeError):
                code, message = "http_" + str(e.code), raw.decode(errors="replace")
            cls = LeaseLost if code == "lease_lost" else APIError
            raise cls(e.code, code, message) from None

    # Producers.

    def enqueue(self, kind, args=None, idempotency_key=None, **opts):
        """Enqueue a job of kind with args (a dict); opts are the API's job
        fields (queue, priority, delay, run_at, max_attempts, unique_key,
        ordering_key, tags, id, ...). Returns (job, duplicate)."""
        body = dict(opts, kind=kind)
        if args is not None:
            body["args"] = args
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        _, out = self._call("POST", "/jobs", body, headers=headers)
        return out["job"], out["duplicate"]

    def get(self, job_id):
        return self._call("GET", "/jobs/" + urllib.parse.quote(job_id, safe=""))[1]

    def list(self, state=None, queue=None, kind=None, limit=None, cursor=None):
        """A page of jobs: (jobs, next_cursor), the cursor None on the last page."""
        _, out = self._call("GET", "/jobs", query={"state": state, "queue": queue, "kind": kind, "limit": limit, "cursor": cursor})
        return out["jobs"], out.get("next_cursor")

    def result(self, job_id, wait="0s"):
        """What a finished job came to ({"id", "state", "output", "last_error"});
        APIError 409 not_finished when it has not finished within wait."""
        seconds = _seconds(wait)
        return self._call("GET", "/jobs/" + urllib.parse.quote(job_id, safe="") + "/result",
                          query={"wait": wait}, timeout=self.timeout + seconds)[1]

    def cancel(self, job_id, reason):
        return self._call("POST", "/jobs/" + urllib.parse.quote(job_id, safe="") + "/cancel", {"reason": reason})[1]

    # Workers.

    def claim(self, queue, kinds, lease="30s", max_jobs=1, worker=None):
        """Claim up to max_jobs jobs of kinds; [] when none waits."""
        body = {"kinds": list(kinds), "lease": lease, "max_jobs": max_jobs}
        if worker:
            body["worker"] = worker
        status, out = self._call("POST", "/queues/" + urllib.parse.quote(queue, safe="") + "/claim", body)
        return [] if status == 204 or not out else out["jobs"]

    def heartbeat(self, job_id, lease_token, lease="30s"):
        """Renew a lease: {"id", "lease_until", "cancel_requested"}."""
        return self._call("POST", self._job(job_id, "heartbeat"), {"lease_token": lease_token, "lease": lease})[1]

    def ack(self, job_id, lease_token):
        return self._call("POST", self._job(job_id, "ack"), {"lease_token": lease_token})[1]

    def fail(self, job_id, lease_token, message, cls=None, stack=None, permanent=False, retry_after=None):
        body = {"lease_token": lease_token, "message": message}
        for k, v in (("class", cls), ("stack", stack), ("retry_after", retry_after)):
            if v:
                body[k] = v
        if permanent:
            body["permanent"] = True
        return self._call("POST", self._job(job_id, "fail"), body)[1]

    def ack_many(self, leases):
        """Acknowledge 1 to 100 leases, (job_id, lease_token) pairs, in one
        transaction: one result per lease, in order, {"id", "state"} or
        {"id", "error": {"code": "lease_lost", ...}} with nothing written."""
        body = {"jobs": [{"id": i, "lease_token": t} for i, t in leases]}
        return self._call("POST", "/ack", body)[1]["results"]

    def fail_many(self, failures):
        """Record 1 to 100 failed attempts in one transaction, each a dict
        of id, lease_token and message, and class, stack, permanent or
        retry_after as fail takes them: one result per entry, in order, as
        ack_many's, with available_at for a retry."""
        return self._call("POST", "/fail", {"jobs": list(failures)})[1]["results"]

    def _job(self, job_id, action):
        return "/jobs/" + urllib.parse.quote(job_id, safe="") + "/" + action


class Context:
    """What a handler may watch: cancelled is set when an operator cancels
    the job (finish or give up soon; the job ends cancelled), lease_lost
    when another worker may run it now (stop: nothing more is recorded)."""

    def __init__(self):
        self.cancelled = threading.Event()
        self.lease_lost = threading.Event()


class Worker:
    """Claims jobs of the handlers' kinds from queue and runs each in a
    thread, at most concurrency at once, renewing its lease every third of
    it. A handler is called as handler(job, ctx): returning acknowledges the
    job, raising fails it (a JobError says how). run() works until stop() or
    SIGTERM, then drains: no new claim, running jobs finish."""

    def __init__(self, client, queue, handlers, concurrency=1, lease=30.0, poll=1.0, name=None):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client, self.queue, self.handlers = client, queue, dict(handlers)
        self.concurrency, self.lease, self.poll = concurrency, float(lease), float(poll)
        self.name = name or "%s-%d" % (socket.gethostname(), threading.get_native_id())
        self._stop = threading.Event()
        self._slots = threading.Semaphore(concurrency)
        self._running = []
        self._lock = threading.Lock()

    def stop(self):
        """Stop claiming; run() returns once the running jobs have finished."""
        self._stop.set()

    def run(self):
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: self.stop())
        else:
            previous = None
        try:
            while not self._stop.is_set():
                if not self._slots.acquire(timeout=self.poll):
                    continue
                if self._stop.is_set():  # stopped while it waited for a slot
                    self._slots.release()
                    break
                free = 1
                while free < self.concurrency and self._slots.acquire(blocking=False):
                    free += 1
                try:
                    jobs = self.client.claim(self.queue, sorted(self.handlers), lease=_duration(self.lease),
                                             max_jobs=free, worker=self.name)
                except (APIError, OSError):
                    jobs = []
                for _ in range(free - len(jobs)):
                    self._slots.release()
                for job in jobs:
                    t = threading.Thread(target=self._run_job, args=(job,), daemon=True)
                    with self._lock:
                        self._running.append(t)
                    t.start()
                if not jobs:
                    self._stop.wait(self.poll)
        finally:
            with self._lock:
                running = list(self._running)
            for t in running:
                t.join()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _run_job(self, job):
        ctx, done = Context(), threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, ctx, done), daemon=True)
        beat.start()
        try:
            self._outcome(job, ctx, self._call_handler(job, ctx))
        finally:
            done.set()
            beat.join()
            self._slots.release()
            with self._lock:
                self._running.remove(threading.current_thread())

    def _call_handler(self, job, ctx):
        try:
            self.handlers[job["kind"]](job, ctx)
            return None
        except Exception as e:  # the job's failure, reported below
            return e

    def _outcome(self, job, ctx, err):
        if ctx.lease_lost.is_set():
            return  # another worker may run it: record nothing
        token = job["lease_token"]
        try:
            if ctx.cancelled.is_set():
                self.client.fail(job["id"], token, "cancelled by an operator", cls="cancelled")
            elif err is None:
                self.client.ack(job["id"], token)
            elif isinstance(err, JobError):
                self.client.fail(job["id"], token, str(err), cls=err.cls, permanent=err.permanent,
                                 retry_after=err.retry_after, stack=_stack(err))
            else:
                self.client.fail(job["id"], token, "%s: %s" % (type(err).__name__, err), cls="error", stack=_stack(err))
        except LeaseLost:
            pass  # the lease expired meanwhile: another attempt owns the job
        except (APIError, OSError):
            pass  # not recorded: the lease expires and the job runs again

    def _heartbeat(self, job, ctx, done):
        token = job["lease_token"]
        while not done.wait(self.lease / 3):
            try:
                hb = self.client.heartbeat(job["id"], token, lease=_duration(self.lease))
            except LeaseLost:
                ctx.lease_lost.set()
                return
            except (APIError, OSError):
                continue  # try again at the next beat, while the lease lasts
            if hb.get("cancel_requested"):
                ctx.cancelled.set()


def _stack(err):
    return "".join(traceback.format_exception(type(err), err, err.__traceback__))[-8000:]


def _duration(seconds):
    """seconds as a Go duration string, to the millisecond."""
    return "%dms" % max(1, round(seconds * 1000))


def _seconds(d):
    """The seconds of a Go duration string such as "10s", "1m30s", "250ms"."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total, num, i = 0.0, "", 0
    while i < len(d):
        c = d[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = "ms" if d.startswith("ms", i) else c
        total += float(num or 0) * units.get(unit, 0)
        num, i = "", i + len(unit)
    return total
