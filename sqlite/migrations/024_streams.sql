-- The output streams of running jobs (errand.Stream), one row per chunk in
-- the order written, keyed like the steps by the job's seq. Times are Unix
-- microseconds on the store's clock.
CREATE TABLE errand_streams (
    job_seq     INTEGER NOT NULL,
    idx         INTEGER NOT NULL,
    data        TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (job_seq, idx)
) WITHOUT ROWID;
