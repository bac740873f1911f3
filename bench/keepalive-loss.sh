#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Live, idle connections across a lossy wire: how many does the control
# connection's TCP keepalive give up on? Two lab VMs joined by a wire
# (scripts/rxe-vm --hosts 2). Host a runs an echo server of each build;
# host b holds CLIENTS connections to it, idle, while netem loses LOSS% of
# the packets each way for HOLD seconds, then clears the loss and sends 2
# echoes on each. A connection that fails them was given up on. ROUNDS
# rounds, the builds alternating.
#   bench/keepalive-loss.sh [-l LOSS] [-H HOLD_S] [-r ROUNDS] [-c CLIENTS] A_BIN [B_BIN]
# A_BIN and B_BIN hold a qpgate-server and a qpgate-client each (a build's
# bin/). Prints one row per round and build; asserts nothing. The
# 2026-11-30 run (docs/security.md, check 11) compared 3 probes with 6:
#   bench/keepalive-loss.sh -l 30 -H 40 -r 2 OLD/bin build/bin
set -euo pipefail
loss=30 hold=40 rounds=2 clients=20
while getopts "l:H:r:c:" o; do
	case $o in
	l) loss=$OPTARG ;;
	H) hold=$OPTARG ;;
	r) rounds=$OPTARG ;;
	c) clients=$OPTARG ;;
	*) echo "usage: $0 [-l LOSS%] [-H HOLD_S] [-r ROUNDS] [-c CLIENTS] A_BIN [B_BIN]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
builds=()
for b in "$@"; do
	[ -x "$b/qpgate-server" ] && [ -x "$b/qpgate-client" ] ||
		{ echo "$0: $b has no qpgate-server and qpgate-client (give a build's bin/)" >&2; exit 2; }
	builds+=("$(cd "$b" && pwd -P)")
done
[ ${#builds[@]} -ge 1 ] && [ ${#builds[@]} -le 2 ] ||
	{ echo "usage: $0 [options] A_BIN [B_BIN]" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
if [ -z "${QPG_LAB_HOST:-}" ]; then
	exec "$repo/scripts/rxe-vm" --hosts 2 --mem 2048 --timeout $((rounds * ${#builds[@]} * (hold + 60) + 300)) \
		-- "$repo/bench/keepalive-loss.sh" -l "$loss" -H "$hold" -r "$rounds" -c "$clients" "${builds[@]}"
fi
sh=$QPG_LAB_SHARED
server_ip=10.77.0.1
letter=(A B)
. "$repo/scripts/netem.sh"

serve() { # host a: a server per build; applies what b asks of netem
	local pids="" i
	for i in "${!builds[@]}"; do
		mkdir -p "$sh/$i"
		"$repo/scripts/make-certs" "$sh/$i" localhost >/dev/null 2>&1
		bin=${builds[$i]} qpg_serve "$sh/$i" --bind "$server_ip" || exit 1
		pids="$pids $srv"
	done
	touch "$sh/up"
	qpg_netem_follow
	# shellcheck disable=SC2086
	kill -TERM $pids
	wait
}

hold_rounds() { # host b
	trap 'touch "$sh/done"' EXIT
	for _ in $(seq 1 600); do [ -f "$sh/up" ] && break; sleep 0.2; done
	local w r i port rc lost
	w=$(mktemp -d)
	printf ' %-6s %-5s %-8s %-7s %-6s %s\n' round build loss hold_s lost first_reason
	for r in $(seq 1 "$rounds"); do
		for i in "${!builds[@]}"; do
			rm -f "$w/ready" "$w/release"
			read -r port _ <"$sh/$i/port"
			"${builds[$i]}/qpgate-client" --ca "$sh/$i/ca.crt" -p "$port" -c "$clients" -n 2 -s 64 \
				--hold 600000 --ready-file "$w/ready" --release-file "$w/release" --timeout 120000 \
				"$server_ip" localhost >"$w/out" 2>&1 &
			local c=$!
			for _ in $(seq 1 300); do [ -f "$w/ready" ] && break; sleep 0.2; done
			qpg_netem_both loss "$loss%" || { echo "host a did not apply netem" >&2; exit 1; }
			sleep "$hold"
			qpg_netem_both clear || { echo "host a did not clear netem" >&2; exit 1; }
			touch "$w/release"
			rc=0
			wait "$c" || rc=$?
			lost=$(awk '$1 ~ /^[0-9]+$/ && NF >= 10 { print $3; exit }' "$w/out")
			printf ' %-6s %-5s %-8s %-7s %-6s %s\n' "$r" "${letter[$i]}" "$loss%" \
				"$hold" "${lost:-?}/$clients" "$(grep -m1 -o 'e.g. ".*"' "$w/out" || echo "-")"
			[ "$rc" -eq 0 ] || [ -n "$lost" ] || tail -3 "$w/out"
		done
	done
	for i in "${!builds[@]}"; do echo " ${letter[$i]} = ${builds[$i]}"; done
}

case $QPG_LAB_HOST in
a) serve ;;
b) hold_rounds ;;
esac
