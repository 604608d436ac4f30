-- Leadership leases: what must run once per cluster is done by the holder
-- of a live lease. A row, not a session advisory lock, so that it works
-- through poolers in transaction mode and operators can see it.
CREATE TABLE errand_leaders (
    name       text        COLLATE "C" PRIMARY KEY,
    holder     text        NOT NULL,
    elected_at timestamptz NOT NULL,
    until      timestamptz NOT NULL
);
