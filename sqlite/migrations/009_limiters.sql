-- Token buckets of rate limits and retry budgets: one row per bucket name
-- ("queue:NAME", "kind:NAME", "retry:KIND"), shared by every process, so
-- that a rate is the cluster's and not each worker's. A take reads the row,
-- refills it to now on the store's clock (errand.LimiterSpec), grants and
-- writes it back in one writer transaction. The spec columns are the last
-- taker's. tokens is the level at updated_at (Unix microseconds). A few
-- rows, read by name: no index beyond the key.
CREATE TABLE errand_limiters (
    name       TEXT    PRIMARY KEY,
    mode       TEXT    NOT NULL,
    rate       REAL    NOT NULL,
    burst      REAL    NOT NULL,
    min_tokens REAL    NOT NULL,
    ratio      REAL    NOT NULL,
    window_us  INTEGER NOT NULL,
    tokens     REAL    NOT NULL,
    denied     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
