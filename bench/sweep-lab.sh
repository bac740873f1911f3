#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# A capacity sweep in the lab, one fresh server per point, with the HTML
# report in build/bench/sweep-TRANSPORT/.
#   bench/sweep-lab.sh [-t rdma|tcp] [-s STEPS] [-m MAX] [-i K] [-a N] [-- PERF FLAGS]
#     -t  transport (default rdma)
#     -s  client counts (default 1000,10000,25000,50000)
#     -m  keep doubling past the last step up to MAX (default: the last step)
#     -i  runs per binary search once a step misses (default 2)
#     -a  spread the control connections over N source addresses (each has
#         64,512 ports towards the server's one port; the local port range is
#         widened to 1024-65535). tcp: 127.0.0.1 .. 127.0.0.N (default 8).
#         rdma (default 1: 127.0.0.1 on the lab's lo-backed device): the
#         server checks HELLO's GID against the control address, and over
#         lo an added address gets no GID, so with N > 1 the sweep runs on
#         Soft-RoCE over a dummy netdev with the server on 10.253.0.1 and
#         the clients on 10.253.0.2 .. 10.253.0.(N+1), each with its own GID
# It boots its own VM (QPG_LAB_MEM, default 20480 MiB; QPG_LAB_TIMEOUT,
# default 10800 s) unless it already runs inside one.
#   bench/sweep-lab.sh -t tcp -s 1000,10000,50000,100000
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 20480 10800 "$@"

transport=rdma steps=1000,10000,25000,50000 max="" naddr="" iters=2
while getopts "t:s:m:i:a:" o; do
	case $o in
	t) transport=$OPTARG ;;
	s) steps=$OPTARG ;;
	m) max=$OPTARG ;;
	a) naddr=$OPTARG ;;
	i) iters=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$naddr" ] || { [ "$transport" = tcp ] && naddr=8 || naddr=1; }
[ "$transport" = rdma ] || [ "$transport" = tcp ] || { echo "sweep-lab.sh: -t rdma|tcp" >&2; exit 2; }
[[ $naddr =~ ^[0-9]+$ ]] && [ "$naddr" -ge 1 ] && [ "$naddr" -le 64 ] ||
	{ echo "sweep-lab.sh: -a wants 1..64" >&2; exit 2; }

qpg_bench_setup sweep
ulimit -n 1048576
ulimit -l unlimited
echo "1024 65535" >/proc/sys/net/ipv4/ip_local_port_range
# Loopback carries both ends' packets through one per-CPU backlog of
# netdev_max_backlog packets (1,000 by default). Keepalive timers expire in
# batches (the timer wheel rounds a 10 s timer to 256 ms), so at 40,000
# connections each batch is thousands of probes and their answers at once:
# the backlog overflowed (/proc/net/softnet_stat: 17,434 dropped) and the
# probes that went missing aborted live connections with ETIMEDOUT (2,140
# in the same 60 s). On a real network each end has its own NIC queues.
echo 100000 >/proc/sys/net/core/netdev_max_backlog
# Soft-RoCE maps every QP's send queue into its process: one mapping per
# client at either end, past the default vm.max_map_count (65,530), where
# ibv_create_qp fails (a 100,000-client run stopped at 65,000).
echo 1048576 >/proc/sys/vm/max_map_count
src=127.0.0.1 host=127.0.0.1 dev_args=() srv_where=""
for i in $(seq 2 "$naddr"); do src+=",127.0.0.$i"; done
if [ "$transport" = rdma ] && [ "$naddr" -gt 1 ]; then
	ip link add qpgsw0 type dummy
	ip addr add 10.253.0.1/24 dev qpgsw0
	src=""
	for i in $(seq 2 $((naddr + 1))); do
		ip addr add "10.253.0.$i/24" dev qpgsw0
		src+="${src:+,}10.253.0.$i"
	done
	ip link set qpgsw0 up
	rdma link add qpgswrx type rxe netdev qpgsw0
	sleep 1
	host=10.253.0.1 dev_args=(-d qpgswrx) srv_where="--bind 10.253.0.1 -d qpgswrx"
fi
report=$out/sweep-$transport
rm -rf "$report"
nproc
free -m
cat /proc/sys/net/ipv4/ip_local_port_range /proc/sys/net/ipv4/tcp_mem
echo "sweep-lab.sh: $transport, steps $steps${max:+, up to $max}, $naddr source addresses"
# Capacity, not admission control: handshakes are not rate-limited and may
# take as long as the emulated CPUs need (server 120 s, client 60 s: client
# and server share the VM's two emulated CPUs); over rdma every client comes from
# 127.0.0.1, so the per-address connection limit (16,384) is lifted too; and
# the per-address QP limit (a quarter of --max-clients) on both: one host
# measures the server's capacity here. Everything else is the default.
peer_limit="--max-qps-per-peer 0"
[ "$transport" = rdma ] && peer_limit="--max-conns-per-peer 0 --max-qps-per-peer 0"
# Every 30 s while the sweep runs, the kernel's view: tcp sockets in use,
# orphaned and in TIME_WAIT, loopback backlog drops, aborts on timeout,
# resets and keepalive probes, so that a drop or an abort can be placed in a
# run's phases (the end-of-sweep totals below cannot say when).
# Packets dropped at the loopback backlog so far, over all CPUs.
softnet_dropped() {
	local d=0 x
	while read -r _ x _; do d=$((d + 16#$x)); done </proc/net/softnet_stat
	echo "$d"
}
kmon() {
	while :; do
		printf '%s t=%ss %s softnet_dropped=%s %s\n' "$(date +%T)" "$SECONDS" \
			"$(awk '/^TCP:/ {print "inuse=" $3, "orphan=" $5, "tw=" $7}' /proc/net/sockstat)" "$(softnet_dropped)" \
			"$(nstat -az TcpExtTCPAbortOnTimeout TcpEstabResets TcpExtTCPKeepAlive 2>/dev/null |
				awk 'NR > 1 {printf "%s=%s ", $1, $2}')"
		sleep 30
	done
}
kmon >"$out/sweep-$transport.kernel.log" 2>&1 &
kmon_pid=$!
rc=0
"$bin/qpgate-sweep" --steps "$steps" ${max:+--max "$max"} --search-iters "$iters" --out "$report" \
	--settle-timeout 600 --title "qpgate capacity in the lab ($transport)" "${dev_args[@]}" \
	--server-args "--transport $transport --cert $work/server.crt --key $work/server.key \
--handshake-timeout 120000 --max-pending 100000 --max-pending-per-peer 100000 --handshake-rate 0 $peer_limit $srv_where" \
	-- --transport "$transport" --ca "$work/ca.crt" --source "$src" "${dev_args[@]}" -n 5 --timeout 3600000 \
	--handshake-timeout 60000 "$@" \
	"$host" localhost || rc=$?
# What the kernel saw: keepalive probes, connections it aborted on a
# timeout, drops at the listen queue, the socket backlog and the loopback
# backlog.
nstat -az TcpExtTCPKeepAlive TcpExtTCPAbortOnTimeout TcpExtTCPAbortOnData TcpExtTCPAbortOnMemory \
	TcpExtTCPMemoryPressures TcpEstabResets TcpExtTCPAbortOnClose \
	TcpExtListenOverflows TcpExtListenDrops TcpExtTCPBacklogDrop 2>/dev/null || true
echo "softnet backlog drops: $(softnet_dropped)"
kill "$kmon_pid" 2>/dev/null || true
echo "kernel counters every 30 s: $out/sweep-$transport.kernel.log"
echo "report: $report/report.html"
if [ -n "$srv_where" ]; then
	rdma link delete qpgswrx || true
	ip link delete qpgsw0 || true
fi
exit $rc
