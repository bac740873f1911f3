#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Anchors side by side: perftest, rdma_cm's cmtime and qpgate on the same rxe
# device in one lab VM, printed as ratios (absolute times under qemu TCG are
# inflated; ratios between runs in the same VM are what carry over).
#
#   bench/anchors.sh [-s SIZE] [-c CLIENTS] [-C CONNECT_CLIENTS] [-n ITERS] [-m ECHOES] [-L K] [-S SESSION_QPS_TOTAL] [-r RUNS] [-t THREADS] [-K]
#
# -S: how many QPs the multi-QP session runs bring up in all (default 8192):
# in sessions of 64 (the server's default bound) in every run, against that
# run's cmtime, with the defaults' threads on both sides and (with -t 1)
# once more with one event-loop thread a side, as cmtime does its verbs on
# one worker thread; and once, for context, in sessions of 256 (the wire's).
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
# The connect rows are against the ceiling (the library floor over TCP in
# one thread, plus a QP pair), and also against the same ceiling whose TLS
# floor runs its client and server in two processes (qpg_tls_floor
# --procs), as qpgate's run. The report and the JSON: bench/anchors-report.sh.
#
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/anchors.json. Prints numbers; asserts nothing about them.
# shellcheck disable=SC2034,SC2046,SC2086 # SC2034: what the report (anchors-report.sh) reads; run-by-run values travel as space-separated lists, split on purpose
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
lib_pfull=() lib_pres=() proc_ceil_full=() proc_ceil_res=() sw_proc=() sw_thread=()
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
	# A floor that fails leaves its figures null in this run (its ratios
	# too), and the medians are taken over the other runs.
	lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 \
		--client-cert "$work/client.crt" --client-key "$work/client.key") ||
		log "qpg_tls_floor failed: no library floor in run $r"
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
	lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 --tcp --procs) ||
		log "qpg_tls_floor --tcp --procs failed: no floor over TCP in run $r"
	echo "$lib_out" >&2
	read -r a b <<<"$(sed -n 's/^floor full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
	lib_tfull+=("${a:-null}") lib_tres+=("${b:-null}")
	read -r a b <<<"$(sed -n 's/^procs full=\([0-9]*\) resumed=\([0-9]*\)$/\1 \2/p' <<<"$lib_out")"
	lib_pfull+=("${a:-null}") lib_pres+=("${b:-null}")
	# What a context switch costs here (bench/switch_floor.c): between two
	# processes, as between qpgate's client and server, against one between
	# two threads of a process; each end touches 512 KiB a turn. Under TCG
	# the first also empties the vCPU's software TLB. Context for the
	# connect rows, not a target: a failure leaves the figures null.
	lib_out=$("$bin/qpg_switch_floor" -n 2000 -w 512) || log "qpg_switch_floor failed: no switch figures in run $r"
	echo "$lib_out" >&2
	read -r a b <<<"$(sed -n 's/^switch process_us=\([0-9.]*\) thread_us=\([0-9.]*\) w_kib=512$/\1 \2/p' <<<"$lib_out")"
	sw_proc+=("${a:-null}") sw_thread+=("${b:-null}")
	# The verbs floor of a connect (bench/qp_floor.c): a pair of QPs
	# created, moved to RTS and destroyed in one thread, on the device
	# qpgate runs on. With the floor over TCP it makes the ceiling of a
	# connect: TLS over TCP and both ends' QPs, nothing of qpgate's own.
	lib_out=$("$bin/qpg_qp_floor" -d "$dev" -n 300) || log "qpg_qp_floor failed: no QP floor in run $r"
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
	lib_out=$("$bin/qpg_tls_floor" --cert "$work/server.crt" --key "$work/server.key" --ca "$work/ca.crt" -n 300 --tcp --threads 2) ||
		log "qpg_tls_floor --threads 2 failed: no wall-clock floor in run $r"
	echo "$lib_out" >&2
	read -r a b <<<"$(sed -n 's/^wall full=\([0-9]*\) resumed=\([0-9]*\) threads=2$/\1 \2/p' <<<"$lib_out")"
	wall_tfull+=("${a:-null}") wall_tres+=("${b:-null}")
	lib_out=$("$bin/qpg_qp_floor" -d "$dev" -n 300 --threads 2) ||
		log "qpg_qp_floor --threads 2 failed: no wall-clock QP floor in run $r"
	echo "$lib_out" >&2
	a=$(sed -n 's/^wall qp_pairs=[0-9]* bringup_per_s=\([0-9]*\) threads=2$/\1/p' <<<"$lib_out")
	wall_qp+=("${a:-null}")
	wall_ceil_full+=("$(ceiling "${wall_tfull[-1]}" "${a:-null}")")
	wall_ceil_res+=("$(ceiling "${wall_tres[-1]}" "${a:-null}")")
	# One message tag of the echo's frame (header and payload), as the echo
	# path makes it (bench/tag_floor.c): an echo round trip makes four.
	a=$("$bin/qpg_tag_floor" -l $((16 + size)) | sed -n 's/^tag len=[0-9]* ns=\([0-9]*\)$/\1/p') ||
		log "qpg_tag_floor failed: no tag figure in run $r"
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
	# QPs over sessions of 64, every run, each against its own run's
	# cmtime (a target's figure, so a median of RUNS like the others; one
	# run of it read 2.64 to 3.09 from VM to VM): one full TLS handshake
	# brings up many QPs, each with its own keys and PSNs (docs/protocol.md).
	# (A run that failed leaves no number: null, and the report goes on.)
	settle
	perf "sess-64" -c "$sess_clients" -q 64 -n 1 --window 4 --no-tls-resume
	add sess64 "$(jn sess-64 '.results.connections.succeeded / .results.connections.connect_phase_s')"
	add sess64ok "$(jn sess-64 '.results.connections.succeeded')"
	# ...and with one event-loop thread a side, as cmtime does its verbs on
	# one worker thread a side: the echo figures' server (-t, default 1)
	# and a client of one thread. With two threads a process on two vCPUs
	# each QP cost 15-20% more CPU on each side (docs/secure-path.md).
	if [ "$data_threads" = 1 ]; then
		settle
		perf_port=$data_port perf "sess1-64" -c "$sess_clients" -q 64 -n 1 --window 4 --no-tls-resume --threads 1
		add sess1 "$(jn sess1-64 '.results.connections.succeeded / .results.connections.connect_phase_s')"
		add sess1ok "$(jn sess1-64 '.results.connections.succeeded')"
	fi
done
# Sessions of 256 (the wire's bound), once: context, not a target.
perf "sess-256" -c "$sess_clients" -q 256 -n 1 --window 4 --no-tls-resume
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

# ---- the report: medians, ratios and the JSON (bench/anchors-report.sh) -----
. "$(dirname "$0")/anchors-report.sh"
