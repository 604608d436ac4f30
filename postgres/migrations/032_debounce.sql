-- Debounce and throttle keys. A job enqueued with a key keeps it in
-- debounce_key; absorbed counts the enqueues folded into it. Neither
-- column has a default that rewrites the table. The index holds only rows
-- with a key: jobs enqueued without one never enter it, so their inserts
-- and state changes cost nothing more; it is empty when created.
ALTER TABLE errand_jobs ADD COLUMN debounce_key text;
ALTER TABLE errand_jobs ADD COLUMN absorbed integer NOT NULL DEFAULT 0;
CREATE INDEX errand_jobs_debounce ON errand_jobs (kind, debounce_key, created_at)
    WHERE debounce_key IS NOT NULL;
