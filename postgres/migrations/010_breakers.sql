-- Circuit breakers: one row per dependency that has counted a failure or
-- been reset. Every event locks its row (FOR UPDATE), decides and writes in
-- one transaction, so a probe slot is a compare-and-set. Claims never read
-- it unless a worker's kinds name a dependency. A few rows, read by
-- dependency: no index beyond the key.
CREATE TABLE errand_breakers (
    dependency    text        COLLATE "C" PRIMARY KEY,
    state         text        NOT NULL,
    failures      integer     NOT NULL DEFAULT 0,
    failing_since timestamptz,
    opened_at     timestamptz,
    open_until    timestamptz,
    probes        integer     NOT NULL DEFAULT 0,
    probe_until   timestamptz,
    trips         integer     NOT NULL DEFAULT 0,
    last_error    text        NOT NULL DEFAULT '',
    updated_at    timestamptz NOT NULL
);
