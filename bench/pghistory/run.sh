#!/usr/bin/env bash
# run.sh URL NAME [pghistory flags...]: reset pg_stat_statements, run
# pghistory work -n 20000 on URL, keep the server log of the run (its
# auto_explain plans) in /tmp/NAME.log and sum them.
set -euo pipefail
url=$1 name=$2; shift 2
log=${PG_LOG:-/tmp/pgdiag/primary.log}
here=$(dirname "$0")
psql "$url" -Atqc "select pg_stat_statements_reset()" >/dev/null
start=$(wc -l < "$log")
${PGHISTORY:-/tmp/pghistory} -url "$url" "$@" work -n ${N:-20000}
tail -n +$((start + 1)) "$log" > "/tmp/$name.log"
python3 "$here/plans.py" "/tmp/$name.log"
