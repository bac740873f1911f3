#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# One address cannot fill the server (docs/security.md, "Limits"):
#   flood.sh TRANSPORT bringup   clients that complete the handshake and never
#                                send a frame are closed by the bring-up
#                                deadline, and counted; clients that hold
#                                their connections quietly (a keepalive as
#                                each came up) are not; and past the idle
#                                timeout, clients that send keepalives keep
#                                their connections, those that send none
#                                do not.
#   flood.sh TRANSPORT qps       one address opens sessions (rdma: of 64 QPs)
#                                as fast as it is allowed, never sending a
#                                frame: the server holds at most
#                                --max-qps-per-peer for it, closes them by the
#                                bring-up deadline, and 20 bystanders from
#                                another address verify all of their echoes.
#   flood.sh tcp pending         four addresses (four /24s) hold 1,024 silent
#                                connections each, which fills --max-pending
#                                (4,096): a fifth client still completes its
#                                handshake, as the heaviest address gives up
#                                its oldest; and one /24 holds at most
#                                --max-pending-per-prefix.
transport=$1
mode=$2
. "$(dirname "$0")/lib.sh"
qpg_test_setup flood
qp0=$(qps)
client() { "$bin/qpgate-client" --transport "$transport" --ca "$work/ca.crt" -p "$port" "$@" 127.0.0.1 localhost; }

case $mode in
bringup)
	qpg_serve "$work" --transport "$transport" --metrics 127.0.0.1:0 --bringup-timeout 1000 || exit 1
	client --test-silent -c 5 -n 1 --hold 4000 --connect-attempts 1 >"$work/silent.out" 2>&1 &
	silent=$!
	client -c 5 -n 1 --hold 4000 >"$work/quiet.out" 2>&1
	rc=$?
	wait $silent
	src=$?
	grep -h 'failed:' "$work/silent.out" "$work/quiet.out" | sed 's/^/  /'
	check "5 clients that held quietly for 4 s verified their echoes (exit $rc)" [ $rc -eq 0 ]
	check "5 clients that never sent a frame did not (exit $src)" [ $src -ne 0 ]
	check "... the server closed all 5 under them" grep -q 'failed: 5 x peer_closed' "$work/silent.out"
	check "the server counted 5 bring-up timeouts ($(metric qpgate_bringup_timeouts_total))" \
		[ "$(metric qpgate_bringup_timeouts_total)" = 5 ]
	# The idle timeout: connections held quietly past it stay up when their
	# client sends keepalives, and are closed when it sends none.
	qpg_stop_checked "$qp0"
	qpg_serve "$work" --transport "$transport" --metrics 127.0.0.1:0 --idle-timeout 2000 || exit 1
	client -c 3 -n 1 --hold 6000 --keepalive 500 >"$work/kept.out" 2>&1 &
	kept=$!
	client -c 3 -n 1 --hold 6000 --keepalive 0 --connect-attempts 1 >"$work/idle.out" 2>&1
	irc=$?
	wait $kept
	krc=$?
	grep -h 'failed:' "$work/idle.out" | sed 's/^/  /'
	check "3 clients quiet for 6 s with a keepalive every 500 ms kept their connections (exit $krc)" [ $krc -eq 0 ]
	check "3 clients quiet for 6 s with none were closed by --idle-timeout 2000 (exit $irc)" \
		bash -c "[ $irc -ne 0 ] && grep -q 'failed: 3 x peer_closed' '$work/idle.out'"
	;;
qps)
	# The bystanders' address, 127.0.0.2. Over rdma their RoCE traffic goes
	# by the GID of 127.0.0.1: the lab's rxe0 sits on lo, which gives no
	# GID to an address added later (a second host would have its own), so
	# the server takes any GID here and counts them by their address.
	if [ "$transport" = rdma ]; then
		per=64 lim=256
		gidx=$(grep -l '0000:0000:0000:0000:0000:ffff:7f00:0001' /sys/class/infiniband/rxe0/ports/1/gids/* |
			head -1 | xargs basename)
		by_gid="-x $gidx" any_gid=--allow-any-gid
	else
		per=1 lim=32 by_gid="" any_gid=""
	fi
	# shellcheck disable=SC2086 # $any_gid, $by_gid: a flag and its value, or nothing
	qpg_serve "$work" --transport "$transport" --metrics 127.0.0.1:0 --max-qps-per-peer $lim \
		--bringup-timeout 2000 --max-conns-per-peer 0 $any_gid || exit 1
	# The flood: 10 s of silent sessions from 127.0.0.1, each process asking
	# for 4 times the limit, one after the other, as fast as they get in.
	end=$((SECONDS + 10))
	(
		while [ $SECONDS -lt $end ]; do
			client --test-silent -q $per -c $((4 * lim)) --window $((4 * lim)) -n 1 --hold 3000 \
				--connect-attempts 2 >>"$work/flood.out" 2>&1
		done
	) &
	flood=$!
	sleep 1
	"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c 20 -n 200 -s 256 \
		--source 127.0.0.2 $by_gid --json "$work/by.json" 127.0.0.1 localhost >"$work/by.out" 2>&1 &
	by=$!
	max=0
	while kill -0 $flood 2>/dev/null; do
		n=$(metric qpgate_connected_clients)
		[ "${n:-0}" -gt $max ] && max=$n
		sleep 0.2
	done
	wait $by
	brc=$?
	timeouts=$(metric qpgate_bringup_timeouts_total)
	refused=$(metric 'qpgate_rejections_total{reason="per_peer_qp_limit"}')
	echo "  flood: at most $max QPs connected (limit $lim + 20 bystanders), $timeouts closed by the" \
		"bring-up deadline, $refused sessions refused at the limit"
	grep -E '^ 20 ' "$work/by.out" | sed 's/^/  bystanders: /'
	check "the server never held more than the limit for the flooding address ($max <= $lim + 20)" \
		[ "$max" -le $((lim + 20)) ]
	check "it refused sessions past the limit ($refused)" [ "${refused:-0}" -gt 0 ]
	check "it closed silent QPs by the bring-up deadline ($timeouts)" [ "${timeouts:-0}" -ge $lim ]
	check "20 bystanders from 127.0.0.2 verified every echo (exit $brc)" [ $brc -eq 0 ]
	[ $brc -eq 0 ] || grep -E "failed|^ 20 |error" "$work/by.out"
	check_json_run qpgate-perf $brc "$work/by.json"
	check "... 20 of 20 connected, 4000 echoes verified" \
		j '.results.connections.succeeded == 20 and .results.data.verified == 4000 and .results.data.mismatches == 0'
	for _ in $(seq 1 100); do
		[ "$(metric qpgate_connected_clients)" = 0 ] && break
		sleep 0.2
	done
	check "nothing left connected" [ "$(metric qpgate_connected_clients)" = 0 ]
	;;
pending)
	ulimit -n 16384
	# No rate limit: each attacker address gets its 1,024 in at once.
	qpg_serve "$work" --transport "$transport" --metrics 127.0.0.1:0 --handshake-timeout 60000 \
		--handshake-rate 0 || exit 1
	loris=()
	for a in 1 2 3 4; do
		"$bin/slowloris" 127.0.$a.1 127.0.0.1 "$port" 1024 40 >"$work/loris$a.out" 2>&1 &
		loris+=($!)
	done
	for _ in $(seq 1 150); do
		[ "$(metric qpgate_handshakes_in_progress)" = 4096 ] && break
		sleep 0.2
	done
	full=$(metric qpgate_handshakes_in_progress)
	check "four addresses hold all 4096 pending slots ($full)" [ "$full" = 4096 ]
	out=$(client -n 5 --connect-attempts 1 2>&1)
	rc=$?
	grep -E '^ 1 |failed:' <<<"$out" | sed 's/^/  /'
	check "a fifth client completed its handshake and 5 echoes, on its first try (exit $rc)" [ $rc -eq 0 ]
	ev=$(metric qpgate_pending_evictions_total)
	check "the server made room by evicting one of the heaviest address's ($ev)" [ "${ev:-0}" -ge 1 ]
	check "the pending slots stayed bounded ($(metric qpgate_handshakes_in_progress) <= 4096)" \
		[ "$(metric qpgate_handshakes_in_progress)" -le 4096 ]
	# A /24 of its own: three addresses in it, 1,024 each, against a
	# per-prefix limit of 2,048 (the default).
	kill "${loris[@]}" 2>/dev/null
	wait "${loris[@]}" 2>/dev/null
	for _ in $(seq 1 150); do
		[ "$(metric qpgate_handshakes_in_progress)" = 0 ] && break
		sleep 0.2
	done
	loris=()
	for h in 1 2 3; do
		"$bin/slowloris" 127.0.9.$h 127.0.0.1 "$port" 1024 20 >"$work/net$h.out" 2>&1 &
		loris+=($!)
	done
	for _ in $(seq 1 100); do
		[ "$(metric 'qpgate_rejections_total{reason="per_prefix_pending_limit"}')" -ge 1024 ] 2>/dev/null && break
		sleep 0.2
	done
	held=$(metric qpgate_handshakes_in_progress)
	pre=$(metric 'qpgate_rejections_total{reason="per_prefix_pending_limit"}')
	check "one /24 holds at most 2048 pending ($held), the rest refused at accept ($pre)" \
		[ "$held" -le 2048 -a "$pre" -ge 1024 ]
	kill "${loris[@]}" 2>/dev/null
	wait "${loris[@]}" 2>/dev/null
	;;
*)
	echo "usage: flood.sh tcp|rdma bringup|qps, flood.sh tcp pending" >&2
	exit 2
	;;
esac
qpg_stop_checked "$qp0"
finish_checks
