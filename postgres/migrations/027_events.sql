-- Events a job's handler publishes (errand.SetEvent), one row per key,
-- keyed like the steps by the job's seq; a later value replaces the
-- earlier one.
CREATE TABLE errand_events (
    job_seq     bigint      NOT NULL,
    key         text        COLLATE "C" NOT NULL,
    value       jsonb       NOT NULL,
    set_at      timestamptz NOT NULL,
    PRIMARY KEY (job_seq, key)
);
