-- Debounce and throttle keys. A job enqueued with a key keeps it in
-- debounce_key; absorbed counts the enqueues folded into it. The index
-- holds only rows with a key, so jobs enqueued without one never enter it.
ALTER TABLE errand_jobs ADD COLUMN debounce_key TEXT;
ALTER TABLE errand_jobs ADD COLUMN absorbed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX errand_jobs_debounce ON errand_jobs (kind, debounce_key, created_at)
    WHERE debounce_key IS NOT NULL;
