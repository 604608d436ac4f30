-- The cursors of the on-dead hook scan: for each hooked kind, the
-- finished_at (Unix microseconds on the store's clock) before which every
-- dead job of the kind has its hook job. A worker's scan starts at its
-- kinds' cursors, reading the finished-jobs index from there, and moves
-- them forward once the hooks up to the new place are enqueued, so no
-- downtime is too long for a dead job to get its hook. A kind without a
-- cursor was never scanned: its first scan starts at its first dead job.
CREATE TABLE errand_dead_hook_cursors (
    kind        TEXT    PRIMARY KEY,
    finished_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Kinds that had hooks before cursors existed were looked at 7 days back
-- by every starting worker: their cursors start 7 days before their latest
-- hooked death, as a starting worker looked before, so that a hook job
-- since pruned by retention is not enqueued a second time.
INSERT INTO errand_dead_hook_cursors (kind, finished_at)
SELECT j.kind, max(j.finished_at) - 604800000000 FROM errand_jobs j
WHERE j.state = 'dead' AND j.finished_at IS NOT NULL
    AND EXISTS (SELECT 1 FROM errand_jobs c WHERE c.id = j.id || '.dead.' || CAST(j.replays AS TEXT))
GROUP BY j.kind;

-- When a fair claim last served each key (Unix microseconds on the store's
-- clock), so that the leader deletes the turns of keys with no waiting job
-- that have been idle for long: without it the table keeps a row for every
-- key ever served.
ALTER TABLE errand_fair_turns ADD COLUMN served_at INTEGER NOT NULL DEFAULT 0;
