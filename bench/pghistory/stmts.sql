-- Per-statement cost of a work run, from pg_stat_statements (reset before
-- the run): buffers touched per call and per row.
SELECT calls, rows,
       shared_blks_hit + shared_blks_read AS blks,
       round((shared_blks_hit + shared_blks_read)::numeric / calls) AS blks_per_call,
       round((shared_blks_hit + shared_blks_read)::numeric / nullif(rows, 0), 1) AS blks_per_row,
       shared_blks_dirtied AS dirtied,
       round(wal_bytes / nullif(rows, 0)) AS wal_per_row,
       round(total_exec_time) AS ms,
       left(regexp_replace(query, '\s+', ' ', 'g'), 60) AS query
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND calls > 1 AND query ~* 'errand_jobs'
ORDER BY blks DESC
LIMIT 12;
