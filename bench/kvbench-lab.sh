#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate-kvbench against a fresh KV server on one rxe device, in the lab.
#   bench/kvbench-lab.sh [qpgate-kvbench flags]      e.g. --scaling -D 5
#   bench/kvbench-lab.sh --anchors [-D SECONDS] [qpgate-kvbench flags]
# --anchors runs perftest in the same VM and prints two ratios: 4 KiB
# two-sided GETs/s against ib_send_bw's 4 KiB message rate (a GET is a round
# trip; target >= 0.5), and 64 KiB one-sided GET throughput against
# ib_read_bw at 64 KiB (target >= 0.8). Every GET is verified either way.
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/kvbench.json (or kvbench-anchors.json). Prints numbers;
# asserts nothing about them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 2400 "$@"
anchors="" secs=10
if [ "${1:-}" = --anchors ]; then
	anchors=1
	shift
	if [ "${1:-}" = -D ]; then secs=$2; shift 2; fi
fi
qpg_bench_setup kvb
dev=$(ibv_devices | awk 'NR==3{print $1}')
if [ -n "$anchors" ]; then
	echo " ib_send_bw -s 4096 and ib_read_bw -s 65536 on $dev" >&2
	send_out=$(qpg_perftest ib_send_bw -s 4096 -n 20000)
	read_out=$(qpg_perftest ib_read_bw -s 65536 -n 5000)
	# Columns: #bytes #iterations BW_peak BW_average[MB/s] MsgRate[Mpps];
	# perftest's MB is 2^20 bytes.
	send_rate=$(awk '$1 == 4096 && NF >= 5 {printf "%.0f", $5 * 1e6; exit}' <<<"$send_out")
	read_bps=$(awk '$1 == 65536 && NF >= 5 {printf "%.0f", $4 * 1048576; exit}' <<<"$read_out")
fi
qpg_serve "$work" --handshake-timeout 120000 --service kv --kv-capacity 256M -s 8192
echo " server: $dev, QPs on the device before: $(rdma res show qp | grep -c lqpn)"
rc=0
kvbench() { # JSON FLAGS...
	local json=$1
	shift
	"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --handshake-timeout 60000 \
		--json "$json" "$@" 127.0.0.1 localhost || rc=$?
}
if [ -z "$anchors" ]; then
	kvbench "$out/kvbench.json" "$@"
else
	kvbench "$work/kv4k.json" --value-size 4096 --get-mode two-sided -D "$secs" "$@"
	kvbench "$work/kv64k.json" --value-size 65536 --num-keys 1000 --get-mode one-sided \
		-D "$secs" "$@"
fi
echo " server RSS: $(awk '/VmRSS/{print $2}' "/proc/$srv/status") kB"
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log" | sed 's/^/ /'
echo " QPs on the device after: $(rdma res show qp | grep -c lqpn)"
if [ -n "$anchors" ]; then
	j() { jq -r "$2" "$work/$1.json"; }
	ops4k=$(j kv4k '.results.runs[0].ops_per_s')
	bps64k=$(j kv64k '.results.runs[0].gib_per_s * 1073741824')
	ok4k=$(j kv4k '.results.runs[0].mismatches + .results.runs[0].errors')
	ok64k=$(j kv64k '.results.runs[0].mismatches + .results.runs[0].errors')
	r1=$(awk -v a="$ops4k" -v b="$send_rate" 'BEGIN{printf "%.3f", (b > 0 ? a / b : 0)}')
	r2=$(awk -v a="$bps64k" -v b="$read_bps" 'BEGIN{printf "%.3f", (b > 0 ? a / b : 0)}')
	printf '\n %-50s %14s %14s %8s %8s\n' "KV figure / anchor (same VM)" "qpgate" "anchor" "ratio" "target"
	printf ' %-50s %14.0f %14s %8s %8s\n' "4 KiB two-sided GETs/s / ib_send_bw 4 KiB msg/s" \
		"$ops4k" "$send_rate" "$r1" ">= 0.5"
	printf ' %-50s %14.0f %14s %8s %8s\n' "64 KiB one-sided GET B/s / ib_read_bw 64 KiB B/s" \
		"$bps64k" "$read_bps" "$r2" ">= 0.8"
	printf ' mismatches + errors: 4 KiB %s, 64 KiB %s\n' "$ok4k" "$ok64k"
	version=$("$bin/qpgate-kvbench" --version | awk '{print $3}')
	jq -n --arg version "$version" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg dev "$dev" \
		--argjson secs "$secs" --argjson sr "$send_rate" --argjson rb "$read_bps" \
		--argjson o4 "$ops4k" --argjson b64 "$bps64k" --argjson r1 "$r1" --argjson r2 "$r2" \
		--slurpfile k4 "$work/kv4k.json" --slurpfile k64 "$work/kv64k.json" \
		'{schema_version: 1, tool: "bench/kvbench-lab.sh", version: $version, date: $date,
		  parameters: {device: $dev, duration_s: $secs},
		  results: {ib_send_bw_4k_msgs_per_s: $sr, ib_read_bw_64k_bytes_per_s: $rb,
		            two_sided_4k: {gets_per_s: $o4, ratio: $r1, run: $k4[0].results.runs[0]},
		            one_sided_64k: {bytes_per_s: $b64, ratio: $r2, run: $k64[0].results.runs[0]}}}' \
		>"$out/kvbench-anchors.json"
	"$bin/json_check" "$out/kvbench-anchors.json" >&2 || echo " kvbench-anchors.json does not have the schema" >&2
	echo " json: $out/kvbench-anchors.json"
fi
exit $rc
