-- The fair index holds keyed jobs only. Holding every waiting job made
-- each enqueue write one more index entry, although almost every job has
-- no fairness key and a fair claim finds those without one through the
-- claim index instead (the seek queue, then fairness_key IS NULL checked
-- in claim order). Plain claims and enqueues of jobs without a key never
-- touch it now. The price is paid by fair claims: finding the jobs without
-- a key reads the keyed jobs ahead of them in claim order (all of the
-- queue's ready keyed jobs when none is without a key).
DROP INDEX errand_jobs_fair;
CREATE INDEX errand_jobs_fair ON errand_jobs (queue, fairness_key, priority, available_at, seq)
    WHERE fairness_key IS NOT NULL AND state IN ('queued', 'retrying');
