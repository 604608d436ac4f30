-- Scoped unique keys, and ordering keys that a dead job may hold.
--
-- A unique key used to be a plain UNIQUE column: taken by its job in every
-- state, for as long as the job existed. Now each job records the states in
-- which it holds its key (unique_states, a bit per state, see
-- errand.UniqueScope) and the window it was enqueued in (unique_window_us,
-- the window's start in Unix microseconds, 0 for none), and a partial
-- unique index covers exactly the rows that hold their key: a job frees its
-- key the moment its state leaves its scope, whatever moves it there, with
-- no write of its own. unique_states defaults to every state (63) and the
-- window to none, so existing keys, and rows written without naming these
-- columns, behave as before.
--
-- ordering_hold = 1 makes a dead job hold its ordering key until it is
-- replayed or cancelled (errand.OrderingHoldOnDead); existing jobs release
-- it, as before.
--
-- SQLite cannot drop a column's UNIQUE constraint, so the table is rebuilt
-- with the same columns, rows, seq high-water mark and index names. The
-- predicates of errand_jobs_unique and errand_jobs_ordering are
-- errand.UniqueHeldSQL and errand.OrderingIndexSQL word for word: queries
-- repeat them so that SQLite uses these indexes.
CREATE TABLE errand_jobs_new (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT    NOT NULL UNIQUE,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    args_version     INTEGER NOT NULL DEFAULT 1,
    priority         INTEGER NOT NULL DEFAULT 0,
    state            TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'retrying', 'succeeded', 'dead', 'cancelled')),
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    backoff_base_us  INTEGER NOT NULL DEFAULT 0,
    backoff_max_us   INTEGER NOT NULL DEFAULT 0,
    max_age_us       INTEGER NOT NULL DEFAULT 0,
    available_at     INTEGER NOT NULL,
    deadline         INTEGER,
    lease_token      TEXT,
    lease_until      INTEGER,
    lease_owner      TEXT,
    unique_key       TEXT,
    ordering_key     TEXT,
    progress         TEXT,
    created_at       INTEGER NOT NULL,
    attempted_at     INTEGER,
    finished_at      INTEGER,
    last_error       TEXT,
    errors           TEXT    NOT NULL DEFAULT '[]',
    replays          INTEGER NOT NULL DEFAULT 0,
    tags             TEXT    NOT NULL DEFAULT '[]',
    unique_states    INTEGER NOT NULL DEFAULT 63,
    unique_window_us INTEGER NOT NULL DEFAULT 0,
    ordering_hold    INTEGER NOT NULL DEFAULT 0 CHECK (ordering_hold IN (0, 1))
);

INSERT INTO errand_jobs_new (seq, id, queue, kind, args, args_version, priority, state, attempt,
        max_attempts, backoff_base_us, backoff_max_us, max_age_us, available_at, deadline,
        lease_token, lease_until, lease_owner, unique_key, ordering_key, progress, created_at,
        attempted_at, finished_at, last_error, errors, replays, tags)
    SELECT seq, id, queue, kind, args, args_version, priority, state, attempt,
        max_attempts, backoff_base_us, backoff_max_us, max_age_us, available_at, deadline,
        lease_token, lease_until, lease_owner, unique_key, ordering_key, progress, created_at,
        attempted_at, finished_at, last_error, errors, replays, tags
    FROM errand_jobs ORDER BY seq;

-- Keep the AUTOINCREMENT high-water mark: a pruned job's seq is never
-- given again.
DELETE FROM sqlite_sequence WHERE name = 'errand_jobs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'errand_jobs_new', seq FROM sqlite_sequence WHERE name = 'errand_jobs';

DROP TABLE errand_jobs;
ALTER TABLE errand_jobs_new RENAME TO errand_jobs;

CREATE INDEX errand_jobs_claim ON errand_jobs (queue, priority, available_at, seq)
    WHERE state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_lease ON errand_jobs (lease_until) WHERE state = 'running';
CREATE INDEX errand_jobs_deadline ON errand_jobs (deadline)
    WHERE deadline IS NOT NULL AND state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_state ON errand_jobs (state, queue, kind);
CREATE INDEX errand_jobs_ordering ON errand_jobs (ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND (state IN ('queued', 'running', 'retrying') OR (state = 'dead' AND ordering_hold = 1));
CREATE INDEX errand_jobs_due ON errand_jobs (queue, available_at)
    WHERE state IN ('queued', 'retrying');
CREATE INDEX errand_jobs_finished ON errand_jobs (state, finished_at)
    WHERE finished_at IS NOT NULL;
CREATE UNIQUE INDEX errand_jobs_unique ON errand_jobs (unique_key, unique_window_us)
    WHERE unique_key IS NOT NULL AND (unique_states & CASE state WHEN 'queued' THEN 1 WHEN 'running' THEN 2 WHEN 'retrying' THEN 4 WHEN 'succeeded' THEN 8 WHEN 'dead' THEN 16 WHEN 'cancelled' THEN 32 ELSE 0 END) <> 0;
