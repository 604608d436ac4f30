-- Fairness keys: who a job is for (a tenant, an account), so that a fair
-- claim takes the keys of a queue in turn. NULL: no key.
ALTER TABLE errand_jobs ADD COLUMN fairness_key TEXT;

-- A fair claim lists the keys waiting in a queue (one seek per key) and
-- reads each key's first claimable jobs in claim order; jobs without a key
-- are one more group, found by the seek fairness_key IS NULL. It holds
-- waiting rows only, as the claim index does. Plain claims never read it.
CREATE INDEX errand_jobs_fair ON errand_jobs (queue, fairness_key, priority, available_at, seq)
    WHERE state IN ('queued', 'retrying');

-- Whose turn it is: each fair claim gives the keys it served the queue's
-- next turn number, and among jobs of equal priority and rank the key
-- served longest ago goes first, so that keys take turns across claims
-- too (a worker claiming one job at a time still alternates). Jobs
-- without a key are the key ''. One row per queue and key ever served by
-- a fair claim; plain claims never touch it.
CREATE TABLE errand_fair_turns (
    queue        TEXT NOT NULL,
    fairness_key TEXT NOT NULL,
    turn         INTEGER NOT NULL,
    PRIMARY KEY (queue, fairness_key)
) WITHOUT ROWID;
