#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# A batch EXISTS of 64 keys against one 4 KiB GET (issue 57's bar: at most
# 1.5x), one request at a time, in ROUNDS runs of qpg_exists_rtt against one
# server; prints each run's table and the median ratio.
#   bench/exists-rtt.sh [-t tcp|rdma] [-r ROUNDS]
# -t rdma runs in the lab VM. Prints numbers; asserts nothing.
set -euo pipefail
transport=tcp rounds=5
while getopts "t:r:" o; do
	case $o in
	t) transport=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) echo "usage: $0 [-t tcp|rdma] [-r ROUNDS]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
[ "$transport" = rdma ] && qpg_bench_in_lab 2048 1800 -t rdma -r "$rounds"
qpg_bench_setup xrtt
qpg_serve "$work" --transport "$transport" --service kv --kv-capacity 64M -s 8192
ratios=()
for r in $(seq 1 "$rounds"); do
	"$bin/qpg_exists_rtt" 127.0.0.1 localhost "$port" "$work/ca.crt" "$transport" 2000 | tee "$work/out"
	ratios+=("$(awk '/EXISTS\/GET at p50/ {sub("x", "", $4); print $4}' "$work/out")")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {printf " median EXISTS(64)/GET(4 KiB) over %d runs: %.2fx\n", NR, a[int((NR+1)/2)]}'
