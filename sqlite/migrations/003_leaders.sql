-- Leadership leases: what must run once per cluster is done by the holder
-- of a live lease. Times are Unix microseconds on the store's clock.
CREATE TABLE errand_leaders (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    elected_at INTEGER NOT NULL,
    until      INTEGER NOT NULL
);
