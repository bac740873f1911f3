# SPDX-License-Identifier: BSD-2-Clause
# core.sh's scenarios of containment, limits, reloads, addresses and
# memlock, sourced by it (its helpers, $transport and $scenario are set).
# shellcheck shell=bash
case "$scenario" in
containment)
	# A client sends a message bigger than the server's receive buffers: on
	# rdma the server's receive completes with a length error and its QP
	# goes to error. Only that connection may go; the QPs must be reaped.
	start_server --handshake-timeout 60000
	client -c 20 -n 100 -s 512 --hold 300000 --ready-file "$work/ready" --release-file "$work/release" \
		--timeout 600000 >"$work/good.out" 2>&1 &
	good=$!
	for _ in $(seq 1 1200); do [ -s "$work/ready" ] && break; sleep 0.1; done
	out=$(client -n 10 -s 512 --test-oversize-at 3 2>&1); rc=$?
	grep -E 'failed:|conn 0:' <<<"$out" | sed 's/^/  /'
	check "the oversized client failed (exit $rc)" [ $rc -ne 0 ]
	check "it got its 3 echoes before the bad message, and no more" grep -Eq '^ 1 +1 +1 +4 +512 +3 +0 ' <<<"$out"
	if [ "$transport" = rdma ]; then
		# rxe NAKs the oversized SEND; the sender's QP goes to error.
		check "the bad connection's QP went to error and was closed, not hung" \
			grep -q 'x qp_error' <<<"$out"
	else
		check "server: the frame was refused as malformed" log_has 'malformed frame'
	fi
	# The 20 stayed connected through it; now their traffic.
	release_held "$good" "$work/good.out" "20 other clients, connected throughout, then verified all 2000 echoes"
	stop_server
	check "server: QPs created ($(stat qps_created)) == destroyed ($(stat qps_destroyed))" \
		[ "$(stat qps_created)" = "$(stat qps_destroyed)" ]
	check "server: nothing left connected" [ "$(stat connected)" = 0 ]
	;;
limits)
	# Slowloris from 127.0.0.2 (idle sockets and half-sent ClientHellos)
	# while real clients connect from 127.0.0.1; then the per-peer
	# connection limit.
	start_server --handshake-timeout 3000 --max-pending-per-peer 100
	"$bin/slowloris" 127.0.0.2 127.0.0.1 "$port" 300 20 >"$work/loris.out" 2>&1 &
	loris=$!
	sleep 0.5
	out=$(client -c 50 -n 10 -s 200 2>&1); rc=$?
	grep -E '^ 50 ' <<<"$out" | sed 's/^/  /'
	check "50 real clients connect and verify 500 echoes during the attack (exit $rc)" [ $rc -eq 0 ]
	wait "$loris"
	cat "$work/loris.out" | sed 's/^/  slowloris: /'
	check "all 300 attacker sockets were opened" grep -q 'opened=300' "$work/loris.out"
	check "the server closed all 300 (100 by the 3 s deadline, 200 at once)" grep -q 'closed=300 of 300' "$work/loris.out"
	check "the last one within 3 s deadline + 3 s slack" \
		awk '{for (i = 1; i <= NF; i++) if ($i == "after") exit !($(i + 1) <= 6.0)}' "$work/loris.out"
	stop_server
	check "server counted the 200 refused beyond 100 pending from one address" [ "$(stat refused_pending)" -eq 200 ]
	check "server closed the 100 stalled handshakes by the deadline" [ "$(stat timeouts)" -eq 100 ]
	check "nothing left connected" [ "$(stat connected)" -eq 0 ]

	# The per-address connection limit counts handshakes in progress too.
	# (Here and below, clients that do not try again: what is counted is
	# the server's refusals, one per client.)
	start_server --max-conns-per-peer 60
	out=$(client -c 80 -n 1 --hold 1000 --connect-attempts 1 2>&1)
	grep -E '^ 80 |failed:' <<<"$out" | sed 's/^/  /'
	check "per-peer connection limit: 60 of 80 connected at once" grep -Eq '^ 80 +60 +20 ' <<<"$out"
	check "the 20 refused were told why" grep -q 'failed: 20 x .*closed the connection before' <<<"$out"
	stop_server
	check "server counted 20 per-peer refusals" [ "$(stat refused_per_peer)" -eq 20 ]

	# Handshakes per second per address (a token bucket): 10 at once, then
	# 2 a second. 40 at once from one address: about 10 get in (a few
	# more as tokens come back while they arrive), the rest are refused
	# at accept, before any TLS work; a second later there is room again.
	start_server --handshake-rate 2,10
	out=$(client -c 40 -n 1 --window 40 --hold 300 --connect-attempts 1 2>&1)
	grep -E '^ 40 |failed:' <<<"$out" | sed 's/^/  /'
	up=$(awk '$1 == 40 {print $2; exit}' <<<"$out")
	check "handshake rate: ${up:-?} of 40 got in at once (10 to 14)" [ "${up:-0}" -ge 10 -a "${up:-0}" -le 14 ]
	check "the refused were told why" grep -q 'failed: .* x .*handshakes per second per address' <<<"$out"
	sleep 1.2
	out=$(client -n 5 2>&1); rc=$?
	check "a second later the address connects again (exit $rc)" [ $rc -eq 0 ]
	stop_server
	check "server counted $((40 - ${up:-0})) rate refusals" [ "$(stat refused_rate)" -eq $((40 - ${up:-0})) ]

	# Out of fds: accept fails with EMFILE while the listener stays
	# readable. The server must back off, not spin, and accept again once
	# fds come back.
	start_server --metrics 127.0.0.1:0
	prlimit --pid "$srv_pid" --nofile=48:48
	client_exec -c 80 -n 1 --window 80 --hold 4000 --handshake-timeout 6000 >"$work/emfile.out" 2>&1 &
	flood=$!
	sleep 1.5
	cpu() { awk '{print $14 + $15}' "/proc/$srv_pid/stat"; }
	t0=$(cpu)
	sleep 3
	t1=$(cpu)
	hz=$(getconf CLK_TCK)
	# The flood's refused connects would retry for a minute: its result is
	# not what is checked here, so it goes now and its fds come back (the
	# metrics listener needs one too).
	kill "$flood" 2>/dev/null; wait "$flood" 2>/dev/null
	backoffs=$(curl -fsS "http://127.0.0.1:$mport/metrics" | sed -n 's/^qpgate_accept_backoffs_total //p')
	echo "  out of fds: server used $((t1 - t0)) ticks of CPU (of $((3 * hz)) in 3 s), $backoffs accept back-offs"
	check "out of fds: accept backed off ($backoffs times) and counted it" [ "${backoffs:-0}" -gt 0 ]
	check "out of fds: the server did not spin (CPU $((t1 - t0)) < $hz ticks in 3 s)" [ $((t1 - t0)) -lt "$hz" ]
	out=$(client -n 20 2>&1); rc=$?
	check "fds back: a new client verifies 20 echoes (exit $rc)" [ $rc -eq 0 ]
	stop_server
	;;
reload)
	# SIGHUP: new handshakes get the new certificate, a client connected
	# before it keeps its connection, and a broken file keeps the old one.
	mkdir -p "$work/live" "$work/b"
	cp "$certs/server.crt" "$certs/server.key" "$work/live/"
	"$here/scripts/make-certs" "$work/b" localhost >/dev/null 2>&1
	# A stand-in for systemd's notify socket: what the server tells it.
	notify=""
	if ldd "$bin/qpgate-server" | grep -q libsystemd; then
		perl -MSocket -MIO::Socket::UNIX -e '
my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0]) or die "$ARGV[0]: $!";
open(my $f, ">>", $ARGV[1]) or die "$ARGV[1]: $!";
select($f); $| = 1;
while (defined $s->recv(my $m, 4096)) { print $f "$m\n"; }' "$work/notify.sock" "$work/notify.log" &
		# (perl: it starts faster than Python, 0.6 s in the lab VM)
		for _ in $(seq 1 300); do [ -S "$work/notify.sock" ] && break; sleep 0.1; done
		notify=$work/notify.sock
	fi
	NOTIFY_SOCKET=$notify srv_cert=$work/live/server.crt srv_key=$work/live/server.key \
		start_server --handshake-timeout 60000
	[ -n "$notify" ] && check "sd_notify: READY=1 once listening" grep -qx 'READY=1' "$work/notify.log"
	client -c 3 -n 50 --hold 300000 --ready-file "$work/ready" --release-file "$work/release" \
		--timeout 600000 >"$work/held.out" 2>&1 &
	held=$!
	for _ in $(seq 1 1200); do [ -s "$work/ready" ] && break; sleep 0.1; done
	check "3 clients connected with the first certificate" grep -q '^3 0$' "$work/ready"
	cp "$work/b/server.crt" "$work/b/server.key" "$work/live/"
	kill -HUP "$srv_pid"
	check "SIGHUP: the server says it reloaded" log_has 'SIGHUP: certificate, key and client CA reloaded'
	out=$("$bin/qpgate-client" --transport "$transport" --ca "$work/b/ca.crt" -p "$port" -n 10 127.0.0.1 localhost 2>&1); rc=$?
	check "a new client that trusts only the new CA verifies 10 echoes (exit $rc)" [ $rc -eq 0 ]
	out=$(client -n 1 --expect-error certificate 2>&1); rc=$?
	echo "$out" | grep -m1 'e.g.'
	check "a new client that trusts only the old CA is refused: certificate (exit $rc)" [ $rc -eq 0 ]
	echo "not a key" >"$work/live/server.key"
	kill -HUP "$srv_pid"
	check "SIGHUP with a broken key: reload refused, with the reason" \
		log_has 'SIGHUP: reload failed, still using the previous certificate'
	out=$("$bin/qpgate-client" --transport "$transport" --ca "$work/b/ca.crt" -p "$port" -n 10 127.0.0.1 localhost 2>&1); rc=$?
	check "and the server still serves with the new certificate (exit $rc)" [ $rc -eq 0 ]
	release_held "$held" "$work/held.out" "the 3 clients from before both reloads verified their 150 echoes"
	stop_server
	[ -n "$notify" ] && check "sd_notify: RELOADING=1 and READY=1 per SIGHUP, STOPPING=1 at the end" \
		eval '[ "$(tr "\n" " " <"$work/notify.log")" = "READY=1 RELOADING=1 READY=1 RELOADING=1 READY=1 STOPPING=1 " ]'
	check "the server closed one connection for a reason: the client with the old CA (tls)" \
		eval '[ "$(grep -cE " closed \([a-z_]+\): " "$work/server.log")" = 1 ] && grep -q " closed (tls): " "$work/server.log"'
	;;
addr)
	# Addresses as a real host has them. IPv6 end to end: the control
	# channel, the per-address limits and (rdma) the GID that carries ::1.
	start_server --bind ::1 --max-conns-per-peer 2 --handshake-timeout 60000
	client6() { "$bin/qpgate-client" --transport "$transport" --ca "$certs/ca.crt" -p "$port" "$@" ::1 localhost; }
	out=$(client6 -n 20 2>&1); rc=$?
	check "IPv6: a client of ::1 verified 20 echoes (exit $rc)" [ $rc -eq 0 ]
	[ "$transport" = rdma ] && check "IPv6: the server took the RoCE v2 GID that carries ::1" \
		grep -Eq 'listening on ::1:[0-9]+, transport rdma on rxe0 port 1 GID [0-9]+ ::1,' "$work/server.log"
	out=$(client6 -c 3 -n 5 --window 3 --connect-attempts 1 2>&1)
	echo "$out" | grep -m1 'e.g.'
	stop_server
	check "IPv6: --max-conns-per-peer 2 held for ::1 (one of 3 refused, $(stat refused_per_peer))" \
		[ "$(stat refused_per_peer)" = 1 ]
	if [ "$transport" = tcp ]; then
		# Out of local ports, in a network namespace of our own with 4 of
		# them: 6 clients of one server port, 4 connect and 2 fail as a
		# local resource that says what ran out (connect() gave
		# EADDRNOTAVAIL, which is not "connection refused"). qpgate-client
		# finds it out; qpgate-perf says so before it starts (exit 2).
		out=$(unshare -n bash -c '
			ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range="40000 40003" || exit 99
			"$0" --transport tcp --cert "$1/server.crt" --key "$1/server.key" -p 17471 2>/dev/null &
			s=$!
			for _ in $(seq 1 100); do ss -ltn | grep -q ":17471 " && break; sleep 0.1; done
			"$2" --transport tcp --ca "$1/ca.crt" -p 17471 -c 6 --window 6 -n 1 --connect-attempts 1 \
				127.0.0.1 localhost
			"$3" --transport tcp --ca "$1/ca.crt" -p 17471 -c 6 -n 1 127.0.0.1 localhost
			echo "perf exit $?"
			kill $s' "$bin/qpgate-server" "$certs" "$bin/qpgate-client" "$bin/qpgate-perf" 2>&1)
		echo "$out" | grep -m1 'e.g.'
		check "out of local ports: 4 of 6 connected, 2 failed as local_resource" \
			eval 'grep -Eq "^ 6 +4 +2 " <<<"$out" && grep -q "failed: 2 x local_resource" <<<"$out"'
		check "  ... saying that no local port was left" grep -q 'no local port left towards this server' <<<"$out"
		check "  ... and qpgate-perf -c 6 said so up front (exit 2, naming --source)" \
			eval 'grep -q "perf exit 2" <<<"$out" && grep -q "give more with --source" <<<"$out"'
	fi
	if [ "$transport" = rdma ]; then
		# --tclass and --sl (their packets are checked on the two-VM wire,
		# wire.sh: rxe on lo loops them back inside the kernel, unseen).
		start_server --tclass 104
		out=$(client --tclass 104 --sl 3 -n 20 2>&1); rc=$?
		check "--tclass 104 --sl 3: 20 echoes verified (exit $rc)" [ $rc -eq 0 ]
		stop_server
		# A server that should refuse to start; one that starts anyway is
		# stopped after 60 s (and the check fails).
		srv_try() { timeout 60 "$bin/qpgate-server" --transport rdma --cert "$certs/server.crt" --key "$certs/server.key" -p 0 "$@" 2>&1; }
		out=$(srv_try --bind 192.0.2.1); echo "  $out"
		check "a --bind address that no GID carries: refused, with the GIDs there are" \
			grep -q 'no RoCE v2 GID carries 192.0.2.1 (the --bind address); RoCE v2 GIDs here: .*rxe0 port 1 index [0-9]* ::ffff:127.0.0.1 (lo)' <<<"$out"
		# Two devices carry the same address (two dummy netdevs, one
		# address): ambiguous, both are named, and -d chooses.
		modprobe dummy 2>/dev/null
		for i in 1 2; do
			ip link add "qd$i" type dummy && ip addr add 10.55.0.1/32 dev "qd$i" && ip link set "qd$i" up &&
				rdma link add "rxe$i" type rxe netdev "qd$i"
		done
		for _ in $(seq 1 100); do
			[ "$(cat /sys/class/infiniband/rxe[12]/ports/1/gids/* 2>/dev/null | grep -c ':ffff:0a37:0001$')" = 2 ] && break
			sleep 0.1
		done
		out=$(srv_try --bind 10.55.0.1); echo "  $out"
		check "one address on two devices: refused as ambiguous, both named" \
			grep -q '10.55.0.1 (the --bind address) is on 2 RDMA GIDs: rxe1 port 1 .*; rxe2 port 1 .*Choose one with -d' <<<"$out"
		start_server --bind 10.55.0.1 -d rxe2
		check "-d rxe2: the server took rxe2's GID for 10.55.0.1" \
			grep -Eq 'transport rdma on rxe2 port 1 GID [0-9]+ ::ffff:10.55.0.1,' "$work/server.log"
		out=$("$bin/qpgate-client" --transport rdma --ca "$certs/ca.crt" -p "$port" -n 1 10.55.0.1 localhost 2>&1)
		check "a client without -d is told its source address is ambiguous" \
			grep -q '10.55.0.1 (the source address toward the server) is on 2 RDMA GIDs' <<<"$out"
		stop_server
		for i in 1 2; do rdma link delete "rxe$i"; ip link delete "qd$i"; done
	fi
	;;
memlock)
	# Without CAP_IPC_LOCK and with 8 MiB of locked memory (a common
	# default): rdma is refused at start with the numbers, never deep in
	# ibv_reg_mr under load; tcp pins nothing and runs.
	limited() { setpriv --bounding-set -ipc_lock prlimit --memlock=8388608:8388608 "$@"; }
	if [ "$transport" = rdma ]; then
		out=$(limited timeout 60 "$bin/qpgate-server" --transport rdma --threads 2 --cert "$certs/server.crt" \
			--key "$certs/server.key" -p 0 2>&1); rc=$?
		echo "  $out"
		check "server refused at start (exit $rc), with the limit, the need and the remedy" \
			eval '[ $rc -eq 1 ] && grep -q "locked memory is limited to 8.0 MiB (ulimit -l 8192), and 2 threads. message pools (16384 slots of [0-9]* bytes each) need [0-9.]* MiB pinned for RDMA: raise it" <<<"$out"'
		start_server
		out=$(setpriv --bounding-set -ipc_lock prlimit --memlock=2097152:2097152 \
			"$bin/qpgate-client" --transport rdma --ca "$certs/ca.crt" -p "$port" -n 5 127.0.0.1 localhost 2>&1); rc=$?
		echo "  $(head -1 <<<"$out")"
		check "client under 2 MiB refused at start (exit $rc), naming its pool" \
			grep -q "and the client's message pool need [0-9.]* MiB pinned for RDMA" <<<"$out"
		out=$(limited "$bin/qpgate-client" --transport rdma --ca "$certs/ca.crt" -p "$port" -n 5 127.0.0.1 localhost 2>&1); rc=$?
		check "a one-connection client fits the common 8 MiB default: 5 echoes verified (exit $rc)" [ $rc -eq 0 ]
		out=$(setpriv --bounding-set -ipc_lock prlimit --memlock=unlimited:unlimited \
			"$bin/qpgate-client" --transport rdma --ca "$certs/ca.crt" -p "$port" -n 5 127.0.0.1 localhost 2>&1); rc=$?
		check "the same client without CAP_IPC_LOCK but an unlimited memlock verifies 5 echoes (exit $rc)" [ $rc -eq 0 ]
		stop_server
	else
		srv_wrap="setpriv --bounding-set -ipc_lock prlimit --memlock=8388608:8388608" start_server
		out=$(limited "$bin/qpgate-client" --transport tcp --ca "$certs/ca.crt" -p "$port" -n 5 127.0.0.1 localhost 2>&1); rc=$?
		check "tcp under an 8 MiB memlock limit, without CAP_IPC_LOCK: 5 echoes verified (exit $rc)" [ $rc -eq 0 ]
		stop_server
	fi
	;;
esac
