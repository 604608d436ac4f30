-- Jobs waiting again after a failure: replayed, snoozed after a failed
-- attempt, or given back on drain. The insights count the last hour's
-- failures from the jobs that finished in it (errand_jobs_finished), the
-- running and retrying ones (errand_jobs_state) and these, which would
-- otherwise be found by reading every queued job. Enqueues, claims and
-- acknowledgments add no entry to it: a new job has no last error, a
-- claimed one runs, an acknowledged one is finished.
CREATE INDEX errand_jobs_requeued ON errand_jobs (seq)
    WHERE state = 'queued' AND last_error IS NOT NULL;
