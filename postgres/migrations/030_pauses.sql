-- Operators' pauses of the claims of a queue or a kind, read by every
-- client about once a second.
CREATE TABLE errand_pauses (
    scope       text        NOT NULL CHECK (scope IN ('queue', 'kind')),
    name        text        COLLATE "C" NOT NULL,
    paused_at   timestamptz NOT NULL,
    operator    text        NOT NULL,
    reason      text        NOT NULL,
    PRIMARY KEY (scope, name)
);
