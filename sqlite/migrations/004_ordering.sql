-- Per-key ordering: a claim skips a job while another job with its
-- ordering key is running, or waits ahead of it (lower seq, queued or
-- retrying). This index answers that question from unfinished rows only.
CREATE INDEX errand_jobs_ordering ON errand_jobs (ordering_key, seq)
    WHERE ordering_key IS NOT NULL AND state IN ('queued', 'running', 'retrying');
