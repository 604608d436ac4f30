// Package errandhttp is errand over HTTP: a JSON API that producers and
// workers in any language use, the operator's dashboard, Prometheus
// metrics and health checks, as http.Handlers that `errand serve` mounts
// and that a Go application can mount in its own server. [New] composes
// them behind one middleware; each is also available on its own.
//
// # The JSON API
//
// [NewAPI] serves /api/v1. Requests and responses are JSON (send
// Content-Type: application/json); times are RFC 3339 in UTC; durations
// are Go syntax ("30s"); a job is the job record, with its field names.
// An error is {"error": {"code": "...", "message": "..."}} with a status
// that says which kind: 400 invalid_input (nothing was written), 401
// unauthorized, 403 forbidden or cross_origin, 404 not_found, 409
// lease_lost, wrong_state, id_conflict or idempotency_conflict, 413 too_large, 415
// unsupported_media_type.
//
//	POST /api/v1/jobs                    enqueue; Idempotency-Key header
//	GET  /api/v1/jobs?state=&queue=&kind=&limit=&cursor=
//	GET  /api/v1/jobs/{id}
//	POST /api/v1/queues/{queue}/claim    {"kinds", "lease", "max_jobs", "worker"}; 204 when none
//	POST /api/v1/jobs/{id}/heartbeat     {"lease_token", "lease"}; answers {"id", "lease_until", "cancel_requested"}
//	POST /api/v1/jobs/{id}/ack           {"lease_token"}
//	POST /api/v1/ack                     {"jobs": [{"id", "lease_token"}, ...]}: up to 100 in one transaction
//	POST /api/v1/jobs/{id}/fail          {"lease_token", "class", "message", "retry_after", "permanent"}
//	POST /api/v1/fail                    {"jobs": [{"id", "lease_token", "class", "message", "retry_after", "permanent"}, ...]}: up to 100 in one transaction
//	POST /api/v1/jobs/{id}/output        {"lease_token", "output"}: the job's output, what its workflow's later steps receive
//	POST /api/v1/jobs/{id}/replay        {"reason", "args"}: args (optional) replace the job's (fix-and-replay)
//	POST /api/v1/jobs/{id}/cancel        {"reason"}: a running job gets a cancel request
//	GET  /api/v1/jobs/{id}/audit
//	POST /api/v1/replay                  {"reason", "kind", "queue", "class", "since", "until", "limit", "rate", "dry_run"}: dead jobs by filter
//	GET  /api/v1/audit?job=&action=&since=&until=&limit=&cursor=
//	POST /api/v1/prune                   {"reason", "succeeded_age", "dead_age", "batch", "dry_run"}
//	GET  /api/v1/stats                   counts by queue and state, and the insights per queue and kind
//	GET  /api/v1/schedules
//	GET  /api/v1/limits                  rate limits and retry budgets: tokens now, rule, claims held back
//	GET  /api/v1/breakers                 every dependency's circuit breaker: state, failures, open_until, trips
//	POST /api/v1/breakers/{dep}/reset     {"reason"}: close it now (audited as breaker_reset)
//	DELETE /api/v1/schedules/{name}      {"reason"}: audited; a worker still declaring it registers it again
//	POST /api/v1/batches                 {"id", "jobs": [job as POST /api/v1/jobs takes it, ...], "callback": {"kind", "args", ...}}; Idempotency-Key header
//	GET  /api/v1/batches?state=open|completed&limit= newest first, with members' counts
//	GET  /api/v1/batches/{id}            a batch: members' counts now, final counts, callback job
//	POST /api/v1/workflows               {"id", "name", "steps": [{"name", "kind", "args", "depends_on", "compensate": {"kind", "args", ...}, ...}]}; Idempotency-Key header
//	GET  /api/v1/workflows?state=&limit= newest first
//	GET  /api/v1/workflows/{id}          a workflow: its state, what happens next, failed step, and each step's job and compensation
//	POST /api/v1/workflows/{id}/rerun    {"id"}: a finished workflow runs again as a new one (id optional)
//	GET  /api/v1/workers
//
// A worker's heartbeat, ack and fail are fenced by the lease token its
// claim returned, as a Go worker's writes are: a stale or wrong token is
// 409 lease_lost and changes nothing. A failure is scheduled by the
// server's retry policy, exactly as a Go worker's would be. A heartbeat
// answering "cancel_requested": true means an operator cancelled the job:
// the worker stops and reports fail, which ends the job cancelled. A worker
// of a workflow's step records the step's output (POST .../output, fenced
// the same way) before its ack; the steps that depend on it find it in the
// field "workflow" of their args.
//
// A batch's jobs are job objects exactly as POST /api/v1/jobs takes them;
// its callback takes the same fields but id, run_at and the unique fields
// (its id is BATCHID.callback and it is enqueued once every member has
// finished; its args get the field "batch", the final counts). A batch's
// answer is {"batch", "jobs", "duplicate"}, 201 when it was enqueued, 200
// when one with its id existed.
//
// A workflow's step takes the job fields of POST /api/v1/jobs but id,
// run_at and the unique fields (its job's id is WFID.step.NAME and it runs
// when the steps it depends_on have succeeded); a kind needs no handler on
// the server. A workflow's answer is {"workflow", "jobs", "duplicate"},
// 201 when it was enqueued, 200 when one with its id existed.
//
// [JobRequest], [BatchRequest] and [WorkflowRequest] are these bodies as
// Go types, for a Go program that calls the API; `errand batch enqueue`
// and `errand workflow enqueue` read the same forms from a file.
//
// # Security
//
// [Auth] stands in front of everything. Tokens are named and have a role,
// read or operator; a request presents one as Authorization: Bearer
// TOKEN, or, from a browser, as the HttpOnly, SameSite=Strict cookie
// errand_token that /login sets. Secrets are compared by their SHA-256
// hashes in constant time. Every state-changing request needs the
// operator role and passes Go's cross-origin protection
// (http.CrossOriginProtection: a browser's Sec-Fetch-Site or Origin must
// name this server). The token's name is the operator recorded in the
// audit. Every response carries a strict Content-Security-Policy; bodies
// are capped (413); listing limits and batch sizes past their maximum are
// 400; malformed JSON and unknown fields are 400 with nothing written.
// Without tokens every request is let in as an operator named "local":
// errand serve allows that only on a loopback address with --no-auth, and
// otherwise generates a token. A read-only token sees no lease tokens;
// /login throttles failures per client address; /logout ends the session
// on the server. [New] serves /healthz without a token.
//
// # Webhook handlers
//
// [NewWebhook] returns an errand.Handler that delivers a job by POSTing
// its envelope to a fixed URL: what `errand serve --http KIND=URL` and
// `errand work --http KIND=URL` run.
package errandhttp
