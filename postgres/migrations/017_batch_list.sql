-- Batches newest first, as errand batches and GET /api/v1/batches list
-- them: all of them, or the completed ones (the open ones have
-- errand_batches_open). id breaks ties of created_at, so a page is read in
-- index order without a sort. errand_batches is small next to errand_jobs
-- (one row per batch), so the index is built in the migration's
-- transaction, without CONCURRENTLY.
CREATE INDEX errand_batches_created ON errand_batches (created_at, id);

-- The open batches, which the leader's reconcile pass reads oldest first
-- and the listing newest first, now in the same full order.
DROP INDEX errand_batches_open;
CREATE INDEX errand_batches_open ON errand_batches (created_at, id) WHERE completed_at IS NULL;
