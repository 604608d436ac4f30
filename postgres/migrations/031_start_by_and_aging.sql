-- A job's start-by time: past it, a job that has not started never starts.
-- Until the first start the job's deadline is the earlier of its start-by
-- and its maximum age, so the claim's deadline filter and the deadline
-- sweep (and their index) serve both. NULL for none; adding a column with
-- no default rewrites nothing.
ALTER TABLE errand_jobs ADD COLUMN start_by timestamptz;

-- The priority a job was enqueued with, once priority aging has lowered its
-- stored priority (the claim index's column); NULL while it never aged.
ALTER TABLE errand_jobs ADD COLUMN base_priority integer;
