#!/usr/bin/env bash
# exp.sh URL NAME SCRIPT [TRANSACTIONS]: run the pgbench SCRIPT (claim and
# ack cycles of 500 jobs, 40 by default: the 20,000 queued jobs) on URL,
# keep the run's auto_explain plans in /tmp/NAME.log and sum them; then WAL
# and buffers per statement from pg_stat_statements.
set -euo pipefail
url=$1 name=$2 script=$3 t=${4:-40}
log=${PG_LOG:-/tmp/pgdiag/primary.log}
here=$(dirname "$0")
psql "$url" -Atqc "select pg_stat_statements_reset()" >/dev/null
start=$(wc -l < "$log")
pgbench -n -f "$script" -D batch=${BATCH:-500} ${PGBENCH_ARGS:-} -t "$t" "$url" 2>&1 | grep -E "^tps|failed trans|ERROR" || true
sleep 1
tail -n +$((start + 1)) "$log" > "/tmp/$name.log"
python3 "$here/plans.py" "/tmp/$name.log"
psql "$url" -Atc "SELECT 'wal/job: ' || round(sum(wal_bytes) / 20000) || ' bytes, fpi ' || sum(wal_fpi) || ', records/job ' || round(sum(wal_records)::numeric / 20000, 1)
  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query ~ 'errand_jobs' AND query !~* '^\s*(select|vacuum|analyze)'"
