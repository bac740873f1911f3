#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# KV tenants end to end (rdma in the lab, or tcp): each client certificate
# acts for the tenant a tenants file gives its identity. Keys are the
# tenant's own (GET, EXISTS, DEL, PUT, batches, one-sided GETs); a tenant at
# its quota evicts only its own values; a PUT over its quota gets a status
# of its own; an identity the file does not name is refused at connect; a
# SIGHUP reads the file again without dropping a connection.
#   tenants.sh TRANSPORT
transport=$1
. "$(dirname "$0")/lib.sh"
qpg_test_setup tenants
qp0=$(qps)

# Client certificates from the test CA: A and B by URI SAN (SPIFFE-like),
# carol by CN only, dave by a URI the file does not name.
issue() { "$here/scripts/make-certs" --client "$work" "$@"; } # NAME CN [SAN]
issue a alice URI:spiffe://test/a
issue b bob URI:spiffe://test/b
issue carol carol
issue dave dave URI:spiffe://test/d

# The store holds 6 MiB; A may hold 2 MiB, B 4 MiB. "shared" comes later,
# with the reload.
cat >"$work/tenants.json" <<'EOF'
{"tenants": [{"name": "a", "identities": ["spiffe://test/a"], "quota": "2M"},
             {"name": "b", "identities": ["spiffe://test/b"], "quota": "4M"}]}
EOF
qpg_serve "$work" --transport "$transport" --service kv --client-ca "$work/ca.crt" \
	--kv-tenants "$work/tenants.json" --kv-capacity 6M --kv-max-value 4M -s 8192 \
	--kv-watermarks off --metrics 127.0.0.1:0
# as WHO [FLAG... --] COMMAND...: qpgate-kv with WHO's certificate.
as() {
	local who=$1 f=()
	shift
	if [[ " $* " == *" -- "* ]]; then
		while [ "$1" != -- ]; do f+=("$1"); shift; done
		shift
	fi
	"$bin/qpgate-kv" --synthetic --transport "$transport" --ca "$work/ca.crt" \
		--cert "$work/$who.crt" --key "$work/$who.key" -p "$port" "${f[@]}" 127.0.0.1 localhost "$@"
}
metrics() { curl -fsS "http://127.0.0.1:$mport/metrics"; }
metric() { metrics | awk -v m="$1" '$1 == m { print $2 }'; }

echo "== namespaces"
out=$(as a put k1 4096 1 put k2 4096 2 2>&1)
check "A stores k1 and k2" [ "$(grep -c ': ok, 4096 bytes' <<<"$out")" -eq 2 ]
out=$(as b get k1 exists k1 exists k1 k2 del k1 2>&1)
sed 's/^/  /' <<<"$out"
check "B: A's k1 is a miss (GET)" grep -q '^GET k1: not found' <<<"$out"
check "B: EXISTS of A's k1, and of k1 k2 in one batch: none stored" \
	eval 'grep -q "^EXISTS k1: 0 of 1 stored, prefix 0" <<<"$out" && grep -q "^EXISTS k1 k2: 0 of 2 stored, prefix 0 (00)" <<<"$out"'
check "B: DEL of A's k1 finds nothing" grep -q '^DEL k1: not found' <<<"$out"
out=$(as b put k1 4096 9 get k1 4096 9 2>&1)
check "B: a PUT of k1 makes B's own k1, read back verified" grep -q '^GET k1: ok, .*verified' <<<"$out"
out=$(as a get k1 4096 1 get k2 4096 2 exists k1 k2 2>&1)
sed 's/^/  /' <<<"$out"
check "A: its own k1 untouched by B's PUT and DEL, and k2, verified" [ "$(grep -c '^GET k[12]: ok, .*verified' <<<"$out")" -eq 2 ]
check "A: EXISTS k1 k2 in one batch: both stored, prefix 2" grep -q '^EXISTS k1 k2: 2 of 2 stored, prefix 2 (11)' <<<"$out"
if [ "$transport" = rdma ]; then
	out=$(as b --one-sided -- get k2 2>&1)
	check "one-sided: B's grant request for A's k2 is a miss" grep -q '^GET k2: not found' <<<"$out"
	out=$(as a --one-sided -- get k2 4096 2 2>&1)
	check "one-sided: A's own k2 READ and verified" grep -q '^GET k2: ok, .*verified' <<<"$out"
	out=$(as b --one-sided -- get k1 4096 9 2>&1)
	check "one-sided: B's k1 is B's value (seed 9), verified" grep -q '^GET k1: ok, .*verified' <<<"$out"
fi

out=$(as a --stats -- get k2 4096 2 2>&1)
echo "  $(grep TENANT <<<"$out")"
check "qpgate-kv --stats: A's own tenant, its 2 keys, its quota" \
	grep -Eq '^TENANT a \(server 1 of 1\): 2 keys, 8192 bytes held, 0\.4% of its 2097152-byte quota; [1-9][0-9]* hits' <<<"$out"
check "... and B's, alone (no command)" grep -q '^TENANT b (server 1 of 1): 1 keys' <<<"$(as b --stats -- 2>&1)"

echo "== quotas"
# B stores 3 MiB (under its 4 MiB quota: the largest holder from here on);
# A writes 4 MiB into its 2 MiB.
cmds=()
for i in $(seq 0 11); do cmds+=(put "b$i" 256K "$((i + 20))"); done
as b "${cmds[@]}" >"$work/b.out" 2>&1
check "B stores 12 values of 256 KiB" [ "$(grep -c ': ok, 262144 bytes' "$work/b.out")" -eq 12 ]
cmds=()
for i in $(seq 0 15); do cmds+=(put "a$i" 256K "$((i + 40))"); done
as a "${cmds[@]}" >"$work/a.out" 2>&1
check "A writes 16 values of 256 KiB (4 MiB) into its 2 MiB quota: every PUT ok" \
	[ "$(grep -c ': ok, 262144 bytes' "$work/a.out")" -eq 16 ]
check "A holds at most its quota (metrics)" [ "$(metric 'qpgate_kv_tenant_bytes{tenant="a"}')" -le 2097152 ]
check "A's own keys were evicted, none of B's" \
	eval '[ "$(metric "qpgate_kv_tenant_evictions_total{tenant=\"a\"}")" -gt 0 ] && [ "$(metric "qpgate_kv_tenant_evictions_total{tenant=\"b\"}")" -eq 0 ]'
bgets=()
for i in $(seq 0 11); do bgets+=(get "b$i" 256K "$((i + 20))"); done
check "B's 12 values all read back verified" [ "$(as b "${bgets[@]}" 2>&1 | grep -c ': ok, .*verified')" -eq 12 ]
check "A's newest value reads back verified" grep -q '^GET a15: ok, .*verified' <<<"$(as a get a15 256K 55 2>&1)"
out=$(as a put huge 3M 5 2>&1)
rc=$?
echo "  $out"
check "A's PUT of 3 MiB over its 2 MiB quota: 'over the tenant's quota', not 'store full' (exit $rc)" \
	eval '[ $rc -ne 0 ] && grep -q "^PUT huge: over the tenant.s quota" <<<"$out"'
check "metrics: A's refusal counted (tenant and status)" \
	eval '[ "$(metric "qpgate_kv_tenant_refused_total{tenant=\"a\"}")" -eq 1 ] && [ "$(metric "qpgate_kv_ops_total{op=\"put\",status=\"over_quota\"}")" -ge 1 ]'

echo "== identities"
out=$(as carol get k1 2>&1)
rc=$?
echo "  $out"
check "carol (CN only, not in the file): refused at connect with the reason (exit $rc)" \
	eval '[ $rc -ne 0 ] && grep -q "identity not admitted.*identity \"carol\" has no tenant here" <<<"$out"'
out=$(as dave get k1 2>&1)
check "dave (a URI the file does not name): refused" grep -q 'identity "spiffe://test/d" has no tenant here' <<<"$out"
check "metrics: 2 connects refused for their identity" [ "$(metric 'qpgate_rejections_total{reason="identity"}')" -eq 2 ]

echo "== reload"
# B keeps a pool busy (GETs and PUTs, every value verified) across the
# SIGHUP, which lowers A's quota to 1 MiB, names carol, and makes
# "shared" (no quota) the default for the rest.
closed0=$(metrics | awk '/^qpgate_connections_closed_total/ { s += $2 } END { print s + 0 }')
"$bin/qpgate-kvbench" --transport "$transport" --ca "$work/ca.crt" --cert "$work/b.crt" --key "$work/b.key" \
	-p "$port" --num-clients 2 --num-workers 4 --num-keys 64 --value-size 4096 --put-ratio 20 -D 4 \
	127.0.0.1 localhost >"$work/bench.out" 2>&1 &
bench=$!
sleep 2
cat >"$work/tenants.json" <<'EOF'
{"default": "shared",
 "tenants": [{"name": "a", "identities": ["spiffe://test/a"], "quota": "1M"},
             {"name": "b", "identities": ["spiffe://test/b"], "quota": "4M"},
             {"name": "c", "identities": ["carol"], "quota": "1M"},
             {"name": "shared"}]}
EOF
kill -HUP "$srv"
wait "$bench"
rc=$?
tail -3 "$work/bench.out" | sed 's/^/  /'
check "B's pool ran through the reload: kvbench exit 0, every value verified (exit $rc)" [ $rc -eq 0 ]
check "the server logged the reload" grep -q 'tenants file reloaded' "$work/server.log"
closed1=$(metrics | awk '/^qpgate_connections_closed_total/ { s += $2 } END { print s + 0 }')
check "no connection dropped during it (closed: $closed0 before, $closed1 after, kvbench's own 2 at its end)" \
	[ "$closed1" -le "$((closed0 + 2))" ]
check "A's quota is 1 MiB now (metrics)" [ "$(metric 'qpgate_kv_tenant_quota_bytes{tenant="a"}')" -eq 1048576 ]
out=$(as a put r1 256K 61 get r1 256K 61 2>&1)
check "A's next PUT brings A under its new quota" \
	eval 'grep -q "^GET r1: ok, .*verified" <<<"$out" && [ "$(metric "qpgate_kv_tenant_bytes{tenant=\"a\"}")" -le 1048576 ]'
check "carol is admitted now, as tenant c" grep -q '^PUT c1: ok' <<<"$(as carol put c1 4096 3 2>&1)"
check "dave falls to the default tenant, shared, and cannot see carol's key" \
	eval 'grep -q "^GET c1: not found" <<<"$(as dave put d1 4096 4 get c1 2>&1)" && [ "$(metric "qpgate_kv_tenant_keys{tenant=\"shared\"}")" -eq 1 ]'
# A tenant without a quota (shared) fills the store: its own values go,
# never those of a tenant under its quota, B, which holds the most.
cmds=()
for i in $(seq 0 31); do cmds+=(put "s$i" 256K "$((i + 80))"); done
as dave "${cmds[@]}" >"$work/s.out" 2>&1
check "shared writes 8 MiB into a 6 MiB store: every PUT ok" [ "$(grep -c ': ok, 262144 bytes' "$work/s.out")" -eq 32 ]
check "... B, under its quota, lost nothing" eval '[ "$(metric "qpgate_kv_tenant_evictions_total{tenant=\"b\"}")" -eq 0 ]'
check "... and B's 12 values still read back verified" [ "$(as b "${bgets[@]}" 2>&1 | grep -c ': ok, .*verified')" -eq 12 ]
# A broken file is refused whole: the tenants stay as they were.
echo '{"tenants": [{"name": "a", "quota": "lots"}]}' >"$work/tenants.json"
kill -HUP "$srv"
for _ in $(seq 1 50); do grep -q 'tenants file not reloaded' "$work/server.log" && break; sleep 0.1; done
check "a broken tenants file: not reloaded, with the reason" grep -q 'tenants file not reloaded.*tenants\[0\].quota' "$work/server.log"
check "... and carol is still admitted" grep -q '^GET c1: ok' <<<"$(as carol get c1 4096 3 2>&1)"

qpg_stop_checked "$qp0"

echo "== without a tenants file"
# Each identity a tenant of its own, no quota; here by CN, so alice2 (a
# URI of its own, CN alice) is alice's tenant, and bob is another.
issue alice2 alice URI:spiffe://test/other
qpg_serve "$work" --transport "$transport" --service kv --client-ca "$work/ca.crt" \
	--kv-tenant-from cn --kv-capacity 6M --kv-max-value 1M -s 8192 --metrics 127.0.0.1:0
out=$(as a --stats -- put k 4096 7 2>&1; as b get k exists k 2>&1; as alice2 get k 4096 7 2>&1)
sed 's/^/  /' <<<"$out"
check "by CN: alice's key is a miss for bob, read back verified by another certificate of alice's" \
	eval 'grep -q "^GET k: not found" <<<"$out" && grep -q "^EXISTS k: 0 of 1" <<<"$out" && grep -q "^GET k: ok, .*verified" <<<"$out"'
check "... its tenant is the identity's own, with no quota (--stats)" \
	grep -q '^TENANT alice (an identity of its own) (server 1 of 1): 1 keys, 4096 bytes held, no quota' <<<"$out"
check "metrics: per-identity tenants summed under one label (1 key), none with a label of its own" \
	eval '[ "$(metric "qpgate_kv_tenant_keys{tenant=\"(unlisted)\"}")" -eq 1 ] && ! metrics | grep -q "tenant=\"alice\""'
qpg_stop_checked "$qp0"
finish_checks
