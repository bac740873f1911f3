#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The tcp transport's echo round trip against a plain TCP ping-pong of the
# same size (sockperf), on this host, over lo: RUNS runs of each,
# alternating, and the median of their p50s. qpgate runs with its default
# busy polling, and once more without it (sockperf does not spin), with
# TLS and per-message tags on, every echo verified.
#   bench/tcp-anchor.sh [-s SIZE] [-n ITERS] [-r RUNS]
# Writes build/bench/tcp-anchor.json. Prints numbers; asserts nothing.
set -euo pipefail
size=64 iters=5000 runs=5
while getopts "s:n:r:" o; do
	case $o in
	s) size=$OPTARG ;;
	n) iters=$OPTARG ;;
	r) runs=$OPTARG ;;
	*) echo "usage: $0 [-s SIZE] [-n ITERS] [-r RUNS]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
qpg_bench_setup tcpa
sockperf server --tcp -i 127.0.0.1 -p 18517 >/dev/null 2>&1 &
pids+=($!)
qpg_serve "$work" --transport tcp --threads 1 -s "$((size > 4096 ? size : 4096))"
sp=() qs=() q0=()
for r in $(seq 1 "$runs"); do
	out_sp=$(sockperf ping-pong --tcp -i 127.0.0.1 -p 18517 -m "$size" -t 3 --full-rtt 2>&1 || true)
	sp+=("$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$out_sp")")
	for bp in default 0; do
		flag=()
		[ "$bp" = 0 ] && flag=(--busy-poll 0)
		"$bin/qpgate-perf" --transport tcp --ca "$work/ca.crt" -p "$port" -c 1 -n "$iters" -s "$size" \
			--json "$work/q.json" "${flag[@]}" 127.0.0.1 localhost >/dev/null 2>&1 ||
			echo " run $r: qpgate-perf did not verify every echo" >&2
		v=$(jq -r '.results.data.latency_us.p50' "$work/q.json")
		if [ "$bp" = 0 ]; then q0+=("$v"); else qs+=("$v"); fi
	done
	echo " run $r: sockperf p50 ${sp[-1]} us, qpgate tcp p50 ${qs[-1]} us (busy-poll 0: ${q0[-1]} us)"
done
m_sp=$(printf '%s\n' "${sp[@]}" | median)
m_q=$(printf '%s\n' "${qs[@]}" | median)
m_q0=$(printf '%s\n' "${q0[@]}" | median)
r1=$(awk -v a="$m_q" -v b="$m_sp" 'BEGIN{printf "%.3f", a / b}')
r0=$(awk -v a="$m_q0" -v b="$m_sp" 'BEGIN{printf "%.3f", a / b}')
printf '\n %-52s %10s %10s %8s %8s\n' "median of $runs runs, $size-byte messages, this host" "qpgate" "sockperf" "ratio" "target"
printf ' %-52s %10.1f %10.1f %8s %8s\n' "tcp transport echo p50 [us], busy-poll default" "$m_q" "$m_sp" "$r1" "<= 1.2"
printf ' %-52s %10.1f %10.1f %8s\n' "tcp transport echo p50 [us], --busy-poll 0" "$m_q0" "$m_sp" "$r0"
version=$("$bin/qpgate-perf" --version | awk '{print $3}')
jq -n --arg version "$version" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
	--argjson size "$size" --argjson iters "$iters" --argjson runs "$runs" \
	--argjson sp "$(printf '%s\n' "${sp[@]}" | jq -s .)" --argjson qs "$(printf '%s\n' "${qs[@]}" | jq -s .)" \
	--argjson q0 "$(printf '%s\n' "${q0[@]}" | jq -s .)" --argjson r1 "$r1" --argjson r0 "$r0" \
	'{schema_version: 1, tool: "bench/tcp-anchor.sh", version: $version, date: $date,
	  parameters: {size: $size, iters: $iters, runs: $runs, where: "host, lo"},
	  results: {sockperf_p50_us: $sp, qpgate_p50_us: $qs, qpgate_busy_poll_0_p50_us: $q0,
	            ratio_median: $r1, ratio_median_busy_poll_0: $r0}}' >"$out/tcp-anchor.json"
"$bin/json_check" "$out/tcp-anchor.json" >&2 || echo " tcp-anchor.json does not have the schema" >&2
echo " json: $out/tcp-anchor.json"
