-- errand's queue, its replay audit and its effect ledger. Times are
-- timestamptz (microseconds) on the store's clock: the database's now()
-- unless a clock is injected. Identifiers that are compared and sorted
-- (ids, queues, kinds, keys) use the "C" collation: byte order, as SQLite
-- sorts them, and cheaper to index than a linguistic collation.

CREATE TABLE errand_jobs (
    seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text        COLLATE "C" NOT NULL UNIQUE,
    queue           text        COLLATE "C" NOT NULL,
    kind            text        COLLATE "C" NOT NULL,
    args            jsonb       NOT NULL,
    args_version    integer     NOT NULL DEFAULT 1,
    priority        integer     NOT NULL DEFAULT 0,
    state           text        NOT NULL CHECK (state IN ('queued', 'running', 'retrying', 'succeeded', 'dead', 'cancelled')),
    attempt         integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL CHECK (max_attempts >= 1),
    backoff_base_us bigint      NOT NULL DEFAULT 0,
    backoff_max_us  bigint      NOT NULL DEFAULT 0,
    max_age_us      bigint      NOT NULL DEFAULT 0,
    available_at    timestamptz NOT NULL,
    deadline        timestamptz,
    lease_token     text,
    lease_until     timestamptz,
    lease_owner     text,
    unique_key      text        COLLATE "C" UNIQUE,
    ordering_key    text        COLLATE "C",
    progress        jsonb,
    created_at      timestamptz NOT NULL,
    attempted_at    timestamptz,
    finished_at     timestamptz,
    last_error      jsonb,
    errors          jsonb       NOT NULL DEFAULT '[]',
    replays         integer     NOT NULL DEFAULT 0,
    tags            jsonb       NOT NULL DEFAULT '[]'
);

-- Every state change rewrites columns that partial indexes depend on, so no
-- update of a job is HOT: each leaves a dead tuple in the table and in every
-- index. At the default scale factor (20%) a table of a million finished jobs
-- collects 200,000 dead tuples before autovacuum starts, and claims wade
-- through them. Vacuum this table after 2% churn, analyze as often so the
-- planner keeps choosing the partial indexes, and let vacuum run with little
-- throttling (its work here is small and frequent).
ALTER TABLE errand_jobs SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1
);

-- Claims read only claimable rows, in claim order, so finished rows never
-- slow them down.
CREATE INDEX errand_jobs_claim ON errand_jobs (queue, priority, available_at, seq)
    WHERE state IN ('queued', 'retrying');
-- The sweep's two questions: whose lease expired, whose deadline passed.
CREATE INDEX errand_jobs_lease ON errand_jobs (lease_until) WHERE state = 'running';
CREATE INDEX errand_jobs_deadline ON errand_jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('queued', 'retrying');
-- Operators' lists and stats.
CREATE INDEX errand_jobs_state ON errand_jobs (state, queue, kind);

CREATE TABLE errand_replays (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      text        COLLATE "C" NOT NULL,
    replay      integer     NOT NULL,
    prior_state text        NOT NULL,
    operator    text        NOT NULL,
    reason      text        NOT NULL,
    at          timestamptz NOT NULL
);
CREATE INDEX errand_replays_job ON errand_replays (job_id, id);

CREATE TABLE errand_effects (
    key         text        COLLATE "C" PRIMARY KEY,
    job_id      text        COLLATE "C" NOT NULL,
    state       text        NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
    lease_token text        NOT NULL DEFAULT '',
    message     text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
