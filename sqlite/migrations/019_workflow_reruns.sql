-- A workflow's first compensation ends replays of its steps
-- (errand.CheckReplayInWorkflow): compensation_started_at is when it was
-- enqueued, NULL before. rerun_of and rerun_as link a workflow run again as
-- a new one (errand.Client.RerunWorkflow) and that rerun; a rerun
-- workflow's steps are not replayed either.
ALTER TABLE errand_workflows ADD COLUMN compensation_started_at INTEGER;
ALTER TABLE errand_workflows ADD COLUMN rerun_of TEXT;
ALTER TABLE errand_workflows ADD COLUMN rerun_as TEXT;
-- A workflow that enqueued a compensation before the column existed: when
-- is not known, and its last change stands in.
-- (json_each has an id column of its own: the workflow's is qualified.)
UPDATE errand_workflows SET compensation_started_at = updated_at
    WHERE EXISTS (SELECT 1 FROM json_each(errand_workflows.enqueued) e
        WHERE substr(e.value, 1, length(errand_workflows.id) + length('.undo.')) = errand_workflows.id || '.undo.');
