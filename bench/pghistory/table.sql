-- The table's and its indexes' state: live and dead tuples, sizes, and
-- for each index its leaf pages, density and the share of its sampled
-- leaf items marked dead (killed-tuple hints: LP_DEAD).
SET auto_explain.log_min_duration = -1;
SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze
FROM pg_stat_user_tables WHERE relid = :'tbl'::regclass;
SELECT c.relname AS index, s.leaf_pages, s.deleted_pages, s.tree_level, round(s.avg_leaf_density) AS density,
       (SELECT round(100.0 * count(*) FILTER (WHERE i.dead) / nullif(count(*), 0), 1)
          FROM generate_series(1, greatest(s.leaf_pages + s.internal_pages + s.deleted_pages, 1)::int, greatest((s.leaf_pages / 100)::int, 1)) g,
               LATERAL bt_page_items(c.oid::regclass::text, g::int) i) AS pct_items_dead
FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid, LATERAL pgstatindex(c.oid::regclass) s
WHERE x.indrelid = :'tbl'::regclass AND s.leaf_pages > 1 ORDER BY s.leaf_pages DESC;
SELECT table_len / 8192 AS pages, tuple_count, dead_tuple_count, round(free_percent) AS free_pct
FROM pgstattuple(:'tbl');
