#!/usr/bin/env bash
# A PostgreSQL primary with a streaming standby in one directory, on free
# ports of 127.0.0.1, for failover tests and for trying a failover by hand;
# or a primary alone, a private server to restart. Failover is pg_ctl
# promote: no Patroni or etcd.
#
#   pg-standby.sh start DIR [--sync|--async|--single]
#                                 initdb a primary, pg_basebackup -R a standby
#                                 (none with --single); prints KEY=VALUE lines
#   pg-standby.sh kill-primary DIR     SIGKILL the primary's postmaster
#   pg-standby.sh restart-primary DIR  pg_ctl restart -m immediate the primary
#   pg-standby.sh promote DIR          pg_ctl promote the standby
#   pg-standby.sh status DIR           KEY=VALUE lines: ports, URL, who runs
#   pg-standby.sh stop DIR             stop the servers; removes nothing
#
# Run as root (the servers then run as the postgres user, since initdb
# refuses root) or as the postgres user. PG_BIN overrides the binaries'
# directory (default /usr/lib/postgresql/15/bin).
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_USER=${PG_USER:-postgres}

usage() {
	sed -n '7,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die() {
	echo "pg-standby: $*" >&2
	exit 1
}

# die_log dies, quoting the end of a log that says why.
die_log() {
	local log=$1
	shift
	echo "pg-standby: $*; the end of $log:" >&2
	tail -n 15 "$log" >&2 2>/dev/null || true
	exit 1
}

# start_node starts the server of data directory $1 on port $2, or on
# another free port when something took that one meanwhile; it prints the
# port it runs on.
start_node() {
	local data=$1 port=$2 log=$1.log
	for _ in 1 2 3; do
		sed -i "s/^port = .*\$/port = $port/" "$data/postgresql.conf"
		if as "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null; then
			echo "$port"
			return 0
		fi
		grep -q "could not bind\|could not create listen socket" "$log" || break
		port=$(free_port "$PRIMARY_PORT" "$STANDBY_PORT")
	done
	die_log "$log" "$(basename "$data") did not start"
}

# as runs a command as the servers' user.
as() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}

# free_port prints a TCP port of 127.0.0.1 that nothing listens on, other
# than the ones given (never 5432, the usual shared server).
free_port() {
	local port
	for _ in $(seq 200); do
		port=$((20000 + RANDOM % 30000))
		case " $* " in *" $port "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return 0
		fi
	done
	die "no free port found between 20000 and 50000"
}

# pid_of prints the postmaster pid of a data directory, if it has one.
pid_of() {
	[ -f "$1/postmaster.pid" ] && head -1 "$1/postmaster.pid"
}

# alive reports whether a process runs: a zombie its parent has yet to
# reap is dead.
alive() {
	kill -0 "$1" 2>/dev/null && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}

running() {
	local pid
	pid=$(pid_of "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && alive "$pid"
}

psql_at() {
	as "$PG_BIN/psql" -X -At -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2"
}

load_state() {
	[ -f "$DIR/topology.env" ] || die "$DIR has no topology (run: $0 start $DIR)"
	# shellcheck disable=SC1091
	. "$DIR/topology.env"
}

# replication_is waits up to 30s for the standby's row of the primary's
# pg_stat_replication to show value in column.
replication_is() {
	for _ in $(seq 300); do
		[ "$(psql_at "$PRIMARY_PORT" "SELECT $1 FROM pg_stat_replication WHERE application_name = 'standby'" 2>/dev/null || true)" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# save_state keeps the ports for the other subcommands (stop, too, after a
# start that failed halfway).
save_state() {
	printf 'MODE=%s\nPRIMARY_PORT=%s\nSTANDBY_PORT=%s\n' "$MODE" "$PRIMARY_PORT" "$STANDBY_PORT" >"$DIR/topology.env"
}

print_state() {
	echo "DIR=$DIR"
	echo "MODE=$MODE"
	echo "PRIMARY_PORT=$PRIMARY_PORT"
	echo "STANDBY_PORT=$STANDBY_PORT"
	echo "PRIMARY_URL=postgres://postgres@127.0.0.1:$PRIMARY_PORT/postgres?sslmode=disable"
	if [ "$MODE" = single ]; then
		echo "URL=postgres://postgres@127.0.0.1:$PRIMARY_PORT/postgres?sslmode=disable"
		return
	fi
	echo "STANDBY_URL=postgres://postgres@127.0.0.1:$STANDBY_PORT/postgres?sslmode=disable"
	echo "URL=postgres://postgres@127.0.0.1:$PRIMARY_PORT,127.0.0.1:$STANDBY_PORT/postgres?sslmode=disable&target_session_attrs=read-write"
}

cmd_start() {
	MODE=sync
	case "${1:-}" in
	--sync) MODE=sync ;;
	--async) MODE=async ;;
	--single) MODE=single ;;
	"") ;;
	*) die "unknown option $1: give --sync, --async or --single" ;;
	esac
	[ -x "$PG_BIN/initdb" ] || die "no PostgreSQL binaries in $PG_BIN (install postgresql-15, or set PG_BIN)"
	id "$PG_USER" >/dev/null 2>&1 || die "no OS user $PG_USER to run the servers as (set PG_USER)"
	mkdir -p "$DIR"
	[ -z "$(ls -A "$DIR")" ] || die "$DIR is not empty: give a new or empty directory"
	[ "$(id -u)" -ne 0 ] || chown "$PG_USER" "$DIR"
	# The directory's parents must let the servers' user through.
	as test -w "$DIR" || die "$PG_USER cannot write $DIR: give a directory whose parents it may enter (mktemp -d makes one it may not; /tmp/NAME will do)"

	PRIMARY_PORT=$(free_port)
	STANDBY_PORT=
	[ "$MODE" = single ] || STANDBY_PORT=$(free_port "$PRIMARY_PORT")

	as "$PG_BIN/initdb" -D "$DIR/primary" -U postgres --auth=trust -E UTF8 --no-sync --no-instructions >"$DIR/initdb.log" 2>&1 ||
		die_log "$DIR/initdb.log" "initdb failed"
	# Sockets in DIR: nothing shared with a system server's socket directory.
	cat >>"$DIR/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PRIMARY_PORT
unix_socket_directories = '$DIR'
wal_level = replica
max_wal_senders = 5
wal_keep_size = '64MB'
hot_standby = on
synchronous_commit = on
fsync = on
max_connections = 100
CONF
	echo "host replication postgres 127.0.0.1/32 trust" >>"$DIR/primary/pg_hba.conf"
	PRIMARY_PORT=$(start_node "$DIR/primary" "$PRIMARY_PORT")
	save_state
	if [ "$MODE" = single ]; then
		print_state
		return
	fi

	as "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -D "$DIR/standby" -R -X stream --no-sync \
		-d "application_name=standby" >"$DIR/basebackup.log" 2>&1 ||
		die_log "$DIR/basebackup.log" "pg_basebackup failed"
	STANDBY_PORT=$(start_node "$DIR/standby" "$STANDBY_PORT")
	save_state

	# Wait for streaming, and only then make commits wait for the standby:
	# set earlier, on the primary only, so that the standby (copied before)
	# does not wait for a standby of its own once promoted.
	replication_is state streaming || die_log "$DIR/standby.log" "the standby does not stream from the primary"
	if [ "$MODE" = sync ]; then
		psql_at "$PRIMARY_PORT" "ALTER SYSTEM SET synchronous_standby_names = 'standby'" >/dev/null
		psql_at "$PRIMARY_PORT" "SELECT pg_reload_conf()" >/dev/null
		replication_is sync_state sync || die_log "$DIR/primary.log" "the standby did not become synchronous"
	fi
	print_state
}

cmd_kill_primary() {
	load_state
	local pid
	pid=$(pid_of "$DIR/primary") || die "the primary has no postmaster.pid: it is not running"
	alive "$pid" || die "the primary (pid $pid) is not running"
	kill -KILL "$pid"
	while alive "$pid"; do sleep 0.01; done
	echo "KILLED_PID=$pid"
}

cmd_restart_primary() {
	load_state
	running "$DIR/primary" || die "the primary is not running"
	as "$PG_BIN/pg_ctl" -D "$DIR/primary" -l "$DIR/primary.log" -m immediate -w -t 60 restart >/dev/null ||
		die_log "$DIR/primary.log" "pg_ctl restart failed"
	echo "RESTARTED_PORT=$PRIMARY_PORT"
}

cmd_promote() {
	load_state
	running "$DIR/standby" || die "the standby is not running"
	as "$PG_BIN/pg_ctl" -D "$DIR/standby" -w -t 60 promote >/dev/null || die "pg_ctl promote failed; see $DIR/standby.log"
	echo "PROMOTED_PORT=$STANDBY_PORT"
}

cmd_status() {
	load_state
	print_state
	local role nodes=(primary standby)
	[ "$MODE" = single ] && nodes=(primary)
	for node in "${nodes[@]}"; do
		local port=$PRIMARY_PORT
		[ "$node" = standby ] && port=$STANDBY_PORT
		role=down
		if running "$DIR/$node"; then
			case "$(psql_at "$port" "SELECT pg_is_in_recovery()" 2>/dev/null || true)" in
			t) role=standby ;;
			f) role=primary ;;
			*) role=unreachable ;;
			esac
		fi
		echo "${node^^}_ROLE=$role"
	done
}

cmd_stop() {
	load_state
	for node in primary standby; do
		if running "$DIR/$node"; then
			as "$PG_BIN/pg_ctl" -D "$DIR/$node" -m immediate -w -t 60 stop >/dev/null || true
		fi
	done
	# A SIGKILLed postmaster leaves backends that exit on their own; wait for them.
	for _ in $(seq 100); do
		pgrep -f -- "$DIR/" >/dev/null 2>&1 || break
		sleep 0.05
	done
	echo "STOPPED=$DIR"
}

[ $# -ge 2 ] || usage
cmd=$1
DIR=$(realpath -m -- "$2")
shift 2
case "$cmd" in
start) cmd_start "$@" ;;
kill-primary) cmd_kill_primary ;;
restart-primary) cmd_restart_primary ;;
promote) cmd_promote ;;
status) cmd_status ;;
stop) cmd_stop ;;
*) usage ;;
esac
