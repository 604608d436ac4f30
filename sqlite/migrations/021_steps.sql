-- The steps of durable handlers (errand.Step), one row per step, keyed by
-- the job's seq: seq is never reused (AUTOINCREMENT), so a job deleted and
-- enqueued again with the same id starts with no steps, and the prune
-- deletes the steps whose job is gone. Times are Unix microseconds on the
-- store's clock.
CREATE TABLE errand_steps (
    job_seq     INTEGER NOT NULL,
    idx         INTEGER NOT NULL CHECK (idx >= 0),
    name        TEXT    NOT NULL,
    result      TEXT,
    error       TEXT,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (job_seq, idx),
    CHECK ((result IS NULL) <> (error IS NULL))
) WITHOUT ROWID;
