-- When the next job comes due: an idle worker asks for the earliest
-- available_at still ahead among a queue's waiting jobs (JobNextDue) and
-- sleeps until then instead of a whole poll. The claim index cannot answer
-- that (priority comes before available_at); this one answers with one seek
-- per queue, reading waiting rows only. Like every migration it runs in a
-- transaction, so it is built without CONCURRENTLY: on a table of millions
-- of waiting jobs, enqueues wait for the build (seconds).
CREATE INDEX errand_jobs_due ON errand_jobs (queue, available_at)
    WHERE state IN ('queued', 'retrying');

-- When a worker began to drain: it claims nothing more and finishes its
-- jobs. Set by the heartbeat Stop sends at once; a registration clears it.
ALTER TABLE errand_workers ADD COLUMN draining_at timestamptz;

-- The kinds a worker has handlers for (a JSON array of names), so that a
-- kind no live worker handles can be named. '[]' for a worker registered by
-- an errand before this column: taken to handle every kind.
ALTER TABLE errand_workers ADD COLUMN kinds jsonb NOT NULL DEFAULT '[]';
