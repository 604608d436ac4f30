-- Every waiting job was written into two indexes of claim order: the claim
-- index and the fair index, whose fair claims read the jobs without a
-- fairness key (most jobs) from its NULL end. The claim index now leads
-- with whether a job has a key, after its queue, so that it serves both:
-- a plain claim reads its two ranges (jobs without a key, jobs with one)
-- and merges them, a fair claim reads the first range alone. The fair
-- index keeps only the jobs with a key: a job without one is written into
-- one index of claim order instead of two. Like every migration it runs in
-- a transaction, so both are built without CONCURRENTLY: they read waiting
-- rows only, but on a table of millions of waiting jobs, enqueues and
-- claims wait for the builds (seconds).
CREATE INDEX errand_jobs_claim_by_key ON errand_jobs (queue, (fairness_key IS NULL), priority, available_at, seq)
    WHERE state IN ('queued', 'retrying');
DROP INDEX errand_jobs_claim;
ALTER INDEX errand_jobs_claim_by_key RENAME TO errand_jobs_claim;
DROP INDEX errand_jobs_fair;
CREATE INDEX errand_jobs_fair ON errand_jobs (queue, fairness_key, priority, available_at, seq)
    WHERE state IN ('queued', 'retrying') AND fairness_key IS NOT NULL;
