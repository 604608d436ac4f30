-- The steps of durable handlers (errand.Step), one row per step, keyed by
-- the job's seq: seq is never reused, so a job deleted and enqueued again
-- with the same id starts with no steps, and the prune deletes the steps
-- whose job is gone.
CREATE TABLE errand_steps (
    job_seq     bigint      NOT NULL,
    idx         integer     NOT NULL CHECK (idx >= 0),
    name        text        COLLATE "C" NOT NULL,
    result      jsonb,
    error       text,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (job_seq, idx),
    CHECK ((result IS NULL) <> (error IS NULL))
);
