#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The KV load that once grew the server to 17.7 GB: 64 clients of 64
# credits, 4,096 workers, 300 keys of 1 MiB, every GET verified. Prints the
# server's peak RSS (VmHWM) beside the memory formula of docs/operations.md.
#   bench/kvbench-rss.sh tcp [SECONDS]        here
#   bench/kvbench-rss.sh rdma [SECONDS]       in the lab (boots it)
set -euo pipefail
transport=${1:-tcp}
secs=${2:-60}
. "$(dirname "$0")/lib.sh"
[ "$transport" = rdma ] && qpg_bench_in_lab 8192 2400 "$@"
qpg_bench_setup kvrss
threads=2 maxmsg=4096 cap_mb=1024 conns=64 credits=64
qpg_serve "$work" --transport "$transport" --service kv --kv-capacity ${cap_mb}M --threads $threads \
	-s $maxmsg --handshake-timeout 60000
rss0=$(awk '/VmRSS/{print $2}' "/proc/$srv/status")
rc=0
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" --credits $credits \
	--num-clients $conns --num-workers 4096 --num-keys 300 --value-size 1M -D "$secs" \
	--handshake-timeout 60000 127.0.0.1 localhost >"$work/kvb.out" 2>&1 || rc=$?
grep -E 'GETs verified|FAILED|error' "$work/kvb.out" | head -5 | sed 's/^/ /'
if [ $rc -ne 0 ]; then
	grep -Ei 'fail|error|refused|closed' "$work/kvb.out" | head -8 | sed 's/^/ kvbench: /'
	grep -h 'closed (' "$work/server.log" | head -5 | sed 's/^/ server: /'
fi
hwm=$(awk '/VmHWM/{print $2}' "/proc/$srv/status")
# The formula of docs/operations.md, in kB: idle + store + pools + per connection (64
# KiB, plus over tcp an output buffer of at most 2 x send depth x slot).
slot_kb=$(((maxmsg + 64 + 1023) / 1024))
depth=$credits
[ "$transport" = rdma ] && depth=$((2 * credits)) # grants: two work requests each
per_conn_kb=$((64 + $([ "$transport" = tcp ] && echo $((2 * depth * slot_kb)) || echo 0)))
bound_kb=$((rss0 + cap_mb * 1024 + threads * 16384 * slot_kb + conns * per_conn_kb))
echo " server ($transport): idle RSS ${rss0} kB, peak RSS (VmHWM) ${hwm} kB; formula bound ${bound_kb} kB"
echo " (idle ${rss0} + store $((cap_mb * 1024)) + pools $((threads * 16384 * slot_kb)) + ${conns} x ${per_conn_kb})"
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log" | sed 's/^/ /'
[ "$hwm" -le "$bound_kb" ] || { echo " peak RSS above the formula"; rc=1; }
exit $rc
