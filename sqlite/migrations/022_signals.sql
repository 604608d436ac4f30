-- Signals sent to jobs (errand.WaitFor reads them), one row per signal,
-- keyed like the steps by the job's seq, in the order they were sent.
-- Times are Unix microseconds on the store's clock.
CREATE TABLE errand_signals (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_seq     INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    sent_at     INTEGER NOT NULL
);
CREATE INDEX errand_signals_job ON errand_signals (job_seq, name, id);
