#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate-kvbench against a fresh KV server on one rxe device, in the lab.
#   bench/kvbench-lab.sh [qpgate-kvbench flags]      e.g. --scaling -D 5
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/kvbench.json.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 2400 "$@"
qpg_bench_setup kvb
qpg_serve "$work" --handshake-timeout 120000 --service kv --kv-capacity 256M -s 8192
echo " server: $(ibv_devices | awk 'NR==3{print $1}'), QPs on the device before: $(rdma res show qp | grep -c lqpn)"
rc=0
"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --handshake-timeout 60000 \
	--json "$out/kvbench.json" "$@" 127.0.0.1 localhost || rc=$?
echo " server RSS: $(awk '/VmRSS/{print $2}' "/proc/$srv/status") kB"
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log" | sed 's/^/ /'
echo " QPs on the device after: $(rdma res show qp | grep -c lqpn)"
exit $rc
