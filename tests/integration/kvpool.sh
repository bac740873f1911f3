#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# A KV pool of 1,024 connections against a server with its default limits
# (5 s handshakes, 500 handshakes a second per address): the pool paces
# its handshakes (--window) and tries a refused or late one again with
# backoff, so every connection comes up and every GET is verified.
#   kvpool.sh TRANSPORT [CLIENTS]
transport=$1
n=${2:-1024}
. "$(dirname "$0")/lib.sh"
qpg_test_setup kvpool
qpg_serve "$work" --transport "$transport" --service kv --kv-capacity 64M -s 8192
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" --threads 2 \
	--num-clients "$n" --num-workers $((2 * n)) --num-keys 1000 --value-size 4096 -n 20000 \
	--json "$work/r.json" 127.0.0.1 localhost >"$work/out" 2>"$work/err"
rc=$?
cat "$work/out"
grep -E 'retry|FAILED|preloaded' "$work/err" | sed 's/^/  /'
check_json_run qpgate-kvbench $rc "$work/r.json"
check "all $n pooled connections up" j '.results.runs[0].clients == '"$n"' and .results.runs[0].error == ""'
check "all 20000 GETs verified, no mismatch, no error" \
	j '.results.runs[0].gets == 20000 and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0'
kill -TERM "$srv"; wait "$srv"; src=$?; srv=""
grep 'stats:' "$work/server.log" | sed 's/^/  /'
check "server exit 0" [ $src -eq 0 ]

# Over rdma the pool can bring its connections up 64 to a TLS session: a
# sixty-fourth of the handshakes, the same verified GETs.
if [ "$transport" = rdma ]; then
	qpg_serve "$work" --service kv --kv-capacity 64M -s 8192
	"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --threads 2 -q 64 \
		--num-clients "$n" --num-workers $((2 * n)) --num-keys 1000 --value-size 4096 -n 20000 \
		--json "$work/q.json" 127.0.0.1 localhost >"$work/out" 2>"$work/err"
	rc=$?
	cat "$work/out"
	qpg_json_file=$work/q.json
	check "-q 64: all $n pooled connections up (rc $rc)" \
		j '.parameters.qps_per_session == 64 and .results.runs[0].clients == '"$n"' and .results.runs[0].error == ""'
	check "-q 64: all 20000 GETs verified, no mismatch, no error" \
		j '.results.runs[0].gets == 20000 and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0'
	kill -TERM "$srv"; wait "$srv"; srv=""
	grep 'stats:' "$work/server.log" | sed 's/^/  /'
	hs=$(sed -n 's/.*stats: .* handshakes_ok=\([0-9]*\).*/\1/p' "$work/server.log")
	check "-q 64: the server made $((n / 64)) TLS handshakes for $n connections (made ${hs:-?})" \
		[ "${hs:-0}" -eq $((n / 64)) ]
fi
finish_checks
