#!/usr/bin/env bash
# beforeafter.sh OLD NEW [compare flags]: errand at two commits, side by side.
#
# Builds cmd/compare from each commit (from `git archive`, so the working
# tree is untouched; each build's errand is that commit's, through bench's
# `replace`) and runs the two binaries alternately, ROUNDS times, swapping
# which goes first each round so the machine's load falls on both. Each round:
#   - the full table, both stores (concurrency 1,000);
#   - work throughput on both stores at each concurrency of BATCHES: a
#     worker claims as many jobs per statement as it has free slots, so the
#     concurrency is the claim's batch size.
# Every run measures River and the bare-SQL loops beside its errand: compare
# old and new by their ratios, which share each run's load.
#
#   cd bench && ./beforeafter.sh 1e63700 0dd8933
#   ROUNDS=2 BATCHES=10,1000 ./beforeafter.sh OLD NEW -jobs 5000   # flags go to compare
#
# Tables go to OUT (default: a new temporary directory); a summary, each
# run's errand figure and ratio per measure, goes to stdout.
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
old=$1 new=$2
shift 2
rounds=${ROUNDS:-3} batches=${BATCHES:-100,1000}
out=${OUT:-$(mktemp -d /tmp/beforeafter.XXXXXX)}
src=$(mktemp -d /tmp/beforeafter-src.XXXXXX)
trap 'rm -rf "$src"' EXIT
root=$(git rev-parse --show-toplevel)
mkdir -p "$out"

for side in old new; do
	rev=${!side}
	mkdir "$src/$side"
	git -C "$root" archive "$rev" | tar -x -C "$src/$side"
	(cd "$src/$side/bench" && go build -o "$out/compare-$side" ./cmd/compare)
	# A compare that also runs Graphile Worker is held to errand and River,
	# so that both sides print the same columns.
	help=$("$out/compare-$side" -h 2>&1 || true)
	systems=""
	grep -q -- '-systems' <<<"$help" && systems="-systems=errand,river"
	declare "systems_$side=$systems"
	echo "$side: $(git -C "$root" rev-parse --short "$rev")" | tee -a "$out/commits.txt" >&2
done

for i in $(seq 1 "$rounds"); do
	order="old new"
	[ $((i % 2)) -eq 0 ] && order="new old"
	for side in $order; do
		echo "round $i, $side: full table, then work at concurrency $batches (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
		systems=systems_$side
		"$out/compare-$side" ${!systems:+"${!systems}"} -markdown "$out/$side-$i.md" "$@" >/dev/null
		"$out/compare-$side" -scaling -concurrency "$batches" -markdown "$out/$side-$i-scaling.md" "$@" >/dev/null
	done
done

# One line per measure: each round's errand figure and ratio, old then new.
for side in old new; do
	for i in $(seq 1 "$rounds"); do
		awk -F' *\\| *' -v side="$side" 'FNR > 2 {
			m = FILENAME ~ /scaling/ ? "work at concurrency " $3 : $3
			print side "\t" $2 " | " m "\t" $4 " " $6
		}' "$out/$side-$i.md" "$out/$side-$i-scaling.md"
	done
done | awk -F'\t' '
	!($2 in seen) { seen[$2] = 1; keys[++n] = $2 }
	{ cell[$2, $1] = cell[$2, $1] (cell[$2, $1] == "" ? "" : ", ") $3 }
	END {
		print "| store | measure | old: errand and its ratio, per round | new: the same |"
		print "| --- | --- | --- | --- |"
		for (k = 1; k <= n; k++) print "| " keys[k] " | " cell[keys[k], "old"] " | " cell[keys[k], "new"] " |"
	}' | tee "$out/summary.md"
echo "tables in $out" >&2
