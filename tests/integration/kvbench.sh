#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate-kvbench end to end: the default shape (16 workers on 4 pooled
# connections, 10,000 keys of 4 KiB) preloads, then every GET is verified
# against the checksum of what was stored; its JSON must agree.
#   kvbench.sh TRANSPORT [OPS]
transport=$1
ops=${2:-20000}
. "$(dirname "$0")/lib.sh"
qpg_test_setup kvb
# SHA-256 digests for one-sided readers (kv.sh's server: SHA-512/256).
qpg_serve "$work" --transport "$transport" --service kv --kv-capacity 128M -s 8192 --metrics 127.0.0.1:0 \
	--kv-digest sha256
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" -n "$ops" \
	--server-pid "$srv" --json "$work/r.json" 127.0.0.1 localhost >"$work/out" 2>&1
rc=$?
cat "$work/out"
check_json_run qpgate-kvbench $rc "$work/r.json"
check "default shape: 16 workers, 4 clients, 4 threads, 10,000 keys of 4 KiB" \
	j '.results.runs[0].workers == 16 and .results.runs[0].clients == 4 and .results.runs[0].threads == 4 and .parameters.num_keys == 10000 and .parameters.value_size == 4096'
check "all $ops GETs verified, no mismatch, no error" \
	j ".results.runs[0].gets == $ops and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0"
check "throughput and latency percentiles filled" \
	j '.results.runs[0].ops_per_s > 0 and .results.runs[0].p50_us > 0 and .results.runs[0].p999_us >= .results.runs[0].p99_us'
check "default credits: enough for the workers, 16 while preloading" j '.results.runs[0].credits == 16'
# What the GETs cost each process: both read, neither missing.
check "CPU per GET measured for qpgate-kvbench and, by --server-pid, the server" \
	j '.results.runs[0].client_cpu_us_per_get > 0 and .results.runs[0].server_cpu_us_per_get > 0'
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" -n 10 --no-preload \
	--server-pid 1073741823 127.0.0.1 localhost >"$work/pout" 2>&1
prc=$?
check "--server-pid of no process: usage error (2) that names it" \
	eval '[ $prc -eq 2 ] && grep -q "server-pid 1073741823: no such process" "$work/pout"'
if [ "$transport" = rdma ]; then
	check "4 pooled connections = 8 QPs on the device (both ends)" j '.results.runs[0].device_qps == 8'
	# Requests a connection sends in one turn of its loop travel in one
	# SEND (docs/protocol.md, "Messages"): 4 workers a connection put
	# several of their $ops requests in one, and every one was answered
	# and verified above.
	curl -fsS "http://127.0.0.1:$mport/metrics" >"$work/s.txt"
	sval() { awk -v k="$1" '$1 == k {print $2}' "$work/s.txt"; }
	frames=$(sval 'qpgate_messages_total{direction="in"}') sends=$(sval 'qpgate_rdma_sends_total{direction="in"}')
	echo "  server: $frames frames in $sends SENDs received"
	check "requests sent together travel in one SEND: fewer SENDs than frames received" \
		eval '[ "$frames" -gt "$ops" ] && [ "$sends" -gt 0 ] && [ "$sends" -lt "$frames" ]'
fi
# --credits is what each connection asks for (it once was overridden by
# the workers per connection: 2 here).
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" -n 200 --no-preload \
	--credits 3 --num-workers 8 --num-clients 4 --json "$work/c.json" 127.0.0.1 localhost >"$work/cout" 2>&1
crc=$?
check_json_run qpgate-kvbench $crc "$work/c.json"
check "--credits 3 is what the connections agreed, not the 2 workers each" \
	j '.results.runs[0].credits == 3 and .results.runs[0].gets == 200 and .results.runs[0].mismatches == 0'
# One-sided: a GET is done once its value is checked, and its grant is
# released with the connection's next GET (no message of its own), or by
# a RELEASE when no GET follows in that loop turn. Every grant is released
# by its client (none left to expire); at most each connection's last may
# go with its close instead.
if [ "$transport" = rdma ]; then
	"$bin/qpgate-kvbench" --transport rdma --ca "$work/ca.crt" -p "$port" -n 400 --num-keys 50 \
		--value-size 65536 --get-mode one-sided --json "$work/o.json" 127.0.0.1 localhost >"$work/oout" 2>&1
	orc=$?
	check_json_run qpgate-kvbench $orc "$work/o.json"
	check "one-sided: all 400 GETs of 64 KiB verified" \
		j '.results.runs[0].gets == 400 and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0'
	sleep 1
	curl -fsS "http://127.0.0.1:$mport/metrics" >"$work/m.txt"
	mval() { awk -v k="$1" '$1 == k {print $2}' "$work/m.txt"; }
	grants=$(mval qpgate_kv_grants_total) by_get=$(mval 'qpgate_kv_releases_total{by="get"}')
	by_rel=$(mval 'qpgate_kv_releases_total{by="release"}') expired=$(mval qpgate_kv_grants_expired_total)
	echo "  grants=$grants released with a GET=$by_get by a RELEASE=$by_rel expired=$expired live=$(mval qpgate_kv_grants_live)"
	check "one-sided: every grant released by its client (all but at most 4 closes), none expired, none left bound" \
		eval '[ "$grants" -ge 400 ] && [ $((grants - by_get - by_rel)) -le 4 ] && [ "$expired" -eq 0 ] && [ "$(mval qpgate_kv_grants_live)" -eq 0 ]'
	check "one-sided: most grants went back with the next GET (at least 3 in 4)" \
		[ $((4 * by_get)) -ge $((3 * grants)) ]
	check "one-sided: values checked against SHA-256 digests, as asked" \
		[ "$(mval 'qpgate_kv_digest_info{digest="sha256"}')" = 1 ]
	# Left to the server (auto), 64 KiB values are granted. A connection
	# asks for 2 grants at a time; once the server has granted what it
	# asked for, a GET past that waits for a grant instead of being sent
	# two-sided (slower at this size). Only the GETs a connection sends
	# before its first answer may go two-sided: at most 2 of 4 workers on
	# each of the 4 connections.
	"$bin/qpgate-kvbench" --transport rdma --ca "$work/ca.crt" -p "$port" -n 400 --no-preload --num-keys 50 \
		--value-size 65536 --get-mode auto --json "$work/a.json" 127.0.0.1 localhost >"$work/aout" 2>&1
	arc=$?
	check_json_run qpgate-kvbench $arc "$work/a.json"
	check "auto: all 400 GETs of 64 KiB verified" \
		j '.results.runs[0].gets == 400 and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0'
	curl -fsS "http://127.0.0.1:$mport/metrics" >"$work/m.txt"
	granted=$(($(mval qpgate_kv_grants_total) - grants))
	echo "  auto: $granted of 400 GETs granted"
	check "auto: the 64 KiB GETs are granted, not sent past the grant cap (at least 392 of 400)" [ "$granted" -ge 392 ]
fi
# --register: the workers GET into one registered arena. One-sided over
# rdma, every GET is READ straight into it, 6 MiB values in two READs.
if [ "$transport" = rdma ]; then
	mkdir -p "$work/zc"
	keep="$srv $port $mport"
	srv_cert=$work/server.crt srv_key=$work/server.key qpg_serve "$work/zc" --transport rdma \
		--service kv --kv-capacity 64M --kv-max-value 8M -s 65536
	"$bin/qpgate-kvbench" --transport rdma --ca "$work/ca.crt" -p "$port" -n 12 --num-keys 3 --value-size 6M \
		-s 65536 --get-mode one-sided --register --num-workers 3 --json "$work/z.json" 127.0.0.1 localhost \
		>"$work/zout" 2>&1
	zrc=$?
	grep 'registered arena' "$work/zout" | sed 's/^/  /'
	check_json_run qpgate-kvbench $zrc "$work/z.json"
	check "--register: all 12 one-sided GETs of 6 MiB READ straight into the arena, verified" \
		j '.results.runs[0].gets == 12 and .results.runs[0].zero_copy_gets == 12 and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0'
	kill -TERM "$srv"; wait "$srv"
	read -r srv port mport <<<"$keep"
fi
# The check can fail: a key that holds other bytes than kvbench's (the
# seed is the key's number, 0 here) makes every GET of it a mismatch, and
# kvbench exit 1. 64 KiB, one-sided over rdma: the pieces of one READ.
mode=two-sided
[ "$transport" = rdma ] && mode=one-sided
"$bin/qpgate-kv" --synthetic --transport "$transport" --ca "$work/ca.crt" -p "$port" 127.0.0.1 localhost \
	put kv-00000000 64K 99 >/dev/null 2>&1
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" -n 20 --no-preload \
	--num-keys 1 --value-size 65536 --get-mode "$mode" --num-workers 2 --num-clients 1 --threads 1 \
	--json "$work/m.json" 127.0.0.1 localhost >"$work/mout" 2>&1
mrc=$?
qpg_json_file=$work/m.json
check "a value kvbench did not write: exit 1 (exit $mrc)" [ $mrc -eq 1 ]
check "... and all 20 $mode GETs of it are mismatches, none an error" \
	j '.results.runs[0].mismatches == 20 and .results.runs[0].gets == 0 and .results.runs[0].errors == 0'
kill -TERM "$srv"; wait "$srv"; src=$?; srv=""
grep 'stats:' "$work/server.log" | sed 's/^/  /'
check "server exit 0" [ $src -eq 0 ]
# A preload the server refuses (its store full, eviction off: 3,000 x 4
# KiB into 1 MiB)
# ends the run with an error. It once hung: the slot it took for the next
# PUT stayed busy, and the last wait never ended.
mkdir -p "$work/full"
srv_cert=$work/server.crt srv_key=$work/server.key qpg_serve "$work/full" --transport "$transport" --service kv --kv-capacity 1M \
	--kv-eviction none
timeout 60 "$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" -D 1 \
	--num-keys 3000 --value-size 4096 127.0.0.1 localhost >"$work/fout" 2>&1
frc=$?
check "a refused preload: exit 1 with the reason, not a hang (exit $frc)" \
	eval '[ $frc -eq 1 ] && grep -q "preload failed: the server refused a PUT" "$work/fout"'
kill -TERM "$srv"; wait "$srv"; srv=""
check "server: no authentication failures" grep -q 'auth_failures=0 seq_failures=0' "$work/server.log"

# The prefix workload: 600 turns of 1,000 zipf prompts of 1 to 16 blocks of
# 4 KiB (2 shared per family of 8), into a 2 MiB store: the turns touch
# several times that, so eviction chooses. Each block of a turn is either read
# (verified) or stored; the server saw every key the lookups asked about;
# the same turns through an exact LRU of the same room give a ratio too.
mkdir -p "$work/pfx"
srv_cert=$work/server.crt srv_key=$work/server.key qpg_serve "$work/pfx" --transport "$transport" --service kv \
	--kv-capacity 2M -s 8192 --metrics 127.0.0.1:0
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" -p "$port" --workload prefix -n 600 \
	--num-keys 1000 --blocks 16 --shared-blocks 2 --dist zipf --num-workers 8 --lru-capacity 2M \
	--json "$work/p.json" 127.0.0.1 localhost >"$work/pxout" 2>&1
prc=$?
grep prefix: "$work/pxout" | sed 's/^/  /'
check_json_run qpgate-kvbench $prc "$work/p.json"
blocks=$(jq '.results.runs[0].prefix.blocks' "$work/p.json")
check "prefix: 600 turns, 600 lookups, 600 to 9600 blocks ($blocks), no mismatch or error" \
	j '.parameters.workload == "prefix" and .results.runs[0].prefix.turns == 600 and .results.runs[0].prefix.lookups == 600 and .results.runs[0].prefix.blocks >= 600 and .results.runs[0].prefix.blocks <= 9600 and .results.runs[0].mismatches == 0 and .results.runs[0].errors == 0'
check "prefix: every block read or stored, once (GETs + PUTs = blocks)" j '.results.runs[0].gets == .results.runs[0].prefix.blocks'
check "prefix: some blocks cached, not all (a 2 MiB store)" \
	j '.results.runs[0].prefix.hit_ratio > 0 and .results.runs[0].prefix.hit_ratio < 1'
check "prefix: an exact LRU's ratio on the same turns, between 0 and 1" \
	j '.results.runs[0].prefix.lru_hit_ratio > 0 and .results.runs[0].prefix.lru_hit_ratio < 1'
# The most popular prompt's first block (its family's system prompt, read
# every few turns): SHA-256 of a zero digest and its id, 0.
first=qpgate-bench-8b/$(head -c 36 /dev/zero | sha256sum | cut -c1-64)
out=$("$bin/qpgate-kv" --transport "$transport" --ca "$work/ca.crt" -p "$port" 127.0.0.1 localhost exists "$first" 2>&1)
check "prefix: keys are a model tag and a chained SHA-256 ($first: ${out##*: })" grep -q '1 of 1 stored' <<<"$out"
curl -fsS "http://127.0.0.1:$mport/metrics" >"$work/pm.txt"
mval() { awk -v k="$1" '$1 == k {print $2}' "$work/pm.txt"; }
asked=$(( $(mval 'qpgate_kv_exists_keys_total{result="stored"}') + $(mval 'qpgate_kv_exists_keys_total{result="absent"}') - 1 ))
check "prefix: the server answered EXISTS for every block the turns asked about ($asked of $blocks)" [ "$asked" -eq "$blocks" ]
check "prefix: the store evicted ($(mval qpgate_kv_evictions_total) keys)" [ "$(mval qpgate_kv_evictions_total)" -gt 0 ]
kill -TERM "$srv"; wait "$srv"; srv=""
finish_checks
