#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Many client processes against one default server.
#   storm.sh TRANSPORT burst N          N default client processes started at
#                                       once against a default server: it
#                                       survives, and every client completes
#                                       (trying again what was transient).
#   storm.sh TRANSPORT kill N ROUNDS [WINDOW_MS]
#                                       each round starts N client processes and
#                                       SIGKILLs each at a random point of its
#                                       first WINDOW_MS (default 3000): its
#                                       start, TLS, bootstrap, QP bring-up or
#                                       data (kill_storm.c), while 5
#                                       bystanders echo; the server stays up,
#                                       the bystanders verify every echo, and
#                                       QPs, fds, connections and RSS return to
#                                       baseline after every round.
transport=$1
mode=$2
n=$3
rounds=${4:-1}
window_ms=${5:-3000}
. "$(dirname "$0")/lib.sh"
qpg_test_setup storm
qp0=$(qps)
# Under ASan, freed memory waits in a quarantine of up to 256 MiB, which
# the RSS check would read as growth: keep it small; and ASan's allocator
# keeps freed chunks in its size classes unless told to give them back
# (lab.storm.kill under make asan: +16.3 MB over baseline without, right at
# the 16 MiB allowance; +13.4 MB with; rounds 2 and 3 add 0.2 to 0.6 MB:
# caches that level off, and LeakSanitizer finds nothing at exit). Both
# ignored without ASan.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4:allocator_release_to_os_interval_ms=100"
qpg_serve "$work" --transport "$transport" --metrics 127.0.0.1:0 || exit 1
rss() { awk '/VmRSS/{print $2}' "/proc/$srv/status"; }
fds() { ls "/proc/$srv/fd" | wc -l; }
client() { "$bin/qpgate-client" --transport "$transport" --ca "$work/ca.crt" -p "$port" "$@" 127.0.0.1 localhost; }
# Wait (bounded) until the server holds WANT connections and its QPs are
# back to QP_WANT.
settle() {
	local want=$1 qp_want=$2
	for _ in $(seq 1 150); do
		[ "$(metric qpgate_connected_clients)" = "$want" ] && [ "$(metric qpgate_handshakes_in_progress)" = 0 ] &&
			[ "$(qps)" -eq "$qp_want" ] && return 0
		sleep 0.2
	done
	return 1
}

case $mode in
burst)
	# As a new user would: default clients against a default server, all
	# at once (kill_storm --no-kill: started by posix_spawn, each to its
	# end; bash forks took 20 s to start 100 in the lab). Those the server
	# cannot take in time try again (--connect-attempts), so every one
	# completes. Their change from the defaults: they keep trying for 240
	# s, not 60 s, up to 30 times, not 10. Under emulation on a loaded CI host the burst is
	# bound by the VM's CPU, which the 100 client processes share with the
	# server: CI of 2026-12-01 took 20 s only to start them, none connected
	# at its first try, and 17 ran out of their 60 s after 6 tries each
	# (83 completed; the server survived, and nothing else failed).
	"$bin/kill_storm" --no-kill --out "$work" "$n" -- "$bin/qpgate-client" --transport "$transport" \
		--ca "$work/ca.crt" -p "$port" -n 20 -s 256 --connect-deadline 240000 \
		--connect-attempts 30 127.0.0.1 localhost >"$work/burst.out"
	sed 's/^/  /' "$work/burst.out"
	ok=$(sed -n 's/.* (\([0-9]*\) with status 0.*/\1/p' "$work/burst.out")
	ok=${ok:-0} other=$((n - ok))
	for f in $(sed -n 's/^kill_storm: child [0-9]* (\(.*\)): .*/\1/p' "$work/burst.out" | head -3); do
		tail -3 "$f" | sed 's/^/  failed: /'
	done
	# Each client says how many connects it took.
	attempts=$(cat "$work"/c*.out | awk '/^ connect attempts/ {print $3}' | sort -n | uniq -c |
		awk '{printf "%s%d x %d", (NR > 1 ? ", " : ""), $1, $2}')
	echo "  $n clients at once: $ok completed, $other failed; connects per client: $attempts"
	check "the server survived $n clients started at once" kill -0 "$srv"
	check "every one of the $n clients completed ($ok)" [ "$ok" -eq "$n" ]
	check "every client said how many connects it took" \
		[ "$(grep -l '^ connect attempts' "$work"/c*.out | wc -l)" -eq "$n" ]
	check "no client saw 'Connection refused' (the server never went away)" \
		bash -c "! grep -l 'Connection refused' '$work'/c*.out"
	check "connections and QPs back to baseline" settle 0 "$qp0"
	;;
kill)
	base_rss=$(rss) base_fds=$(fds)
	echo "  baseline: RSS ${base_rss} kB, $base_fds fds, $qp0 QPs"
	# Bystanders: 5 connections made before the storm, echoing through all
	# of it, however long the rounds take (they stop once the last round
	# has settled); qpgate-perf exits 0 only if all 5 stayed up and every
	# echo verified.
	"$bin/qpgate-perf" --transport "$transport" --ca "$work/ca.crt" -p "$port" -c 5 -D 86400 \
		--stop-file "$work/storm-over" -s 256 --timeout 86400000 127.0.0.1 localhost \
		>"$work/by.out" 2>&1 &
	by=$!
	for _ in $(seq 1 300); do
		[ "$(metric qpgate_connected_clients)" = 5 ] && break
		sleep 0.1
	done
	bad=0 cut_tls=0 cut_after=0
	hs() { metric "qpgate_handshakes_total{result=\"$1\"}"; }
	for r in $(seq 1 "$rounds"); do
		# Each client killed at a random point of its life, 0 to WINDOW_MS
		# after its start (kill_storm.c: started by posix_spawn, as a bash
		# fork costs 0.2 s in the lab and 100 of them took 20 s).
		hs_failed=$(hs failed) hs_ok=$(hs ok)
		"$bin/kill_storm" --max-ms "$window_ms" "$n" -- "$bin/qpgate-client" --transport "$transport" \
			--ca "$work/ca.crt" -p "$port" -n 100000 -s 256 --handshake-timeout 30000 127.0.0.1 localhost |
			sed 's/^/  /'
		# Settled: no handshake left, at most the 5 bystanders connected.
		ok=""
		for _ in $(seq 1 150); do
			[ "$(metric qpgate_handshakes_in_progress)" = 0 ] &&
				[ "$(metric qpgate_connected_clients)" -le 5 ] && { ok=1; break; }
			sleep 0.2
		done
		[ -n "$ok" ] || { bad=$((bad + 1)); curl -fsS "http://127.0.0.1:$mport/metrics" | grep -E '^qpgate_(connected|handshakes_in)' | sed 's/^/  not settled: /'; ss -tnp state established "( sport = :$port )" | tail -n +2 | head -3 | sed 's/^/  socket: /'; }
		# Where the kills landed: handshakes cut (failed), and clients
		# killed after theirs (bootstrap, bring-up, data).
		f=$(hs failed) o=$(hs ok)
		f=$((${f:-0} - ${hs_failed:-0})) o=$((${o:-0} - ${hs_ok:-0}))
		cut_tls=$((cut_tls + f)) cut_after=$((cut_after + o))
		echo "  round $r: of $n, $f killed in their handshake, $o after it; server RSS $(rss) kB, $(fds) fds, $(qps) QPs, connected $(metric qpgate_connected_clients)"
		kill -0 "$srv" || break
	done
	touch "$work/storm-over"
	wait "$by"
	byrc=$?
	grep -E '^ +5 ' "$work/by.out" | head -2 | sed 's/^/  bystanders: /'
	grep -E 'failed: ' "$work/by.out" | head -2 | sed 's/^/  bystanders: /'
	check "the server survived $rounds rounds of $n killed clients" kill -0 "$srv"
	check "every round settled: no handshake left, only bystanders connected ($bad did not)" [ $bad -eq 0 ]
	check "kills landed in handshakes ($cut_tls) and after them ($cut_after)" [ "$cut_tls" -gt 0 -a "$cut_after" -gt 0 ]
	check "bystanders: 5 connections stayed up through the storm, every echo verified (exit $byrc)" [ $byrc -eq 0 ]
	check "connections and QPs back to baseline $qp0" settle 0 "$qp0"
	check "fds back to baseline $base_fds (now $(fds))" [ "$(fds)" -eq "$base_fds" ]
	end_rss=$(rss)
	# Under TSan every page the server ever touched also has shadow pages
	# (several times its size) that are never given back: allow 64 MiB
	# there; the ordinary build is held to 16 MiB.
	slack=16384
	ldd "$bin/qpgate-server" | grep -q libtsan && slack=65536
	check "RSS back near baseline: ${end_rss} kB vs ${base_rss} kB (+$((slack / 1024)) MiB for allocator caches)" \
		[ "$end_rss" -le $((base_rss + slack)) ]
	;;
esac
qpg_stop_checked "$qp0"
finish_checks
