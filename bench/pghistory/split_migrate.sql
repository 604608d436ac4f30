-- A prototype of splitting errand_jobs: unfinished jobs stay in
-- errand_jobs (the table every claim, sweep and acknowledgment reads),
-- finished ones (succeeded, dead, cancelled) live in errand_jobs_done.
-- The migration renames the existing table to errand_jobs_done, so the
-- history is not copied: only the unfinished jobs move, into a new
-- errand_jobs built as the migrations build it. Cost: the DDL and the
-- unfinished rows, whatever the history.
BEGIN;
LOCK TABLE errand.errand_jobs IN ACCESS EXCLUSIVE MODE;
ALTER TABLE errand.errand_jobs RENAME TO errand_jobs_done;
-- The indexes a finished job is never looked up by go; the others are
-- renamed, and kept.
DROP INDEX errand.errand_jobs_claim, errand.errand_jobs_fair, errand.errand_jobs_lease,
    errand.errand_jobs_deadline, errand.errand_jobs_cancel, errand.errand_jobs_ordering_running,
    errand.errand_jobs_requeued;
ALTER INDEX errand.errand_jobs_pkey RENAME TO errand_jobs_done_pkey;
ALTER INDEX errand.errand_jobs_id_key RENAME TO errand_jobs_done_id_key;
ALTER INDEX errand.errand_jobs_state RENAME TO errand_jobs_done_state;
ALTER INDEX errand.errand_jobs_finished RENAME TO errand_jobs_done_finished;
ALTER INDEX errand.errand_jobs_unique RENAME TO errand_jobs_done_unique;
ALTER INDEX errand.errand_jobs_ordering RENAME TO errand_jobs_done_ordering;
ALTER INDEX errand.errand_jobs_batch RENAME TO errand_jobs_done_batch;
ALTER INDEX errand.errand_jobs_workflow RENAME TO errand_jobs_done_workflow;
ALTER TABLE errand.errand_jobs_done RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor,
    autovacuum_vacuum_cost_delay);

-- The live table: the same columns, seq continuing the old sequence.
CREATE TABLE errand.errand_jobs (LIKE errand.errand_jobs_done INCLUDING DEFAULTS INCLUDING CONSTRAINTS
    INCLUDING IDENTITY INCLUDING STORAGE);
ALTER TABLE errand.errand_jobs ADD PRIMARY KEY (seq), ADD UNIQUE (id);
DO $$
DECLARE last bigint;
BEGIN
    EXECUTE format('SELECT last_value FROM %s', pg_get_serial_sequence('errand.errand_jobs_done', 'seq')) INTO last;
    PERFORM setval(pg_get_serial_sequence('errand.errand_jobs', 'seq'), last);
END $$;
-- A finished job keeps the seq it was given in errand_jobs.
ALTER TABLE errand.errand_jobs_done ALTER COLUMN seq DROP IDENTITY;
ALTER TABLE errand.errand_jobs SET (autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1);
CREATE INDEX errand_jobs_claim ON errand.errand_jobs (queue, (fairness_key IS NULL), priority, available_at, seq)
    WHERE state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_fair ON errand.errand_jobs (queue, fairness_key, priority, available_at, seq)
    WHERE state IN ('queued', 'retrying') AND fairness_key IS NOT NULL;
CREATE INDEX errand_jobs_lease ON errand.errand_jobs (lease_until) WHERE state = 'running';
CREATE INDEX errand_jobs_deadline ON errand.errand_jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_state ON errand.errand_jobs (state, queue, kind);
CREATE UNIQUE INDEX errand_jobs_unique ON errand.errand_jobs (unique_key, unique_window_us)
    WHERE unique_key IS NOT NULL AND (unique_states & CASE state WHEN 'queued' THEN 1 WHEN 'running' THEN 2 WHEN 'retrying' THEN 4 WHEN 'succeeded' THEN 8 WHEN 'dead' THEN 16 WHEN 'cancelled' THEN 32 ELSE 0 END) <> 0;
CREATE INDEX errand_jobs_ordering ON errand.errand_jobs (ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND (state IN ('queued', 'running', 'retrying') OR (state = 'dead' AND ordering_hold = 1));
CREATE UNIQUE INDEX errand_jobs_ordering_running ON errand.errand_jobs (ordering_key)
    WHERE ordering_key IS NOT NULL AND state = 'running';
CREATE INDEX errand_jobs_batch ON errand.errand_jobs (batch_id, state) WHERE batch_id IS NOT NULL;
CREATE INDEX errand_jobs_workflow ON errand.errand_jobs (workflow_id, state) WHERE workflow_id IS NOT NULL;
CREATE INDEX errand_jobs_cancel ON errand.errand_jobs (id) WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
CREATE INDEX errand_jobs_requeued ON errand.errand_jobs (seq) WHERE state = 'queued' AND last_error IS NOT NULL;

-- Move the unfinished jobs.
WITH m AS (DELETE FROM errand.errand_jobs_done WHERE state IN ('queued', 'running', 'retrying') RETURNING *)
INSERT INTO errand.errand_jobs OVERRIDING SYSTEM VALUE SELECT * FROM m;
COMMIT;
