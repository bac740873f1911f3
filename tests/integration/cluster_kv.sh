#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The KV cache over a cluster (tcp transport, on the host), with an etcd of
# its own on loopback: faults under load (kill -9, SIGSTOP, a graceful
# leave, a join), a forged member entry, and the stale-read cases (a frozen
# owner, a key that bounces between members, an owner cut off from etcd).
# Every value returned is verified; asserts states and counts, never times.
#   cluster_kv.sh [tcp|rdma] [all|failover]
# rdma runs in the lab (tests/lab-run): the servers, etcd and clients in one
# VM on one rxe device; "failover" is the kill -9 under load, once with
# two-sided and once with one-sided GETs.
. "$(dirname "$0")/lib.sh"
transport=${1:-tcp} what=${2:-all}
. "$here/scripts/etcd.sh"
qpg_test_setup clusterkv
trap 'qpg_etcd_stop; jobs -p | xargs -r kill -9 2>/dev/null; pkill -9 -f "qpgate-server.*--cluster-name $name" 2>/dev/null; rm -rf "$work"' EXIT
name=kv$$
qpg_etcd_start "$work" || exit 1
echo " etcd at $etcd_url"
cl() { "$bin/qpgate-cluster" --cluster "$etcd_url" --cluster-name "$name" "$@"; }
active() { cl status 2>/dev/null | grep -c " active *$transport " || true; }
wait_active() { # N [SECONDS]
	local i
	for i in $(seq 1 $((${2:-10} * 10))); do
		[ "$(active)" -eq "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
declare -A pids
start() { # start ID [ETCD_URL]: a KV server joining the cluster
	"$bin/qpgate-server" --transport "$transport" --service kv --kv-capacity 64M -s 8192 \
		--cert "$work/server.crt" --key "$work/server.key" -p 0 \
		--cluster "${2:-$etcd_url}" --cluster-name "$name" --cluster-id "$1" \
		--advertise-name localhost --cluster-ttl 3 --metrics 127.0.0.1:0 \
		--port-file "$work/$1.port" "${@:3}" 2>>"$work/$1.log" &
	pids[$1]=$!
}
# refused IDS...: the KV requests these members answered UNAVAILABLE
# because their own view was not known current (fenced, or stale: their
# write to etcd did not come back within the staleness bound), summed
# from their /metrics; a member that cannot be read counts 0.
refused() {
	local id n sum=0
	for id in "$@"; do
		n=$(curl -s -m 5 "http://127.0.0.1:$(awk '{print $2}' "$work/$id.port" 2>/dev/null)/metrics" 2>/dev/null |
			awk '/^qpgate_cluster_kv_refused_total/ {s += $2} END {print s + 0}')
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}
port_of() { cl status | awk -v id="$1" '$1==id {split($2, a, ":"); print a[2]}'; }
rev() { cl status | awk '/view revision/ {print $3+0}'; }
kv() { "$bin/qpgate-kv" --transport "$transport" --ca "$work/ca.crt" "$@"; }
ckv() { kv --cluster "$etcd_url" --cluster-name "$name" --synthetic "$@"; }
# direct PORT REV get KEY SIZE SEED: a lagging client that still routes to
# the member at PORT with a view of revision REV. Prints the server's answer.
direct() {
	local p=$1 r=$2
	shift 2
	kv -p "$p" --test-view-rev "$r" --synthetic 127.0.0.1 localhost "$@" 2>&1 | tail -1
}
# not_verified ANSWER: the answer is anything but a value that verified.
not_verified() { ! grep -q verified <<<"$1"; }
kvbench() { # kvbench OUT SECONDS [FLAGS]: a clustered load, every value checked
	"$bin/qpgate-kvbench" --cluster "$etcd_url" --cluster-name "$name" --transport "$transport" \
		--ca "$work/ca.crt" --num-keys "${num_keys:-3000}" --value-size "${value_size:-1024}" --threads 1 \
		--num-workers 8 -D "$2" --json "$1.json" "${@:3}" >"$1" 2>&1
}
# bench_ok OUT: exit 0, no error, no value that failed its check.
bench_ok() {
	check "$2: kvbench exit 0 (exit $3)" [ "$3" -eq 0 ]
	check "$2: every value verified (0 mismatches, 0 errors)" grep -q " 0 mismatches, 0 errors" "$1"
}
# load_running OUT: waits (60 s at most) until kvbench's load has begun: its
# connects and preload can outlast a fixed sleep under emulation, and a
# fault that lands before the load has nothing to fail.
load_running() {
	local i
	for i in $(seq 1 600); do
		grep -q "^kvbench: load running" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "   (kvbench's load never began: $1)"
	return 1
}
# tcp_proxy_up LISTEN_PORT TARGET_PORT NAME: starts a tcp_proxy ($tcp_proxy)
# and waits until it listens.
tcp_proxy_up() {
	rm -f "$work/$3.ready"
	"$bin/tcp_proxy" "$1" "$2" "$work/$3.ready" &
	tcp_proxy=$!
	local i
	for i in $(seq 1 150); do
		[ -e "$work/$3.ready" ] && return 0
		kill -0 $tcp_proxy 2>/dev/null || break
		sleep 0.1
	done
	echo "   the proxy $3 did not come up on port $1"
	return 1
}
member_col() { # member_col OUT ID COLUMN: from kvbench's member table
	awk -v id="$2" -v c="$3" '$1==id && NF==8 {print $c}' "$1"
}

for i in 1 2 3; do start m$i; done
check "three KV members active" wait_active 3

# failover LABEL [kvbench FLAGS]: kill -9 m2 under load, then start it again.
failover() {
	local label=$1
	shift
	echo "== kill -9 one member under load ($label)"
	# The keys first, in a run of their own, and the kill 2 s into the load
	# (load_running): under emulation the connects alone can outlast a fixed
	# sleep, and m2's lease then ends before the load begins.
	kvbench "$work/b0" 1 "$@" || echo "   (the preload run exited $?)"
	kvbench "$work/b1" 10 --no-preload "$@" &
	local b=$!
	load_running "$work/b1"
	sleep 2
	kill -9 "${pids[m2]}"
	wait "${pids[m2]}" 2>/dev/null
	wait $b
	local rc=$?
	bench_ok "$work/b1" "kill -9, $label" $rc
	check "kill -9, $label: m2's keys were UNAVAILABLE, not rerouted, until its lease ended" \
		[ "$(member_col "$work/b1" m2 5)" -gt 0 ]
	check "kill -9, $label: then the survivors served them (misses filled again)" \
		grep -Eq "cluster: [1-9][0-9]* misses" "$work/b1"
	check "kill -9, $label: no survivor was sent m2's keys meanwhile (0 wrong owner)" \
		[ "$(member_col "$work/b1" m1 6)$(member_col "$work/b1" m3 6)" = 00 ]
	check "kill -9, $label: kvbench saw the view lose m2" grep -q "2 members, 2 active" "$work/b1"
	grep -E "view change|misses|unavailable" "$work/b1" | sed 's/^/   /'
	start m2
	check "m2 comes back (3 active)" wait_active 3
}
if [ "$transport" = rdma ]; then
	num_keys=300 value_size=65536 failover "one-sided GETs of 64 KiB" --get-mode one-sided
	failover "two-sided GETs" --get-mode two-sided
else
	failover "tcp"
fi
[ "$what" = failover ] && { echo "== (failover only)"; finish_checks; }

echo "== SIGSTOP one member (a hang) under load, SIGCONT later"
kvbench "$work/b2" 12 &
b=$!
load_running "$work/b2"
sleep 2
kill -STOP "${pids[m3]}"
sleep 6
kill -CONT "${pids[m3]}"
wait $b
rc=$?
bench_ok "$work/b2" "SIGSTOP" $rc
check "SIGSTOP: m3's keys were UNAVAILABLE meanwhile" [ "$(member_col "$work/b2" m3 5)" -gt 0 ]
check "SIGSTOP: m3 registered again after SIGCONT" bash -c "grep -q 'registered again' '$work/m3.log'"
check "m3 active again" wait_active 3

echo "== a graceful leave under load"
kvbench "$work/b3" 8 &
b=$!
load_running "$work/b3"
sleep 2
kill -TERM "${pids[m1]}"
wait "${pids[m1]}"
lrc=$?
wait $b
rc=$?
check "m1 left with exit 0 (exit $lrc)" [ $lrc -eq 0 ]
bench_ok "$work/b3" "graceful leave" $rc
check "graceful leave: kvbench saw m1 draining or gone" grep -q "3 members, 2 active\|2 members, 2 active" "$work/b3"
start m1
check "m1 back (3 active)" wait_active 3

echo "== a fourth member joins under load: about a quarter of the keys move"
# The keys first, in a run of their own (as the failover's): a preload that
# outlasts the 2 s before the join (a sanitizer build's does) puts keys on
# owners that lose them at once, and counts its own UNAVAILABLE answers.
# A member whose 3 s lease lapses under the machine's other load comes back
# with an empty store, and its keys are refilled too: not the join's doing.
# When one of m1-m3 logged a lost lease during the join, m4 leaves and the
# join is measured once more (at most twice in all).
# m4's connects are held back, as a loaded host's can be: clients reach it
# through a proxy that stays stopped for 1 s after m4 is active, so their
# pools to it come up late. Its keys wait for the pool meanwhile (never
# UNAVAILABLE for that: CI39 of 2026-11-30 saw 3.7% when they were).
join_m4() {
	local p4 pp4
	p4=$(qpg_free_port) pp4=$(qpg_free_port)
	tcp_proxy_up "$pp4" "$p4" m4proxy || return 1
	kill -STOP $tcp_proxy
	start m4 "$etcd_url" -p "$p4" --advertise "127.0.0.1:$pp4"
	wait_active 4 10 || echo "   (m4 not active within 10 s)"
	sleep 1
	kill -CONT $tcp_proxy
}
lapses() { cat "$work"/m1.log "$work"/m2.log "$work"/m3.log 2>/dev/null | grep -c "lease lost" || true; }
for try in 1 2; do
	l0=$(lapses)
	kvbench "$work/b4p" 1 || echo "   (the preload run exited $?)"
	r0=$(refused m1 m2 m3 m4)
	kvbench "$work/b4" 8 --no-preload &
	b=$!
	load_running "$work/b4"
	sleep 2
	join_m4
	wait $b
	rc=$?
	r1=$(refused m1 m2 m3 m4)
	[ "$(lapses)" -eq "$l0" ] || [ $try -eq 2 ] && break
	echo "   a lease of m1-m3 lapsed during the join (their logs say 'lease lost'): m4 leaves, and the join runs again"
	kill -TERM "${pids[m4]}" $tcp_proxy
	wait "${pids[m4]}"
	wait_active 3 20 || echo "   (not 3 active again within 20 s)"
done
bench_ok "$work/b4" "join" $rc
refills=$(awk '/^ cluster: [0-9]+ misses/ {print $2}' "$work/b4")
echo "   $refills of 3000 keys were missed once and filled again on their new owner"
check "join: between 20% and 30% of the keys moved ($refills of 3000)" \
	eval '[ "${refills:-0}" -ge 600 ] && [ "${refills:-0}" -le 900 ]'
# A join may answer a few GETs UNAVAILABLE while the members' views catch
# up with the clients' (one loop thread at a time waits for that): a few,
# never an error. With requests for m4 failing fast until its pool is up
# (the fix switched off), this read 5.5% and 6.0% of the GETs.
# Not counted against the join: requests the members refused because
# their own view was not known current (their metrics say how many). That
# is the staleness bound at work on a machine whose etcd answers late, as
# on a loaded CI host: CI of 2026-12-01 saw m1-m3 refuse about 7,100 GETs
# each, 25% of all. (etcd stopped for 2 s during the join reproduces it:
# 24,574 UNAVAILABLE of 89,614 GETs, all of them the members' refusals.)
unav=$(awk '/^ cluster: [0-9]+ misses/ {print $(NF-1)}' "$work/b4")
gets=$(awk '/GETs verified/ {print $1}' "$work/b4")
own=$((r1 - r0))
echo "   $unav of $gets GETs were UNAVAILABLE during the join ($own of them refused by a member for a view not known current); by member:"
awk '$1 ~ /^m[0-9]$/ && NF == 8' "$work/b4" | sed 's/^/   /'
unav=$((${unav:-999999999} - own))
check "join: at most 2% of the GETs were UNAVAILABLE for the join ($unav of $gets)" [ "$unav" -le $((${gets:-0} / 50)) ]
# While the proxy held m4's connects back, its keys' requests waited for
# its pool: the client counts them (POOL_WAITS), so the wait was exercised.
w4=$(member_col "$work/b4" m4 8)
check "join: requests for m4's keys waited for its pool ($w4, POOL_WAITS)" [ "${w4:-0}" -gt 0 ]

echo "== a member asked for a key it does not own answers WRONG_OWNER"
key=direct-1
check "the key written through the cluster" ckv put "$key" 512 7
owner=$(cl owner "$key" | awk '{print $2}')
other=m1
[ "$owner" = m1 ] && other=m3
ans=$(direct "$(port_of $other)" 0 get "$key" 512 7)
echo "   GET $key from $other (the owner is $owner): $ans"
check "a GET at a non-owner is answered wrong owner" grep -q "wrong owner" <<<"$ans"
ans=$(direct "$(port_of $other)" 0 put "$key" 512 8)
check "a PUT at a non-owner is answered wrong owner" grep -q "wrong owner" <<<"$ans"
ans=$(direct "$(port_of $other)" 0 exists "$key" "$key")
check "an EXISTS at a non-owner is answered wrong owner, not 'absent'" grep -q "wrong owner" <<<"$ans"
ans=$(ckv exists "$key" 2>&1 | tail -1)
check "through the cluster, EXISTS finds it on its owner ($ans)" grep -q "1 of 1 stored" <<<"$ans"
check "the owner still has the value written through the cluster" ckv get "$key" 512 7

echo "== stale reads: a frozen owner (SIGSTOP past its lease)"
key=frozen-1
owner=$(cl owner "$key" | awk '{print $2}')
oport=$(port_of "$owner")
r1=$(rev)
check "v1 written through the cluster" ckv put "$key" 512 1
# A reader already connected to the owner, whose GET is waiting in the
# owner's socket when it wakes: the first thing the woken owner does.
rm -f "$work/go"
kv -p "$oport" --test-view-rev "$r1" --test-wait-file "$work/go" --synthetic 127.0.0.1 localhost \
	get "$key" 512 1 >"$work/frozen.out" 2>&1 &
reader=$!
sleep 1
kill -STOP "${pids[$owner]}"
check "its lease ends: 3 active without it" wait_active 3 10
check "v2 written through the new owner" ckv put "$key" 512 2
touch "$work/go"
sleep 0.5
kill -CONT "${pids[$owner]}"
wait $reader
ans=$(tail -1 "$work/frozen.out")
echo "   a reader that still routes to $owner, connected before the freeze: $ans"
check "the woken owner never serves v1 (unavailable, wrong owner or not found)" \
	not_verified "$ans"
ans=$(direct "$oport" "$r1" get "$key" 512 1)
echo "   a reader that connects after the wake: $ans"
check "nor later" not_verified "$ans"
check "the cluster serves v2" ckv get "$key" 512 2
wait_active 4 10

echo "== stale reads: a key bounces A -> D -> A twice, with writes between"
# A key that m4 owns: without m4 it goes back to where it was.
for k in $(seq 1 200); do
	[ "$(cl owner "bounce-$k" | awk '{print $2}')" = m4 ] && break
done
key=bounce-$k
for round in 1 2; do
	kill -TERM "${pids[m4]}"
	wait "${pids[m4]}"
	wait_active 3 10
	a=$(cl owner "$key" | awk '{print $2}')
	aport=$(port_of "$a")
	ra=$(rev)
	ckv put "$key" 512 $((10 * round + 1)) >/dev/null 2>&1
	start m4
	wait_active 4 10
	check "round $round: $key is m4's again" [ "$(cl owner "$key" | awk '{print $2}')" = m4 ]
	ckv put "$key" 512 $((10 * round + 2)) >/dev/null 2>&1
	kill -TERM "${pids[m4]}"
	wait "${pids[m4]}"
	wait_active 3 10
	ans=$(direct "$aport" "$ra" get "$key" 512 $((10 * round + 1)))
	echo "   round $round: a reader with the view from before m4 joined asks $a: $ans"
	check "round $round: $a never serves the value older than m4's write" \
		not_verified "$ans"
	ans=$(direct "$(port_of "$(cl owner "$key" | awk '{print $2}')")" 0 get "$key" 512 $((10 * round + 1)))
	check "round $round: nor does the key's owner now" not_verified "$ans"
	start m4
	wait_active 4 10
done

echo "== stale reads: an owner cut off from etcd until its lease ends"
proxy_port=$(qpg_free_port)
etcd_port=${etcd_url##*:}
# proxy_up: (re)starts the proxy on $proxy_port and waits until it listens.
proxy_up() {
	tcp_proxy_up "$proxy_port" "$etcd_port" proxy || return 1
	proxy=$tcp_proxy
}
check "the proxy to etcd listens (port $proxy_port)" proxy_up
start m5 "http://127.0.0.1:$proxy_port" --cluster-ttl 10
check "m5 joins through the proxy" wait_active 5 10

echo "== stale reads: a member whose view lags (its link to etcd stalls) catches up first"
# Keys m5 owns while m4 is away, of which m4 takes one when it returns.
kill -TERM "${pids[m4]}"
wait "${pids[m4]}"
wait_active 4 10
cands=""
for k in $(seq 1 300); do
	[ "$(cl owner "lag-$k" | awk '{print $2}')" = m5 ] && cands="$cands lag-$k"
done
start m4
wait_active 5 10
key=""
for k in $cands; do
	[ "$(cl owner "$k" | awk '{print $2}')" = m4 ] && key=$k && break
done
check "a key moves from m5 to m4 when m4 returns ($key)" [ -n "$key" ]
kill -TERM "${pids[m4]}"
wait "${pids[m4]}"
wait_active 4 10
check "v1 written to m5" ckv put "$key" 512 1
r_old=$(rev)
kill -STOP $proxy # m5 hears nothing from etcd now; its lease (10 s) runs on
start m4
check "m4 returns (5 active)" wait_active 5 10
check "v2 written to m4" ckv put "$key" 512 2
ans=$(direct "$(port_of m5)" "$(rev)" get "$key" 512 1)
echo "   a reader with the newest view asks m5, whose view is behind: $ans"
check "m5 does not answer from its older view (it cannot catch up: unavailable)" not_verified "$ans"
# The case a Jepsen-style run found: the reader is cut off from etcd too,
# so its view is as old as m5's, and m5's lease still runs. m5 has not
# known its view current for longer than the staleness bound: it refuses.
ans=$(direct "$(port_of m5)" "$r_old" get "$key" 512 1)
echo "   a reader as cut off as m5 (its view from before m4 returned) asks m5: $ans"
check "m5, cut off past the staleness bound, never serves v1 to it (its lease still runs)" \
	not_verified "$ans"
kill -CONT $proxy
check "m5 catches up and drops the key it lost" bash -c "sleep 2; grep -q 'dropped' '$work/m5.log'"
for k in $(seq 1 200); do
	[ "$(cl owner "cut-$k" | awk '{print $2}')" = m5 ] && break
done
key=cut-$k
port5=$(port_of m5)
r5=$(rev)
check "v1 written to m5" ckv put "$key" 512 1
kill -9 $proxy
wait $proxy 2>/dev/null
check "m5's lease ends (4 active)" wait_active 4 20
check "v2 written through the new owner" ckv put "$key" 512 2
check "the proxy to etcd listens again" proxy_up
check "m5 registers again once it reaches etcd" wait_active 5 15
ans=$(direct "$port5" "$r5" get "$key" 512 1)
echo "   a reader with the old view asks m5: $ans"
check "m5 never serves v1 again" not_verified "$ans"
check "m5 said it lost its lease" grep -q "lease lost" "$work/m5.log"

echo "== a forged member entry: the right CA and name, another key"
# An impostor with a certificate from the same CA for the same name, but
# its own key, holding its own value for a key; its entry is written to
# etcd by hand, as whoever can write to etcd could.
(cd "$work" && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
	-keyout evil.key -out evil.csr 2>/dev/null &&
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >evil.ext &&
	openssl x509 -req -in evil.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile evil.ext \
		-out evil.crt 2>/dev/null)
srv_cert=$work/evil.crt srv_key=$work/evil.key qpg_serve "$work" --transport tcp --service kv -s 8192
evil=$port
# m1's entry, with the SPKI it pins (a keepalive late under load may have
# it re-registering this moment: wait for it, 10 s at most).
spki=""
for _ in $(seq 1 100); do
	spki=$(etcdctl --endpoints "$etcd_url" get "/qpgate/$name/members/m1" --print-value-only | jq -r '.spki_sha256 // empty')
	[ ${#spki} -eq 64 ] && break
	sleep 0.1
done
check "m1's entry is in etcd, with the SPKI to forge from" [ ${#spki} -eq 64 ]
entry=$(jq -cn --arg spki "$spki" --argjson port "$evil" \
	'{v:1,id:"forged",host:"127.0.0.1",port:$port,transport:"tcp",tls_name:"localhost",
	  incarnation:"0123456789abcdef",state:"active",weight:1000,clients:0,max_clients:1,spki_sha256:$spki}')
for k in $(seq 1 100); do
	kv -p "$evil" --synthetic 127.0.0.1 localhost put "forged-$k" 512 66 >/dev/null 2>&1
done
etcdctl --endpoints "$etcd_url" put "/qpgate/$name/members/forged" "$entry" >/dev/null
sleep 1
for k in $(seq 1 100); do
	[ "$(cl owner "forged-$k" | awk '{print $2}')" = forged ] && break
done
ckv get "forged-$k" 512 66 >"$work/forged.out" 2>&1
echo "   GET forged-$k through the cluster: $(tail -1 "$work/forged.out")"
check "the impostor's value is never served (its key does not match the pinned SPKI)" \
	bash -c "! grep -q verified '$work/forged.out'"
check "the client said why: the SPKI pin" grep -q "SPKI pin" "$work/forged.out"
etcdctl --endpoints "$etcd_url" del "/qpgate/$name/members/forged" >/dev/null
kill -9 "$srv" 2>/dev/null
srv=""

echo "== leaving: every member exits 0 and its entry goes"
for id in "${!pids[@]}"; do
	kill -0 "${pids[$id]}" 2>/dev/null && kill -TERM "${pids[$id]}"
done
fails=0
for id in "${!pids[@]}"; do
	wait "${pids[$id]}" || fails=$((fails + 1))
done
check "every member exited 0 on SIGTERM" [ $fails -eq 0 ]
check "no member entry is left" [ "$(etcdctl --endpoints "$etcd_url" get --prefix "/qpgate/$name/members/" --keys-only | grep -c .)" -eq 0 ]
kill -9 $proxy 2>/dev/null
finish_checks
