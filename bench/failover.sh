#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# How long a cluster member's keys are out when it fails, per key: an etcd
# of its own on loopback, 3 KV servers each reaching etcd through a proxy
# of its own (and, over tcp, its clients through another), a writer and a
# reader of versioned values (tests/nemesis/nemesis_client), and one fault
# in the middle of each trial:
#   crash      kill -9 (started again after the trial)
#   hang       SIGSTOP for 6 s (past the 3 s lease), then SIGCONT
#   partition  its proxy to etcd stopped for 6 s: it still serves clients
#   blackhole  (tcp) both its proxies stopped for 6 s: its host drops packets
# The reader has a thread per key, so a request a dead member holds until
# its deadline delays no other key. For each key refused while the fault
# lasted, the outage is the time from the fault to its good read after
# that (on the new owner); for each key refused after it ended (the member
# came back: its keys wait S there), the time that refusal lasted. Prints
# p50 and p99 of both over the keys and trials, the keys affected, the reads
# the checker judged (none stale), and the same with the staleness bound
# at its least (200 ms) beside the default (1000 ms): what S costs a
# failover. Writes build/bench/failover-TRANSPORT.json. Asserts nothing
# but the checker's verdict.
#   bench/failover.sh [-t tcp|rdma] [-r RUNS] [-m "FAULT..."] [-S "MS..."]
# (-m: the faults to run, -S: the staleness bounds; FAILOVER_KEEP=1 keeps
# each trial's reader log in build/bench/failover-logs/.)
set -uo pipefail
transport=tcp runs=3 modes="" bounds="1000 200"
while getopts "t:r:m:S:" o; do
	case $o in
	t) transport=$OPTARG ;;
	r) runs=$OPTARG ;;
	m) modes=$OPTARG ;;
	S) bounds=$OPTARG ;;
	*) echo "usage: $0 [-t tcp|rdma] [-r RUNS] [-m \"FAULT...\"] [-S \"MS...\"]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
[ "$transport" = rdma ] && qpg_bench_in_lab 4096 3600 "$@"
. "$repo/scripts/etcd.sh"
qpg_bench_setup failover
trap 'for f in "$work"/*.pid; do [ -f "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null; [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done; qpg_etcd_stop; jobs -p | xargs -r kill -9 2>/dev/null; rm -rf "$work"' EXIT
qpg_etcd_start "$work" || exit 1
etcd_port=${etcd_url##*:}
name=fo$$
mono() { /usr/bin/python3 -c 'import time; print(time.monotonic_ns())'; }
proxy() { # NAME TARGET_PORT: a proxy on a port of its own; its port in NAME.port
	local p
	p=$(qpg_free_port)
	rm -f "$work/$1.ready"
	"$bin/tcp_proxy" "$p" "$2" "$work/$1.ready" </dev/null >/dev/null 2>&1 &
	echo $! >"$work/$1.pid"
	disown
	echo "$p" >"$work/$1.port"
	for _ in $(seq 1 100); do [ -e "$work/$1.ready" ] && return 0; sleep 0.1; done
	return 1
}
declare -A lport
start() { # ID STALENESS_MS
	local id=$1 adv=()
	[ -n "${lport[$id]:-}" ] || lport[$id]=$(qpg_free_port)
	[ -e "$work/$id-etcd.port" ] || proxy "$id-etcd" "$etcd_port"
	if [ "$transport" = tcp ]; then
		[ -e "$work/$id-data.port" ] || proxy "$id-data" "${lport[$id]}"
		adv=(--advertise "127.0.0.1:$(cat "$work/$id-data.port")")
	fi
	"$bin/qpgate-server" --transport "$transport" --service kv --kv-capacity 64M -s 8192 \
		--cert "$work/server.crt" --key "$work/server.key" -p "${lport[$id]}" "${adv[@]}" \
		--cluster "http://127.0.0.1:$(cat "$work/$id-etcd.port")" --cluster-name "$name" \
		--cluster-id "$id" --advertise-name localhost --cluster-ttl 3 --cluster-staleness "$2" \
		</dev/null >>"$work/$id.log" 2>&1 &
	echo $! >"$work/$id.pid"
	disown # its kill -9 is the point: no note of it from the shell
}
active() { "$bin/qpgate-cluster" --cluster "$etcd_url" --cluster-name "$name" status 2>/dev/null | grep -c " active *$transport " || true; }
wait_active() { for _ in $(seq 1 300); do [ "$(active)" -eq "$1" ] && return 0; sleep 0.1; done; return 1; }
pidof_() { cat "$work/$1.pid"; }

# trial MODE VICTIM S: prints "affected p50 p99 reads stale" for one trial.
trial() {
	local mode=$1 v=$2 s=$3 secs=14 fault_s=6
	"$bin/nemesis_client" writer "$etcd_url" "$name" "$work/ca.crt" "$transport" 64 $secs \
		"$work/w.log" 2>"$work/w.err" &
	local w=$!
	NEMESIS_READERS=64 "$bin/nemesis_client" reader "$etcd_url" "$name" "$work/ca.crt" "$transport" 64 $secs \
		"$work/r.log" 2>"$work/r.err" &
	local r=$!
	sleep 4
	local t0
	t0=$(mono)
	case $mode in
	crash) kill -9 "$(pidof_ "$v")" ;;
	hang) kill -STOP "$(pidof_ "$v")" ;;
	partition) kill -STOP "$(pidof_ "$v-etcd")" ;;
	blackhole) kill -STOP "$(pidof_ "$v-etcd")" "$(pidof_ "$v-data")" ;;
	esac
	sleep $fault_s
	case $mode in
	hang) kill -CONT "$(pidof_ "$v")" ;;
	partition) kill -CONT "$(pidof_ "$v-etcd")" ;;
	blackhole) kill -CONT "$(pidof_ "$v-etcd")" "$(pidof_ "$v-data")" ;;
	esac
	wait $w $r
	# (A subshell of the caller's: the member is not its child. It is
	# started again here, its output away from the caller's pipe.)
	if [ "$mode" = crash ]; then
		while kill -0 "$(pidof_ "$v")" 2>/dev/null; do sleep 0.1; done
		start "$v" "$s"
	fi
	wait_active 3 || echo "   (only $(active) members active after the $mode of $v)" >&2
	sleep 2 # the members' first keys wait S
	if [ -n "${FAILOVER_KEEP:-}" ]; then
		local kept
		kept=$out/failover-logs/$mode-$s-$(date +%s)
		mkdir -p "$out/failover-logs"
		cp "$work/r.log" "$kept.rlog"
		echo "$t0 $v" >"$kept.t0"
	fi
	local verdict
	verdict=$(/usr/bin/python3 "$repo/tests/nemesis/nemesis_check.py" "$work/w.log" "$work/r.log")
	/usr/bin/python3 - "$work/r.log" "$t0" "$fault_s" <<'PY'
import sys, collections
t0, fault_end = int(sys.argv[2]), int(sys.argv[2]) + int(sys.argv[3]) * 10**9
ev = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split()
    if p:
        ev[int(p[1])].append((int(p[3]) if p[0] == "R" else int(p[-1]), p[0]))
# Per key, in time order (each key has a reader thread of its own): the
# fault's outage runs from the fault to the end of the last refusal that
# began while the fault lasted (its next good read); the way back's, from
# the first refusal after the fault ended (the member returns and its keys
# wait S there) to the next good read.
fault, back = [], []
for k, es in ev.items():
    es.sort()
    bad = out = None
    for t, c in es:
        if t < t0:
            continue
        if c in ("U", "E"):
            if bad is None:
                bad = t
        elif c in ("R", "M") and bad is not None:
            if bad >= fault_end:
                back.append((t - bad) / 1e9)
                break
            out, bad = (t - t0) / 1e9, None
    if out is not None:
        fault.append(out)
def line(tag, v):
    v.sort()
    pct = lambda q: v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
    print(tag, len(v), f"{pct(0.5):.3f}", f"{pct(0.99):.3f}", " ".join(f"{x:.3f}" for x in v))
line("fault", fault)
line("back", back)
PY
	echo "$verdict" | awk '/reads verified/ {gsub(",", ""); print "#", $3, $5}'
}
echo " failover bench: $transport, $runs runs per fault, etcd at $etcd_url"
if [ -z "$modes" ]; then
	modes="crash hang partition"
	[ "$transport" = tcp ] && modes="$modes blackhole"
fi
json="[]"
printf '\n %-10s %6s %6s %9s %9s %6s %9s %9s %9s %6s\n' FAULT S[ms] keys outp50[s] outp99[s] back \
	backp50[s] backp99[s] reads stale
for s in $bounds; do
	for m in m1 m2 m3; do
		if [ -e "$work/$m.pid" ]; then # (not always our child: a crash trial restarted it)
			kill -TERM "$(pidof_ "$m")" 2>/dev/null
			while kill -0 "$(pidof_ "$m")" 2>/dev/null; do sleep 0.1; done
		fi
		start "$m" "$s"
	done
	wait_active 3
	sleep 2
	for mode in $modes; do
		all=() ball=() reads=0 stale=0 keys=0 bkeys=0
		for r in $(seq 1 "$runs"); do
			victim=m$(((r % 3) + 1))
			res=$(trial "$mode" "$victim" "$s") # ($out is where the JSON goes)
			read -r _ n _ _ rest <<<"$(grep '^fault ' <<<"$res")"
			keys=$((keys + n))
			# shellcheck disable=SC2206
			all+=($rest)
			read -r _ n _ _ rest <<<"$(grep '^back ' <<<"$res")"
			bkeys=$((bkeys + n))
			# shellcheck disable=SC2206
			ball+=($rest)
			read -r _ rd st <<<"$(grep '^#' <<<"$res")"
			reads=$((reads + ${rd:-0})) stale=$((stale + ${st:-0}))
		done
		pq() { printf '%s\n' "${@:2}" | sort -g | awk -v q="$1" 'NF {a[++n]=$1} END {if (n) {i=int(n*q)+1; if (i>n) i=n; print a[i]} else print "null"}'; }
		p50=$(pq 0.5 "${all[@]}") p99=$(pq 0.99 "${all[@]}")
		b50=$(pq 0.5 "${ball[@]}") b99=$(pq 0.99 "${ball[@]}")
		printf ' %-10s %6s %6s %9s %9s %6s %9s %9s %9s %6s\n' "$mode" "$s" "$keys" "$p50" "$p99" "$bkeys" \
			"$b50" "$b99" "$reads" "$stale"
		json=$(jq -c --arg m "$mode" --argjson s "$s" --argjson k "$keys" --arg p50 "$p50" --arg p99 "$p99" \
			--argjson bk "$bkeys" --arg b50 "$b50" --arg b99 "$b99" --argjson rd "$reads" --argjson st "$stale" \
			'. + [{fault:$m, staleness_ms:$s, keys_out:$k, outage_p50_s:($p50|tonumber? // null), outage_p99_s:($p99|tonumber? // null), keys_out_on_return:$bk, return_outage_p50_s:($b50|tonumber? // null), return_outage_p99_s:($b99|tonumber? // null), reads:$rd, stale_reads:$st}]' <<<"$json")
	done
done
# The tools' one schema: schema_version, tool, version, date, parameters, results.
jq -n --arg v "$("$bin/qpgate-cluster" --version | awk '{print $NF}')" --arg d "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
	--arg t "$transport" --argjson runs "$runs" --argjson r "$json" \
	'{schema_version: 1, tool: "bench/failover.sh", version: $v, date: $d,
	  parameters: {transport: $t, runs: $runs, members: 3, lease_ttl_s: 3, keys: 64, fault_s: 6},
	  results: {faults: $r}}' >"$out/failover-$transport.json"
"$bin/json_check" "$out/failover-$transport.json" >/dev/null && echo " wrote $out/failover-$transport.json"
