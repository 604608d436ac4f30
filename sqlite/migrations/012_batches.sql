-- Batches: jobs enqueued together whose callback job is enqueued once every
-- member is finished. A member names its batch in errand_jobs.batch_id. A
-- batch completes once: completed_at and the final counts are written in the
-- transaction that inserts the callback job, by a compare-and-set on
-- completed_at, so that however many processes notice the last member finish
-- the callback is enqueued once. callback is the callback job's insert
-- parameters as errand encodes them (JSON), NULL for a batch without one.
-- Times are Unix microseconds on the store's clock.
CREATE TABLE errand_batches (
    id              TEXT    PRIMARY KEY,
    total           INTEGER NOT NULL,
    callback        TEXT,
    callback_job_id TEXT,
    created_at      INTEGER NOT NULL,
    completed_at    INTEGER,
    succeeded       INTEGER NOT NULL DEFAULT 0,
    dead            INTEGER NOT NULL DEFAULT 0,
    cancelled       INTEGER NOT NULL DEFAULT 0
);
-- The open batches, which the leader's reconcile pass reads.
CREATE INDEX errand_batches_open ON errand_batches (created_at) WHERE completed_at IS NULL;

ALTER TABLE errand_jobs ADD COLUMN batch_id TEXT;
-- A batch's members by state: "is any member unfinished" is one seek, and
-- jobs outside batches are not indexed at all.
CREATE INDEX errand_jobs_batch ON errand_jobs (batch_id, state) WHERE batch_id IS NOT NULL;
