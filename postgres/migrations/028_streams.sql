-- The output streams of running jobs (errand.Stream), one row per chunk in
-- the order written, keyed like the steps by the job's seq.
CREATE TABLE errand_streams (
    job_seq     bigint      NOT NULL,
    idx         integer     NOT NULL,
    data        text        NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (job_seq, idx)
);
