-- A job's start-by time (microseconds): past it, a job that has not started
-- never starts. Until the first start the job's deadline is the earlier of
-- its start-by and its maximum age, so the claim's deadline filter and the
-- deadline sweep serve both. NULL for none.
ALTER TABLE errand_jobs ADD COLUMN start_by INTEGER;

-- The priority a job was enqueued with, once priority aging has lowered its
-- stored priority (the claim index's column); NULL while it never aged.
ALTER TABLE errand_jobs ADD COLUMN base_priority INTEGER;
