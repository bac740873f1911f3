#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# A cluster of qpgate servers (tcp transport, on the host) with an etcd of
# its own on loopback: what membership does when servers join, clash, leave,
# die, freeze, and when etcd itself stops. Asserts states and counts, never
# times (the times it prints are for reading).
. "$(dirname "$0")/lib.sh"
. "$here/scripts/etcd.sh"
qpg_test_setup cluster
trap 'qpg_etcd_stop; jobs -p | xargs -r kill -9 2>/dev/null; rm -rf "$work"' EXIT
name=t$$
cl() { "$bin/qpgate-cluster" "$@" --cluster "$etcd_url" --cluster-name "$name"; }
# member_count STATE: members in that state now (any state: "").
member_count() { cl status 2>/dev/null | grep -c " ${1:-[a-z]*} *tcp " || true; }
# wait_for N STATE SECONDS: until N members are in STATE (bounded).
wait_for() {
	local i
	for i in $(seq 1 $((${3} * 10))); do
		[ "$(member_count "$2")" -eq "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
declare -A pids
start() { # start ID [flags]: a tcp server joining the cluster
	local id=$1
	shift
	"$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" -p 0 \
		--cluster "$etcd_url" --cluster-name "$name" --cluster-id "$id" --advertise-name localhost \
		--cluster-ttl 3 --metrics 127.0.0.1:0 --port-file "$work/$id.port" "$@" 2>"$work/$id.log" &
	pids[$id]=$!
}
metric() { # metric ID NAME: its value in the member's /metrics
	curl -s "http://127.0.0.1:$(awk '{print $2}' "$work/$1.port")/metrics" | awk -v n="$2" '$1==n {print $2}'
}

echo "== etcd unreachable at start: a clear error, exit 1"
"$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" -p 0 \
	--cluster http://127.0.0.1:1 --cluster-name "$name" 2>"$work/nohost.log"
rc=$?
check "server exits 1 when etcd cannot be reached (exit $rc)" [ $rc -eq 1 ]
check "its error says etcd cannot be reached" grep -q "cannot register with etcd" "$work/nohost.log"
"$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" -p 0 \
	--cluster http://127.0.0.1:1 --cluster-name 'bad/name' 2>"$work/badname.log"
check "a bad cluster name is a usage error that says why" grep -q "is not 1 to 63 of" "$work/badname.log"

qpg_etcd_start "$work" || exit 1
echo " etcd at $etcd_url"

echo "== three members join; a watcher started first sees each one"
cl watch -D 30 --until-active 3 >"$work/watch1.log" 2>&1 &
watcher=$!
sleep 0.5
t0=$(date +%s.%N)
# kv2's lease is 10 s: it is killed with -9 below, and the clients that
# must find it refusing need it listed the whole time they pick, however
# slow the run (with 3 s, a loaded CI run saw its entry go after a few
# of the 20, and none of those had tried it).
start kv1
start kv2 --cluster-ttl 10
start kv3
wait $watcher
rc=$?
check "the watcher saw 3 active members (exit $rc)" [ $rc -eq 0 ]
t1=$(awk '/ 3 active/ {print $1; exit}' "$work/watch1.log")
echo " registration to view, all three: $(echo "$t1 - $t0" | bc) s (printed, not asserted)"
check "status lists 3 active members" [ "$(member_count active)" -eq 3 ]
cl status
cl status --json "$work/status.json" >/dev/null
check "status --json has the tools' schema and 3 members" \
	bash -c "'$bin/json_check' '$work/status.json' && jq -e '.results.members | length == 3' '$work/status.json' >/dev/null"
check "each entry carries the certificate's SPKI hash, and no secret" \
	bash -c "etcdctl --endpoints '$etcd_url' get --prefix /qpgate/$name/members/ --print-value-only | jq -e -s 'all(.[]; (.spki_sha256 | test(\"^[0-9a-f]{64}$\")) and (keys - [\"v\",\"id\",\"host\",\"port\",\"transport\",\"tls_name\",\"incarnation\",\"state\",\"weight\",\"clients\",\"max_clients\",\"spki_sha256\"] == []))' >/dev/null"
cl spread -n 30000 | tee "$work/spread.txt"
check "30,000 keys spread with max/mean <= 1.1" \
	awk '/max\/mean/ {exit !($NF <= 1.1)}' "$work/spread.txt"

echo "== a duplicate ID is refused at start, and the first keeps its entry"
inc_before=$(cl status | awk '$1=="kv1" {print $NF}')
# (bounded: a duplicate that wrongly started would run until killed, exit 124)
timeout -s KILL 20 "$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" -p 0 \
	--cluster "$etcd_url" --cluster-name "$name" --cluster-id kv1 2>"$work/dup.log"
rc=$?
check "the duplicate exits 1 (exit $rc)" [ $rc -eq 1 ]
check "its error names the ID and who holds it" grep -q "member ID 'kv1' is already registered in this cluster (by" "$work/dup.log"
check "kv1's entry is untouched (same incarnation)" [ "$(cl status | awk '$1=="kv1" {print $NF}')" = "$inc_before" ]

echo "== a graceful leave: draining, then gone without waiting for the lease"
cl watch -D 20 >"$work/watch2.log" 2>&1 &
watcher=$!
sleep 0.3
kill -TERM "${pids[kv3]}"
wait "${pids[kv3]}"
rc=$?
check "kv3 exits 0 on SIGTERM (exit $rc)" [ $rc -eq 0 ]
check "kv3's entry is gone at once (lease revoked): 2 members" [ "$(member_count)" -eq 2 ]
check "the watcher saw kv3 draining before it left" grep -q "kv3 draining" "$work/watch2.log"
check "kv3 logged its leave" grep -q "left (lease revoked)" "$work/kv3.log"
kill $watcher 2>/dev/null

echo "== kill -9: the entry stays until its lease ends, then goes"
kill -9 "${pids[kv2]}"
wait "${pids[kv2]}" 2>/dev/null
check "right after kill -9, kv2 is still listed (its lease runs)" [ "$(member_count)" -eq 2 ]
# Clients that pick a member meanwhile: kv2 refuses, another is taken.
ok=0
for i in $(seq 1 20); do
	"$bin/qpgate-client" --transport tcp --ca "$work/ca.crt" -n 5 --cluster "$etcd_url" \
		--cluster-name "$name" >>"$work/pick.out" 2>&1 && ok=$((ok + 1))
done
check "20 qpgate-client --cluster while kv2 is dead: all 20 echo through kv1 ($ok)" [ $ok -eq 20 ]
check "they found kv2 refusing and took another member" grep -q "member kv2 .* refused the connect; another" "$work/pick.out"
check "within the TTL and 3 s more, kv2 is gone" wait_for 1 "" 13

echo "== one port, one server"
port5=$(qpg_free_port)
# A 10 s lease: the dead predecessor's still runs, however slow the run,
# when the restart below comes.
start kv5 -p "$port5" --cluster-ttl 10
check "kv5 joins on port $port5" wait_for 2 active 10
timeout -s KILL 20 "$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" \
	-p "$port5" 2>"$work/second.log"
rc=$?
check "a second server on kv5's port exits 1 (exit $rc)" [ $rc -eq 1 ]
check "its error names the port and what to do" grep -q "port $port5 on .* is in use by another process.*another -p" "$work/second.log"
check "kv5 still runs, alone on its port" kill -0 "${pids[kv5]}"

echo "== kill -9, then a restart at once, as the shipped unit does: the member takes its entry over"
unit=$bin/../systemd/qpgate-server.service
restart_s=$(awk -F= '/^RestartSec=/ {sub(/s$/, "", $2); print $2}' "$unit")
check "the unit restarts a crashed server (Restart=on-failure, RestartSec=${restart_s}s)" \
	bash -c "grep -q '^Restart=on-failure' '$unit' && [ -n '$restart_s' ]"
check "and never gives up (StartLimitIntervalSec=0)" grep -q '^StartLimitIntervalSec=0' "$unit"
inc5=$(cl status | awk '$1=="kv5" {print $NF}')
kill -9 "${pids[kv5]}"
wait "${pids[kv5]}" 2>/dev/null
sleep "${restart_s:-2}" # the unit's pause, well inside the dead lease's 10 s
check "its dead predecessor's entry is still there" [ "$(cl status | awk '$1=="kv5" {print $NF}')" = "$inc5" ]
start kv5 -p "$port5" --cluster-ttl 10
check "the restarted kv5 is active at once" wait_for 2 active 5
sleep 1
check "and keeps running (the first start succeeded)" kill -0 "${pids[kv5]}"
check "it said it took the entry over" grep -q "taken over" "$work/kv5.log"
inc5b=$(cl status | awk '$1=="kv5" {print $NF}')
check "under a new incarnation ($inc5 -> $inc5b)" eval '[ -n "$inc5b" ] && [ "$inc5b" != "$inc5" ]'
sleep 1 # the old lease's revoke (right after the takeover) must not have taken the new entry
check "the entry outlives the old lease" [ "$(cl status | awk '$1=="kv5" {print $NF}')" = "$inc5b" ]
kill -TERM "${pids[kv5]}"
wait "${pids[kv5]}"

echo "== SIGSTOP past the lease: the member fences itself, then comes back under a new incarnation"
start kv4
wait_for 2 active 10
inc4=$(cl status | awk '$1=="kv4" {print $NF}')
kill -STOP "${pids[kv4]}"
check "a frozen member's entry goes when its lease ends" wait_for 1 "" 8
kill -CONT "${pids[kv4]}"
check "it registers again (2 active members)" wait_for 2 active 10
inc4b=$(cl status | awk '$1=="kv4" {print $NF}')
check "under a new incarnation ($inc4 -> $inc4b)" eval '[ -n "$inc4b" ] && [ "$inc4b" != "$inc4" ]'
check "it logged the lost lease" grep -q "lease lost" "$work/kv4.log"

echo "== etcd stopped for 10 s, then restarted: no member leaves the view"
cl watch -D 60 >"$work/watch3.log" 2>&1 &
watcher=$!
sleep 0.5
kill -STOP "$etcd_pid"
sleep 5
check "etcd unreachable: the metric says so (qpgate_cluster_etcd_up 0)" [ "$(metric kv1 qpgate_cluster_etcd_up)" = 0 ]
check "past the TTL without a keepalive, the lease is not known alive" [ "$(metric kv1 qpgate_cluster_lease_alive)" = 0 ]
sleep 5
kill -9 "$etcd_pid"
wait "$etcd_pid" 2>/dev/null
qpg_etcd_run "$work"
for _ in $(seq 1 100); do curl -s -m 1 "$etcd_url/health" | grep -q true && break; sleep 0.1; done
check "after etcd's restart both members are active again" wait_for 2 active 15
sleep 2
kill $watcher 2>/dev/null
wait $watcher 2>/dev/null
check "the watcher never saw a member leave (every view has 2 members)" \
	bash -c "! grep 'view revision' '$work/watch3.log' | grep -vq ': 2 members'"
check "the servers said etcd was unreachable, and reachable again" \
	bash -c "grep -q 'etcd unreachable' '$work/kv1.log' && grep -q 'etcd reachable again' '$work/kv1.log'"
check "both servers are still running" kill -0 "${pids[kv1]}" "${pids[kv4]}"
check "etcd reachable again: qpgate_cluster_etcd_up 1, the lease alive" \
	bash -c "[ \"\$(curl -s http://127.0.0.1:$(awk '{print $2}' "$work/kv1.port")/metrics | grep -E '^qpgate_cluster_(etcd_up|lease_alive) ' | awk '{s+=\$2} END {print s}')\" = 2 ]"

# leaves_on_its_etcd PID WHAT ETCD_PID: the member leaves with exit 0 on
# SIGTERM, then the etcd of its own section stops.
leaves_on_its_etcd() {
	kill -TERM "$1"
	wait "$1"
	local rc=$?
	check "the $2 member leaves with exit 0 (exit $rc)" [ $rc -eq 0 ]
	kill "$3" 2>/dev/null
	wait "$3" 2>/dev/null
}

echo "== etcd over TLS with client certificates"
plain_url=$etcd_url plain_pid=$etcd_pid
mkdir -p "$work/tls"
cp "$work/ca.crt" "$work/ca.key" "$work/client.crt" "$work/client.key" "$work/tls/"
qpg_etcd_start "$work/tls" tls || exit 1
tls_url=$etcd_url tls_pid=$etcd_pid
etcd_url=$plain_url etcd_pid=$plain_pid
tlsflags=(--cluster "$tls_url" --cluster-name "$name" --cluster-ca "$work/ca.crt"
	--cluster-cert "$work/client.crt" --cluster-key "$work/client.key")
"$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" -p 0 \
	"${tlsflags[@]}" --cluster-id tls1 --advertise-name localhost 2>"$work/tls1.log" &
tls1=$!
ok=1
for _ in $(seq 1 50); do
	"$bin/qpgate-cluster" "${tlsflags[@]}" status 2>/dev/null | grep -q " tls1 .* active" && ok=0 && break
	sleep 0.1
done
check "a member registers over TLS with a client certificate, and a client reads it" [ $ok -eq 0 ]
check "no plain-http warning over https" bash -c "! grep -q 'plain http' '$work/tls1.log'"
"$bin/qpgate-server" --transport tcp --cert "$work/server.crt" --key "$work/server.key" -p 0 \
	--cluster "$tls_url" --cluster-name "$name" --cluster-ca "$work/ca.crt" --cluster-id tls2 \
	2>"$work/tls2.log"
rc=$?
check "without a client certificate etcd refuses, and the server exits 1 (exit $rc)" [ $rc -eq 1 ]
check "its error says it cannot register with etcd" grep -q "cannot register with etcd" "$work/tls2.log"
leaves_on_its_etcd "$tls1" TLS "$tls_pid"

echo "== etcd's users: a server that may write the cluster's keys, a client that may only read them"
mkdir -p "$work/auth"
qpg_etcd_start "$work/auth" || exit 1
auth_url=$etcd_url auth_pid=$etcd_pid
etcd_url=$plain_url etcd_pid=$plain_pid
ectl() { etcdctl --endpoints "$auth_url" "$@" >>"$work/auth.log" 2>&1; }
printf 'rootpw\n' >"$work/root.pw"
printf 'srvpw\n' >"$work/server.pw"
printf 'readpw\n' >"$work/reader.pw"
auth_setup() {
	ectl user add root:rootpw && ectl user add server:srvpw && ectl user add reader:readpw &&
		ectl role add qpgate-server && ectl role add qpgate-reader &&
		ectl role grant-permission qpgate-server --prefix=true readwrite "/qpgate/$name/" &&
		ectl role grant-permission qpgate-reader --prefix=true read "/qpgate/$name/" &&
		ectl user grant-role server qpgate-server && ectl user grant-role reader qpgate-reader &&
		ectl auth enable
}
check "etcd's users and roles set up, auth on" auth_setup
as() { echo --cluster "$auth_url" --cluster-name "$name" --cluster-user "$1" --cluster-password-file "$work/$1.pw"; }
"$bin/qpgate-server" --transport tcp --service kv --cert "$work/server.crt" --key "$work/server.key" -p 0 \
	$(as server) --cluster-id auth1 --advertise-name localhost 2>"$work/auth1.log" &
auth1=$!
ok=1
for _ in $(seq 1 50); do
	"$bin/qpgate-cluster" $(as reader) status 2>/dev/null | grep -q " auth1 .* active" && ok=0 && break
	sleep 0.1
done
check "a server registers as etcd's user 'server', and a client reads the view as 'reader'" [ $ok -eq 0 ]
sleep 1.2 # the new member's first keys wait the staleness bound
kvr() { "$bin/qpgate-kv" --transport tcp --ca "$work/ca.crt" $(as reader) --synthetic "$@"; }
kvr put ro-1 512 3 >"$work/ro.out" 2>&1 && kvr get ro-1 512 3 >>"$work/ro.out" 2>&1
rc=$?
check "the read-only client puts and gets through the cluster (exit $rc)" [ $rc -eq 0 ]
check "the reader's role cannot write under the cluster's prefix (etcd refuses)" \
	bash -c "! etcdctl --endpoints '$auth_url' --user reader:readpw put '/qpgate/$name/members/x' y 2>/dev/null"
check "nothing under the prefix but the member and its sync key: the client wrote nothing" \
	[ "$(etcdctl --endpoints "$auth_url" --user root:rootpw get --prefix "/qpgate/$name/" --keys-only | grep -c .)" -eq 2 ]
timeout -s KILL 20 "$bin/qpgate-server" --transport tcp --service kv --cert "$work/server.crt" \
	--key "$work/server.key" -p 0 $(as reader) --cluster-id auth2 2>"$work/auth2.log"
rc=$?
check "a server with the reader's role cannot register: exit 1 (exit $rc)" [ $rc -eq 1 ]
check "and says etcd refused it" grep -q "permission denied" "$work/auth2.log"
printf 'wrong\n' >"$work/bad.pw"
timeout -s KILL 20 "$bin/qpgate-cluster" --cluster "$auth_url" --cluster-name "$name" --cluster-user reader \
	--cluster-password-file "$work/bad.pw" status >"$work/badpw.log" 2>&1
check "a wrong password is an error that names the user and the file to check" \
	grep -q "etcd user 'reader': check its password file" "$work/badpw.log"
leaves_on_its_etcd "$auth1" authenticated "$auth_pid"

echo "== the rest leave; nothing of the cluster is left in etcd but our sync keys"
kill -TERM "${pids[kv1]}" "${pids[kv4]}"
wait "${pids[kv1]}" "${pids[kv4]}"
check "no member entry is left" [ "$(etcdctl --endpoints "$etcd_url" get --prefix /qpgate/$name/members/ --keys-only | grep -c .)" -eq 0 ]
finish_checks
