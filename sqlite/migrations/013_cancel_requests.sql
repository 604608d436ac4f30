-- Cancelling a running job: an operator's cancel of a running job records
-- the request here (Unix microseconds on the store's clock); the job stays
-- running until its worker ends the attempt as cancelled, or the sweep of
-- its expired lease does. The request stays on the record after the job
-- ends, for operators; a replay clears it. The index holds only the
-- requests still pending (running jobs), which the cancel listener reads
-- after each commit: it is empty almost always.
ALTER TABLE errand_jobs ADD COLUMN cancel_requested_at INTEGER;
CREATE INDEX errand_jobs_cancel ON errand_jobs (id)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
