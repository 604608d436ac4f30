"""Tests of errand_client against a real errand serve: ERRAND_URL and
ERRAND_TOKEN (an operator token) name it. clients/python/python_test.go
starts one on SQLite and one on PostgreSQL and runs these against each:

    go test ./clients/python
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest
import uuid

from errand_client import APIError, Client, JobError, LeaseLost, Worker

URL, TOKEN = os.environ.get("ERRAND_URL"), os.environ.get("ERRAND_TOKEN")


def wait_for(cond, limit=20.0, what="condition"):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("%s not met within %ss" % (what, limit))


@unittest.skipUnless(URL and TOKEN, "set ERRAND_URL and ERRAND_TOKEN (go test ./clients/python does)")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(URL, TOKEN)
        self.kind = "py_" + uuid.uuid4().hex[:12]  # each test its own kind

    def work(self, handler, **kw):
        """A worker of self.kind in a thread, stopped at the test's end."""
        w = Worker(self.client, "default", {self.kind: handler}, **kw)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        self.addCleanup(t.join, 30)
        self.addCleanup(w.stop)
        return w, t

    def state(self, job_id):
        return self.client.get(job_id)["state"]

    def test_enqueue_is_idempotent_and_readable(self):
        key = "order-" + uuid.uuid4().hex
        job, dup = self.client.enqueue(self.kind, {"n": 1}, idempotency_key=key, max_attempts=5, tags=["py"])
        self.assertFalse(dup)
        self.assertEqual((job["id"], job["kind"], job["args"], job["max_attempts"]), (key, self.kind, {"n": 1}, 5))
        again, dup = self.client.enqueue(self.kind, {"n": 1}, idempotency_key=key, max_attempts=5, tags=["py"])
        self.assertTrue(dup)
        self.assertEqual(again["id"], key)
        self.assertEqual(self.client.get(key)["state"], "queued")
        jobs, _ = self.client.list(kind=self.kind)
        self.assertEqual([j["id"] for j in jobs], [key])

    def test_bad_input_is_an_error_with_its_code(self):
        with self.assertRaises(APIError) as cm:
            self.client.enqueue(self.kind, {"n": 1}, max_attempts=-1)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_input"))
        with self.assertRaises(APIError) as cm:
            self.client.get("no-such-job-" + self.kind)
        self.assertEqual(cm.exception.code, "not_found")

    def test_worker_acknowledges(self):
        ids = [self.client.enqueue(self.kind, {"i": i})[0]["id"] for i in range(6)]
        seen = []
        self.work(lambda job, ctx: seen.append(job["args"]["i"]), concurrency=3, poll=0.1)
        for i in ids:
            wait_for(lambda: self.state(i) == "succeeded", what="job %s succeeded" % i)
        self.assertEqual(sorted(seen), list(range(6)))

    def test_job_error_dead_letters_with_its_class(self):
        job, _ = self.client.enqueue(self.kind, {}, max_attempts=3)

        def refuse(job, ctx):
            raise JobError("the address is malformed", cls="bad_address", permanent=True)

        self.work(refuse, poll=0.1)
        wait_for(lambda: self.state(job["id"]) == "dead", what="dead")
        got = self.client.get(job["id"])
        self.assertEqual((got["attempt"], got["last_error"]["class"]), (1, "bad_address"))

    def test_exception_is_retried_with_its_stack(self):
        job, _ = self.client.enqueue(self.kind, {}, max_attempts=2, backoff_base="1h")
        self.work(lambda job, ctx: int("x"), poll=0.1)
        wait_for(lambda: self.state(job["id"]) == "retrying", what="retrying")
        err = self.client.get(job["id"])["errors"][0]
        self.assertEqual(err["class"], "error")
        self.assertIn("ValueError", err["message"])
        self.assertIn("int(\"x\")", err["stack"])

    def test_heartbeats_keep_the_lease(self):
        job, _ = self.client.enqueue(self.kind, {})
        self.work(lambda job, ctx: time.sleep(2.5), lease=1.0, poll=0.1)
        wait_for(lambda: self.state(job["id"]) == "succeeded", what="succeeded")
        self.assertEqual(self.client.get(job["id"])["attempt"], 1, "the lease of 1s lapsed while the handler ran 2.5s")

    def test_cancel_reaches_the_handler(self):
        job, _ = self.client.enqueue(self.kind, {})
        started = threading.Event()

        def long(job, ctx):
            started.set()
            if not ctx.cancelled.wait(20):
                raise AssertionError("no cancel request heard")

        self.work(long, lease=1.0, poll=0.1)
        self.assertTrue(started.wait(20))
        self.client.cancel(job["id"], "the customer left")
        wait_for(lambda: self.state(job["id"]) == "cancelled", what="cancelled")

    def test_stale_lease_is_lease_lost(self):
        job, _ = self.client.enqueue(self.kind, {})
        claimed = self.client.claim("default", [self.kind], lease="30s")
        self.assertEqual([j["id"] for j in claimed], [job["id"]])
        with self.assertRaises(LeaseLost):
            self.client.ack(job["id"], "0" * 32)
        self.client.ack(job["id"], claimed[0]["lease_token"])
        with self.assertRaises(LeaseLost):
            self.client.ack(job["id"], claimed[0]["lease_token"])
        self.assertEqual(self.client.result(job["id"], wait="1s")["state"], "succeeded")
        self.assertEqual(self.client.claim("default", [self.kind]), [])

    def test_many_outcomes_at_once(self):
        ids = [self.client.enqueue(self.kind, {"i": i}, max_attempts=3, backoff_base="1h")[0]["id"] for i in range(4)]
        claimed = {j["id"]: j["lease_token"] for j in self.client.claim("default", [self.kind], max_jobs=4)}
        self.assertEqual(sorted(claimed), sorted(ids))
        acked = self.client.ack_many([(ids[0], claimed[ids[0]]), (ids[1], "0" * 32)])
        self.assertEqual([(r["id"], r.get("state"), r.get("error", {}).get("code")) for r in acked],
                         [(ids[0], "succeeded", None), (ids[1], None, "lease_lost")])
        failed = self.client.fail_many([
            {"id": ids[1], "lease_token": claimed[ids[1]], "message": "503 upstream", "class": "upstream_down"},
            {"id": ids[2], "lease_token": claimed[ids[2]], "message": "no such user", "permanent": True},
        ])
        self.assertEqual([(r["id"], r["state"]) for r in failed], [(ids[1], "retrying"), (ids[2], "dead")])
        self.assertIn("available_at", failed[0])
        self.assertEqual(self.client.get(ids[1])["last_error"]["class"], "upstream_down")
        with self.assertRaises(APIError) as cm:
            self.client.fail_many([{"id": ids[3], "lease_token": claimed[ids[3]], "permanent": True, "retry_after": "1m"}])
        self.assertEqual(cm.exception.code, "invalid_input")
        self.assertEqual(self.state(ids[3]), "running", "a refused batch wrote nothing")

    def test_sigterm_drains(self):
        """A worker process told SIGTERM finishes the job it runs, claims no
        other, and exits 0."""
        first, _ = self.client.enqueue(self.kind, {}, priority=-1)
        second, _ = self.client.enqueue(self.kind, {})
        script = textwrap.dedent("""
            import sys, time
            from errand_client import Client, Worker
            def slow(job, ctx):
                print("started", job["id"], flush=True)
                time.sleep(1.5)
            # A long poll: the loop waits on the busy slot when SIGTERM comes.
            Worker(Client(sys.argv[1], sys.argv[2]), "default", {sys.argv[3]: slow}, poll=30).run()
            print("drained", flush=True)
        """)
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.Popen([sys.executable, "-c", script, URL, TOKEN, self.kind], cwd=here,
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        self.assertEqual(p.stdout.readline().split(), ["started", first["id"]])
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        self.assertEqual((p.returncode, out.strip()), (0, "drained"))
        self.assertEqual(self.state(first["id"]), "succeeded")
        self.assertEqual(self.state(second["id"]), "queued")


if __name__ == "__main__":
    unittest.main()
