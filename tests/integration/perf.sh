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
check "the priming connect (a full handshake alone, for the ticket) timed within the connect phase" \
	j '.results.connections.prime_s > 0 and .results.connections.prime_s < .results.connections.connect_phase_s'
check "latency and connect percentiles filled" \
	j '.results.data.latency_us.p50 > 0 and .results.data.latency_us.p999 >= .results.data.latency_us.p99 and .results.connections.connect_ms.p99 > 0'
check "per-phase table present" j '.results.connections.phases_us.tls_handshake.count > 0'
check "client and server resources sampled" \
	j '.results.resources.snapshots[1].client.fds > 0 and .results.resources.snapshots[1].server.rss_kb > 0 and .results.resources.server_memory_per_client_kb != null'
check "msgs/s and bytes/s" j '.results.data.msgs_per_s > 0 and ((.results.data.bytes_per_s / .results.data.msgs_per_s) - 300 | fabs) < 1e-6'
if [ "$transport" = rdma ]; then
	check "QP phases timed" j '.results.connections.phases_us.qp_rtr.p50 > 0 and .results.connections.phases_us.qp_create.p50 > 0'
	check "device QPs at 'connected' = 2 per client + QP1" j ".results.resources.snapshots[1].device.qp == $((2 * n + 1))"
	# The server tears its QPs down once the client's are gone, on its own
	# time: wait for the device to be back where it began (60 s at most).
	check "device QPs back to baseline once the server has closed every connection" \
		qps_back "$(jq '.results.resources.snapshots[0].device.qp' "$work/r.json")"
	# The TLS session is freed once the bootstrap is done (about 13 kB of
	# each client's 25): at a count where the pools' growth is amortized.
	if [ "$n" -ge 1000 ]; then
		check "server memory per client <= 16 kB (TLS freed after the bootstrap)" \
			j '.results.resources.server_memory_per_client_kb <= 16'
	fi
fi
want_threads=$((n / 64 < $(nproc) ? n / 64 : $(nproc)))
[ "$want_threads" -ge 1 ] || want_threads=1
check "by default one loop per CPU, one per 64 clients at most ($want_threads)" j ".parameters.threads == $want_threads"
check "CSV has a header and one row" [ "$(wc -l <"$work/r.csv")" -eq 2 ]
check "CSV row says $n of $n connected" grep -q "^$n,$n,0,1.000000," "$work/r.csv"
kill -TERM "$srv"; wait "$srv"; srv=""

# --source: the control connections come from the given addresses, in turn.
# Over tcp several (each has its own ports); over rdma the one the GID carries.
if [ "$transport" = tcp ]; then src=127.0.0.2,127.0.0.3; else src=127.0.0.1; fi
qpg_serve "$work" --transport "$transport" --handshake-timeout 60000 -v
"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c 20 -n 2 \
	--source "$src" --json "$work/s.json" 127.0.0.1 localhost >"$work/out" 2>&1
rc=$?
qpg_json_file=$work/s.json
check "--source run: all 20 connected and verified (rc $rc)" \
	j '.results.connections.succeeded == 20 and .results.data.verified == 40'
kill -TERM "$srv"; wait "$srv"; srv=""
for a in ${src//,/ }; do
	check "the server saw clients from $a" grep -q "from $a:" "$work/server.log"
done
check "and from no other address" bash -c "! grep -E ' from ' '$work/server.log' | grep -vqE ' from (${src//,/|}):'"
if [ "$transport" = tcp ]; then
	"$bin/qpgate-perf" --transport tcp --ca "$work/ca.crt" -p 1 -c 1 --source 127.0.0.1,::1 \
		127.0.0.1 localhost >"$work/out" 2>&1
	check "a source of the other family is refused, with why (rc $?)" \
		grep -q "source address '::1' is IPv6, but the server is IPv4" "$work/out"
fi
# --lat-every K: one echo in K on each client is timed (a clock read can be
# a system call); every echo is still verified.
qpg_serve "$work" --transport "$transport" --handshake-timeout 60000
perf_json() { # NAME FLAGS...: qpgate-perf against $port; sets rc, qpg_json_file
	local name=$1
	shift
	"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" "$@" \
		--json "$work/$name.json" 127.0.0.1 localhost >"$work/out" 2>&1
	rc=$?
	qpg_json_file=$work/$name.json
}
# --threads: the clients spread over loops, each with its share; the
# results are the sum (and conn 0's hooks still reach conn 0).
perf_json t -c 7 -n 3 --threads 3
check "--threads 3: 7 clients over 3 loops, all connected, every echo verified and timed (rc $rc)" \
	j '.parameters.threads == 3 and .results.connections.succeeded == 7 and .results.data.verified == 21 and .results.data.latency_us.count == 21 and .results.data.mismatches == 0'
check "--threads 3: the table names them" grep -q "7 clients, $transport transport, .*, 3 threads" "$work/out"
perf_json l -c 4 -n 10 --lat-every 3
check "--lat-every 3: all 40 echoes verified, echoes 0, 3, 6 and 9 of each client timed (rc $rc)" \
	j '.parameters.latency_every == 3 and .results.data.verified == 40 and .results.data.latency_us.count == 16'
check "--lat-every 3: the table says what was timed" \
	grep -q "latency from 1 echo in 3 on each connection (16 timed); every echo verified" "$work/out"
# --ready-file: written whole once every client is up, while the traffic
# goes on (bench/profile-rate.sh starts its profile on it); --stop-file
# then ends the sending, and what is in flight still comes back.
rm -f "$work/ready" "$work/stop"
"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c 3 -D 60 \
	--ready-file "$work/ready" --stop-file "$work/stop" --json "$work/rf.json" \
	127.0.0.1 localhost >"$work/out" 2>&1 &
pp=$!
for _ in $(seq 1 600); do
	[ -e "$work/ready" ] && break
	kill -0 "$pp" 2>/dev/null || break
	sleep 0.1
done
check "--ready-file: written while the run goes on, saying 3 up and 0 failed" \
	bash -c "kill -0 $pp && [ \"\$(cat '$work/ready')\" = '3 0' ]"
touch "$work/stop"
wait "$pp"
rc=$?
qpg_json_file=$work/rf.json
check "--ready-file run: ended by --stop-file, every echo sent came back verified (rc $rc)" \
	j '.results.data.verified > 0 and .results.data.verified == .results.data.sent and .results.data.mismatches == 0'
# --clock tsc: stamps from the time-stamp counter, calibrated against
# CLOCK_MONOTONIC and checked against it over the run; a bad name is refused.
if [ "$(uname -m)" = x86_64 ]; then
	perf_json t -c 2 -n 200 --clock tsc
	check "--clock tsc: all 400 echoes verified and timed (rc $rc)" \
		j '.parameters.clock == "tsc" and .results.data.verified == 400 and .results.data.latency_us.count == 400 and .results.data.latency_us.p50 > 0'
	check "--clock tsc: the counter agreed with CLOCK_MONOTONIC over the run within 5%" \
		j '(.results.data.clock_drift | fabs) < 0.05'
	check "--clock tsc: the table names the clock" grep -q "latency clock: TSC at" "$work/out"
fi
"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c 1 -n 1 --clock hpet \
	127.0.0.1 localhost >"$work/out" 2>&1
rc=$?
check "--clock hpet: refused before connecting, with why (rc $rc)" \
	bash -c "[ $rc -eq 2 ] && grep -q \"error: --clock is 'mono' or 'tsc', not 'hpet'\" '$work/out'"
"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c 1 -n 1 \
	--server-pid 1073741823 127.0.0.1 localhost >"$work/out" 2>&1
rc=$?
check "--server-pid of no process: refused before connecting, naming it (rc $rc)" \
	bash -c "[ $rc -eq 2 ] && grep -q 'error: --server-pid 1073741823: no such process' '$work/out'"
kill -TERM "$srv"; wait "$srv"; srv=""
# Sessions of several QPs (-q): one TLS handshake and one control connection
# bring up a session's QPs, each with keys and PSNs of its own; the server
# bounds their number; a session shares one fate.
if [ "$transport" = rdma ]; then
	qpg_serve "$work" --handshake-timeout 60000 --max-session-qps 8 -v
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c 20 -q 8 -n 3 --server-pid "$srv" \
		--json "$work/q.json" 127.0.0.1 localhost >"$work/out" 2>&1
	rc=$?
	qpg_json_file=$work/q.json
	check "-q 8: 20 clients in 3 sessions, all connected and every echo verified (rc $rc)" \
		j '.parameters.qps_per_session == 8 and .results.connections.succeeded == 20 and .results.data.verified == 60'
	check "-q 8: device QPs at 'connected' = 2 per client + QP1" j '.results.resources.snapshots[1].device.qp == 41'
	check "-q 8: device QPs back to baseline once the server has closed every connection" \
		qps_back "$(jq '.results.resources.snapshots[0].device.qp' "$work/q.json")"
	# The server logs each QP as a connection, from its session's one
	# control connection (address:port).
	sessions=$(sed -n 's/.*conn [0-9]* from \([0-9.:]*\): QPN.*/\1/p' "$work/server.log" | sort -u | wc -l)
	qps=$(grep -c ': QPN' "$work/server.log")
	check "-q 8: the server saw 20 QPs over 3 control connections ($qps over $sessions)" [ "$qps" -eq 20 -a "$sessions" -eq 3 ]
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c 9 -q 9 -n 1 127.0.0.1 localhost >"$work/out" 2>&1
	check "-q 9 against --max-session-qps 8: refused, with why (rc $?)" \
		grep -q 'at most 8 QPs per session here (asked for 9)' "$work/out"
	check "-q 9: the server logged the refusal" grep -q 'closed (rejected): rejected: at most 8 QPs' "$work/server.log"
	# A bad tag on one QP ends its session (all 4), not the other one.
	"$bin/qpgate-client" --ca "$work/ca.crt" -p "$port" -c 8 -q 4 -n 5 --test-corrupt-tag-at 2 \
		127.0.0.1 localhost >"$work/out" 2>&1
	check "a bad tag ends its session's 4 QPs and no others (rc $?)" grep -q 'failed: 4 x peer_closed' "$work/out"
	check "the server says why: the QP with the bad tag, then its 3 siblings" \
		[ "$(grep -c 'closed (.*): session closed: message 3 failed authentication' "$work/server.log")" -eq 3 ]
	kill -TERM "$srv"; wait "$srv"; srv=""
fi
# Connections that the server closes while later ones still connect (here
# idle ones) are established and failed both: each must still be counted
# once as a finished handshake, and every one of the 40 started.
if [ "$transport" = tcp ]; then
	qpg_serve "$work" --transport tcp --idle-timeout 300
	"$bin/qpgate-perf" --transport tcp --ca "$work/ca.crt" -p "$port" -c 40 -n 1 --ramp 20 \
		--json "$work/i.json" 127.0.0.1 localhost >"$work/out" 2>&1
	qpg_json_file=$work/i.json
	check "idle-closed while others connect: all 40 established, none left unstarted" \
		j '.results.connections.succeeded == 40 and (.results.connections.failure_examples.timeout // "" | test("not started") | not)'
	kill -TERM "$srv"; wait "$srv"; srv=""
fi
# Over rdma, several source addresses, each with its own GID: Soft-RoCE on
# a dummy netdev (over lo an added address gets no GID) with three
# addresses; the server on the first, checking every HELLO's GID against
# its control connection's address (no --allow-any-gid); the clients from
# the other two in turn, each connection sending from its source's GID.
if [ "$transport" = rdma ]; then
	ip link add qpgsrc0 type dummy && ip addr add 10.252.0.1/24 dev qpgsrc0 &&
		ip addr add 10.252.0.2/24 dev qpgsrc0 && ip addr add 10.252.0.3/24 dev qpgsrc0 &&
		ip link set qpgsrc0 up && rdma link add qpgsrx0 type rxe netdev qpgsrc0
	sleep 1
	qpg_serve "$work" --bind 10.252.0.1 -d qpgsrx0 --handshake-timeout 60000 -v
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c 20 -n 3 -d qpgsrx0 \
		--source 10.252.0.2,10.252.0.3 --json "$work/g.json" 10.252.0.1 localhost >"$work/out" 2>&1
	rc=$?
	qpg_json_file=$work/g.json
	check "--source A,B over rdma: all 20 connected and verified, each from its source's GID (rc $rc)" \
		j '.results.connections.succeeded == 20 and .results.data.verified == 60'
	kill -TERM "$srv"; wait "$srv"; srv=""
	for a in 10.252.0.2 10.252.0.3; do
		check "the server saw clients from $a" grep -q "from $a:" "$work/server.log"
	done
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p 9 -c 1 -d qpgsrx0 --source 10.252.0.2,127.0.0.1 \
		10.252.0.1 localhost >"$work/out" 2>&1
	check "a source with no GID on the device is refused, with why (rc $?)" \
		grep -q "source address 2" "$work/out"
	rdma link delete qpgsrx0
	ip link delete qpgsrc0
fi
# A process at vm.max_map_count cannot map another QP's queues (Soft-RoCE
# maps each QP's send queue): the QP fails with a bare ENOMEM, which the
# server must tell apart and name, with what to do. The lab's limit is set
# 20 mappings above the server's own, and put back. The refused clients
# try again for 5 s (--connect-deadline), not 60: a few tries each, so
# each ends on the server's word, without the 18 s that 10 tries and
# their backoff took (one try each was too few: a client could end on
# another failure first, CI71 of 2026-12-01).
if [ "$transport" = rdma ]; then
	qpg_serve "$work" --handshake-timeout 60000
	maps_was=$(cat /proc/sys/vm/max_map_count)
	echo $(($(grep -c . "/proc/$srv/maps") + 20)) >/proc/sys/vm/max_map_count
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c 60 -n 1 --threads 1 --json "$work/m.json" \
		--connect-deadline 5000 127.0.0.1 localhost >"$work/out" 2>&1
	echo "$maps_was" >/proc/sys/vm/max_map_count
	qpg_json_file=$work/m.json
	check "at vm.max_map_count: some of 60 refused, the rest connected and verified" \
		j '.results.connections.succeeded > 0 and .results.connections.succeeded < 60 and .results.data.mismatches == 0'
	check "the client is told it is vm.max_map_count, and what to do" \
		grep -q "server could not create the data path: .*vm.max_map_count.*sysctl -w vm.max_map_count=" "$work/out"
	check "the server's log says so too" grep -q "closed (rejected): .*vm.max_map_count" "$work/server.log"
	kill -TERM "$srv"; wait "$srv"; srv=""
fi
# More clients than one local address has ports toward one server port:
# said up front (exit 2, naming what to do), not found part-way through.
read -r plo phi </proc/sys/net/ipv4/ip_local_port_range
many=$((phi - plo + 2))
"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p 9 -c "$many" -n 1 \
	127.0.0.1 localhost >"$work/ports" 2>&1
prc=$?
check "-c $many from one address: exit 2, naming --source (exit $prc)" \
	eval '[ $prc -eq 2 ] && grep -q "give more with --source A,B" "$work/ports"'
if [ "$transport" = rdma ]; then
	check "over rdma it says each source needs a GID of its own" \
		grep -q "over rdma each must be an address of the RDMA device's netdev" "$work/ports"
fi
finish_checks
