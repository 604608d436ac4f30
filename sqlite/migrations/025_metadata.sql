-- A job's metadata: a JSON object for its producers and consumers (a trace
-- context, a Faktory job's custom fields), NULL for none.
ALTER TABLE errand_jobs ADD COLUMN metadata TEXT;
