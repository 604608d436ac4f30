-- Retention deletes a completed batch and a finished workflow once none of
-- their jobs is left. These indexes give it the candidates oldest first,
-- without reading the open ones: whether any job is left is then one seek
-- in errand_jobs_batch, errand_jobs_cancel (the callback job) or
-- errand_jobs_workflow per candidate.
CREATE INDEX errand_batches_completed ON errand_batches (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX errand_workflows_finished ON errand_workflows (finished_at)
    WHERE state IN ('succeeded', 'failed');
