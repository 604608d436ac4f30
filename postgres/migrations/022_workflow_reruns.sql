-- A workflow's first compensation ends replays of its steps
-- (errand.CheckReplayInWorkflow): compensation_started_at is when it was
-- enqueued, NULL before. rerun_of and rerun_as link a workflow run again as
-- a new one (errand.Client.RerunWorkflow) and that rerun; a rerun
-- workflow's steps are not replayed either. Nullable columns without a
-- default: no table rewrite.
ALTER TABLE errand_workflows
    ADD COLUMN compensation_started_at timestamptz,
    ADD COLUMN rerun_of text COLLATE "C",
    ADD COLUMN rerun_as text COLLATE "C";
-- A workflow that enqueued a compensation before the column existed: when
-- is not known, and its last change stands in.
UPDATE errand_workflows w SET compensation_started_at = w.updated_at
    WHERE EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.enqueued::jsonb) e(v)
        WHERE starts_with(e.v, w.id || '.undo.'));
