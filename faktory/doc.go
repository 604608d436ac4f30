// Package faktory serves Faktory's work protocol over TCP, so that
// unchanged Faktory workers and producers (faktory-worker for Node.js,
// faktory_worker_ruby, faktory_worker_go, ...) run against errand. Each
// command maps onto the Go API of an [errand.Client]: PUSH and PUSHB
// enqueue, FETCH claims ([errand.ClaimOpts] with AnyKind, since a Faktory
// worker never announces its job types), ACK and FAIL record outcomes
// fenced by the claim's lease token. `errand serve --faktory ADDR` mounts
// it; docs/faktory.md is the user's page.
//
// Design decisions, written down where they live:
//
//   - Reservations are errand leases. A FETCH claims the job under a lease
//     of the job's reserve_for (default 1800 s) and keeps its lease token
//     in a table per worker id (wid), shared by all the connections of
//     that wid, since Faktory clients pool connections and ACK on another
//     than the one that fetched. ACK and FAIL present that token: an ACK
//     after the reservation expired and another worker claimed the job is
//     answered "-ERR lease lost", never a silent success. Faktory has no
//     per-job heartbeat, so the lease is never renewed.
//   - A job's identity is its jid. A PUSH of a jid that exists returns the
//     existing job when it is the job the push would have made (a retried
//     push), and an error naming what differs otherwise.
//   - Priorities map 5-p: Faktory's 1 to 9 (9 first, default 5) become
//     errand's 4 to -4 (lower first, default 0), so that the default is
//     the same in both and the order is kept.
//   - What errand has no field for is kept in the job's metadata under
//     one key, "faktory": {"custom": {...}, "reserve_for": 600,
//     "retry": -1}, each only when it says something. Other metadata keys
//     (a Go producer's trace context) are left alone, and a job enqueued
//     without them reaches a Faktory worker with custom {}.
//   - retry n is n+1 attempts; retry 0 and -1 are one attempt. errand
//     never discards a job: a job without retries that fails is dead, to
//     be inspected and replayed, where Faktory would drop it (retry 0).
//   - Input is bounded: a command line is at most MaxLineBytes (1 MiB by
//     default); a longer one is refused and the connection closed, since
//     the rest of the line cannot be told from the next command. A client
//     must finish its HELLO within HandshakeTimeout and each command line
//     within LineTimeout once it has begun; an idle connection is closed
//     after IdleTimeout. Nothing a client sends is trusted into an answer
//     unescaped: error messages are one line.
//   - Nothing here loses a job. A job claimed for a FETCH whose answer
//     cannot be written is given back at once (a snooze of 0, which does
//     not count the attempt); a connection that drops keeps its worker's
//     reservations, which end with their leases.
package faktory
