-- The dependency each kind names, as the last client to declare the kind
-- recorded it when it started, so that every process (the CLI, errand
-- serve, another host) tells a job held back by its dependency's open
-- circuit breaker from a ready one. A row per kind that names one.
CREATE TABLE errand_kind_dependencies (
    kind        text        COLLATE "C" PRIMARY KEY,
    dependency  text        COLLATE "C" NOT NULL,
    declared_at timestamptz NOT NULL
);
