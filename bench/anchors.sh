#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Anchors side by side: perftest, rdma_cm's cmtime and qpgate on the same rxe
# device in one lab VM, printed as ratios (absolute times under qemu TCG are
# inflated; ratios between runs in the same VM are what carry over).
#
#   bench/anchors.sh [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS] [-m ECHOES] [-L K] [-S SESSION_QPS_TOTAL] [-r RUNS] [-t THREADS] [-K]
#
# -S: how many QPs the multi-QP session runs bring up in all (default 8192),
# in sessions of 64 (the server's default bound) and of 256 (the wire's),
# with the defaults' threads on both sides, and (with -t 1) sessions of 64
# once more with one event-loop thread a side, as cmtime does its verbs on
# one worker thread.
# -r: each anchor and the qpgate figure it is compared with run RUNS times,
# one after the other (default 3); the table shows the median of each
# figure, and of each ratio taken run by run, and the JSON keeps every run.
# One run of a pair in this VM can be 30% off the next. Each echo figure
# (latency, message rate; auth on and off) runs right after an anchor run
# of its own (ib_send_lat, ib_send_bw), so the two share the VM's pace of
# that moment: the lab's pace wanders over minutes (ib_send_bw 24,372 and
# 45,084 msg/s in two runs of one VM). The anchor rows show all of them.
# -t: the event-loop threads of the server that the echo figures (latency
# and message rate) run against (default 1). perftest's pair is one thread
# on each side; the client here is one thread too (--threads 1), and in a
# 2-vCPU VM a second server thread only takes the client's core (at 1,000
# clients, 5 alternating runs: 17,228 echoes/s with 2 threads, 18,543 with
# 1, medians). The connect figures run with the defaults on both sides:
# the server's threads, and qpgate-perf's (one per CPU), so that the
# client's handshakes, which cost it more than the server's, use both
# vCPUs as the server's do. With -t 1 the full and resumed connects run
# once more with one thread a side (that server, a client of one thread),
# the shape of the ceiling's floors, each timed as one thread's CPU.
# Resumed connects are counted after the first connect (prime_s), a full
# handshake made alone for the ticket the others resume.
# -m: echoes per client in the message-rate run (default 100). The rate is
# echoes over the whole traffic phase, whose tail has fewer and fewer
# clients still sending; with 20 each, that tail was a large part of a
# one-second phase (auth on, one VM, 3 runs each: 17,988, 15,378 and
# 18,006 echoes/s with 20; 18,731, 17,862 and 18,747 with 100).
# qpgate-perf's latency stamps read the time-stamp counter (--clock tsc),
# as perftest's cycles do: this VM's CLOCK_MONOTONIC reads the HPET, a
# system call and a trap of about 1 us, two per timed echo, on the core the
# server also needs. One VM, 3 runs each at 1,000 clients: 18,852, 18,482
# and 18,413 echoes/s timing every echo with CLOCK_MONOTONIC; 18,349,
# 19,533 and 19,077 with the counter; an echo p50 with auth 0.9 us lower.
# The counter is checked against CLOCK_MONOTONIC over each run (the JSON's
# clock_drift; under 0.05% in the lab).
# -L: the message-rate run times 1 echo in K on each client (qpgate-perf
# --lat-every; default 1, every echo; all are verified either way).
# Last, in the same VM, bench/kvbench-lab.sh --anchors -r RUNS -D 5 (its own
# KV server): 4 KiB two-sided GETs against ib_send_bw 4 KiB, and its
# one-sided pairs, each KV run right after its anchor; its 4 KiB row is
# printed in this table too, and its JSON is kept in anchors.json. -K
# leaves it out (about 7 minutes at -r 5).
#
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/anchors.json. Prints numbers; asserts nothing about them.
# shellcheck disable=SC2046,SC2086 # run-by-run values travel as space-separated lists, split on purpose
set -euo pipefail
[ -n "${QPG_TRACE:-}" ] && set -x
size=64 clients=1000 conn_clients=200 iters=2000 rate_msgs=100 rate_lat_every=1 sess_clients=8192 runs=3 data_threads=1 kv=1
while getopts "s:c:C:n:m:L:S:r:t:K" o; do
	case $o in
	s) size=$OPTARG ;;
	c) clients=$OPTARG ;;
	C) conn_clients=$OPTARG ;;
	n) iters=$OPTARG ;;
	m) rate_msgs=$OPTARG ;;
	L) rate_lat_every=$OPTARG ;;
	S) sess_clients=$OPTARG ;;
	r) runs=$OPTARG ;;
	t) data_threads=$OPTARG ;;
	K) kv="" ;;
	*) echo "usage: $0 [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS] [-m ECHOES] [-L K] [-S SESSION_QPS_TOTAL] [-r RUNS] [-t THREADS] [-K]" >&2; exit 2 ;;
	esac
done
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 2400 "$@"
qpg_bench_setup anchors
dev=$(ibv_devices | awk 'NR==3{print $1}')
log() { echo "anchors: $*" >&2; }
case $runs in '' | *[!0-9]* | 0) echo "anchors: -r wants a count of runs, not '$runs'" >&2; exit 2 ;; esac
case $rate_msgs in '' | *[!0-9]* | 0) echo "anchors: -m wants a count of echoes, not '$rate_msgs'" >&2; exit 2 ;; esac
case $data_threads in '' | *[!0-9]* | 0) echo "anchors: -t wants a count of threads, not '$data_threads'" >&2; exit 2 ;; esac
stamp_clock=mono
[ "$(uname -m)" = x86_64 ] && stamp_clock=tsc
case $rate_lat_every in '' | *[!0-9]* | 0) echo "anchors: -L wants a count of echoes, not '$rate_lat_every'" >&2; exit 2 ;; esac

# ---- the public-key floor of a TLS 1.3 handshake, in this VM ---------------
# A full handshake costs both ends 1 ECDSA P-256 sign, 2 verifies (the
# certificate's and CertificateVerify) and 4 X25519 operations (a key
# generation and a derivation on each side); a resumption (psk_dhe_ke) only
# the 4 X25519. Both vCPUs at work: floor = 2 / (seconds per handshake).
log "openssl speed ecdsap256 ecdhx25519 (one core)"
speed_out=$(openssl speed -seconds 2 ecdsap256 ecdhx25519 2>/dev/null)
# (no process substitution: the lab has no /dev/fd)
read -r ec_sign ec_verify <<<"$(awk '/ecdsa \(nistp256\)/ {print $(NF-1), $NF}' <<<"$speed_out")"
x25519=$(awk '/ecdh \(X25519\)/ {print $NF}' <<<"$speed_out")
floor_full=$(awk -v s="$ec_sign" -v v="$ec_verify" -v x="$x25519" 'BEGIN{printf "%.0f", 2 / (1/s + 2/v + 4/x)}')
floor_resumed=$(awk -v x="$x25519" 'BEGIN{printf "%.0f", 2 / (4/x)}')

# ---- one run of every pair --------------------------------------------------
# Per run: the TLS library floor and cmtime, then qpgate's figures against
# a server that stays up, each echo figure after its own perftest run (lat
# or bw); arrays hold each run's value.
lib_mfull=() lib_tfull=() lib_tres=() lib_mres=() tag_ns=() lat_typ=() bw_rate=() cm_rate=() cm_wall=() lib_full=() lib_res=() lib_fc=() lib_fs=() lib_rc=() lib_rs=()
declare -A q # q[figure-auth] -> space-separated values, one per run
add() { q[$1]="${q[$1]:-} $2"; }
# Every figure starts on a quiet device: the QPs of the test before (a
# server tears a thousand connections down after its client has gone) are
# gone first, up to a minute.
qp_count() { rdma res show qp 2>/dev/null | grep -c lqpn || true; }
qp_base=$(qp_count)
settle() {
	local i
	for i in $(seq 1 300); do
		[ "$(qp_count)" -le "$qp_base" ] && return 0
		sleep 0.2
	done
	log "the device still holds $(qp_count) QPs (baseline $qp_base); measuring anyway"
}
perf() { # NAME FLAGS... -> runs qpgate-perf, JSON in $work/NAME.json
	local name=$1
	shift
	settle
	log "qpgate-perf $name: $*"
	"$bin/qpgate-perf" --ca "$work/ca.crt" -p "${perf_port:-$port}" -s "$size" --clock "$stamp_clock" --json "$work/$name.json" \
		"$@" 127.0.0.1 localhost >"$work/$name.txt" 2>/dev/null || {
		cat "$work/$name.txt" >&2
		log "qpgate-perf $name did not verify every echo"
	}
}
cmtime_once() { # -> the run's connects/s and wall seconds in cm_rate[], cm_wall[]
	# rdma_cm needs an IP on the netdev, so rxe on a dummy (removed again,
	# so that perftest and qpgate see one device).
	ip link add qpgdummy0 type dummy
	ip addr add 10.251.0.1/24 dev qpgdummy0
	ip link set qpgdummy0 up
	rdma link add qpgrxe1 type rxe netdev qpgdummy0
	sleep 1
	log "cmtime -c $conn_clients on rxe over a dummy netdev"
	timeout 600 cmtime -b 10.251.0.1 -c "$conn_clients" >"$work/cmtime.srv" 2>&1 &
	local cm_srv=$!
	sleep 2
	local t0 t1 ms
	t0=$(date +%s.%N)
	timeout 600 cmtime -s 10.251.0.1 -c "$conn_clients" >"$work/cmtime.cli" 2>&1 || cat "$work/cmtime.cli" >&2
	t1=$(date +%s.%N)
	kill "$cm_srv" 2>/dev/null || true # the cmtime server does not exit by itself
	wait "$cm_srv" 2>/dev/null || true
	cat "$work/cmtime.cli" >&2
	# cmtime times each step for all connections at once; "connect" ends
	# when every connection is established. Connects/s = connections /
	# (sum of the steps up to and including connect). Rows: "connect :
	# 57.95 52.65 ...": the step, then its total in ms over all connections.
	ms=$(awk -F: '
		/^step/ {on = 1; next}
		on && NF == 2 {
			gsub(/ +$/, "", $1); split($2, f, " ")
			if ($1 ~ /disconnect|destroy/) exit
			sum += f[1]
		}
		END {print sum + 0}' "$work/cmtime.cli")
	cm_rate+=("$(awk -v n="$conn_clients" -v ms="$ms" 'BEGIN{if (ms > 0) printf "%.1f", n / (ms / 1000); else print "null"}')")
	cm_wall+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
	rdma link delete qpgrxe1 || true
	ip link delete qpgdummy0 || true
}
# ceiling RATE_A RATE_B: the rate of two costs paid one after the other on
# the same 2 vCPUs, 1 / (1/A + 1/B); null if either is missing.
ceiling() {
	awk -v a="$1" -v b="$2" 'BEGIN{if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && a > 0 && b > 0) printf "%.1f", 1 / (1/a + 1/b); else print "null"}'
}
qp_up=() qp_ceil_full=() qp_ceil_res=()
lib_pfull=() lib_pres=() proc_ceil_full=() proc_ceil_res=()
wall_tfull=() wall_tres=() wall_qp=() wall_ceil_full=() wall_ceil_res=()
# Resumed connects a second, once the priming connect is up.
resumed_rate='.results.connections | if .connect_phase_s > .prime_s then .tls_resumed / (.connect_phase_s - .prime_s) else null end'
modprobe rdma_ucm # /dev/infiniband/rdma_cm for librdmacm
for r in $(seq 1 "$runs"); do
	log "---- run $r of $runs"
	settle
	# What OpenSSL's whole handshake costs, made as qpgate makes it (the
	# same contexts, certificate, host check and tickets; no bootstrap, no
	# QP): bench/tls_floor.c, each end's CPU timed, both on one core in turn.
	lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 \
		--client-cert "$work/client.crt" --client-key "$work/client.key")
	echo "$lib_out" >&2
	read -r a b <<<"$(sed -n 's/^floor full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
	lib_full+=("${a:-null}") lib_res+=("${b:-null}")
	read -r a b <<<"$(awk '$1 == "full" {print $4, $5}' <<<"$lib_out")"
	lib_fc+=("${a:-null}") lib_fs+=("${b:-null}")
	read -r a b <<<"$(awk '$1 == "resumed" {print $4, $5}' <<<"$lib_out")"
	lib_rc+=("${a:-null}") lib_rs+=("${b:-null}")
	read -r a b <<<"$(sed -n 's/^floor mtls-full=\([0-9]*\) mtls-resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
	lib_mfull+=("${a:-null}") lib_mres+=("${b:-null}")
	# The same over TCP on loopback (--tcp): what the control connection's
	# TCP adds to a connect, which the socketpair floor leaves out. And
	# (--procs) the same handshakes with the client and the server in two
	# processes that wait on their sockets, as qpgate's and every TLS
	# pair's are: what the switches between them cost (bench/tls_floor_procs.c).
	lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 --tcp --procs)
	echo "$lib_out" >&2
	read -r a b <<<"$(sed -n 's/^floor full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
	lib_tfull+=("${a:-null}") lib_tres+=("${b:-null}")
	read -r a b <<<"$(sed -n 's/^procs full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
	lib_pfull+=("${a:-null}") lib_pres+=("${b:-null}")
	# The verbs floor of a connect (bench/qp_floor.c): a pair of QPs
	# created, moved to RTS and destroyed in one thread, on the device
	# qpgate runs on. With the floor over TCP it makes the ceiling of a
	# connect: TLS over TCP and both ends' QPs, nothing of qpgate's own.
	lib_out=$("$bin/qpg_qp_floor" -d "$dev" -n 300)
	echo "$lib_out" >&2
	a=$(sed -n 's/^floor qp_pairs=[0-9]* per_s=[0-9]* bringup_per_s=\([0-9]*\)$/\1/p' <<<"$lib_out")
	qp_up+=("${a:-null}")
	qp_ceil_full+=("$(ceiling "${lib_tfull[-1]}" "${a:-null}")")
	qp_ceil_res+=("$(ceiling "${lib_tres[-1]}" "${a:-null}")")
	proc_ceil_full+=("$(ceiling "${lib_pfull[-1]}" "${a:-null}")")
	proc_ceil_res+=("$(ceiling "${lib_pres[-1]}" "${a:-null}")")
	# The same two floors by the wall clock, two threads at once (one per
	# vCPU), as qpgate's connects are timed: what the library and the
	# device reach on these cores with what a CPU figure leaves out (the
	# kernel's work in other contexts, the scheduler, waits).
	lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 --tcp --threads 2)
	echo "$lib_out" >&2
	read -r a b <<<"$(sed -n 's/^wall full=\([0-9]*\) resumed=\([0-9]*\) threads=2$/\1 \2/p' <<<"$lib_out")"
	wall_tfull+=("${a:-null}") wall_tres+=("${b:-null}")
	lib_out=$("$bin/qpg_qp_floor" -d "$dev" -n 300 --threads 2)
	echo "$lib_out" >&2
	a=$(sed -n 's/^wall qp_pairs=[0-9]* bringup_per_s=\([0-9]*\) threads=2$/\1/p' <<<"$lib_out")
	wall_qp+=("${a:-null}")
	wall_ceil_full+=("$(ceiling "${wall_tfull[-1]}" "${a:-null}")")
	wall_ceil_res+=("$(ceiling "${wall_tres[-1]}" "${a:-null}")")
	# One message tag of the echo's frame (header and payload), as the echo
	# path makes it (bench/tag_floor.c): an echo round trip makes four.
	a=$("$bin/qpg_tag_floor" -l $((16 + size)) | sed -n 's/^tag len=[0-9]* ns=\([0-9]*\)$/\1/p')
	tag_ns+=("${a:-null}")
	cmtime_once
	# qpgate on the same lo-backed device
	if [ "$r" = 1 ]; then
		# The echo figures' server (-t threads), then the connect figures'
		# (default threads), each with its own port file and log.
		mkdir -p "$work/data"
		srv_cert=$work/server.crt srv_key=$work/server.key qpg_serve "$work/data" \
			--handshake-timeout 120000 --allow-no-auth --max-pending 100000 \
			--max-pending-per-peer 100000 -s "$((size > 4096 ? size : 4096))" --threads "$data_threads"
		pids+=("$srv")
		data_srv=$srv data_port=$port
		# The mTLS connect figures' server (client certificates from
		# the same CA; resumption from its session cache).
		mkdir -p "$work/mtls"
		srv_cert=$work/server.crt srv_key=$work/server.key qpg_serve "$work/mtls" \
			--handshake-timeout 120000 --max-pending 100000 --max-pending-per-peer 100000 \
			--client-ca "$work/ca.crt"
		pids+=("$srv")
		mtls_srv=$srv mtls_port=$port
		qpg_serve "$work" --handshake-timeout 120000 --allow-no-auth --max-pending 100000 \
			--max-pending-per-peer 100000 --max-session-qps 256 -s "$((size > 4096 ? size : 4096))"
		pids+=("$srv")
	fi
	for auth in on off; do
		flag=()
		[ $auth = off ] && flag=(--no-auth)
		# Each echo figure right after its own anchor run (perftest on
		# the lo-backed device, GID 1 = ::ffff:127.0.0.1), so that a pair
		# shares the VM's pace of the moment.
		settle
		# Columns: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
		v=$(qpg_perftest_figure "$size" 7 5 "" ib_send_lat -s "$size" -n "$iters")
		lat_typ+=("$v")
		add "lat_typ-$auth" "$v"
		perf_port=$data_port perf "lat-$auth" -c 1 -n "$iters" "${flag[@]}"
		settle
		# Columns: #bytes #iterations BW_peak BW_average MsgRate[Mpps]
		# As many messages as the rate run's echoes carry (a request and
		# a reply each), so both last seconds: a run a fifth of a second
		# long (10,000 messages) read 17,098 msg/s in one run of a VM
		# and 43,099 in another.
		v=$(qpg_perftest_figure "$size" 5 5 1e6 ib_send_bw -s "$size" -n $((2 * clients * rate_msgs)))
		bw_rate+=("$v")
		add "bw-$auth" "$v"
		perf_port=$data_port perf "rate-$auth" -c "$clients" -n "$rate_msgs" --window 64 --lat-every "$rate_lat_every" --threads 1 "${flag[@]}"
		perf "conn-$auth" -c "$conn_clients" -n 1 --window "$conn_clients" --no-tls-resume "${flag[@]}"
		add "p50-$auth" "$(j "lat-$auth" '.results.data.latency_us.p50')"
		add "echoes-$auth" "$(j "rate-$auth" '.results.data.msgs_per_s')"
		add "ok-$auth" "$(j "rate-$auth" '.results.connections.succeeded')"
		add "cps-$auth" "$(j "conn-$auth" '.results.connections.succeeded / .results.connections.connect_phase_s')"
	done
	# Reconnects: the client resumes its TLS session from a ticket (one
	# connection first, alone, to get the first ticket). The rate is the
	# resumed connects over the time after that first one (prime_s), as
	# the library floor times its resumptions after an untimed first
	# handshake.
	perf "reconn-on" -c "$conn_clients" -n 1 --window "$conn_clients"
	add reconn "$(j reconn-on "$resumed_rate")"
	add resumed "$(j reconn-on '.results.connections.tls_resumed')"
	# mTLS: full handshakes, then reconnects that resume.
	mtls=(--cert "$work/client.crt" --key "$work/client.key")
	perf_port=$mtls_port perf "mconn-on" -c "$conn_clients" -n 1 --window "$conn_clients" --no-tls-resume "${mtls[@]}"
	add mconn "$(j mconn-on '.results.connections.succeeded / .results.connections.connect_phase_s')"
	perf_port=$mtls_port perf "mreconn-on" -c "$conn_clients" -n 1 --window "$conn_clients" "${mtls[@]}"
	add mreconn "$(j mreconn-on "$resumed_rate")"
	add mresumed "$(j mreconn-on '.results.connections.tls_resumed')"
	# Full and resumed connects again with one event-loop thread a side
	# (the echo figures' server, -t 1, and a client of one thread): the
	# ceiling's floors are each one thread's CPU, and with two threads a
	# process on the VM's two vCPUs every connect costs more CPU on each
	# side (docs/secure-path.md, "Threads a side").
	if [ "$data_threads" = 1 ]; then
		perf_port=$data_port perf "conn1-on" -c "$conn_clients" -n 1 --window "$conn_clients" --no-tls-resume --threads 1
		add cps1 "$(j conn1-on '.results.connections.succeeded / .results.connections.connect_phase_s')"
		perf_port=$data_port perf "reconn1-on" -c "$conn_clients" -n 1 --window "$conn_clients" --threads 1
		add reconn1 "$(j reconn1-on "$resumed_rate")"
	fi
done
# QPs over sessions (once: each brings up thousands of QPs): one full TLS
# handshake brings up many QPs, each with its own keys and PSNs
# (docs/protocol.md).
for q in 64 256; do
	perf "sess-$q" -c "$sess_clients" -q "$q" -n 1 --window 4 --no-tls-resume
done
# ...and sessions of 64 with one event-loop thread a side, as cmtime does
# its verbs on one worker thread a side: the echo figures' server (-t,
# default 1) and a client of one thread. With two threads a process on two
# vCPUs each QP cost 15-20% more CPU on each side (docs/secure-path.md).
if [ "$data_threads" = 1 ]; then
	perf_port=$data_port perf "sess1-64" -c "$sess_clients" -q 64 -n 1 --window 4 --no-tls-resume --threads 1
fi
kill -TERM "$srv" "$data_srv" "$mtls_srv"
wait "$srv" || true
wait "$data_srv" || true
wait "$mtls_srv" || true

# ---- the TCP transport against a plain TCP ping-pong (sockperf) ------------
log "sockperf ping-pong --tcp -m $size over lo"
sockperf server --tcp -i 127.0.0.1 -p 18516 >/dev/null 2>&1 &
pids+=($!)
sleep 1
qpg_serve "$work" --transport tcp --handshake-timeout 120000 -s "$((size > 4096 ? size : 4096))"
pids+=("$srv")
tcp_sp=() tcp_q=()
for r in $(seq 1 "$runs"); do
	sp_out=$(sockperf ping-pong --tcp -i 127.0.0.1 -p 18516 -m "$size" -t 5 --full-rtt 2>&1 || true)
	v=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp_out")
	tcp_sp+=("${v:-null}")
	perf tcp-lat --transport tcp -c 1 -n "$iters"
	tcp_q+=("$(j tcp-lat '.results.data.latency_us.p50')")
done
kill -TERM "$srv"
wait "$srv" || true

# ---- two-sided 4 KiB GETs against ib_send_bw 4 KiB (bench/kvbench-lab.sh) ---
kv_json=null
if [ -n "$kv" ]; then
	log "bench/kvbench-lab.sh --anchors -r $runs -D 5 (-K leaves it out)"
	rm -f "$out/kvbench-anchors.json"
	if "$repo/bench/kvbench-lab.sh" --anchors -r "$runs" -D 5 >"$work/kvbench.out" 2>&1 &&
		[ -s "$out/kvbench-anchors.json" ]; then
		sed -n '/KV figure \/ anchor/,$p' "$work/kvbench.out" >&2
		kv_json=$(jq -c . "$out/kvbench-anchors.json")
	else
		log "kvbench-lab.sh failed; its output:"
		tail -30 "$work/kvbench.out" >&2
	fi
fi

# ---- medians, and ratios taken run by run -----------------------------------
vals() { echo "${q[$1]:-}"; } # the runs' values of one qpgate figure (none: empty)
per_run_ratio() { # A-VALUES B-VALUES [SCALE_B] -> the ratios, run by run
	local -a a b
	read -ra a <<<"$1"
	read -ra b <<<"$2"
	local i
	for i in "${!a[@]}"; do ratio "${a[$i]}" "$(awk -v v="${b[$i]:-null}" -v k="${3:-1}" 'BEGIN{if (v == "null") print "null"; else print v * k}')"; echo; done
}
# ib_send_lat reports half a round trip; an echo is a whole one.
round_trip() { awk -v t="$1" 'BEGIN{if (t == "null") print "null"; else printf "%.2f", 2 * t}'; }
rtt=()
for v in "${lat_typ[@]}"; do rtt+=("$(round_trip "$v")"); done
# The round trips each echo figure is compared with: its own anchor runs.
for auth in on off; do
	q[rtt-$auth]=""
	for v in $(vals "lat_typ-$auth"); do add "rtt-$auth" "$(round_trip "$v")"; done
done
m_lat=$(med "${lat_typ[@]}") m_rtt=$(med "${rtt[@]}") m_bw=$(med "${bw_rate[@]}") m_cm=$(med "${cm_rate[@]}")
m_lf=$(med "${lib_full[@]}") m_lr=$(med "${lib_res[@]}")
m_lfc=$(med "${lib_fc[@]}") m_lfs=$(med "${lib_fs[@]}") m_lrc=$(med "${lib_rc[@]}") m_lrs=$(med "${lib_rs[@]}")
m_tsp=$(med "${tcp_sp[@]}")

printf '\n anchors on %s, %s-byte messages, median of %s runs (qemu TCG: compare ratios, not absolutes)\n' "$dev" "$size" "$runs"
printf ' echo figures against a server of %s event-loop thread(s) (-t); connect figures against its default\n' "$data_threads"
printf ' %-48s %14s   (runs: %s)\n' "ib_send_lat t_typical [us] (one way)" "$m_lat" "${lat_typ[*]}"
printf ' %-48s %14s\n' "  round trip = 2 x t_typical [us]" "$m_rtt"
printf ' %-48s %14s   (runs: %s)\n' "ib_send_bw message rate, 1 QP [msg/s]" "$m_bw" "${bw_rate[*]}"
printf ' %-48s %14s   (runs: %s)\n' "cmtime connects/s ($conn_clients connections)" "$m_cm" "${cm_rate[*]}"
printf ' %-48s %14s   (runs: %s)\n' "sockperf TCP ping-pong p50 round trip [us]" "$m_tsp" "${tcp_sp[*]}"
printf ' %-48s %14s   (P-256 sign %s/s, verify %s/s, X25519 %s/s, one core)\n' \
	"TLS public-key floor, full handshakes/s (2 cores)" "$floor_full" "$ec_sign" "$ec_verify" "$x25519"
printf ' %-48s %14s\n' "TLS public-key floor, resumptions/s (2 cores)" "$floor_resumed"
printf ' %-48s %14s   (client %s us, server %s us of CPU each; runs: %s)\n' \
	"TLS library floor, full handshakes/s (2 cores)" "$m_lf" "$m_lfc" "$m_lfs" "${lib_full[*]}"
printf ' %-48s %14s   (client %s us, server %s us; runs: %s)\n' \
	"TLS library floor, resumptions/s (2 cores)" "$m_lr" "$m_lrc" "$m_lrs" "${lib_res[*]}"
printf ' %-48s %14s   (runs: %s)\n' "TLS library floor over TCP, full/s" "$(med "${lib_tfull[@]}")" "${lib_tfull[*]}"
printf ' %-48s %14s   (runs: %s)\n' "TLS library floor over TCP, resumed/s" "$(med "${lib_tres[@]}")" "${lib_tres[*]}"
printf ' %-48s %14s   (create to RTS, both ends; runs: %s)\n' "QP pair floor, bring-ups/s (2 cores)" "$(med "${qp_up[@]}")" "${qp_up[*]}"
printf ' %-48s %14s   (runs: %s)\n' "ceiling: floor over TCP + QP pair, full/s" "$(med "${qp_ceil_full[@]}")" "${qp_ceil_full[*]}"
printf ' %-48s %14s   (runs: %s)\n' "ceiling: floor over TCP + QP pair, resumed/s" "$(med "${qp_ceil_res[@]}")" "${qp_ceil_res[*]}"
printf ' %-48s %14s   (runs: %s)\n' "wall clock, 2 threads: floor over TCP, full/s" "$(med "${wall_tfull[@]}")" "${wall_tfull[*]}"
printf ' %-48s %14s   (runs: %s)\n' "wall clock, 2 threads: floor over TCP, resumed/s" "$(med "${wall_tres[@]}")" "${wall_tres[*]}"
printf ' %-48s %14s   (runs: %s)\n' "wall clock, 2 threads: QP pair bring-ups/s" "$(med "${wall_qp[@]}")" "${wall_qp[*]}"
printf ' %-48s %14s   (runs: %s)\n' "wall-clock ceiling, full/s" "$(med "${wall_ceil_full[@]}")" "${wall_ceil_full[*]}"
printf ' %-48s %14s   (runs: %s)\n' "wall-clock ceiling, resumed/s" "$(med "${wall_ceil_res[@]}")" "${wall_ceil_res[*]}"
printf '\n %-5s %-48s %12s %12s %8s %8s   %s\n' "auth" "qpgate figure / anchor (medians)" "qpgate" "anchor" "ratio" "target" "ratio in each run"
row() { # AUTH LABEL FORMAT QPGATE-VALUES ANCHOR-VALUES TARGET [SCALE_ANCHOR] -> prints; sets $rr (median ratio)
	local rs
	rs=$(per_run_ratio "$4" "$5" "${7:-1}" | tr '\n' ' ')
	rr=$(medr $rs)
	printf " %-5s %-48s $3 %12s %8s %8s   %s\n" "$1" "$2" "$(med $4)" \
		"$(med $(for v in $5; do awk -v v="$v" -v k="${7:-1}" 'BEGIN{if (v == "null") print "null"; else print v * k}'; done))" \
		"$rr" "$6" "$rs"
}
json_rows=()
for auth in on off; do
	msgs=$(for e in $(vals "echoes-$auth"); do awk -v e="$e" 'BEGIN{printf "%.1f\n", 2 * e}'; done | tr '\n' ' ') # a request and its reply
	t1="<= 1.5"
	[ $auth = off ] && t1="<= 1.2"
	row "$auth" "echo round trip p50 [us] / 2 x ib_send_lat" "%12.1f" "$(vals "p50-$auth")" "$(vals "rtt-$auth")" "$t1"
	r1=$rr
	row "$auth" "messages/s at $(med $(vals "ok-$auth")) clients / ib_send_bw" "%12.0f" "$msgs" "$(vals "bw-$auth")" ">= 1.0"
	r2=$rr
	row "$auth" "full-handshake connects/s / cmtime" "%12.1f" "$(vals "cps-$auth")" "${cm_rate[*]}" ">= 1.0"
	r3=$rr
	json_rows+=("{\"auth\":$([ $auth = on ] && echo true || echo false),\"echo_p50_us\":$(med $(vals "p50-$auth")),\"echoes_per_s\":$(med $(vals "echoes-$auth")),\"messages_per_s\":$(med $msgs),\"msgs_per_s\":$(med $(vals "echoes-$auth")),\"clients\":$(med $(vals "ok-$auth")),\"connects_per_s\":$(med $(vals "cps-$auth")),\"lat_ratio\":$r1,\"rate_ratio\":$r2,\"connect_ratio\":$r3,\"runs\":{\"ib_send_lat_typical_us\":$(jarr $(vals "lat_typ-$auth")),\"ib_send_bw_msgs_per_s\":$(jarr $(vals "bw-$auth")),\"echo_p50_us\":$(jarr $(vals "p50-$auth")),\"echoes_per_s\":$(jarr $(vals "echoes-$auth")),\"connects_per_s\":$(jarr $(vals "cps-$auth"))}}")
done
# Auth's extra cost per round trip (p50 with auth less without, run by
# run) against four tags' cost measured in the same run.
auth_extra=$(
	read -ra on <<<"$(vals p50-on)"
	read -ra off <<<"$(vals p50-off)"
	for i in "${!on[@]}"; do
		awk -v a="${on[$i]}" -v b="${off[$i]:-null}" 'BEGIN{if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/) printf "%.2f ", a - b; else printf "null "}'
	done
)
four_tags=$(for t in "${tag_ns[@]}"; do awk -v t="$t" 'BEGIN{if (t ~ /^[0-9.]+$/) printf "%.2f ", 4 * t / 1000; else printf "null "}'; done)
row on "auth's extra per round trip [us] / 4 tags" "%12.2f" "$auth_extra" "$four_tags" "<= 2.0"
r11=$rr
row on "resumed reconnects/s ($(med $(vals resumed)) resumed) / cmtime" "%12.1f" "$(vals reconn)" "${cm_rate[*]}" ">= 1.0"
r5=$rr
row on "full-handshake connects/s / TLS library floor" "%12.1f" "$(vals cps-on)" "${lib_full[*]}" ">= 0.9"
r7=$rr
row on "resumed reconnects/s / TLS library floor" "%12.1f" "$(vals reconn)" "${lib_res[*]}" ">= 0.9"
r8=$rr
row on "mTLS full-handshake connects/s / mTLS library floor" "%12.1f" "$(vals mconn)" "${lib_mfull[*]}" ">= 0.9"
r12=$rr
row on "mTLS resumed ($(med $(vals mresumed)) resumed) / mTLS library floor" "%12.1f" "$(vals mreconn)" "${lib_mres[*]}" ">= 0.9"
r13=$rr
row on "full-handshake connects/s / library floor over TCP" "%12.1f" "$(vals cps-on)" "${lib_tfull[*]}" ""
r14=$rr
row on "resumed reconnects/s / library floor over TCP" "%12.1f" "$(vals reconn)" "${lib_tres[*]}" ""
r15=$rr
row on "TLS library floor, full / cmtime" "%12.1f" "${lib_full[*]}" "${cm_rate[*]}" ""
r9=$rr
row on "TLS library floor, resumed / cmtime" "%12.1f" "${lib_res[*]}" "${cm_rate[*]}" ""
r10=$rr
# The ceiling of a connect (TLS over TCP and both ends' QPs, nothing of
# qpgate's own): how far qpgate is from it, and how far it is itself from
# the socketpair floor that the >= 0.9 targets are set against.
row on "full-handshake connects/s / ceiling (TCP + QPs)" "%12.1f" "$(vals cps-on)" "${qp_ceil_full[*]}" ">= 0.9"
r16=$rr
row on "resumed reconnects/s / ceiling (TCP + QPs)" "%12.1f" "$(vals reconn)" "${qp_ceil_res[*]}" ">= 0.9"
r17=$rr
r21=null r22=null
if [ "$data_threads" = 1 ]; then
	row on "  the same, full, one thread a side" "%12.1f" "$(vals cps1)" "${qp_ceil_full[*]}" ">= 0.9"
	r21=$rr
	row on "  the same, resumed, one thread a side" "%12.1f" "$(vals reconn1)" "${qp_ceil_res[*]}" ">= 0.9"
	r22=$rr
fi
# The same against the ceiling by the wall clock (the floors two threads
# at once), and what the wall clock takes from the floors themselves.
row on "full-handshake connects/s / wall-clock ceiling" "%12.1f" "$(vals cps-on)" "${wall_ceil_full[*]}" ""
r23=$rr
row on "resumed reconnects/s / wall-clock ceiling" "%12.1f" "$(vals reconn)" "${wall_ceil_res[*]}" ""
r24=$rr
row on "wall-clock ceiling / ceiling, full" "%12.1f" "${wall_ceil_full[*]}" "${qp_ceil_full[*]}" ""
r25=$rr
row on "wall-clock ceiling / ceiling, resumed" "%12.1f" "${wall_ceil_res[*]}" "${qp_ceil_res[*]}" ""
r26=$rr
# The same against the ceiling whose TLS floor runs its two ends in two
# processes (qpg_tls_floor --procs), and what the two processes take from
# the one-thread floor.
row on "full-handshake connects/s / two-process ceiling" "%12.1f" "$(vals cps-on)" "${proc_ceil_full[*]}" ""
r27=$rr
row on "resumed reconnects/s / two-process ceiling" "%12.1f" "$(vals reconn)" "${proc_ceil_res[*]}" ""
r28=$rr
row on "two-process TLS floor / one-thread, full" "%12.1f" "${lib_pfull[*]}" "${lib_tfull[*]}" ""
r29=$rr
row on "two-process TLS floor / one-thread, resumed" "%12.1f" "${lib_pres[*]}" "${lib_tres[*]}" ""
r30=$rr
row on "ceiling, full / TLS library floor" "%12.1f" "${qp_ceil_full[*]}" "${lib_full[*]}" ""
r18=$rr
row on "ceiling, resumed / TLS library floor" "%12.1f" "${qp_ceil_res[*]}" "${lib_res[*]}" ""
r19=$rr
row on "QP pair floor, bring-ups/s / cmtime" "%12.1f" "${qp_up[*]}" "${cm_rate[*]}" ""
r20=$rr
sess_rows=()
for q in 64 256; do
	qps=$(j "sess-$q" '.results.connections.succeeded / .results.connections.connect_phase_s')
	ok=$(j "sess-$q" '.results.connections.succeeded')
	r6=$(ratio "$qps" "$m_cm")
	printf ' %-5s %-48s %12.1f %12s %8s %8s   (one run, against the median cmtime)\n' "on" "QPs/s, $ok in sessions of $q / cmtime" "$qps" "$m_cm" "$r6" ">= 3.0"
	sess_rows+=("{\"qps_per_session\":$q,\"qps\":$ok,\"qps_per_s\":$qps,\"ratio\":$r6}")
done
if [ "$data_threads" = 1 ]; then
	qps=$(j sess1-64 '.results.connections.succeeded / .results.connections.connect_phase_s')
	ok=$(j sess1-64 '.results.connections.succeeded')
	r6=$(ratio "$qps" "$m_cm")
	printf ' %-5s %-48s %12.1f %12s %8s %8s   (one run; one thread a side, as cmtime)\n' "on" "QPs/s, $ok in sessions of 64, 1 thread / cmtime" "$qps" "$m_cm" "$r6" ">= 3.0"
	sess_rows+=("{\"qps_per_session\":64,\"threads_per_side\":1,\"qps\":$ok,\"qps_per_s\":$qps,\"ratio\":$r6}")
fi
row on "tcp transport echo p50 [us] / sockperf TCP" "%12.1f" "${tcp_q[*]}" "${tcp_sp[*]}" "<= 1.2"
r4=$rr
if [ "$kv_json" != null ]; then
	# Its own runs, each GET rate right after its ib_send_bw run.
	row on "4 KiB two-sided GETs/s / ib_send_bw 4 KiB msg/s" "%12.0f" \
		"$(jq -r '.results.runs.gets_per_s_4k | map(tostring) | join(" ")' <<<"$kv_json")" \
		"$(jq -r '.results.runs.ib_send_bw_4k_msgs_per_s | map(tostring) | join(" ")' <<<"$kv_json")" ">= 0.9"
fi
rows=$(IFS=,; echo "${json_rows[*]}")
srows=$(IFS=,; echo "${sess_rows[*]}")
version=$("$bin/qpgate-perf" --version | awk '{print $3}')
jq -n --arg version "$version" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg dev "$dev" \
	--argjson size "$size" --argjson clients "$clients" --argjson conn "$conn_clients" --argjson iters "$iters" \
	--argjson nruns "$runs" --argjson dthreads "$data_threads" --argjson ratemsgs "$rate_msgs" --argjson ratelat "$rate_lat_every" --arg sclock "$stamp_clock" \
	--argjson lat "$m_lat" --argjson rtt "$m_rtt" --argjson bw "$m_bw" --argjson cm "$m_cm" \
	--argjson tcpa "$m_tsp" --argjson tcpq "$(med "${tcp_q[@]}")" --argjson r4 "$r4" --argjson rows "[$rows]" \
	--argjson ffull "$floor_full" --argjson fres "$floor_resumed" --argjson reconn "$(med $(vals reconn))" \
	--argjson lfull "$m_lf" --argjson lres "$m_lr" --argjson lfc "$m_lfc" \
	--argjson lfs "$m_lfs" --argjson lrc "$m_lrc" --argjson lrs "$m_lrs" \
	--arg ia32cap "$qpg_ia32cap" --argjson r7 "$r7" --argjson r8 "$r8" --argjson r9 "$r9" --argjson r10 "$r10" \
	--argjson r11 "$r11" --argjson tagns "$(med "${tag_ns[@]}")" --argjson rtag "$(jarr "${tag_ns[@]}")" \
	--argjson rextra "$(jarr $auth_extra)" \
	--argjson r12 "$r12" --argjson r13 "$r13" --argjson r14 "$r14" --argjson r15 "$r15" \
	--argjson ltfull "$(med "${lib_tfull[@]}")" --argjson ltres "$(med "${lib_tres[@]}")" --argjson mconn "$(med $(vals mconn))" \
	--argjson mreconn "$(med $(vals mreconn))" --argjson mresumed "$(med $(vals mresumed))" \
	--argjson lmfull "$(med "${lib_mfull[@]}")" --argjson lmres "$(med "${lib_mres[@]}")" \
	--argjson resumed "$(med $(vals resumed))" --argjson r5 "$r5" --argjson sess "[$srows]" --argjson sessn "$sess_clients" \
	--argjson qpup "$(med "${qp_up[@]}")" --argjson cfull "$(med "${qp_ceil_full[@]}")" --argjson cres "$(med "${qp_ceil_res[@]}")" \
	--argjson r16 "$r16" --argjson r17 "$r17" --argjson r18 "$r18" --argjson r19 "$r19" --argjson r20 "$r20" \
	--argjson r21 "$r21" --argjson r22 "$r22" \
	--argjson r23 "$r23" --argjson r24 "$r24" --argjson r25 "$r25" --argjson r26 "$r26" \
	--argjson pcfull "$(m=$(med "${proc_ceil_full[@]}"); echo "${m:-null}")" --argjson pcres "$(m=$(med "${proc_ceil_res[@]}"); echo "${m:-null}")" \
	--argjson ptfull "$(m=$(med "${lib_pfull[@]}"); echo "${m:-null}")" --argjson ptres "$(m=$(med "${lib_pres[@]}"); echo "${m:-null}")" \
	--argjson r27 "$r27" --argjson r28 "$r28" --argjson r29 "$r29" --argjson r30 "$r30" \
	--argjson wcfull "$(m=$(med "${wall_ceil_full[@]}"); echo "${m:-null}")" --argjson wcres "$(m=$(med "${wall_ceil_res[@]}"); echo "${m:-null}")" \
	--argjson wtfull "$(m=$(med "${wall_tfull[@]}"); echo "${m:-null}")" --argjson wtres "$(m=$(med "${wall_tres[@]}"); echo "${m:-null}")" \
	--argjson wqp "$(m=$(med "${wall_qp[@]}"); echo "${m:-null}")" \
	--argjson kvb "$kv_json" \
	--argjson cps1 "$(m=$(med $(vals cps1)); echo "${m:-null}")" --argjson reconn1 "$(m=$(med $(vals reconn1)); echo "${m:-null}")" \
	--argjson rqpup "$(jarr "${qp_up[@]}")" \
	--argjson rlat "$(jarr "${lat_typ[@]}")" --argjson rbw "$(jarr "${bw_rate[@]}")" --argjson rcm "$(jarr "${cm_rate[@]}")" \
	--argjson rlf "$(jarr "${lib_full[@]}")" --argjson rlr "$(jarr "${lib_res[@]}")" \
	--argjson rrc "$(jarr $(vals reconn))" --argjson rtsp "$(jarr "${tcp_sp[@]}")" --argjson rtq "$(jarr "${tcp_q[@]}")" \
	'{schema_version: 1, tool: "bench/anchors.sh", version: $version, date: $date,
	  parameters: {device: $dev, size: $size, clients: $clients, connect_clients: $conn, iters: $iters,
	               session_qps: $sessn, runs: $nruns, openssl_ia32cap: $ia32cap,
	               echo_server_threads: $dthreads, rate_echoes_per_client: $ratemsgs,
	               rate_latency_every: $ratelat, latency_clock: $sclock},
	  results: {ib_send_lat_typical_us: $lat, round_trip_anchor_us: $rtt, ib_send_bw_msgs_per_s: $bw,
	            cmtime_connects_per_s: $cm, tcp_pingpong_p50_us: $tcpa,
	            tls_floor: {full_handshakes_per_s: $ffull, resumptions_per_s: $fres},
	            tls_library_floor: {full_handshakes_per_s: $lfull, resumptions_per_s: $lres,
	                                full_client_us: $lfc, full_server_us: $lfs,
	                                resumed_client_us: $lrc, resumed_server_us: $lrs,
	                                full_connect_ratio: $r7, reconnect_ratio: $r8,
	                                full_vs_cmtime: $r9, resumed_vs_cmtime: $r10,
	                                over_tcp: {full_handshakes_per_s: $ltfull, resumptions_per_s: $ltres,
	                                            full_connect_ratio: $r14, reconnect_ratio: $r15}},
	            connect_ceiling: {qp_pair_bringups_per_s: $qpup, qp_pair_bringups_runs: $rqpup,
	                              qp_pair_vs_cmtime: $r20,
	                              full_per_s: $cfull, resumed_per_s: $cres,
	                              full_vs_library_floor: $r18, resumed_vs_library_floor: $r19,
	                              full_connect_ratio: $r16, reconnect_ratio: $r17,
	                              one_thread_a_side: {connects_per_s: $cps1, reconnects_per_s: $reconn1,
	                                                  full_connect_ratio: $r21, reconnect_ratio: $r22},
	                              wall_clock: {tls_full_per_s: $wtfull, tls_resumed_per_s: $wtres,
	                                           qp_pair_bringups_per_s: $wqp,
	                                           full_per_s: $wcfull, resumed_per_s: $wcres,
	                                           full_connect_ratio: $r23, reconnect_ratio: $r24,
	                                           full_vs_cpu_ceiling: $r25, resumed_vs_cpu_ceiling: $r26},
	                              two_processes: {tls_full_per_s: $ptfull, tls_resumed_per_s: $ptres,
	                                              full_per_s: $pcfull, resumed_per_s: $pcres,
	                                              full_connect_ratio: $r27, reconnect_ratio: $r28,
	                                              tls_full_vs_one_thread: $r29, tls_resumed_vs_one_thread: $r30}},
	            auth_cost: {tag_ns: $tagns, four_tags_us: (if $tagns == null then null else 4 * $tagns / 1000 end),
	                        extra_us_runs: $rextra, tag_ns_runs: $rtag, ratio: $r11},
	            mtls: {connects_per_s: $mconn, reconnects_per_s: $mreconn, tls_resumed: $mresumed,
	                   library_full_per_s: $lmfull, library_resumed_per_s: $lmres,
	                   full_ratio: $r12, resumed_ratio: $r13},
	            reconnects: {connects_per_s: $reconn, tls_resumed: $resumed, ratio: $r5},
	            sessions: $sess,
	            tcp_transport: {echo_p50_us: $tcpq, ratio: $r4}, qpgate: $rows,
	            kv_anchors: (if $kvb == null then null else $kvb.results end),
	            runs: {ib_send_lat_typical_us: $rlat, ib_send_bw_msgs_per_s: $rbw, cmtime_connects_per_s: $rcm,
	                   tls_library_full_per_s: $rlf, tls_library_resumed_per_s: $rlr,
	                   reconnects_per_s: $rrc, tcp_pingpong_p50_us: $rtsp, tcp_transport_p50_us: $rtq}}}' >"$out/anchors.json"
"$bin/json_check" "$out/anchors.json" >&2 || log "anchors.json does not have the tools' schema"
echo " json: $out/anchors.json"
