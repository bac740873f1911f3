#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Connections closed in the middle of multi-packet SENDs, many times over
# (issue 56's SRQ question): a receive that a server QP had begun must come
# back (flushed) when the QP leaves, or its pool slot is lost and the SRQ
# holds fewer receives than the server counts, until clients meet RNR.
#   midclose.sh TRANSPORT ROUNDS [QPS [BYTES [CREDITS]]]
# Each round closes a session of QPS connections whose CREDITS each hold an
# echo request of BYTES (1 MiB). Afterwards: the closes gave receives back
# flushed (they did happen mid-message), every pool slot held is a posted
# receive, and QPS connections filling their credits with BYTES are all
# answered (an SRQ short of what the server counts would leave them on RNR).
#
# Under `scripts/rxe-vm --hosts 2` host a serves and host b closes: only a
# wire makes a SEND take time. On one kernel, rxe delivers a whole message
# inside the ibv_post_send that starts it, so nothing is ever half sent.
transport=$1
rounds=$2
nq=${3:-16}
bytes=${4:-1048576}
credits=${5:-1}
. "$(dirname "$0")/lib.sh"
host=${QPG_LAB_HOST:-}
sh=${QPG_LAB_SHARED:-}
server_ip=127.0.0.1
[ -n "$host" ] && server_ip=10.77.0.1
# Bounded wait for a file the other host writes.
await() {
	for _ in $(seq 1 3000); do
		[ -e "$1" ] && return 0
		sleep 0.2
	done
	echo "FAIL waited 600 s for $(basename "$1")"
	return 1
}
closer() { # PORT CA: the storm, then the probe (the probe's exit status)
	"$bin/midclose" "$transport" "$1" "$2" "$rounds" "$nq" "$bytes" "$credits" "$server_ip" \
		>"$work/mc.out" 2>&1
	local rc=$?
	sed 's/^/  /' "$work/mc.out" | tail -3
	check "midclose ran its $rounds rounds (exit $rc)" [ $rc -eq 0 ]
}
probe() { # PORT CA
	# The SRQ holds what the server counts: $nq connections filling every
	# credit, each request echoed and verified within the run's timeout.
	"$bin/qpgate-perf" --transport "$transport" --ca "$2" -p "$1" -c "$nq" --credits "$credits" \
		-s "$bytes" -n 8 --timeout 120000 "$server_ip" localhost >"$work/probe.out" 2>&1
	local rc=$?
	grep -E '^ +[0-9]+ ' "$work/probe.out" | head -2 | sed 's/^/  probe: /'
	check "$nq connections filling their credits with $bytes-byte requests all answered (exit $rc)" [ $rc -eq 0 ]
}

if [ "$host" = b ]; then
	qpg_test_setup midclose-b
	await "$sh/up" || exit 1
	read -r port _ <"$sh/mc/port"
	closer "$port" "$sh/mc/ca.crt"
	touch "$sh/storm-over"
	await "$sh/checked" || exit 1
	probe "$port" "$sh/mc/ca.crt"
	touch "$sh/probe-over"
	finish_checks
fi

qpg_test_setup midclose
dir=$work
if [ "$host" = a ]; then
	dir=$sh/mc
	qpg_certs "$dir"
fi
qp0=$(qps)
# A small SRQ: it holds the credits granted plus 64, so losing 64
# receives starves it.
qpg_serve "$dir" --transport "$transport" --bind "$server_ip" --max-msg "$bytes" --srq-depth 16 \
	--metrics 127.0.0.1:0 || exit 1
[ "$dir" = "$work" ] || ln -s "$dir/server.log" "$work/server.log"
idle() {
	for _ in $(seq 1 150); do
		[ "$(metric qpgate_connected_clients)" = 0 ] && [ "$(metric qpgate_handshakes_in_progress)" = 0 ] &&
			[ "$(qps)" -eq "$qp0" ] && return 0
		sleep 0.2
	done
	return 1
}
if [ "$host" = a ]; then
	touch "$sh/up"
	await "$sh/storm-over" || exit 1
else
	closer "$port" "$dir/ca.crt"
fi
check "connections and QPs back to baseline $qp0" idle
flushed=$(metric qpgate_receives_flushed_total) posted=$(metric qpgate_srq_receives_posted)
in_use=$(metric qpgate_pool_slots_in_use)
echo "  receives begun and flushed back: $flushed; posted now: $posted; pool slots held: $in_use"
if [ "$host" = a ]; then
	check "closes mid-message happened: receives came back flushed ($flushed)" [ "${flushed:-0}" -gt 0 ]
fi
[ "$transport" = rdma ] &&
	check "every pool slot held is a posted receive ($in_use held, $posted posted)" [ "$in_use" = "$posted" ]
if [ "$host" = a ]; then
	touch "$sh/checked"
	await "$sh/probe-over" || exit 1
else
	probe "$port" "$dir/ca.crt"
fi
qpg_stop_checked "$qp0"
finish_checks
