#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Where the message rate's time goes: anchors.sh's rate run (1,000 clients,
# one echo in flight each, 64 bytes, a one-thread server, auth on unless
# --no-auth is passed), profiled over its traffic phase alone. No TLS
# handshake is in the profile: perf record -a starts with its events off,
# and qpgate-perf's --ready-file turns them on once every client is up.
# Before that, perf stat counts each process's CPU, system calls and
# context switches over 3 s, per echo at the run's rate. In the lab:
#   bench/profile-rate.sh [-c CLIENTS] [-t SECONDS] [extra qpgate-perf flags]
# -t: seconds profiled (default 6). QPG_SERVER_ARGS adds server flags.
# Writes build/bench/profile-rate.txt. Prints what it measured; asserts
# nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 1800 "$@"
clients=1000 secs=6
while [ $# -gt 0 ]; do
	case $1 in
	-c) clients=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	*) break ;; # the rest goes to qpgate-perf
	esac
done
case $secs in '' | *[!0-9]* | 0) echo "profile-rate: -t wants seconds, not '$secs'" >&2; exit 2 ;; esac
qpg_bench_setup profrate
clock=mono
[ "$(uname -m)" = x86_64 ] && clock=tsc # as anchors.sh: the lab's clock reads trap
# shellcheck disable=SC2086 # QPG_SERVER_ARGS: extra server flags, split
qpg_serve "$work" --handshake-timeout 120000 --allow-no-auth --max-pending 100000 \
	--max-pending-per-peer 100000 -s 4096 --threads 1 --metrics 127.0.0.1:0 ${QPG_SERVER_ARGS:-}
pids+=("$srv")

# The clients first, then perf record with its events off: it learns the
# processes already running from /proc (one started later, while its events
# are off, would have no name or symbols in the report). Setting it up takes
# the lab about 25 s; it must not eat into the traffic, so -D is long and
# the stop file ends the run once the profile is taken.
"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -s 64 --clock "$clock" -c "$clients" --window 64 \
	-D $((secs + 120)) --ready-file "$work/ready" --stop-file "$work/stop" --json "$work/run.json" \
	"$@" 127.0.0.1 localhost >"$work/run.txt" 2>&1 &
cli=$!
pids+=("$cli")
# Commands go to perf record through a FIFO; each is acknowledged.
mkfifo "$work/ctl" "$work/ack"
perf record -e cpu-clock -F 1000 -g -a --delay=-1 --control "fifo:$work/ctl,$work/ack" \
	-o "$work/perf.data" -- sleep 3600 >"$work/record.log" 2>&1 &
rec=$!
pids+=("$rec")
exec 3<>"$work/ctl" 4<>"$work/ack" # both ends held open: no open blocks
ctl() {                            # CMD: send it, wait for perf's ack
	echo "$1" >&3
	read -r -t 300 _ <&4 || {
		echo "profile-rate: perf record did not answer '$1'" >&2
		cat "$work/record.log" >&2
		exit 1
	}
}
ctl disable # answered once perf record is set up
for _ in $(seq 1 6000); do
	[ -e "$work/ready" ] && break
	kill -0 "$cli" 2>/dev/null || break
	sleep 0.1
done
[ -e "$work/ready" ] || { echo "profile-rate: the clients never all came up" >&2; tail -5 "$work/run.txt" >&2; exit 1; }
read -r up failed <"$work/ready"
sleep 1
echoes() { curl -fsS "http://127.0.0.1:$mport/metrics" | awk '$1 == "qpgate_messages_total{direction=\"in\"}" {print $2}'; }
t0=$(date +%s.%N) e0=$(echoes)
# One perf stat over both processes, thread by thread: the same window.
perf stat -x, --per-thread -e task-clock,raw_syscalls:sys_enter,context-switches \
	-p "$srv,$cli" -o "$work/stat.txt" -- sleep 3
t1=$(date +%s.%N) e1=$(echoes)
sleep 0.5
t2=$(date +%s.%N) e2=$(echoes)
ctl enable
sleep "$secs"
ctl disable
t3=$(date +%s.%N) e3=$(echoes)
touch "$work/stop"
wait "$cli" || true
pkill -P "$rec" sleep || true
wait "$rec" || true
# Per echo at the rate the server counted around perf stat's 3 s (setting
# perf stat up takes the lab a while: the counts are per second of its own
# window, the echoes per second of the whole time around it).
rate() { awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" 'BEGIN{printf "%.0f", (b - a) / (t1 - t0)}'; }
stat_rate=$(rate "$e0" "$e1" "$t0" "$t1")
per_echo() { # COMM EVENT -> its threads' CPUs, or the event's count per echo
	awk -F, -v c="$1" -v ev="$2" -v r="$stat_rate" 'index($1, c "-") == 1 && $4 == ev {n += $2}
		END {if (ev == "task-clock") printf "%.2f CPUs", n / 3000; else printf "%.2f", n / 3 / r}' "$work/stat.txt"
}
{
	echo "# qpgate-perf -c $clients ($up up, $failed failed) $*: $(jq '.results.data.verified' "$work/run.json") echoes verified of $(jq '.results.data.sent' "$work/run.json") sent, $(jq '.results.data.mismatches' "$work/run.json") mismatches"
	echo "# echoes/s the server counted: $stat_rate around perf stat, $(rate "$e2" "$e3" "$t2" "$t3") around the profile"
	for comm in qpgate-server qpgate-perf; do
		echo "# $comm: $(per_echo $comm task-clock), $(per_echo $comm raw_syscalls:sys_enter) system calls and $(per_echo $comm context-switches) context switches per echo"
	done
	qpg_profile_report "$work/perf.data" qpgate-perf,qpgate-server
} | tee "$out/profile-rate.txt"
