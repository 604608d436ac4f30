-- Events a job's handler publishes (errand.SetEvent), one row per key,
-- keyed like the steps by the job's seq; a later value replaces the
-- earlier one. Times are Unix microseconds on the store's clock.
CREATE TABLE errand_events (
    job_seq     INTEGER NOT NULL,
    key         TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    set_at      INTEGER NOT NULL,
    PRIMARY KEY (job_seq, key)
) WITHOUT ROWID;
