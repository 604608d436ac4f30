-- The worker registry: one row per long-running worker process, for
-- operators (errand workers). No claim or lease decision reads it. The table
-- holds a row per worker until a prune removes stopped and gone ones, so it
-- stays small and needs no index beyond its key.

CREATE TABLE errand_workers (
    id                    text        COLLATE "C" PRIMARY KEY,
    host                  text        NOT NULL,
    pid                   integer     NOT NULL,
    queues                jsonb       NOT NULL DEFAULT '[]', -- [{"name", "concurrency"}]
    heartbeat_interval_us bigint      NOT NULL CHECK (heartbeat_interval_us > 0),
    started_at            timestamptz NOT NULL,
    heartbeat_at          timestamptz NOT NULL,
    stopped_at            timestamptz,
    last_completed_at     timestamptz,
    jobs_running          integer     NOT NULL DEFAULT 0,
    jobs_completed        bigint      NOT NULL DEFAULT 0,
    -- The database's clock minus the worker's at its last heartbeat.
    clock_skew_ms         bigint      NOT NULL DEFAULT 0
);
