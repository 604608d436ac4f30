-- The kinds a concurrency limit counts, separated by spaces: a dependency's
-- limit counts every kind that declares it. '' on other rows, and on a
-- kind's limit written before, which counts the kind in its name.
ALTER TABLE errand_limiters ADD COLUMN counts TEXT NOT NULL DEFAULT '';
