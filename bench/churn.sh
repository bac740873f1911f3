#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Churn soak: one server, clients connecting and disconnecting for MINUTES,
# with the server's RSS and fds and the device's QP/CQ/MR counts sampled
# after every round. Prints a table and the drift between the first and
# the last quarter of the rounds: flat means nothing leaks per connection.
#
#   bench/churn.sh [-t MINUTES] [-c CLIENTS] [--transport rdma|tcp]
#
# rdma runs in the lab (tests/lab-run); tcp runs here. Bounded: it stops
# after MINUTES (default 5) and at most 10,000 rounds.
set -euo pipefail
minutes=5 clients=200 transport=rdma
while [ $# -gt 0 ]; do
	case $1 in
	-t) minutes=$2; shift 2 ;;
	-c) clients=$2; shift 2 ;;
	--transport) transport=$2; shift 2 ;;
	*) echo "usage: $0 [-t MINUTES] [-c CLIENTS] [--transport rdma|tcp]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
[ "$transport" = rdma ] &&
	qpg_bench_in_lab 4096 $((minutes * 60 + 600)) -t "$minutes" -c "$clients" --transport "$transport"
qpg_bench_setup churn
qpg_serve "$work" --handshake-timeout 120000 --transport "$transport"

dev_count() { # KIND: qp | cq | mr
	if [ "$transport" = rdma ]; then rdma res show "$1" 2>/dev/null | grep -c . || true; else echo 0; fi
}
sample() {
	local rss fds
	rss=$(awk '/VmRSS/{print $2}' "/proc/$srv/status")
	fds=$(ls "/proc/$srv/fd" | wc -l)
	echo "$rss $fds $(dev_count qp) $(dev_count cq) $(dev_count mr)"
}
printf ' %-6s %-9s %-9s %-10s %-6s %-7s %-7s %-7s\n' round clients failed rss[kB] fds dev:qp cq mr
end=$(($(date +%s) + minutes * 60))
rounds=0 total=0 failed=0
: >"$work/samples"
while [ "$(date +%s)" -lt "$end" ] && [ $rounds -lt 10000 ]; do
	rounds=$((rounds + 1))
	rc=0
	"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c "$clients" \
		-n 3 -s 512 --json "$work/r.json" 127.0.0.1 localhost >/dev/null 2>&1 || rc=$?
	ok=$(jq -r '.results.connections.succeeded' "$work/r.json" 2>/dev/null || echo 0)
	bad=$((clients - ok))
	[ $rc -eq 0 ] || bad=$((bad > 0 ? bad : 1))
	total=$((total + clients))
	failed=$((failed + bad))
	# Let the server finish reaping the round's connections before sampling.
	sleep 1
	s=$(sample)
	echo "$rounds $s" >>"$work/samples"
	read -r rss fds qp cq mr <<<"$s"
	printf ' %-6d %-9d %-9d %-10d %-6d %-7d %-7d %-7d\n' "$rounds" "$clients" "$bad" "$rss" "$fds" "$qp" "$cq" "$mr"
done
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log" | sed 's/^/ /'
awk -v total="$total" -v failed="$failed" '
	{ r[NR] = $2; f[NR] = $3; q[NR] = $4 }
	END {
		n = NR; k = int(n / 4); if (k < 1) k = 1
		for (i = 1; i <= k; i++) { r0 += r[i]; f0 += f[i]; q0 += q[i] }
		for (i = n - k + 1; i <= n; i++) { r1 += r[i]; f1 += f[i]; q1 += q[i] }
		printf "\n %d rounds, %d connections, %d failed\n", n, total, failed
		printf " server RSS: first quarter %.0f kB, last quarter %.0f kB (%+.1f%%)\n", r0 / k, r1 / k, 100 * (r1 - r0) / r0
		printf " server fds: %.1f -> %.1f;  device QPs between rounds: %.1f -> %.1f\n", f0 / k, f1 / k, q0 / k, q1 / k
	}' "$work/samples"
