#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# A/B of two qpgate-kvbench builds (a client change) against one server:
# GET-heavy and PUT-heavy (--put-ratio 100) at 4 KiB and 1 MiB, ROUNDS
# rounds with A and B alternating, and per shape the medians of ops/s and
# of the CPU each op cost the client and the server (--server-pid).
#   bench/kvbench-ab.sh [-t tcp|rdma] [-r ROUNDS] [-D SECONDS] [-b BUSY_POLL_US] A_BIN B_BIN
# A_BIN and B_BIN hold a qpgate-kvbench each (a build's bin/); the server is
# $QPG_BIN's (build/bin). -b 0 (the default) keeps the threads from
# spinning, so CPU per op means something on a small host (a spinning
# thread burns its core whatever it does). -t rdma runs in the lab.
# Writes build/bench/kvbench-ab.txt. Prints numbers; asserts nothing.
set -euo pipefail
transport=tcp rounds=5 secs=4 bp=0
while getopts "t:r:D:b:" o; do
	case $o in
	t) transport=$OPTARG ;;
	r) rounds=$OPTARG ;;
	D) secs=$OPTARG ;;
	b) bp=$OPTARG ;;
	*) echo "usage: $0 [-t tcp|rdma] [-r ROUNDS] [-D SECONDS] [-b US] A_BIN B_BIN" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 2 ] || [ ! -x "$1/qpgate-kvbench" ] || [ ! -x "$2/qpgate-kvbench" ]; then
	echo "usage: $0 [options] A_BIN B_BIN (each with a qpgate-kvbench)" >&2
	exit 2
fi
a_bin=$(cd "$1" && pwd -P) b_bin=$(cd "$2" && pwd -P)
. "$(dirname "$0")/lib.sh"
[ "$transport" = rdma ] && qpg_bench_in_lab 3072 3600 -t rdma -r "$rounds" -D "$secs" -b "$bp" "$a_bin" "$b_bin"
qpg_bench_setup kvab
qpg_serve "$work" --transport "$transport" --service kv --kv-capacity 512M --kv-max-value 2M \
	-s 65536 --busy-poll "$bp"
rows=$work/rows
: >"$rows"
run() { # BIN LABEL SIZE KEYS PUT_PCT [FLAGS]
	local j=$work/r.json
	"$1/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" --num-workers 16 \
		--num-clients 4 --threads 2 --busy-poll "$bp" --value-size "$3" --num-keys "$4" \
		--put-ratio "$5" -D "$secs" --server-pid "$srv" --json "$j" "${@:6}" \
		127.0.0.1 localhost >"$work/out" 2>&1 || { echo " $2: kvbench failed:" >&2; tail -3 "$work/out" >&2; return 0; }
	jq -r --arg l "$2" --arg s "$3" --arg p "$5" \
		'.results.runs[0] | "\($l) \($s) \($p) \(.ops_per_s) \(.client_cpu_us_per_get) \(.server_cpu_us_per_get)"' \
		"$j" >>"$rows"
}
for shape in "4096 10000 0" "4096 10000 100" "1048576 64 0" "1048576 64 100"; do
	set -- $shape
	run "$b_bin" preload "$1" "$2" 100 -n 200 >/dev/null # the keys, once
	sed -i '/^preload /d' "$rows"
	for r in $(seq 1 "$rounds"); do
		run "$a_bin" A "$1" "$2" "$3" --no-preload
		run "$b_bin" B "$1" "$2" "$3" --no-preload
	done
done
med() { awk -v l="$1" -v s="$2" -v p="$3" -v c="$4" '$1==l && $2==s && $3==p {print $c}' "$rows" | median; }
{
	echo " qpgate-kvbench A/B, $transport, $rounds rounds of $secs s, busy-poll $bp: medians"
	echo " A = $a_bin"
	echo " B = $b_bin"
	printf ' %-9s %-5s %10s %10s %6s %14s %14s %14s %14s\n' size put% "A ops/s" "B ops/s" B/A \
		"A client us" "B client us" "A server us" "B server us"
	for shape in "4096 0" "4096 100" "1048576 0" "1048576 100"; do
		set -- $shape
		ao=$(med A "$1" "$2" 4) bo=$(med B "$1" "$2" 4)
		printf ' %-9s %-5s %10.0f %10.0f %6.2f %14.1f %14.1f %14.1f %14.1f\n' "$1" "$2" "$ao" "$bo" \
			"$(awk -v a="$ao" -v b="$bo" 'BEGIN {print (a > 0 ? b / a : 0)}')" \
			"$(med A "$1" "$2" 5)" "$(med B "$1" "$2" 5)" "$(med A "$1" "$2" 6)" "$(med B "$1" "$2" 6)"
	done
} | tee "$out/kvbench-ab.txt"
