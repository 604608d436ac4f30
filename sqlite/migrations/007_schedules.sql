-- Recurring jobs: one row per schedule name. next_fire_at is the next tick
-- due to fire; a process fires it by moving it forward only from the value it
-- read (compare-and-set), in the transaction that inserts the tick's job, so
-- that however many processes run the schedule a tick enqueues one job and a
-- restart neither loses nor repeats one. Times are Unix microseconds on the
-- store's clock. A few rows, read by name: no index beyond the key.
CREATE TABLE errand_schedules (
    name         TEXT    PRIMARY KEY,
    spec         TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    missed       TEXT    NOT NULL,
    next_fire_at INTEGER NOT NULL,
    last_fire_at INTEGER,
    last_job_id  TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
