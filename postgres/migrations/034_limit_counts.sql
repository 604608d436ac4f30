-- The kinds a concurrency limit counts, separated by spaces: a dependency's
-- limit counts every kind that declares it. '' on other rows, and on a
-- kind's limit written before, which counts the kind in its name.
-- target_us is an adaptive limit's latency target in microseconds (0:
-- none), kept with its rule for outcomes counted outside a Worker.
-- Constant defaults: no rewrite of the table.
ALTER TABLE errand_limiters
    ADD COLUMN counts    text   NOT NULL DEFAULT '',
    ADD COLUMN target_us bigint NOT NULL DEFAULT 0;
