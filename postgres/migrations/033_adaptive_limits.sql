-- Adaptive rate limits: a kind's limit with a floor and a ceiling has its
-- rate moved by its jobs' outcomes (errandtype.LimiterSpec.Adapt). rate
-- and burst are then the bucket's own, kept across takes; held_until is a
-- provider's reset time, before which no token is granted; moved_at,
-- moved_reason, decreases, peak (the rate of the last decrease) and
-- cuts (decreases since the last increase) say when and why the rate last moved. Added
-- with constant defaults: no rewrite of the table.
ALTER TABLE errand_limiters
    ADD COLUMN floor_rate   double precision NOT NULL DEFAULT 0,
    ADD COLUMN ceiling_rate double precision NOT NULL DEFAULT 0,
    ADD COLUMN held_until   timestamptz,
    ADD COLUMN moved_at     timestamptz,
    ADD COLUMN moved_reason text             NOT NULL DEFAULT '',
    ADD COLUMN decreases    bigint           NOT NULL DEFAULT 0,
    ADD COLUMN peak         double precision NOT NULL DEFAULT 0,
    ADD COLUMN cuts         bigint           NOT NULL DEFAULT 0;
