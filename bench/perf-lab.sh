#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# One qpgate-perf run against a fresh server on one rxe device, in the lab.
#   bench/perf-lab.sh CLIENTS [extra qpgate-perf flags...]
# Run it through the lab: scripts/rxe-vm --mem 8192 -- bench/perf-lab.sh 10000
# QPG_SERVER_ARGS adds server flags (e.g. "--qp-timeout 14").
set -euo pipefail
clients=${1:?usage: perf-lab.sh CLIENTS [flags]}
shift
. "$(dirname "$0")/lib.sh"
qpg_bench_setup bench
qpg_serve "$work" --handshake-timeout 120000 --max-pending 100000 --max-pending-per-peer 100000 ${QPG_SERVER_ARGS:-}
rc=0
"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c "$clients" --server-pid "$srv" \
	--json "$out/perf-$clients.json" --csv "$out/perf-$clients.csv" "$@" 127.0.0.1 localhost || rc=$?
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log"
echo "json: $out/perf-$clients.json"
exit $rc
