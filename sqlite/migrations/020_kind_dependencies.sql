-- The dependency each kind names, as the last client to declare the kind
-- recorded it when it started, so that every process (the CLI, errand
-- serve, another host) tells a job held back by its dependency's open
-- circuit breaker from a ready one. A row per kind that names one; times
-- are Unix microseconds on the store's clock.
CREATE TABLE errand_kind_dependencies (
    kind        TEXT    PRIMARY KEY,
    dependency  TEXT    NOT NULL,
    declared_at INTEGER NOT NULL
);
