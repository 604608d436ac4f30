-- Workflows: a graph of steps, each an ordinary job, enqueued once the steps
-- it depends on succeeded. A step's or compensation's job names its workflow
-- in errand_jobs.workflow_id. The row is the workflow's lock: advancing it
-- (errand.PlanWorkflow) happens in one transaction that locks the row
-- (SELECT ... FOR UPDATE), reads its jobs, inserts the planned ones and
-- rewrites the row, so a job is planned once however many processes advance
-- it at once. steps is the workflow's definition as errand encodes it (JSON,
-- kept as text so that both stores return it byte for byte); enqueued is the
-- JSON array of every job id the workflow ever enqueued, so that a job
-- deleted by retention is never enqueued again. failed_step is the step
-- whose failure stopped the workflow, NULL while none has. checked_at is when
-- the workflow was last advanced: the leader looks again only at open
-- workflows with a job finished since.
CREATE TABLE errand_workflows (
    id          text        COLLATE "C" PRIMARY KEY,
    name        text        NOT NULL DEFAULT '',
    state       text        NOT NULL,
    failed_step text,
    steps       text        NOT NULL,
    enqueued    text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    checked_at  timestamptz NOT NULL,
    finished_at timestamptz
);
-- The open workflows, which the leader's pass reads, oldest first.
CREATE INDEX errand_workflows_open ON errand_workflows (created_at)
    WHERE state IN ('running', 'compensating');
-- Listing, newest first.
CREATE INDEX errand_workflows_created ON errand_workflows (created_at);

-- Nullable columns without a default: no table rewrite. output is the
-- output a handler recorded (errand.SetOutput), JSON kept as text; NULL for
-- none, as for every job outside a workflow.
ALTER TABLE errand_jobs ADD COLUMN workflow_id text COLLATE "C";
ALTER TABLE errand_jobs ADD COLUMN output text;
-- A workflow's jobs by state: "is any job unfinished" is one seek, and jobs
-- outside workflows are not indexed at all.
CREATE INDEX errand_jobs_workflow ON errand_jobs (workflow_id, state) WHERE workflow_id IS NOT NULL;
