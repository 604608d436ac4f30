-- The audit of operators' actions: replays (as they were, with corrected
-- args, in bulk), cancels and prunes, with who, why and when. It replaces
-- errand_replays, whose records move here unchanged (same ids) as action
-- 'replay'. Times are Unix microseconds on the store's clock. Retention
-- never deletes from it.
CREATE TABLE errand_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    action      TEXT    NOT NULL,
    job_id      TEXT,
    operator    TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    prior_state TEXT,
    replay      INTEGER NOT NULL DEFAULT 0,
    details     TEXT
);
INSERT INTO errand_audit (id, action, job_id, operator, reason, at, prior_state, replay)
    SELECT id, 'replay', job_id, operator, reason, at, prior_state, replay FROM errand_replays ORDER BY id;
DROP TABLE errand_replays;
CREATE INDEX errand_audit_job ON errand_audit (job_id, id) WHERE job_id IS NOT NULL;
CREATE INDEX errand_audit_at ON errand_audit (at);

-- Finished jobs by state and when they finished: retention deletes the
-- oldest of them in batches, and the dashboard's figures (throughput, dead
-- letters per hour and day, run times) read the last minutes and hours.
-- Claims never touch it (a waiting or running job has no finished_at);
-- an outcome that finishes a job adds one entry.
CREATE INDEX errand_jobs_finished ON errand_jobs (state, finished_at)
    WHERE finished_at IS NOT NULL;
