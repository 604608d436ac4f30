-- Recurring jobs: one row per schedule name. next_fire_at is the next tick
-- due to fire; a process fires it by moving it forward only from the value it
-- read (compare-and-set), in the transaction that inserts the tick's job, so
-- that however many processes run the schedule a tick enqueues one job and a
-- restart neither loses nor repeats one. A few rows, read by name: no index
-- beyond the key.
CREATE TABLE errand_schedules (
    name         text        COLLATE "C" PRIMARY KEY,
    spec         text        NOT NULL,
    kind         text        NOT NULL,
    queue        text        NOT NULL,
    missed       text        NOT NULL,
    next_fire_at timestamptz NOT NULL,
    last_fire_at timestamptz,
    last_job_id  text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
