# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash
# Sourced by the scripts that run on both VMs of `scripts/rxe-vm --hosts 2`
# (tests/integration/wire.sh, bench/keepalive-loss.sh): netem on the wire,
# applied by both hosts to their side of it, so that it hits both
# directions. Host b asks (qpg_netem_both), host a applies and acknowledges
# (qpg_netem_follow); the requests are numbered files in $QPG_LAB_SHARED.

# qpg_netem ARGS...: netem ARGS on this host's side of the wire ("clear"
# removes it).
qpg_netem() {
	if [ "$1" = clear ]; then
		tc qdisc del dev "$QPG_LAB_IF" root 2>/dev/null || true
	else
		tc qdisc replace dev "$QPG_LAB_IF" root netem "$@"
	fi
}

# qpg_netem_both ARGS... (host b): netem ARGS on both sides. Returns 1 when
# host a did not acknowledge it within 20 s.
qpg_netem_n=0
qpg_netem_both() {
	local n=$qpg_netem_n sh=$QPG_LAB_SHARED
	qpg_netem_n=$((n + 1))
	echo "$*" >"$sh/netem.$n.tmp"
	mv "$sh/netem.$n.tmp" "$sh/netem.$n"
	qpg_netem "$@"
	for _ in $(seq 1 100); do [ -f "$sh/netem.$n.ok" ] && break; sleep 0.2; done
	[ -f "$sh/netem.$n.ok" ]
}

# qpg_netem_follow (host a): applies host b's requests in turn until
# $QPG_LAB_SHARED/done appears, then clears netem.
qpg_netem_follow() {
	local n=0 sh=$QPG_LAB_SHARED
	while [ ! -f "$sh/done" ]; do
		if [ -f "$sh/netem.$n" ]; then
			# shellcheck disable=SC2046 # the request's words are netem's arguments
			qpg_netem $(cat "$sh/netem.$n")
			touch "$sh/netem.$n.ok"
			n=$((n + 1))
		fi
		sleep 0.2
	done
	qpg_netem clear
}
