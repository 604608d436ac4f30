-- errand's queue, its replay audit and its effect ledger.
-- Times are Unix microseconds on the store's clock.

CREATE TABLE errand_jobs (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    queue           TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    args            TEXT    NOT NULL,
    args_version    INTEGER NOT NULL DEFAULT 1,
    priority        INTEGER NOT NULL DEFAULT 0,
    state           TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'retrying', 'succeeded', 'dead', 'cancelled')),
    attempt         INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL CHECK (max_attempts >= 1),
    backoff_base_us INTEGER NOT NULL DEFAULT 0,
    backoff_max_us  INTEGER NOT NULL DEFAULT 0,
    max_age_us      INTEGER NOT NULL DEFAULT 0,
    available_at    INTEGER NOT NULL,
    deadline        INTEGER,
    lease_token     TEXT,
    lease_until     INTEGER,
    lease_owner     TEXT,
    unique_key      TEXT UNIQUE,
    ordering_key    TEXT,
    progress        TEXT,
    created_at      INTEGER NOT NULL,
    attempted_at    INTEGER,
    finished_at     INTEGER,
    last_error      TEXT,
    errors          TEXT    NOT NULL DEFAULT '[]',
    replays         INTEGER NOT NULL DEFAULT 0,
    tags            TEXT    NOT NULL DEFAULT '[]'
);

-- Claims read only claimable rows, in claim order, so finished rows never
-- slow them down.
CREATE INDEX errand_jobs_claim ON errand_jobs (queue, priority, available_at, seq)
    WHERE state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_lease ON errand_jobs (lease_until) WHERE state = 'running';
CREATE INDEX errand_jobs_deadline ON errand_jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_state ON errand_jobs (state, queue, kind);

CREATE TABLE errand_replays (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      TEXT    NOT NULL,
    replay      INTEGER NOT NULL,
    prior_state TEXT    NOT NULL,
    operator    TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX errand_replays_job ON errand_replays (job_id, id);

CREATE TABLE errand_effects (
    key         TEXT    PRIMARY KEY,
    job_id      TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
    lease_token TEXT    NOT NULL DEFAULT '',
    message     TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
