#!/usr/bin/env bash
# av_runs.sh URL NAME SCRIPT RUNS: RUNS times, enqueue 20,000 jobs with
# errand and work them with the pgbench SCRIPT (exp.sh), printing each
# run's claim and ack buffers and errand_jobs' dead tuples and vacuums.
set -euo pipefail
url=$1 name=$2 script=$3 runs=${4:-8}
here=$(dirname "$0")
for i in $(seq "$runs"); do
	${PGHISTORY:-/tmp/pghistory} -url "$url" enqueue -n 20000
	echo "--- run $i $(date +%T)"
	"$here/exp.sh" "$url" "${name}_$i" "$script" | grep -E "^(claim|ack|sweep_leases)|idx:errand_jobs_claim|wal/job"
	psql "$url" -Atc "SELECT relname || ': n_dead_tup=' || n_dead_tup || ' autovacuums=' || autovacuum_count FROM pg_stat_user_tables WHERE relname LIKE 'errand_jobs%' ORDER BY 1"
done
