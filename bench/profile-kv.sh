#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Where a KV GET's time goes: perf record -e cpu-clock -g over the whole VM
# while qpgate-kvbench runs against a fresh KV server, then the top of perf
# report of the GETs (the keys are put in first, outside it). The default is kvbench-lab.sh --anchors' 4 KiB two-sided run; any
# qpgate-kvbench flag given here is added after it (and wins). In the lab:
#   bench/profile-kv.sh [-D SECONDS] [qpgate-kvbench flags]
# Writes build/bench/profile-kv.txt. Prints what it measured; asserts nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 1800 "$@"
secs=8
if [ "${1:-}" = -D ]; then
	secs=$2
	shift 2
fi
qpg_bench_setup profkv
qpg_serve "$work" --handshake-timeout 120000 --service kv --kv-capacity 256M -s 131072
flags=(--value-size 4096 --get-mode two-sided --num-clients 1 --threads 1 --credits 128 --num-workers 128 -s 131072 "$@")
# The keys go in first, outside the profile, which sees GETs only.
"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --handshake-timeout 60000 "${flags[@]}" -n 1000 \
	127.0.0.1 localhost >"$work/preload.txt" 2>&1 || { cat "$work/preload.txt" >&2; exit 1; }
flags+=(--no-preload -D "$secs")
perf record -e cpu-clock -F 1000 --call-graph dwarf,8192 -a -o "$work/perf.data" -- \
	"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --handshake-timeout 60000 "${flags[@]}" \
	127.0.0.1 localhost >"$work/run.txt" 2>&1 || true
{
	echo "# qpgate-kvbench ${flags[*]}"
	grep -vE '^\[' "$work/run.txt" | tail -4
	qpg_profile_report "$work/perf.data" qpgate-kvbench,qpgate-server
} | tee "$out/profile-kv.txt"
