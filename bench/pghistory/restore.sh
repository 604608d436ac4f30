#!/usr/bin/env bash
# restore.sh DATA SNAPSHOT: stop the private server of DATA, put back the
# copy of its data directory taken when it was stopped, start it again.
# For a private server only (pg-standby.sh start DIR --single; run as root).
set -euo pipefail
data=$1 snap=$2
bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
runuser -u postgres -- "$bin/pg_ctl" -D "$data" -w stop >/dev/null
rsync -a --delete "$snap/" "$data/"
runuser -u postgres -- "$bin/pg_ctl" -D "$data" -l "$data.log" -w start >/dev/null
