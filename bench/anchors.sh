#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Anchors side by side: perftest, rdma_cm's cmtime and qpgate on the same rxe
# device in one lab VM, printed as ratios (absolute times under qemu TCG are
# inflated; ratios between runs in the same VM are what carry over).
#
#   bench/anchors.sh [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS]
#
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/anchors.json. Prints numbers; asserts nothing about them.
set -euo pipefail
[ -n "${QPG_TRACE:-}" ] && set -x
size=64 clients=1000 conn_clients=200 iters=2000
while getopts "s:c:C:n:" o; do
	case $o in
	s) size=$OPTARG ;;
	c) clients=$OPTARG ;;
	C) conn_clients=$OPTARG ;;
	n) iters=$OPTARG ;;
	*) echo "usage: $0 [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 2400 "$@"
qpg_bench_setup anchors
dev=$(ibv_devices | awk 'NR==3{print $1}')
log() { echo "anchors: $*" >&2; }

# ---- perftest on the lo-backed device (GID 1 = ::ffff:127.0.0.1) ----------
perftest() { # TOOL EXTRA... -> the client's output
	local tool=$1
	shift
	"$tool" -d "$dev" -x 1 -s "$size" -p 18515 "$@" >"$work/$tool.srv" 2>&1 &
	local sp=$!
	sleep 2
	"$tool" -d "$dev" -x 1 -s "$size" -p 18515 "$@" 127.0.0.1 >"$work/$tool.cli" 2>&1 || {
		cat "$work/$tool.cli" >&2
		return 1
	}
	wait "$sp" || true
	cat "$work/$tool.cli"
}
log "ib_send_lat -x 1 -s $size -n $iters"
lat_out=$(perftest ib_send_lat -n "$iters")
# Columns: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
lat_typical=$(awk -v s="$size" '$1 == s && NF >= 7 {print $5; exit}' <<<"$lat_out")
log "ib_send_bw -x 1 -s $size"
bw_out=$(perftest ib_send_bw -n $((iters * 5)))
# Columns: #bytes #iterations BW_peak BW_average MsgRate[Mpps]
bw_mpps=$(awk -v s="$size" '$1 == s && NF >= 5 {print $5; exit}' <<<"$bw_out")

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
	perf "conn-$auth" -c "$conn_clients" -n 1 --window "$conn_clients" "${flag[@]}"
done
kill -TERM "$srv"
wait "$srv" || true

j() { jq -r "$2" "$work/$1.json"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
bw_rate=$(awk -v m="$bw_mpps" 'BEGIN{printf "%.0f", m * 1e6}')

printf '\n anchors on %s, %s-byte messages (qemu TCG: compare ratios, not absolutes)\n' "$dev" "$size"
printf ' %-44s %14s\n' "ib_send_lat t_typical [us]" "$lat_typical"
printf ' %-44s %14s\n' "ib_send_bw msg rate [msg/s]" "$bw_rate"
printf ' %-44s %14s   (%s s wall)\n' "cmtime connects/s ($conn_clients connections)" "$cm_rate" "$cm_wall"
printf '\n %-10s %-36s %14s %14s %8s\n' "auth" "qpgate figure" "qpgate" "anchor" "ratio"
json_rows=()
for auth in on off; do
	p50=$(j "lat-$auth" '.results.data.latency_us.p50')
	rate=$(j "rate-$auth" '.results.data.msgs_per_s')
	ok_rate=$(j "rate-$auth" '.results.connections.succeeded')
	cps=$(j "conn-$auth" '.results.connections.succeeded / .results.connections.connect_phase_s')
	r1=$(ratio "$p50" "$lat_typical")
	r2=$(ratio "$rate" "$bw_rate")
	r3=$(ratio "$cps" "$cm_rate")
	printf ' %-10s %-36s %14.1f %14s %8s\n' "$auth" "echo p50 [us] / ib_send_lat typical" "$p50" "$lat_typical" "$r1"
	printf ' %-10s %-36s %14.0f %14s %8s\n' "$auth" "msg/s at $ok_rate clients / ib_send_bw" "$rate" "$bw_rate" "$r2"
	printf ' %-10s %-36s %14.1f %14s %8s\n' "$auth" "secure connects/s / cmtime" "$cps" "$cm_rate" "$r3"
	json_rows+=("{\"auth\":\"$auth\",\"echo_p50_us\":$p50,\"msgs_per_s\":$rate,\"clients\":$ok_rate,\"connects_per_s\":$cps,\"lat_ratio\":\"$r1\",\"rate_ratio\":\"$r2\",\"connect_ratio\":\"$r3\"}")
done
rows=$(IFS=,; echo "${json_rows[*]}")
jq -n --arg dev "$dev" --argjson size "$size" --arg lat "$lat_typical" --arg bw "$bw_rate" \
	--arg cm "$cm_rate" --argjson rows "[$rows]" \
	'{test_info: {tool: "bench/anchors.sh", device: $dev, size: $size},
	  results: {ib_send_lat_typical_us: ($lat | tonumber), ib_send_bw_msgs_per_s: ($bw | tonumber),
	            cmtime_connects_per_s: ($cm | tonumber), qpgate: $rows}}' >"$out/anchors.json"
echo " json: $out/anchors.json"
