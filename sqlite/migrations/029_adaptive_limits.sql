-- Adaptive rate limits: a kind's limit with a floor and a ceiling has its
-- rate moved by its jobs' outcomes (errandtype.LimiterSpec.Adapt). rate
-- and burst are then the bucket's own, kept across takes; held_until is a
-- provider's reset time (Unix microseconds), before which no token is
-- granted; moved_at, moved_reason, decreases, peak (the rate of the last
-- decrease) and cuts (decreases since the last increase) say when and why the rate last
-- moved.
ALTER TABLE errand_limiters ADD COLUMN floor_rate REAL NOT NULL DEFAULT 0;
ALTER TABLE errand_limiters ADD COLUMN ceiling_rate REAL NOT NULL DEFAULT 0;
ALTER TABLE errand_limiters ADD COLUMN held_until INTEGER;
ALTER TABLE errand_limiters ADD COLUMN moved_at INTEGER;
ALTER TABLE errand_limiters ADD COLUMN moved_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE errand_limiters ADD COLUMN decreases INTEGER NOT NULL DEFAULT 0;
ALTER TABLE errand_limiters ADD COLUMN peak REAL NOT NULL DEFAULT 0;
ALTER TABLE errand_limiters ADD COLUMN cuts INTEGER NOT NULL DEFAULT 0;
