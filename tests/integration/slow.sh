#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# 100 clients ask a KV server for 16 x 1 MiB each and then stop reading
# (tcp) or posting receives (rdma), while 20 bystanders GET and verify.
# The server's memory stays inside the formula of docs/operations.md, it closes every
# slow client by its own deadline (no progress over tcp; a finite RNR
# retry over rdma), the bystanders verify every value, and connections,
# fds and pool slots come back to where they started.
#   slow.sh TRANSPORT
transport=$1
# Over tcp, a client that stops reading is found once the kernel's buffers
# are full, and loopback lets a receive buffer grow to 32 MiB here: run in
# a network namespace of our own with receive buffers capped at 1 MiB, so
# that 16 x 1 MiB asked for is always more than the kernel will hold.
if [ "$transport" = tcp ] && [ -z "${QPG_SLOW_NETNS:-}" ]; then
	exec env QPG_SLOW_NETNS=1 unshare -n sh -c 'ip link set lo up &&
		sysctl -qw net.ipv4.tcp_rmem="4096 131072 1048576" net.ipv4.tcp_wmem="4096 16384 1048576" &&
		exec "$0" "$@"' "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
qpg_test_setup slow
nslow=100 credits=16 nby=20 threads=2 maxmsg=8192 cap_mb=64
progress_ms=${QPG_SLOW_PROGRESS_MS:-3000} # 0 switches the deadline off (it must then fail)
# Long enough to fill the kernel buffers and then wait out the deadline.
hold_ms=15000
qp0=$(qps)
qpg_serve "$work" --transport "$transport" --service kv --kv-capacity ${cap_mb}M --kv-max-value 1M \
	-s $maxmsg --threads $threads --progress-timeout $progress_ms --metrics 127.0.0.1:0 || exit 1
kv() { "$bin/qpgate-kv" --synthetic --transport "$transport" --ca "$work/ca.crt" -p "$port" 127.0.0.1 localhost "$@"; }
kv put big 1M 7 >/dev/null || { echo "FAIL cannot store the 1 MiB value"; exit 1; }
sleep 0.3
rss0=$(awk '/VmRSS/{print $2}' "/proc/$srv/status")
fds0=$(ls "/proc/$srv/fd" | wc -l)
slots0=$(metric qpgate_pool_slots_in_use)
echo "idle: RSS ${rss0} kB, $fds0 fds, $slots0 pool slots in use, $(qps) QPs"

# The formula from docs/operations.md, in kB: the process at idle, the store, every
# thread's pool at its cap, and per connection its TLS session, structs and
# service state (64 KiB) plus an output buffer of at most twice its send
# depth in frames (tcp; the send depth is its credits here).
slot_kb=$(((maxmsg + 64 + 1023) / 1024))
per_conn_kb=$((64 + 2 * credits * slot_kb))
bound_kb=$((rss0 + cap_mb * 1024 + threads * 16384 * slot_kb + (nslow + nby) * per_conn_kb))

"$bin/slow_reader" "$transport" "$port" "$work/ca.crt" $nslow $credits big $hold_ms >"$work/slow.out" 2>&1 &
slowpid=$!
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" --num-clients $nby \
	--num-workers $nby --num-keys 200 --value-size 65536 -n 4000 --credits 4 \
	127.0.0.1 localhost >"$work/by.out" 2>&1
byrc=$?
wait $slowpid
slowrc=$?
sed 's/^/  /' "$work/slow.out"
grep -E 'GETs verified|FAILED|error' "$work/by.out" | head -3 | sed 's/^/  /'
hwm=$(awk '/VmHWM/{print $2}' "/proc/$srv/status")
echo "server peak RSS ${hwm} kB; formula bound ${bound_kb} kB (idle ${rss0} + store $((cap_mb * 1024)) + pools $((threads * 16384 * slot_kb)) + $((nslow + nby)) x ${per_conn_kb})"
check "slow clients connected and sent their GETs (exit $slowrc)" [ $slowrc -eq 0 ]
check "bystanders: 4000 GETs, every one verified, no errors (exit $byrc)" \
	grep -q '4000 GETs verified, 0 mismatches, 0 errors' "$work/by.out"
# The short turn that lets the GETs leave also reads, and one callback
# reads as long as the server sends: some connections are read to their
# end there (seen: 0-14 of 100 over tcp), and a connection whose last
# unanswered bytes fit in the kernel's buffers (1 MiB each side here) has
# had every send complete. A slow reader is one left with 3+ of its 1 MiB
# GETs unanswered: the server must still hold some of that, so it must
# close every one of them; at least 50 must be left so, or the test would
# not be testing slow readers.
pending=$(sed -n 's/.*left with 3+ GETs unanswered: \([0-9]*\);.*/\1/p' "$work/slow.out")
pending_open=$(sed -n 's/.*of those still open: \([0-9]*\).*/\1/p' "$work/slow.out")
check "${pending:-0} of $nslow clients were left with 3+ GETs unanswered (at least 50)" [ "${pending:-0}" -ge 50 ]
check "the server closed every one of them (${pending_open:-?} still open)" [ "${pending_open:-1}" = 0 ]
need=${pending:-$nslow}
reason=$([ "$transport" = tcp ] && echo "no progress" || echo "RNR retry|no progress")
closed=$(grep -Ec "closed \((timeout|qp_error)\): .*($reason)" "$work/server.log")
grep -Em1 "closed \((timeout|qp_error)\): " "$work/server.log" | sed 's/^/  server log: /'
check "the server logged $closed closes by its deadline ($reason; at least $need)" [ "$closed" -ge $need ]
# Back to baseline (the tick copies the pool's figure every 100 ms).
for _ in $(seq 1 50); do
	[ "$(metric qpgate_connected_clients)" = 0 ] && [ "$(metric qpgate_pool_slots_in_use)" = "$slots0" ] && break
	sleep 0.2
done
fds1=$(ls "/proc/$srv/fd" | wc -l)
check "connections back to 0" [ "$(metric qpgate_connected_clients)" = 0 ]
check "pool slots in use back to $slots0 (now $(metric qpgate_pool_slots_in_use))" [ "$(metric qpgate_pool_slots_in_use)" = "$slots0" ]
check "fds back to $fds0 (now $fds1)" [ "$fds1" -eq "$fds0" ]
qpg_stop_checked "$qp0"
finish_checks
