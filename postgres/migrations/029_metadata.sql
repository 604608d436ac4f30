-- A job's metadata: a JSON object for its producers and consumers (a trace
-- context, a Faktory job's custom fields), NULL for none. Adding a column
-- with no default rewrites nothing.
ALTER TABLE errand_jobs ADD COLUMN metadata jsonb;
