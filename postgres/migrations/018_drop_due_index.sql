-- A queued job was written into errand_jobs_due as well as the claim index,
-- for one question only: when the next waiting job of a queue comes due.
-- That question now walks the claim index, priority by priority (see
-- nextDueSQL), so errand_jobs_due goes: one B-tree fewer to maintain for
-- every job enqueued, retried or snoozed.
DROP INDEX IF EXISTS errand_jobs_due;
