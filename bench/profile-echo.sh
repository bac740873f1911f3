#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Where an echo's time goes: perf record -e cpu-clock -g over the whole VM
# while one client echoes (rdma, auth on unless --no-auth is passed), then
# the top of perf report, by symbol and by process. In the lab:
#   bench/profile-echo.sh [-n ITERS] [-c CLIENTS] [extra qpgate-perf flags]
# QPG_SERVER_ARGS adds server flags. Writes build/bench/profile-echo.txt. Prints what it measured; asserts nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 4096 1800 "$@"
iters=3000 clients=1
while [ $# -gt 0 ]; do
	case $1 in
	-n) iters=$2; shift 2 ;;
	-c) clients=$2; shift 2 ;;
	*) break ;; # the rest goes to qpgate-perf
	esac
done
qpg_bench_setup prof
# shellcheck disable=SC2086 # QPG_SERVER_ARGS: extra server flags, split
qpg_serve "$work" --handshake-timeout 120000 --allow-no-auth ${QPG_SERVER_ARGS:-}
pids+=("$srv")
"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c "$clients" -n 200 "$@" 127.0.0.1 localhost >/dev/null 2>&1 # warm up
# DWARF call graphs (from .eh_frame: Debian's libcrypto has neither frame
# pointers nor symbols for its internals, but its exported functions show
# with what they include).
perf record -e cpu-clock -F 1000 --call-graph dwarf,8192 -a -o "$work/perf.data" -- \
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c "$clients" -n "$iters" "$@" 127.0.0.1 localhost \
	>"$work/run.txt" 2>&1 || true
grep -E '^ [0-9]' "$work/run.txt" | tail -2
{
	echo "# qpgate-perf -c $clients -n $iters $*"
	grep -E '^ [0-9]|#conns' "$work/run.txt" | tail -2
	qpg_profile_report "$work/perf.data" qpgate-perf,qpgate-server
} | tee "$out/profile-echo.txt"
