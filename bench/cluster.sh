#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The cluster's figures: an etcd of its own on loopback, 3 KV servers (4
# for the join), a clustered qpgate-kvbench as the load and two watching
# clients. Prints a table and writes build/bench/cluster-TRANSPORT.json
# (the tools' one schema). Prints numbers; asserts nothing.
#   bench/cluster.sh [-t tcp|rdma] [-r RUNS]
# rdma runs in the lab (one VM, one rxe device, distinct ports).
#  - failover time, fault -> the last watching client's view without the
#    member (crash, hang) or with it draining (graceful leave), p50/p99
#    over RUNS trials each, and during each failover the misses,
#    UNAVAILABLE answers, errors and stale reads (values that fail their
#    check) that kvbench saw;
#  - the fraction of 30,000 keys that move on a join (3 -> 4) and a leave
#    (4 -> 3), against 1/N;
#  - the spread (max/mean keys per member);
#  - watch latency, an etcd put -> a client's view, p50/p99 of 20;
#  - the cluster layer's cost: GETs/s through the cluster API with one
#    member against a plain pool to that server, RUNS alternating pairs.
set -euo pipefail
[ -n "${QPG_TRACE:-}" ] && set -x
transport=tcp runs=5
while getopts "t:r:" o; do
	case $o in
	t) transport=$OPTARG ;;
	r) runs=$OPTARG ;;
	*) echo "usage: $0 [-t tcp|rdma] [-r RUNS]" >&2; exit 2 ;;
	esac
done
case $transport in tcp | rdma) ;; *) echo "cluster.sh: -t is tcp or rdma" >&2; exit 2 ;; esac
case $runs in '' | *[!0-9]* | 0) echo "cluster.sh: -r wants a count of runs" >&2; exit 2 ;; esac
. "$(dirname "$0")/lib.sh"
[ "$transport" = rdma ] && qpg_bench_in_lab 4096 3600 "$@"
. "$repo/scripts/etcd.sh"
qpg_bench_setup cluster
trap 'qpg_etcd_stop; for p in "${pids[@]}" $(jobs -p); do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
qpg_etcd_start "$work"
name=bench$$
cl() { "$bin/qpgate-cluster" --cluster "$etcd_url" --cluster-name "$name" "$@"; }
active() { cl status 2>/dev/null | grep -c " active *$transport " || true; }
wait_active() { for _ in $(seq 1 200); do [ "$(active)" -eq "$1" ] && return 0; sleep 0.1; done; return 1; }
declare -A mp
start() {
	"$bin/qpgate-server" --transport "$transport" --service kv --kv-capacity 64M -s 8192 \
		--cert "$work/server.crt" --key "$work/server.key" -p 0 --port-file "$work/$1.port" \
		--cluster "$etcd_url" --cluster-name "$name" --cluster-id "$1" --advertise-name localhost \
		--cluster-ttl 3 2>>"$work/$1.log" &
	mp[$1]=$!
	pids+=($!)
}
kvb() { # OUT SECONDS [FLAGS]
	# (bounded: a kvbench that hangs ends the trial, and says so)
	timeout $(($2 * 4 + 120)) "$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" --num-keys 3000 \
		--value-size 1024 --threads 1 --num-workers 8 -D "$2" "${@:3}" >"$1" 2>&1
}
echo " cluster bench: $transport, $runs runs, etcd at $etcd_url"
for m in m1 m2 m3; do start $m; done
wait_active 3

# ---- failover -------------------------------------------------------------
# fault_trial MODE VICTIM: a kvbench run with the fault in its middle;
# sets ft="SECONDS MISSES UNAVAILABLE ERRORS STALE" (in this shell: it
# restarts the victim, whose pid the next trial needs).
fault_trial() {
	local mode=$1 v=$2 secs=8 t0 tv
	[ "$mode" = leave ] && secs=5
	local wp=()
	for w in 1 2; do
		cl watch -D $((secs + 6)) >"$work/w$w" 2>&1 &
		wp+=($!)
	done
	kvb "$work/kvb" $secs --cluster "$etcd_url" --cluster-name "$name" &
	local b=$!
	sleep 2
	t0=$EPOCHREALTIME
	case $mode in
	crash) kill -9 "${mp[$v]}" ;;
	hang) kill -STOP "${mp[$v]}" ;;
	leave) kill -TERM "${mp[$v]}" ;;
	esac
	local brc=0
	wait $b || brc=$?
	[ $brc -eq 0 ] || { echo "   kvbench ($mode of $v) exited $brc:"; sed 's/^/   kvbench: /' "$work/kvb" | tail -6; }
	if [ "$mode" = hang ]; then
		kill -CONT "${mp[$v]}"
	else
		wait "${mp[$v]}" 2>/dev/null || true
		start "$v"
	fi
	wait_active 3 || true
	sleep 1
	kill "${wp[@]}" 2>/dev/null || true
	wait "${wp[@]}" 2>/dev/null || true
	# The first view after the fault where the victim is not active, per watcher.
	tv=0
	for w in 1 2; do
		local t
		t=$(awk -v t0="$t0" -v v="$v" '
			/ view revision / { if (n && $1 > t0 && !seen) { print t; done = 1; exit } t = $1; n = 1; seen = 0; next }
			$2 == v && $3 == "active" { seen = 1 }
			END { if (!done && n && t > t0 && !seen) print t }' "$work/w$w")
		[ -n "$t" ] && tv=$(awk -v a="$tv" -v b="$t" 'BEGIN{print (b > a) ? b : a}')
	done
	local secs_to=null
	[ "$tv" != 0 ] && secs_to=$(awk -v a="$tv" -v b="$t0" 'BEGIN{printf "%.3f", a - b}')
	local misses unav errs="" stale=""
	misses=$(awk '/^ cluster: [0-9]+ misses/ {print $2}' "$work/kvb")
	unav=$(awk '/^ cluster: [0-9]+ misses/ {print $(NF-1)}' "$work/kvb")
	read -r errs stale <<<"$(awk '/GETs verified/ {print $6, $4}' "$work/kvb")" || true
	# What the run said, when it did not end as it should.
	grep -q 'GETs verified' "$work/kvb" || sed 's/^/   kvbench: /' "$work/kvb" | tail -8
	ft="$secs_to ${misses:-null} ${unav:-null} ${errs:-null} ${stale:-null}"
}
pct() { # P VALUES...: the P-th percentile (nearest rank)
	local p=$1
	shift
	printf '%s\n' "$@" | grep -v null | sort -g | awk -v p="$p" '{a[NR]=$1} END {if (!NR) print "null"; else {i = int((p / 100) * NR + 0.999); if (i < 1) i = 1; print a[i]}}'
}
declare -A fo_json
printf '\n %-8s %8s %8s %8s %12s %8s %8s\n' FAULT p50[s] p99[s] misses unavailable errors stale
for mode in crash hang leave; do
	times=() m=0 u=0 e=0 s=0
	for r in $(seq 1 "$runs"); do
		victim=m$(((r % 3) + 1))
		fault_trial $mode $victim
		read -r t mi un er st <<<"$ft"
		times+=("$t")
		m=$((m + ${mi/null/0})) u=$((u + ${un/null/0})) e=$((e + ${er/null/0})) s=$((s + ${st/null/0}))
	done
	p50=$(pct 50 "${times[@]}") p99=$(pct 99 "${times[@]}")
	printf ' %-8s %8s %8s %8s %12s %8s %8s\n' "$mode" "$p50" "$p99" "$m" "$u" "$e" "$s"
	fo_json[$mode]=$(jq -cn --argjson t "$(jarr "${times[@]}")" --arg p50 "$p50" --arg p99 "$p99" \
		--argjson m "$m" --argjson u "$u" --argjson e "$e" --argjson s "$s" \
		'{seconds:$t, p50:($p50|tonumber? // null), p99:($p99|tonumber? // null), misses:$m, unavailable:$u, errors:$e, stale_reads:$s}')
done

# ---- moves and spread ------------------------------------------------------
owners() { # FILE: the owner of key-0 .. key-29999, a line each
	cl spread -n 30000 >"$1.spread"
	seq 0 29999 | sed 's/^/key-/' | xargs -n 2000 "$bin/qpgate-cluster" --cluster "$etcd_url" \
		--cluster-name "$name" owner | awk '{print $2}' >"$1"
}
owners "$work/o3"
spread3=$(awk '/max\/mean/ {print $NF}' "$work/o3.spread")
start m4
wait_active 4
owners "$work/o4"
spread4=$(awk '/max\/mean/ {print $NF}' "$work/o4.spread")
join_moved=$(paste -d' ' "$work/o3" "$work/o4" | awk '$1 != $2 {n++} END {printf "%.4f", n / NR}')
kill -TERM "${mp[m4]}"
wait "${mp[m4]}" || true
wait_active 3
owners "$work/o3b"
leave_moved=$(paste -d' ' "$work/o4" "$work/o3b" | awk '$1 != $2 {n++} END {printf "%.4f", n / NR}')
printf '\n keys moved: join 3->4 %s (1/4 = 0.25), leave 4->3 %s (1/4 = 0.25)\n' "$join_moved" "$leave_moved"
printf ' spread (max/mean of 30,000 keys): 3 members %s, 4 members %s\n' "$spread3" "$spread4"

# ---- watch latency ----------------------------------------------------------
cl watch -D 60 >"$work/wl" 2>&1 &
wl=$!
sleep 0.5
lat=()
spki=$(printf '0%.0s' $(seq 1 64))
# The put goes through etcd's JSON gateway from Python, which notes the
# time just before it sends: etcdctl's own start (a Go binary: about 2 s
# under the lab's TCG, 10 ms on the host) must not count.
put_at() { # KEY VALUE: puts it; prints the time the request left
	/usr/bin/python3 - "$etcd_url" "$1" "$2" <<'PY'
import base64, json, sys, time, urllib.request
url, key, value = sys.argv[1:4]
b64 = lambda s: base64.b64encode(s.encode()).decode()
req = urllib.request.Request(url + "/v3/kv/put", method="POST",
                             data=json.dumps({"key": b64(key), "value": b64(value)}).encode())
t0 = time.time()
urllib.request.urlopen(req, timeout=30).read()
print(f"{t0:.6f}")
PY
}
for i in $(seq 1 20); do
	t0=$(put_at "/qpgate/$name/members/probe$i" \
		"{\"v\":1,\"id\":\"probe$i\",\"host\":\"127.0.0.1\",\"port\":9,\"transport\":\"$transport\",\"tls_name\":\"localhost\",\"incarnation\":\"0000000000000001\",\"state\":\"warming\",\"weight\":1,\"clients\":0,\"max_clients\":0,\"spki_sha256\":\"$spki\"}")
	for _ in $(seq 1 300); do grep -q " probe$i warming" "$work/wl" && break; sleep 0.01; done
	t1=$(awk -v p="probe$i" '$2 == p {print $1; exit}' "$work/wl")
	lat+=("$(awk -v a="${t1:-0}" -v b="${t0:-0}" 'BEGIN{if (a == 0 || b == 0) print "null"; else printf "%.4f", a - b}')")
	etcdctl --endpoints "$etcd_url" del "/qpgate/$name/members/probe$i" >/dev/null
done
kill $wl 2>/dev/null || true
wl50=$(pct 50 "${lat[@]}") wl99=$(pct 99 "${lat[@]}")
printf ' watch latency, etcd put -> client view: p50 %s s, p99 %s s (20 puts)\n' "$wl50" "$wl99"

# ---- the cluster layer's cost -------------------------------------------------
# One member, and a server of one event-loop thread, as anchors.sh's rate
# runs: in a 2-vCPU host two server threads and the client's compete for
# the cores, and which connections land on which thread made runs of the
# same build differ by 3x (about 30,000 and 100,000 GETs/s).
for m in m1 m2 m3; do kill -TERM "${mp[$m]}"; wait "${mp[$m]}" || true; done
"$bin/qpgate-server" --threads 1 --transport "$transport" --service kv --kv-capacity 64M -s 8192 \
	--cert "$work/server.crt" --key "$work/server.key" -p 0 --port-file "$work/solo.port" \
	--cluster "$etcd_url" --cluster-name "$name" --cluster-id solo --advertise-name localhost \
	2>>"$work/solo.log" &
pids+=($!)
wait_active 1
p1=$(awk '{print $1}' "$work/solo.port")
cl_ops=() direct_ops=() ratios=()
for r in $(seq 1 "$runs"); do
	kvb "$work/oc" 5 --cluster "$etcd_url" --cluster-name "$name"
	kvb "$work/od" 5 -p "$p1" 127.0.0.1 localhost
	a=$(awk '$1 == "auto" {print $6}' "$work/oc") d=$(awk '$1 == "auto" {print $6}' "$work/od")
	cl_ops+=("$a") direct_ops+=("$d") ratios+=("$(ratio "$a" "$d")")
done
ovr=$(medr "${ratios[@]}")
printf ' GETs/s, one member: cluster API %s, direct pool %s (medians of %d alternating runs): %s x\n' \
	"$(med "${cl_ops[@]}")" "$(med "${direct_ops[@]}")" "$runs" "$ovr"

mkdir -p "$out"
jq -n --arg tool qpgate-cluster-bench --arg t "$transport" --argjson runs "$runs" \
	--argjson crash "${fo_json[crash]}" --argjson hang "${fo_json[hang]}" --argjson leave "${fo_json[leave]}" \
	--argjson jm "$join_moved" --argjson lm "$leave_moved" --argjson s3 "$spread3" --argjson s4 "$spread4" \
	--argjson lat "$(jarr "${lat[@]}")" --arg wl50 "$wl50" --arg wl99 "$wl99" \
	--argjson co "$(jarr "${cl_ops[@]}")" --argjson dop "$(jarr "${direct_ops[@]}")" \
	--argjson rt "$(jarr "${ratios[@]}")" --arg ovr "$ovr" \
	'{parameters: {transport: $t, runs: $runs, members: 3, lease_ttl_s: 3, keys: 3000, value_size: 1024},
	  results: {failover: {crash: $crash, hang: $hang, leave: $leave},
	            moves: {join_3_to_4: $jm, leave_4_to_3: $lm, expected: 0.25},
	            spread: {members_3: $s3, members_4: $s4},
	            watch_latency_s: {samples: $lat, p50: ($wl50|tonumber? // null), p99: ($wl99|tonumber? // null)},
	            overhead: {server_threads: 1, cluster_gets_per_s: $co, direct_gets_per_s: $dop, ratios: $rt,
	                       median_ratio: ($ovr|tonumber? // null)}}}' >"$work/res.json"
# The tools' one schema: schema_version, tool, version, date, parameters, results.
jq --arg v "$("$bin/qpgate-cluster" --version | awk '{print $NF}')" --arg d "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
	'{schema_version: 1, tool: "bench/cluster.sh", version: $v, date: $d} + .' "$work/res.json" \
	>"$out/cluster-$transport.json"
"$bin/json_check" "$out/cluster-$transport.json" >/dev/null && echo " wrote $out/cluster-$transport.json"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
wait "${pids[@]}" 2>/dev/null || true
