-- Scoped unique keys, and ordering keys that a dead job may hold.
--
-- A unique key used to be a plain UNIQUE constraint: taken by its job in
-- every state, for as long as the job existed. Now each job records the
-- states in which it holds its key (unique_states, a bit per state, see
-- errand.UniqueScope) and the window it was enqueued in (unique_window_us,
-- the window's start in Unix microseconds, 0 for none: part of the key,
-- never compared with a clock, so an integer as in SQLite), and a partial
-- unique index covers exactly the rows that hold their key: a job frees its
-- key the moment its state leaves its scope, whatever moves it there, with
-- no write of its own. unique_states defaults to every state (63) and the
-- window to none, so existing keys, and rows written without naming these
-- columns, behave as before. (A constant default rewrites no row.)
--
-- ordering_hold = 1 makes a dead job hold its ordering key until it is
-- replayed or cancelled (errand.OrderingHoldOnDead); existing jobs release
-- it, as before.
--
-- The predicates of errand_jobs_unique and errand_jobs_ordering are
-- errand.UniqueHeldSQL and errand.OrderingIndexSQL word for word.
ALTER TABLE errand_jobs
    ADD COLUMN unique_states integer NOT NULL DEFAULT 63,
    ADD COLUMN unique_window_us bigint NOT NULL DEFAULT 0,
    ADD COLUMN ordering_hold smallint NOT NULL DEFAULT 0 CHECK (ordering_hold IN (0, 1));
CREATE UNIQUE INDEX errand_jobs_unique ON errand_jobs (unique_key, unique_window_us)
    WHERE unique_key IS NOT NULL AND (unique_states & CASE state WHEN 'queued' THEN 1 WHEN 'running' THEN 2 WHEN 'retrying' THEN 4 WHEN 'succeeded' THEN 8 WHEN 'dead' THEN 16 WHEN 'cancelled' THEN 32 ELSE 0 END) <> 0;
ALTER TABLE errand_jobs DROP CONSTRAINT errand_jobs_unique_key_key;
DROP INDEX errand_jobs_ordering;
CREATE INDEX errand_jobs_ordering ON errand_jobs (ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND (state IN ('queued', 'running', 'retrying') OR (state = 'dead' AND ordering_hold = 1));
