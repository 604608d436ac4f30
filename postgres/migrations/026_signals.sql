-- Signals sent to jobs (errand.WaitFor reads them), one row per signal,
-- keyed like the steps by the job's seq, in the order they were sent.
CREATE TABLE errand_signals (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_seq     bigint      NOT NULL,
    name        text        COLLATE "C" NOT NULL,
    value       jsonb       NOT NULL,
    sent_at     timestamptz NOT NULL
);
CREATE INDEX errand_signals_job ON errand_signals (job_seq, name, id);
