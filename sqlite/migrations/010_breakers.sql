-- Circuit breakers: one row per dependency that has counted a failure or
-- been reset. Every event reads and writes its row in one writer
-- transaction, so a probe slot is a compare-and-set. Claims never read it
-- unless a worker's kinds name a dependency. Times are Unix microseconds on
-- the store's clock. A few rows, read by dependency: no index beyond the key.
CREATE TABLE errand_breakers (
    dependency    TEXT    PRIMARY KEY,
    state         TEXT    NOT NULL,
    failures      INTEGER NOT NULL DEFAULT 0,
    failing_since INTEGER,
    opened_at     INTEGER,
    open_until    INTEGER,
    probes        INTEGER NOT NULL DEFAULT 0,
    probe_until   INTEGER,
    trips         INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT    NOT NULL DEFAULT '',
    updated_at    INTEGER NOT NULL
);
