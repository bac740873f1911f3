#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate's KV over tcp against Redis 7 with TLS, on this host, as a user
# choosing between them would run them (issue 60): redis-benchmark --tls
# -t get -c 64 --threads 2 against redis-server --io-threads 1, and
# qpgate-kvbench --transport tcp with 64 workers on 4 connections, at each
# size, RUNS rounds alternating. Each side's values are there first (a SET
# run, a preload). Prints per size the medians of GETs/s, their ratio, and
# the CPU per GET of each side's client and server (user + system, from
# /proc). kvbench checks every value it reads, and redis-benchmark checks
# none: the last column is kvbench's CPU per GET with that check.
#   bench/redis-anchor.sh [-r RUNS] [-D SECONDS] [-s SIZES] [-m MAX_MSG]
# SIZES: comma-separated (default 4096,65536,1048576); MAX_MSG: qpgate's
# message size, server and client (default 65536). Writes
# build/bench/redis-anchor.json. Prints numbers; asserts nothing.
set -euo pipefail
runs=5 secs=5 sizes=4096,65536,1048576 maxmsg=65536
while getopts "r:D:s:m:" o; do
	case $o in
	r) runs=$OPTARG ;;
	D) secs=$OPTARG ;;
	s) sizes=$OPTARG ;;
	m) maxmsg=$OPTARG ;;
	*) echo "usage: $0 [-r RUNS] [-D SECONDS] [-s SIZES] [-m MAX_MSG]" >&2; exit 2 ;;
	esac
done
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
	echo "redis-anchor: needs redis-server and redis-benchmark: make deps (or apt-get install redis-server redis-tools)" >&2
	exit 2
}
. "$(dirname "$0")/lib.sh"
qpg_bench_setup redisa
# CPU seconds (user + system) of PID so far.
cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
rport=$(( 20000 + RANDOM % 10000 ))
redis-server --port 0 --tls-port "$rport" --tls-cert-file "$work/server.crt" --tls-key-file "$work/server.key" \
	--tls-ca-cert-file "$work/ca.crt" --tls-auth-clients no --io-threads 1 --save '' --appendonly no \
	--protected-mode no --bind 127.0.0.1 --dir "$work" --logfile "$work/redis.log" &
rpid=$!
pids+=("$rpid")
qpg_serve "$work" --transport tcp --service kv --kv-capacity 2G --kv-max-value 2M -s "$maxmsg"
rb() { redis-benchmark --tls --cacert "$work/ca.crt" -h 127.0.0.1 -p "$rport" "$@"; }
for _ in $(seq 1 50); do rb -t ping -n 1 -q >/dev/null 2>&1 && break; sleep 0.1; done
rows=$work/rows
: >"$rows"
IFS=, read -r -a size_list <<<"$sizes"
for size in "${size_list[@]}"; do
	keys=$(( size >= 1048576 ? 200 : size >= 65536 ? 2000 : 10000 ))
	rb -t set -c 16 -n $((keys * 4)) -r "$keys" -d "$size" -q >/dev/null 2>&1
	# qpgate's keys, preloaded once (then --no-preload)
	"$bin/qpgate-kvbench" --transport tcp --ca "$work/ca.crt" -p "$port" -s "$maxmsg" -n 1 --num-keys "$keys" \
		--value-size "$size" 127.0.0.1 localhost >/dev/null 2>&1
	for r in $(seq 1 "$runs"); do
		# Redis: as many GETs as qpgate's last run did, at least 20,000.
		n=$(( ${last_q_ops:-20000} > 20000 ? last_q_ops : 20000 ))
		s0=$(cpu "$rpid")
		t0=$(date +%s.%N)
		rbout=$( { /usr/bin/time -f 'CPU %U %S' redis-benchmark --tls --cacert "$work/ca.crt" -h 127.0.0.1 \
			-p "$rport" -t get -c 64 --threads 2 -n "$n" -r "$keys" -d "$size" --csv; } 2>&1)
		t1=$(date +%s.%N)
		s1=$(cpu "$rpid")
		r_rps=$(awk -F'"' '$2 == "GET" {print $4}' <<<"$rbout")
		r_ccpu=$(awk '/^CPU/ {print $2 + $3}' <<<"$rbout")
		r_scpu=$(awk -v a="$s0" -v b="$s1" 'BEGIN{print b - a}')
		# qpgate: its table, and CPU per GET of both sides (--server-pid)
		"$bin/qpgate-kvbench" --transport tcp --ca "$work/ca.crt" -p "$port" -s "$maxmsg" -D "$secs" \
			--num-keys "$keys" --value-size "$size" --num-workers 64 --num-clients 4 --no-preload \
			--server-pid "$srv" --json "$work/q.json" 127.0.0.1 localhost >/dev/null 2>&1 ||
			echo " run $r, $size bytes: qpgate-kvbench did not verify every value" >&2
		q_rps=$(jq -r '.results.runs[0].ops_per_s' "$work/q.json")
		q_ccpu=$(jq -r '.results.runs[0].client_cpu_us_per_get' "$work/q.json")
		q_scpu=$(jq -r '.results.runs[0].server_cpu_us_per_get' "$work/q.json")
		last_q_ops=$(jq -r '.results.runs[0].gets' "$work/q.json")
		awk -v s="$size" -v rr="$r_rps" -v qr="$q_rps" -v rc="$r_ccpu" -v rs="$r_scpu" -v n="$n" \
			-v qc="$q_ccpu" -v qs="$q_scpu" 'BEGIN {
			printf "%s %.0f %.0f %.2f %.2f %.2f %.2f\n", s, rr, qr, rc * 1e6 / n, rs * 1e6 / n, qc, qs }' >>"$rows"
		tail -1 "$rows" | awk '{printf " run '"$r"', %8s B: redis %9.0f GETs/s, qpgate %9.0f GETs/s (%.2fx); CPU/GET us: redis client %.1f server %.1f, qpgate client %.1f server %.1f\n", $1, $2, $3, $3 / $2, $4, $5, $6, $7}'
	done
done
echo
printf ' %-10s %12s %12s %7s %10s %10s %10s %10s\n' "median of" "redis" "qpgate" "ratio" "redis cl" "redis srv" "qpg cl" "qpg srv"
printf ' %-10s %12s %12s %7s %10s %10s %10s %10s\n' "$runs runs" "GETs/s" "GETs/s" "" "us/GET" "us/GET" "us/GET" "us/GET"
for size in "${size_list[@]}"; do
	awk -v s="$size" '$1 == s' "$rows" >"$work/one"
	col() { awk -v c="$1" '{print $c}' "$work/one" | median; }
	rr=$(col 2) qr=$(col 3)
	printf ' %-10s %12.0f %12.0f %7.2f %10.1f %10.1f %10.1f %10.1f\n' "$size B" "$rr" "$qr" \
		"$(awk -v a="$qr" -v b="$rr" 'BEGIN{print a / b}')" "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)"
done
version=$("$bin/qpgate-kvbench" --version | awk '{print $3}')
jq -R -s --arg version "$version" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --argjson runs "$runs" \
	--argjson secs "$secs" --argjson maxmsg "$maxmsg" --arg redis "$(redis-server --version | awk '{print $3}')" '
	{schema_version: 1, tool: "bench/redis-anchor.sh", version: $version, date: $date,
	 parameters: {runs: $runs, seconds: $secs, redis: $redis, max_msg: $maxmsg, where: "host, lo, TLS on both"},
	 results: {rows: [split("\n")[] | select(length > 0) | split(" ") |
	   {size: (.[0] | tonumber), redis_gets_per_s: (.[1] | tonumber), qpgate_gets_per_s: (.[2] | tonumber),
	    redis_client_cpu_us_per_get: (.[3] | tonumber), redis_server_cpu_us_per_get: (.[4] | tonumber),
	    qpgate_client_cpu_us_per_get: (.[5] | tonumber), qpgate_server_cpu_us_per_get: (.[6] | tonumber)}]}}' \
	"$rows" >"$out/redis-anchor.json"
"$bin/json_check" "$out/redis-anchor.json" >&2 || echo " redis-anchor.json does not have the schema" >&2
echo " json: $out/redis-anchor.json"
