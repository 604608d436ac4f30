-- At most one job of an ordering key runs at a time. A claim checks the
-- other jobs of a candidate's key in its statement's snapshot, which does
-- not hold a concurrent claim that has not committed: two claimers could
-- each find the key free, one taking a later job and the other an earlier
-- one that a replay, or an enqueue committed late, had just made waiting.
-- With this index the second claim's update waits for the first claim and
-- then fails, and the claim is tried again in a new snapshot, which sees
-- the key held. It holds only running jobs with a key: a few rows.
CREATE UNIQUE INDEX errand_jobs_ordering_running ON errand_jobs (ordering_key)
    WHERE ordering_key IS NOT NULL AND state = 'running';
