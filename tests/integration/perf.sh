#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate-perf end to end: its JSON must be valid, complete, and agree with
# what the run did. Timings are reported, never asserted.
#   perf.sh TRANSPORT [CLIENTS]
transport=$1
n=${2:-200}
. "$(dirname "$0")/lib.sh"
qpg_test_setup perf
qpg_serve "$work" --transport "$transport" --handshake-timeout 60000
"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c "$n" -n 5 -s 300 \
	--server-pid "$srv" --json "$work/r.json" --csv "$work/r.csv" 127.0.0.1 localhost >"$work/out" 2>&1
rc=$?
cat "$work/out"
check_json_run qpgate-perf $rc "$work/r.json"
check "parameters name the run" j ".tool == \"qpgate-perf\" and .parameters.clients == $n and .parameters.transport == \"$transport\" and .parameters.size == 300"
check "100% success" j ".results.connections.success_rate == 1 and .results.connections.succeeded == $n"
check "every message verified" j ".results.data.verified == $((n * 5)) and .results.data.mismatches == 0"
check "latency and connect percentiles filled" \
	j '.results.data.latency_us.p50 > 0 and .results.data.latency_us.p999 >= .results.data.latency_us.p99 and .results.connections.connect_ms.p99 > 0'
check "per-phase table present" j '.results.connections.phases_us.tls_handshake.count > 0'
check "client and server resources sampled" \
	j '.results.resources.snapshots[1].client.fds > 0 and .results.resources.snapshots[1].server.rss_kb > 0 and .results.resources.server_memory_per_client_kb != null'
check "msgs/s and bytes/s" j '.results.data.msgs_per_s > 0 and ((.results.data.bytes_per_s / .results.data.msgs_per_s) - 300 | fabs) < 1e-6'
if [ "$transport" = rdma ]; then
	check "QP phases timed" j '.results.connections.phases_us.qp_rtr.p50 > 0 and .results.connections.phases_us.qp_create.p50 > 0'
	check "device QPs at 'connected' = 2 per client + QP1" j ".results.resources.snapshots[1].device.qp == $((2 * n + 1))"
	check "device QPs back to baseline at the end" j '.results.resources.snapshots[2].device.qp == .results.resources.snapshots[0].device.qp'
fi
check "CSV has a header and one row" [ "$(wc -l <"$work/r.csv")" -eq 2 ]
check "CSV row says $n of $n connected" grep -q "^$n,$n,0,1.000000," "$work/r.csv"
kill -TERM "$srv"; wait "$srv"; srv=""
finish_checks
