#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Where an EXISTS batch's time goes, against a GET's: perf record -e
# cpu-clock -g over the whole VM while qpg_exists_rtt alternates a 4 KiB
# GET and an EXISTS of 64 keys (bench/exists-rtt.sh's run), then the top of
# perf report for the client and the server. In the lab:
#   bench/profile-exists.sh [ROUNDS]
# Writes build/bench/profile-exists.txt. Prints what it measured; asserts nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 4096 1800 "$@"
rounds=${1:-2000}
qpg_bench_setup profx
qpg_serve "$work" --transport rdma --service kv --kv-capacity 64M -s 8192
perf record -e cpu-clock -F 1000 --call-graph dwarf,8192 -a -o "$work/perf.data" -- \
	"$bin/qpg_exists_rtt" 127.0.0.1 localhost "$port" "$work/ca.crt" rdma "$rounds" >"$work/run.txt" 2>&1 || true
{
	cat "$work/run.txt"
	qpg_profile_report "$work/perf.data" qpg_exists_rtt,qpgate-server
} | tee "$out/profile-exists.txt"
