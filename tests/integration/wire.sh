#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Attacks and faults on a real wire: runs on both VMs of
# `scripts/rxe-vm --hosts 2` (host a serves at 10.77.0.1, host b attacks
# and measures from 10.77.0.2). RoCE v2 crosses between two kernels, so an
# injector can put packets on the wire and netem can lose them.
#   wire.sh [inject] [loss] [dead]     (default: all three)
# Checks (numbered as in `make security-check`):
#   1 wrong PSN dropped, 2 bad ICRC dropped, 3 forged payload rejected by the
#   tag (and accepted without it), 4 replay not executed again,
#   11 loss of 1% and 5%: every echo and GET verified; 100%: a clear error
#   in bounded time, and the server reclaims everything.
. "$(dirname "$0")/lib.sh"
bin=${QPG_BIN:-$here/build/bin}
[ -n "${QPG_LAB_HOST:-}" ] || { echo "wire.sh runs under scripts/rxe-vm --hosts 2"; exit 2; }
sh=$QPG_LAB_SHARED
parts=${*:-inject loss dead}
if=$QPG_LAB_IF
server_ip=10.77.0.1
client_ip=10.77.0.2

# Both hosts apply the same qdisc to their side of the wire, so loss hits
# both directions: b asks (qpg_netem_both), a applies (qpg_netem_follow).
. "$here/scripts/netem.sh"

serve_a() {
	srv="" srv2=""
	trap 'for p in $srv $srv2; do kill -9 "$p" 2>/dev/null; done' EXIT
	. "$here/scripts/serve.sh"
	for d in echo kv; do
		qpg_certs "$sh/$d"
	done
	qps0=$(rdma res show qp | grep -c lqpn)
	# Message auth is optional on this server so check 3 can show what a
	# client without it would accept.
	qpg_serve "$sh/echo" --bind "$server_ip" --allow-no-auth --metrics "$server_ip:0" -s 4096 ||
		exit 1
	local esrv=$srv
	# Deadlines sized for 5% loss on emulated hosts (a 1 MiB READ is ~1,000
	# packets, each loss a retry): this checks recovery from loss; the
	# deadlines themselves have their own tests.
	qpg_serve "$sh/kv" --bind "$server_ip" --service kv --kv-capacity 64M -s 8192 \
		--progress-timeout 60000 --kv-grant-ttl 60000 || exit 1
	srv2=$srv
	srv=$esrv
	# The two-host recipe (README and docs/operations.md, "Two real hosts"): no GID index given,
	# each server found the RoCE v2 GID that carries its --bind address on
	# the NIC of the wire.
	for d in echo kv; do
		check "server ($d) took the RoCE v2 GID of --bind $server_ip by itself" \
			grep -Eq "listening on $server_ip:[0-9]+, transport rdma on rxe0 port 1 GID [0-9]+ ::ffff:$server_ip," "$sh/$d/server.log"
	done
	touch "$sh/servers-up"
	qpg_netem_follow
	for p in $srv $srv2; do kill -TERM "$p"; done
	wait "$srv"
	local rc1=$?
	wait "$srv2"
	local rc2=$?
	srv="" srv2=""
	grep -h 'stats:' "$sh/echo/server.log" "$sh/kv/server.log" | sed 's/^/  /'
	check "echo and kv servers exit 0 on SIGTERM" eval '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]'
	check "server host: device QPs back to baseline ($qps0)" [ "$(rdma res show qp | grep -c lqpn)" -le "$qps0" ]
	finish_checks
}

# ---- host b ----
metric() { # NAME: its value summed over label sets, from the echo server
	curl -fsS "http://$server_ip:$mport/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}

client() {
	"$bin/qpgate-client" --ca "$sh/echo/ca.crt" -p "$port" "$@" "$server_ip" localhost
}

# One injection against a quiet, live connection: the victim sends 5
# echoes, pauses, the injector sends its packet, the victim sends 5 more.
inject() { # MODE [client flags]
	local mode=$1
	shift
	w=$work/$mode$*
	mkdir -p "$w"
	local in0 auth0
	in0=$(metric 'qpgate_messages_total{direction="in"}')
	auth0=$(metric qpgate_auth_failures_total)
	client -c 1 -n 10 -s 64 --test-pause-at 5 --test-resume-file "$w/resume" "$@" >"$w/victim.out" 2>&1 &
	local victim=$!
	"$bin/roce_inject" "$if" "$server_ip" "$mode" "$w/resume.paused" 60 >"$w/inject.out" 2>&1
	inj_rc=$?
	sed 's/^/  /' "$w/inject.out"
	sleep 1 # let the packet land before the victim goes on
	touch "$w/resume"
	wait "$victim"
	victim_rc=$?
	sleep 0.5
	d_in=$(($(metric 'qpgate_messages_total{direction="in"}') - in0))
	d_auth=$(($(metric qpgate_auth_failures_total) - auth0))
	echo "  victim exit $victim_rc; server: $d_in messages in, $d_auth authentication failures"
	grep -E 'failed:|->' "$w/victim.out" | head -2 | sed 's/^/  victim: /'
}

inject_checks() {
	inject wrong-psn
	check "1 wrong PSN: injected with a valid ICRC" grep -q 'ICRC of the captured packet .*: reproduced' "$w/inject.out"
	check "1 wrong PSN: dropped (server saw exactly the victim's 10 messages, no auth failure)" eval '[ "$d_in" -eq 10 ] && [ "$d_auth" -eq 0 ]'
	check "1 wrong PSN: the session went on unharmed (10 echoes verified)" [ "$victim_rc" -eq 0 ]

	inject bad-icrc
	check "2 bad ICRC: dropped silently (10 messages in, no auth failure)" eval '[ "$inj_rc" -eq 0 ] && [ "$d_in" -eq 10 ] && [ "$d_auth" -eq 0 ]'
	check "2 bad ICRC: the session went on (10 echoes verified)" [ "$victim_rc" -eq 0 ]

	inject forged
	check "3 forged payload at the exact PSN: rejected by the message tag (1 auth failure)" eval '[ "$inj_rc" -eq 0 ] && [ "$d_auth" -eq 1 ]'
	check "3 forged payload: the server closed that connection (victim failed)" [ "$victim_rc" -ne 0 ]
	inject forged --no-auth
	check "3 without message auth the same packet is accepted (6 messages in: 5 + the forged one; no auth failure)" eval '[ "$inj_rc" -eq 0 ] && [ "$d_in" -eq 6 ] && [ "$d_auth" -eq 0 ]'

	inject replay
	check "4 replay of a captured packet: not executed again (exactly 10 messages in)" eval '[ "$inj_rc" -eq 0 ] && [ "$d_in" -eq 10 ] && [ "$d_auth" -eq 0 ]'
	check "4 replay: the session went on (10 echoes verified)" [ "$victim_rc" -eq 0 ]
}

kv() {
	"$bin/qpgate-kv" --synthetic --ca "$sh/kv/ca.crt" -p "$kport" --qp-timeout 14 "$server_ip" localhost "$@"
}

loss_round() { # PERCENT
	qpg_netem_both loss "$1%" || { check "netem loss $1% applied on both hosts" false; return; }
	local t0=$SECONDS out
	out=$(client -c 20 -n 50 -s 1024 --timeout 600000 2>&1)
	local rc=$?
	grep -E '^ [0-9]|failed:|->' <<<"$out" | sed 's/^/  /'
	check "11 loss $1%: 20 clients x 50 echoes, every one verified, none lost or duplicated ($((SECONDS - t0)) s)" [ $rc -eq 0 ]
	out=$(kv put "l4k$1" 4096 7 put "l1m$1" 1M 8 get "l4k$1" 4096 7 get "l1m$1" 1M 8 2>&1;
		"$bin/qpgate-kv" --synthetic --ca "$sh/kv/ca.crt" -p "$kport" --qp-timeout 14 --two-sided "$server_ip" localhost get "l1m$1" 1M 8 2>&1)
	sed 's/^/  /' <<<"$out"
	check "11 loss $1%: GETs of 4 KiB and 1 MiB (by READ and sent) verified" [ "$(grep -c verified <<<"$out")" -eq 3 ]
	[ "$(grep -c verified <<<"$out")" -eq 3 ] ||
		grep -h 'closed (' "$sh/kv/server.log" | tail -3 | sed 's/^/  kv server: /'
	qpg_netem_both clear
}

# On one connection, a GET of 4 KiB (sent) and then one of 128 KiB (by READ),
# 40 times, with a quarter of the client's packets lost (its ACKs among
# them): each window is bound right after a SEND the server may have to send
# again. rxe goes back over every work request after the one it resends, a
# bind already done included, and a window bound twice fails its QP, so the
# server binds only once its SENDs are all acknowledged (src/lib/
# rdma_windows.c, the fence; docs/security.md, check 11).
ack_loss_round() {
	qpg_netem_both clear
	kv put l4ka 4096 7 put l128ka 128K 9 | sed 's/^/  /'
	qpg_netem loss 25% || { check "netem loss 25% applied on the client's side" false; return; }
	local ops=() out ok t0=$SECONDS
	for _ in $(seq 1 40); do ops+=(get l4ka 4096 7 get l128ka 128K 9); done
	out=$(kv "${ops[@]}" 2>&1)
	sed -E 's/ (fnv64|sha[0-9-]+) [0-9a-f]+,//' <<<"$out" | sort | uniq -c | sed 's/^/  /'
	ok=$(grep -Ec "^GET l4ka: ok, 4096 bytes in 1 chunk,.*verified|^GET l128ka: ok, 131072 bytes in 1 chunk,.*verified" <<<"$out")
	check "11 client's loss 25%: 40 GETs sent and 40 by READ, alternating on one connection, verified ($ok of 80, $((SECONDS - t0)) s)" [ "$ok" -eq 80 ]
	[ "$ok" -eq 80 ] || { sleep 3; tail -5 "$sh/kv/server.log" | sed 's/^/  kv server: /'; }
	qpg_netem clear
}

loss_checks() {
	loss_round 1
	loss_round 5
	ack_loss_round
}

dead_checks() {
	# 100%: connected clients, then the wire goes dead under their traffic.
	client -c 5 -n 20 -s 1024 --qp-timeout 14 --hold 600000 --ready-file "$work/ready" \
		--release-file "$work/release" --timeout 120000 >"$work/dead.out" 2>&1 &
	local dead=$!
	for _ in $(seq 1 300); do [ -f "$work/ready" ] && break; sleep 0.2; done
	qpg_netem_both loss 100%
	local t0=$SECONDS
	touch "$work/release"
	wait "$dead"
	local rc=$? took=$((SECONDS - t0))
	sed 's/^/  /' "$work/dead.out"
	check "11 loss 100%: every client fails with a clear error in bounded time (${took} s)" \
		eval '[ $rc -ne 0 ] && grep -q "5 x qp_error.*retry counter exceeded" "$work/dead.out" && [ $took -le 120 ]'
	qpg_netem_both clear
	local left=""
	for _ in $(seq 1 300); do
		left=$(metric qpgate_connected_clients)
		[ "$left" = 0 ] && break
		sleep 1
	done
	check "11 loss 100%: the server reclaimed the dead clients once the wire came back (connected: $left)" [ "$left" = 0 ]
}

attack_b() {
	work=$(mktemp -d)
	trap 'touch "$sh/done"' EXIT
	for _ in $(seq 1 600); do [ -f "$sh/servers-up" ] && break; sleep 0.2; done
	read -r port mport <"$sh/echo/port"
	read -r kport _ <"$sh/kv/port"
	# --tclass reaches the wire: RoCE v2 packets (UDP 4791) carry the
	# traffic class in their IP header's TOS byte.
	tcpdump -i "$if" -n -v -c 20 "udp port 4791 and src host $client_ip" >"$work/tos.out" 2>/dev/null &
	local tcpd=$!
	sleep 1
	client --tclass 104 --sl 3 -n 20 >/dev/null 2>&1
	local trc=$?
	sleep 1
	kill "$tcpd" 2>/dev/null
	wait "$tcpd" 2>/dev/null
	local tos udp
	tos=$(grep -c 'tos 0x68' "$work/tos.out")
	udp=$(grep -c 'proto UDP' "$work/tos.out")
	check "--tclass 104 --sl 3: echoes verified, and the client's RoCE v2 packets carry TOS 0x68 ($tos of $udp)" \
		eval '[ $trc -eq 0 ] && [ "$udp" -gt 0 ] && [ "$tos" = "$udp" ]'
	for p in $parts; do
		case $p in
		inject) inject_checks ;;
		loss) loss_checks ;;
		dead) dead_checks ;;
		esac
	done
	touch "$sh/done"
	finish_checks
}

case $QPG_LAB_HOST in
a) serve_a ;;
b) attack_b ;;
esac
