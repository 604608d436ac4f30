-- Token buckets of rate limits and retry budgets: one row per bucket name
-- ("queue:NAME", "kind:NAME", "retry:KIND"), shared by every process, so
-- that a rate is the cluster's and not each worker's. A take locks the row
-- (INSERT ... ON CONFLICT DO UPDATE), refills it to now on the store's
-- clock (errand.LimiterSpec), grants and writes it back in one
-- transaction. The spec columns are the last taker's. tokens is the level
-- at updated_at. A few rows, read by name: no index beyond the key.
CREATE TABLE errand_limiters (
    name       text             COLLATE "C" PRIMARY KEY,
    mode       text             NOT NULL,
    rate       double precision NOT NULL,
    burst      double precision NOT NULL,
    min_tokens double precision NOT NULL,
    ratio      double precision NOT NULL,
    window_us  bigint           NOT NULL,
    tokens     double precision NOT NULL,
    denied     bigint           NOT NULL,
    updated_at timestamptz      NOT NULL
);
