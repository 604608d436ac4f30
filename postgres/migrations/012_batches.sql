-- Batches: jobs enqueued together whose callback job is enqueued once every
-- member is finished. A member names its batch in errand_jobs.batch_id. A
-- batch completes once: completed_at and the final counts are written in the
-- transaction that inserts the callback job, by a compare-and-set on
-- completed_at, so that however many processes notice the last member finish
-- the callback is enqueued once. callback is the callback job's insert
-- parameters as errand encodes them (JSON, kept as text so that both stores
-- return it byte for byte), NULL for a batch without one.
CREATE TABLE errand_batches (
    id              text        COLLATE "C" PRIMARY KEY,
    total           integer     NOT NULL,
    callback        text,
    callback_job_id text        COLLATE "C",
    created_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    succeeded       integer     NOT NULL DEFAULT 0,
    dead            integer     NOT NULL DEFAULT 0,
    cancelled       integer     NOT NULL DEFAULT 0
);
-- The open batches, which the leader's reconcile pass reads.
CREATE INDEX errand_batches_open ON errand_batches (created_at) WHERE completed_at IS NULL;

-- A nullable column without a default: no table rewrite.
ALTER TABLE errand_jobs ADD COLUMN batch_id text COLLATE "C";
-- A batch's members by state: "is any member unfinished" is one seek, and
-- jobs outside batches are not indexed at all.
CREATE INDEX errand_jobs_batch ON errand_jobs (batch_id, state) WHERE batch_id IS NOT NULL;
