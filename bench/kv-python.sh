#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The Python binding's cost: GETs/s of 4 KiB and 64 KiB values through
# qpgate.AsyncKVPool (bench/kv_python.py) against qpgate-kvbench with the
# same connections and workers, in the same run, alternating, RUNS each
# (default 5). kvbench runs twice a round, with its default busy polling and
# with none (as the binding's pool: its work comes from Python's thread);
# the ratio is against the faster of the two, and the median is printed.
#   bench/kv-python.sh [-t tcp|rdma] [-r RUNS] [-D SECONDS]
# rdma runs in the lab.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
transport=tcp runs=5 secs=5
while getopts "t:r:D:" o; do
	case $o in
	t) transport=$OPTARG ;;
	r) runs=$OPTARG ;;
	D) secs=$OPTARG ;;
	*) echo "usage: $0 [-t tcp|rdma] [-r RUNS] [-D SECONDS]" >&2; exit 2 ;;
	esac
done
case $transport in tcp | rdma) ;; *) echo "kv-python: -t is tcp or rdma" >&2; exit 2 ;; esac
[ "$transport" = rdma ] && qpg_bench_in_lab 4096 2400 "$@"
bin=${QPG_BIN:-$repo/build/bin}
work=$(mktemp -d "${TMPDIR:-/tmp}/qpg-kvpy.XXXXXX")
trap 'kill -9 $srv 2>/dev/null; rm -rf "$work"' EXIT
"$repo/scripts/make-certs" "$work" localhost >/dev/null 2>&1
conns=4 workers=16 keys=1000
export PYTHONPATH=$repo/python QPGATE_KV_LIB=${QPGATE_KV_LIB:-$repo/build/src/libqpgate-kv.so.0}
echo " kv-python: $transport, $conns connections, $workers workers, $keys keys, ${secs} s a run," \
	"$runs runs each way, alternating ($(date -u +%F), $(git -C "$repo" rev-parse --short HEAD))"
printf ' %-8s %12s %12s %12s %8s\n' size kvbench kvbench-bp0 python ratio
kvb() { # SIZE [FLAGS]: kvbench's own GETs/s
	local out
	out=$("$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" \
		--num-clients $conns --num-workers $workers --num-keys $keys --value-size "$1" \
		-D "$secs" "${@:2}" 127.0.0.1 localhost 2>&1)
	grep -q ' 0 mismatches, 0 errors' <<<"$out" || { echo " kvbench did not verify every GET:" >&2; tail -3 <<<"$out" >&2; }
	# Its own ops/s: the sixth column of its row, under the "GET" header.
	awk '/^ GET / {h = 1; next} h && NF > 6 {printf "%.0f", $6; exit}' <<<"$out"
}
for size in 4096 65536; do
	"$bin/qpgate-server" --threads 1 --transport "$transport" --service kv --kv-capacity 256M -s 8192 \
		--cert "$work/server.crt" --key "$work/server.key" -p 0 --port-file "$work/port" 2>"$work/srv.log" &
	srv=$!
	for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
	read -r port _ <"$work/port"
	ratios=()
	for r in $(seq 1 "$runs"); do
		k1=$(kvb $size)
		p=$(/usr/bin/python3 "$repo/bench/kv_python.py" 127.0.0.1 localhost "$work/ca.crt" "$port" \
			"$transport" $conns $workers $size $keys "$secs" | awk '{print $7}')
		k0=$(kvb $size --busy-poll 0)
		ratio=$(awk -v a="$p" -v b="$k1" -v c="$k0" 'BEGIN {m = b > c ? b : c; printf "%.2f", m ? a / m : 0}')
		ratios+=("$ratio")
		printf ' %-8s %12s %12s %12s %8s\n' "$size" "$k1" "$k0" "$p" "$ratio"
	done
	med=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}')
	echo " $size bytes: median python/kvbench ${med}x"
	kill -TERM $srv
	wait $srv || true
	rm -f "$work/port"
done
