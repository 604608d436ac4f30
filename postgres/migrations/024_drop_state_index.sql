-- errand_jobs_state (state, queue, kind) took an entry at every write of a
-- job, the enqueue, the claim and each acknowledgment, for operators' lists
-- and stats alone: a claim wrote four index entries, of which it was one.
-- Those reads now go through the index that already holds each state: the
-- claim index the waiting jobs, the lease index the running ones, and the
-- finished index the finished ones, which is rebuilt to carry their queue
-- and kind so that counting them stays an index-only scan.
--
-- The finished index holds the jobs with a finished_at; every finished job
-- has one (each write that finishes a job sets it), and the constraint
-- keeps it so.
UPDATE errand_jobs SET finished_at = coalesce(attempted_at, created_at)
    WHERE state IN ('succeeded', 'dead', 'cancelled') AND finished_at IS NULL;
ALTER TABLE errand_jobs ADD CONSTRAINT errand_jobs_finished_at
    CHECK (state NOT IN ('succeeded', 'dead', 'cancelled') OR finished_at IS NOT NULL);

-- Like every migration this runs in one transaction: enqueues and claims
-- wait for the check and the build of the finished index (0.6 to 0.9 s in
-- all with a million finished jobs, on 2 cores).
CREATE INDEX errand_jobs_finished_by ON errand_jobs (state, finished_at) INCLUDE (queue, kind)
    WHERE finished_at IS NOT NULL;
DROP INDEX errand_jobs_finished;
ALTER INDEX errand_jobs_finished_by RENAME TO errand_jobs_finished;
DROP INDEX errand_jobs_state;
