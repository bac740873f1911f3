#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Anchors side by side: perftest, rdma_cm's cmtime and qpgate on the same rxe
# device in one lab VM, printed as ratios (absolute times under qemu TCG are
# inflated; ratios between runs in the same VM are what carry over).
#
#   bench/anchors.sh [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS] [-S SESSION_QPS_TOTAL]
#
# -S: how many QPs the multi-QP session runs bring up in all (default 8192),
# in sessions of 64 (the server's default bound) and of 256 (the wire's).
#
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/anchors.json. Prints numbers; asserts nothing about them.
set -euo pipefail
[ -n "${QPG_TRACE:-}" ] && set -x
size=64 clients=1000 conn_clients=200 iters=2000 sess_clients=8192
while getopts "s:c:C:n:S:" o; do
	case $o in
	s) size=$OPTARG ;;
	c) clients=$OPTARG ;;
	C) conn_clients=$OPTARG ;;
	n) iters=$OPTARG ;;
	S) sess_clients=$OPTARG ;;
	*) echo "usage: $0 [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS] [-S SESSION_QPS_TOTAL]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 2400 "$@"
qpg_bench_setup anchors
dev=$(ibv_devices | awk 'NR==3{print $1}')
log() { echo "anchors: $*" >&2; }

# ---- perftest on the lo-backed device (GID 1 = ::ffff:127.0.0.1) ----------
log "ib_send_lat -x 1 -s $size -n $iters"
lat_out=$(qpg_perftest ib_send_lat -s "$size" -n "$iters")
# Columns: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
lat_typical=$(awk -v s="$size" '$1 == s && NF >= 7 {print $5; exit}' <<<"$lat_out")
log "ib_send_bw -x 1 -s $size"
bw_out=$(qpg_perftest ib_send_bw -s "$size" -n $((iters * 5)))
# Columns: #bytes #iterations BW_peak BW_average MsgRate[Mpps]
bw_mpps=$(awk -v s="$size" '$1 == s && NF >= 5 {print $5; exit}' <<<"$bw_out")

# ---- the public-key floor of a TLS 1.3 handshake, in this VM ---------------
# A full handshake costs both ends 1 ECDSA P-256 sign, 2 verifies (the
# certificate's and CertificateVerify) and 4 X25519 operations (a key
# generation and a derivation on each side); a resumption (psk_dhe_ke) only
# the 4 X25519. Both vCPUs at work: floor = 2 / (seconds per handshake).
log "openssl speed ecdsap256 ecdhx25519 (one core)"
speed_out=$(openssl speed -seconds 2 ecdsap256 ecdhx25519 2>/dev/null)
# (no process substitution: the lab has no /dev/fd)
read -r ec_sign ec_verify <<<"$(awk '/ecdsa \(nistp256\)/ {print $(NF-1), $NF}' <<<"$speed_out")"
x25519=$(awk '/ecdh \(X25519\)/ {print $NF}' <<<"$speed_out")
floor_full=$(awk -v s="$ec_sign" -v v="$ec_verify" -v x="$x25519" 'BEGIN{printf "%.0f", 2 / (1/s + 2/v + 4/x)}')
floor_resumed=$(awk -v x="$x25519" 'BEGIN{printf "%.0f", 2 / (4/x)}')
# ... and what OpenSSL's whole handshake costs, as qpgate makes it (the same
# contexts, certificate, host check and tickets; no bootstrap, no QP):
# bench/tls_floor.c, each end's CPU timed, both on one core in turn.
log "qpg_tls_floor -n 300"
lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300)
echo "$lib_out" >&2
read -r lib_full lib_resumed <<<"$(sed -n 's/^floor full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
read -r lib_full_cli lib_full_srv <<<"$(awk '$1 == "full" {print $4, $5}' <<<"$lib_out")"
read -r lib_res_cli lib_res_srv <<<"$(awk '$1 == "resumed" {print $4, $5}' <<<"$lib_out")"

# ---- cmtime: rdma_cm needs an IP on the netdev, so rxe on a dummy ----------
modprobe rdma_ucm # /dev/infiniband/rdma_cm for librdmacm
ip link add qpgdummy0 type dummy
ip addr add 10.251.0.1/24 dev qpgdummy0
ip link set qpgdummy0 up
rdma link add qpgrxe1 type rxe netdev qpgdummy0
sleep 1
log "cmtime -c $conn_clients on rxe over a dummy netdev"
timeout 600 cmtime -b 10.251.0.1 -c "$conn_clients" >"$work/cmtime.srv" 2>&1 &
cm_srv=$!
pids+=("$cm_srv")
sleep 2
t0=$(date +%s.%N)
timeout 600 cmtime -s 10.251.0.1 -c "$conn_clients" >"$work/cmtime.cli" 2>&1 || cat "$work/cmtime.cli" >&2
t1=$(date +%s.%N)
kill "$cm_srv" 2>/dev/null || true # the cmtime server does not exit by itself
wait "$cm_srv" 2>/dev/null || true
cat "$work/cmtime.cli" >&2
# cmtime times each step for all connections at once; "connect" ends when
# every connection is established. Connects/s = connections / (sum of the
# steps up to and including connect).
# Rows: "connect      :       57.95       52.65 ...": the step, then its total
# in ms (the time for that step over all connections).
cm_connect_ms=$(awk -F: '
	/^step/ {on = 1; next}
	on && NF == 2 {
		gsub(/ +$/, "", $1); split($2, f, " ")
		if ($1 ~ /disconnect|destroy/) exit
		sum += f[1]
	}
	END {print sum + 0}' "$work/cmtime.cli")
cm_rate=$(awk -v n="$conn_clients" -v ms="$cm_connect_ms" 'BEGIN{if (ms > 0) printf "%.1f", n / (ms / 1000); else print 0}')
cm_wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
rdma link delete qpgrxe1 || true
ip link delete qpgdummy0 || true

# ---- qpgate on the same lo-backed device ----------------------------------
qpg_serve "$work" --handshake-timeout 120000 --allow-no-auth --max-pending 100000 --max-pending-per-peer 100000 \
	--max-session-qps 256 \
	-s "$((size > 4096 ? size : 4096))"
pids+=("$srv")
perf() { # NAME FLAGS... -> runs qpgate-perf, JSON in $work/NAME.json
	local name=$1
	shift
	log "qpgate-perf $name: $*"
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -s "$size" --json "$work/$name.json" \
		"$@" 127.0.0.1 localhost >"$work/$name.txt" 2>/dev/null || {
		cat "$work/$name.txt" >&2
		log "qpgate-perf $name did not verify every echo"
	}
}
for auth in on off; do
	flag=()
	[ $auth = off ] && flag=(--no-auth)
	perf "lat-$auth" -c 1 -n "$iters" "${flag[@]}"
	perf "rate-$auth" -c "$clients" -n 20 --window 64 "${flag[@]}"
	perf "conn-$auth" -c "$conn_clients" -n 1 --window "$conn_clients" --no-tls-resume "${flag[@]}"
done
# Reconnects: the client resumes its TLS session from a ticket (one
# connection first, alone, to get the first ticket).
perf "reconn-on" -c "$conn_clients" -n 1 --window "$conn_clients"
# QPs over sessions: one full TLS handshake brings up many QPs, each with
# its own keys and PSNs (docs/protocol.md).
for q in 64 256; do
	perf "sess-$q" -c "$sess_clients" -q "$q" -n 1 --window 4 --no-tls-resume
done
kill -TERM "$srv"
wait "$srv" || true

# ---- the TCP transport against a plain TCP ping-pong (sockperf) ------------
log "sockperf ping-pong --tcp -m $size over lo"
sockperf server --tcp -i 127.0.0.1 -p 18516 >/dev/null 2>&1 &
pids+=($!)
sleep 1
sp_out=$(sockperf ping-pong --tcp -i 127.0.0.1 -p 18516 -m "$size" -t 5 --full-rtt 2>&1 || true)
tcp_anchor_p50=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp_out")
qpg_serve "$work" --transport tcp --handshake-timeout 120000 -s "$((size > 4096 ? size : 4096))"
pids+=("$srv")
perf tcp-lat --transport tcp -c 1 -n "$iters"
kill -TERM "$srv"
wait "$srv" || true

j() { jq -r "$2" "$work/$1.json"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b > 0) printf "%.3f", a / b; else print "null"}'; }
bw_rate=$(awk -v m="$bw_mpps" 'BEGIN{printf "%.0f", m * 1e6}')
# ib_send_lat reports half a round trip; an echo is a whole one.
rtt_anchor=$(awk -v t="$lat_typical" 'BEGIN{printf "%.2f", 2 * t}')

printf '\n anchors on %s, %s-byte messages (qemu TCG: compare ratios, not absolutes)\n' "$dev" "$size"
printf ' %-48s %14s\n' "ib_send_lat t_typical [us] (one way)" "$lat_typical"
printf ' %-48s %14s\n' "  round trip = 2 x t_typical [us]" "$rtt_anchor"
printf ' %-48s %14s\n' "ib_send_bw message rate, 1 QP [msg/s]" "$bw_rate"
printf ' %-48s %14s   (%s s wall)\n' "cmtime connects/s ($conn_clients connections)" "$cm_rate" "$cm_wall"
printf ' %-48s %14s\n' "sockperf TCP ping-pong p50 round trip [us]" "${tcp_anchor_p50:-n/a}"
printf ' %-48s %14s   (P-256 sign %s/s, verify %s/s, X25519 %s/s, one core)\n' \
	"TLS public-key floor, full handshakes/s (2 cores)" "$floor_full" "$ec_sign" "$ec_verify" "$x25519"
printf ' %-48s %14s\n' "TLS public-key floor, resumptions/s (2 cores)" "$floor_resumed"
printf ' %-48s %14s   (client %s us, server %s us of CPU each)\n' \
	"TLS library floor, full handshakes/s (2 cores)" "$lib_full" "$lib_full_cli" "$lib_full_srv"
printf ' %-48s %14s   (client %s us, server %s us)\n' \
	"TLS library floor, resumptions/s (2 cores)" "$lib_resumed" "$lib_res_cli" "$lib_res_srv"
printf '\n %-5s %-48s %12s %12s %8s %8s\n' "auth" "qpgate figure / anchor" "qpgate" "anchor" "ratio" "target"
json_rows=()
for auth in on off; do
	p50=$(j "lat-$auth" '.results.data.latency_us.p50')
	echoes=$(j "rate-$auth" '.results.data.msgs_per_s')
	msgs=$(awk -v e="$echoes" 'BEGIN{printf "%.1f", 2 * e}') # a request and its reply
	ok_rate=$(j "rate-$auth" '.results.connections.succeeded')
	cps=$(j "conn-$auth" '.results.connections.succeeded / .results.connections.connect_phase_s')
	r1=$(ratio "$p50" "$rtt_anchor")
	r2=$(ratio "$msgs" "$bw_rate")
	r3=$(ratio "$cps" "$cm_rate")
	t1="<= 1.5"
	[ $auth = off ] && t1="<= 1.2"
	printf ' %-5s %-48s %12.1f %12s %8s %8s\n' "$auth" "echo round trip p50 [us] / 2 x ib_send_lat" "$p50" "$rtt_anchor" "$r1" "$t1"
	printf ' %-5s %-48s %12.0f %12s %8s %8s\n' "$auth" "messages/s at $ok_rate clients / ib_send_bw" "$msgs" "$bw_rate" "$r2" ">= 1.0"
	printf ' %-5s %-48s %12.1f %12s %8s %8s\n' "$auth" "full-handshake connects/s / cmtime" "$cps" "$cm_rate" "$r3" ">= 1.0"
	json_rows+=("{\"auth\":$([ $auth = on ] && echo true || echo false),\"echo_p50_us\":$p50,\"echoes_per_s\":$echoes,\"messages_per_s\":$msgs,\"msgs_per_s\":$echoes,\"clients\":$ok_rate,\"connects_per_s\":$cps,\"lat_ratio\":$r1,\"rate_ratio\":$r2,\"connect_ratio\":$r3}")
done
reconn=$(j reconn-on '.results.connections.succeeded / .results.connections.connect_phase_s')
resumed=$(j reconn-on '.results.connections.tls_resumed')
r5=$(ratio "$reconn" "$cm_rate")
printf ' %-5s %-48s %12.1f %12s %8s %8s\n' "on" "resumed reconnects/s ($resumed resumed) / cmtime" "$reconn" "$cm_rate" "$r5" ">= 2.0"
cps_on=$(j conn-on '.results.connections.succeeded / .results.connections.connect_phase_s')
r7=$(ratio "$cps_on" "$lib_full")
r8=$(ratio "$reconn" "$lib_resumed")
printf ' %-5s %-48s %12.1f %12s %8s\n' "on" "full-handshake connects/s / TLS library floor" "$cps_on" "$lib_full" "$r7"
printf ' %-5s %-48s %12.1f %12s %8s\n' "on" "resumed reconnects/s / TLS library floor" "$reconn" "$lib_resumed" "$r8"
sess_rows=()
for q in 64 256; do
	qps=$(j "sess-$q" '.results.connections.succeeded / .results.connections.connect_phase_s')
	ok=$(j "sess-$q" '.results.connections.succeeded')
	r6=$(ratio "$qps" "$cm_rate")
	printf ' %-5s %-48s %12.1f %12s %8s %8s\n' "on" "QPs/s, $ok in sessions of $q / cmtime" "$qps" "$cm_rate" "$r6" ">= 3.0"
	sess_rows+=("{\"qps_per_session\":$q,\"qps\":$ok,\"qps_per_s\":$qps,\"ratio\":$r6}")
done
tcp_p50=$(j tcp-lat '.results.data.latency_us.p50')
r4=$(ratio "$tcp_p50" "${tcp_anchor_p50:-0}")
printf ' %-5s %-48s %12.1f %12s %8s %8s\n' "on" "tcp transport echo p50 [us] / sockperf TCP" "$tcp_p50" "${tcp_anchor_p50:-n/a}" "$r4" "<= 1.2"
rows=$(IFS=,; echo "${json_rows[*]}")
srows=$(IFS=,; echo "${sess_rows[*]}")
version=$("$bin/qpgate-perf" --version | awk '{print $3}')
jq -n --arg version "$version" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg dev "$dev" \
	--argjson size "$size" --argjson clients "$clients" --argjson conn "$conn_clients" --argjson iters "$iters" \
	--argjson lat "$lat_typical" --argjson rtt "$rtt_anchor" --argjson bw "$bw_rate" --argjson cm "$cm_rate" \
	--argjson tcpa "${tcp_anchor_p50:-null}" --argjson tcpq "$tcp_p50" --argjson r4 "$r4" --argjson rows "[$rows]" \
	--argjson ffull "$floor_full" --argjson fres "$floor_resumed" --argjson reconn "$reconn" \
	--argjson lfull "$lib_full" --argjson lres "$lib_resumed" --argjson lfc "$lib_full_cli" \
	--argjson lfs "$lib_full_srv" --argjson lrc "$lib_res_cli" --argjson lrs "$lib_res_srv" \
	--argjson r7 "$r7" --argjson r8 "$r8" \
	--argjson resumed "$resumed" --argjson r5 "$r5" --argjson sess "[$srows]" --argjson sessn "$sess_clients" \
	'{schema_version: 1, tool: "bench/anchors.sh", version: $version, date: $date,
	  parameters: {device: $dev, size: $size, clients: $clients, connect_clients: $conn, iters: $iters, session_qps: $sessn},
	  results: {ib_send_lat_typical_us: $lat, round_trip_anchor_us: $rtt, ib_send_bw_msgs_per_s: $bw,
	            cmtime_connects_per_s: $cm, tcp_pingpong_p50_us: $tcpa,
	            tls_floor: {full_handshakes_per_s: $ffull, resumptions_per_s: $fres},
	            tls_library_floor: {full_handshakes_per_s: $lfull, resumptions_per_s: $lres,
	                                full_client_us: $lfc, full_server_us: $lfs,
	                                resumed_client_us: $lrc, resumed_server_us: $lrs,
	                                full_connect_ratio: $r7, reconnect_ratio: $r8},
	            reconnects: {connects_per_s: $reconn, tls_resumed: $resumed, ratio: $r5},
	            sessions: $sess,
	            tcp_transport: {echo_p50_us: $tcpq, ratio: $r4}, qpgate: $rows}}' >"$out/anchors.json"
"$bin/json_check" "$out/anchors.json" >&2 || log "anchors.json does not have the tools' schema"
echo " json: $out/anchors.json"
