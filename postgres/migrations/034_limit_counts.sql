-- The kinds a concurrency limit counts, separated by spaces: a dependency's
-- limit counts every kind that declares it. '' on other rows, and on a
-- kind's limit written before, which counts the kind in its name. A
-- constant default: no rewrite of the table.
ALTER TABLE errand_limiters ADD COLUMN counts text NOT NULL DEFAULT '';
