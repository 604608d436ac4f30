-- The worker registry: one row per long-running worker process, for
-- operators (errand workers). No claim or lease decision reads it.
-- Times are Unix microseconds on the store's clock. The table holds a row per
-- worker until a prune removes stopped and gone ones, so it stays small and
-- needs no index beyond its key.

CREATE TABLE errand_workers (
    id                    TEXT    PRIMARY KEY,
    host                  TEXT    NOT NULL,
    pid                   INTEGER NOT NULL,
    queues                TEXT    NOT NULL DEFAULT '[]', -- [{"name", "concurrency"}]
    heartbeat_interval_us INTEGER NOT NULL CHECK (heartbeat_interval_us > 0),
    started_at            INTEGER NOT NULL,
    heartbeat_at          INTEGER NOT NULL,
    stopped_at            INTEGER,
    last_completed_at     INTEGER,
    jobs_running          INTEGER NOT NULL DEFAULT 0,
    jobs_completed        INTEGER NOT NULL DEFAULT 0,
    clock_skew_ms         INTEGER NOT NULL DEFAULT 0
);
