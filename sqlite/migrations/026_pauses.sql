-- Operators' pauses of the claims of a queue or a kind, read by every
-- client about once a second. paused_at is Unix microseconds on the
-- store's clock.
CREATE TABLE errand_pauses (
    scope       TEXT    NOT NULL CHECK (scope IN ('queue', 'kind')),
    name        TEXT    NOT NULL,
    paused_at   INTEGER NOT NULL,
    operator    TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    PRIMARY KEY (scope, name)
) WITHOUT ROWID;
