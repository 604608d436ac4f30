-- Cancelling a running job: an operator's cancel of a running job records
-- the request here; the job stays running until its worker ends the attempt
-- as cancelled, or the sweep of its expired lease does. The request stays on
-- the record after the job ends, for operators; a replay clears it. A new
-- nullable column without a default rewrites nothing. The index holds only
-- the requests still pending (running jobs): empty almost always.
ALTER TABLE errand_jobs ADD COLUMN cancel_requested_at timestamptz;
CREATE INDEX errand_jobs_cancel ON errand_jobs (id)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
