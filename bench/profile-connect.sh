#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Where a connect's time goes, against its ceiling: anchors.sh's connect run
# (N clients at once, one connection each, a server of default threads),
# with the ceiling's parts measured in the same VM just before (the TLS
# library floor over TCP, bench/tls_floor.c; a QP pair's bring-up,
# bench/qp_floor.c). Each of ROUNDS runs prints the connects/s, the ratio to
# the ceiling and how idle the VM's CPUs were during the run (/proc/stat); the
# last is under perf record -a -g, whose report for the client and the server
# follows. In the lab:
#   bench/profile-connect.sh [-R] [-c CLIENTS] [-r ROUNDS] [extra qpgate-perf flags]
# -R: reconnects that resume their TLS session (default: full handshakes).
# QPG_SERVER_ARGS adds server flags. Writes build/bench/profile-connect.txt.
# Prints what it measured; asserts nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 4096 1800 "$@"
clients=200 rounds=3 resume=(--no-tls-resume) kind=full
while [ $# -gt 0 ]; do
	case $1 in
	-R) resume=() kind=resumed; shift ;;
	-c) clients=$2; shift 2 ;;
	-r) rounds=$2; shift 2 ;;
	*) break ;; # the rest goes to qpgate-perf
	esac
done
if [ $kind = resumed ] && ! [ "$clients" -ge 2 ] 2>/dev/null; then
	echo "profile-connect: -R counts the connects after the first (a full handshake, for the ticket): give -c 2 or more" >&2
	exit 2
fi
qpg_bench_setup profconn
dev=$(ls /sys/class/infiniband | head -1)
# shellcheck disable=SC2086 # QPG_SERVER_ARGS: extra server flags, split
qpg_serve "$work" --handshake-timeout 120000 --max-pending 100000 --max-pending-per-peer 100000 \
	${QPG_SERVER_ARGS:-}
pids+=("$srv")
floor=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 --tcp)
qp=$("$bin/qpg_qp_floor" -d "$dev" -n 300)
tls=$(sed -n "s/^floor full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p" <<<"$floor")
[ $kind = full ] && tls=${tls% *} || tls=${tls#* }
up=$(sed -n 's/^floor qp_pairs=[0-9]* per_s=[0-9]* bringup_per_s=\([0-9]*\)$/\1/p' <<<"$qp")
ceil=$(awk -v a="$tls" -v b="$up" 'BEGIN{printf "%.1f", 1 / (1/a + 1/b)}')
{
	echo "$floor" | grep -E '^ *(full|resumed|floor)'
	echo "$qp" | grep -E '^floor'
	printf ' ceiling, %s: TLS over TCP %s/s + QP pair bring-up %s/s = %s/s\n' "$kind" "$tls" "$up" "$ceil"
} | tee "$out/profile-connect.txt"
# idle: the VM's idle share of CPU time between two reads of /proc/stat.
cpu() { awk '$1 == "cpu" {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
# One connection first, alone, for the first ticket (anchors.sh does too).
"$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c 1 -n 1 "$@" 127.0.0.1 localhost >/dev/null
for r in $(seq 1 "$rounds"); do
	pre=()
	[ "$r" = "$rounds" ] && pre=(perf record -e cpu-clock -F 1000 -g -a -o "$work/perf.data" --)
	read -r i0 t0 <<<"$(cpu)"
	"${pre[@]}" "$bin/qpgate-perf" --ca "$work/ca.crt" -p "$port" -c "$clients" -n 1 --window "$clients" \
		"${resume[@]}" --server-pid "$srv" --json "$work/run.json" "$@" 127.0.0.1 localhost >"$work/run.txt" 2>&1 || { cat "$work/run.txt"; exit 1; }
	read -r i1 t1 <<<"$(cpu)"
	# Resumed: the resumed connects over the time after the first one,
	# which is a full handshake alone, for the ticket (prime_s).
	if [ $kind = full ]; then
		cps=$(jq -r '.results.connections.succeeded / .results.connections.connect_phase_s' "$work/run.json")
	else
		cps=$(jq -r '.results.connections | if .connect_phase_s > .prime_s then .tls_resumed / (.connect_phase_s - .prime_s) else null end' "$work/run.json")
	fi
	# CPU per connect, each side, from the baseline snapshot (taken once
	# the client has started) to the one taken when every client is up.
	cpu_per=$(jq -r '.results.connections.succeeded as $n | .results.resources.snapshots as $s |
		[(($s[1].client.cpu_s - $s[0].client.cpu_s) / $n * 1e6 | floor),
		 (($s[1].server.cpu_s - $s[0].server.cpu_s) / $n * 1e6 | floor)] | join(" ")' "$work/run.json")
	printf ' round %d: %s connects/s (%s of %s), %.2f of the ceiling; CPU per connect: client %s, server %s us; CPUs idle %.0f%% of the run%s\n' \
		"$r" "$(printf '%.1f' "$cps")" "$(jq -r .results.connections.succeeded "$work/run.json")" "$clients" \
		"$(awk -v a="$cps" -v b="$ceil" 'BEGIN{print a / b}')" ${cpu_per} \
		"$(awk -v a=$((i1 - i0)) -v b=$((t1 - t0)) 'BEGIN{print 100 * a / b}')" \
		"$([ "$r" = "$rounds" ] && echo ' (profiled)')" | tee -a "$out/profile-connect.txt"
done
{
	echo "## the client"
	qpg_profile_report "$work/perf.data" qpgate-perf | sed -n '/inclusive/,$p'
	echo "## the server"
	qpg_profile_report "$work/perf.data" qpgate-server | sed -n '/by object/,$p'
} | tee -a "$out/profile-connect.txt"
