#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate-kvbench against a fresh KV server on one rxe device, in the lab.
#   bench/kvbench-lab.sh [qpgate-kvbench flags]      e.g. --scaling -D 5
#   bench/kvbench-lab.sh --anchors [-D SECONDS] [-r RUNS] [qpgate-kvbench flags]
# --anchors runs perftest in the same VM and prints two ratios: 4 KiB
# two-sided GETs/s against ib_send_bw's 4 KiB message rate (a GET is a round
# trip; issue 60's target >= 0.9), and 64 KiB one-sided GET throughput against
# ib_read_bw at 64 KiB (target >= 0.8), and 4 MiB one-sided GETs READ
# straight into a registered arena (--register: zero copy, as an inference
# engine's KV pool) against ib_read_bw at 4 MiB (target >= 0.9). Every GET
# is verified either way.
# Like perftest (one QP, a deep send queue), the 4 KiB run pipelines over
# one pooled connection on one pool thread, as deep as ib_send_bw's default
# send queue (-t 128): --num-clients 1 --threads 1 --credits 128
# --num-workers 128 -s 131072 (flags given after these win). Each pair
# runs RUNS times (default 3), one after the other, each KV figure right
# after its own anchor run; the medians and each run's ratio are printed,
# since one run here can be 30% off the next.
# Each run also measures the floor of a verified one-sided GET here
# (bench/read_floor.c): the same 64 KiB READs kept 16 deep, one QP per
# vCPU, each landed buffer checked against its digest as the KV client
# checks a value (the digest the server chose: --kv-digest auto picks the
# faster here), with nothing of qpgate around them. Its ratio to
# ib_read_bw is about the most a verified one-sided GET reaches in this VM
# with as many connections as vCPUs (ib_read_bw itself uses one QP).
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/kvbench.json (or kvbench-anchors.json). Prints numbers;
# asserts nothing about them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
qpg_bench_in_lab 6144 2400 "$@"
anchors="" secs=10 runs=3
if [ "${1:-}" = --anchors ]; then
	anchors=1
	shift
	while :; do
		case ${1:-} in
		-D) secs=$2; shift 2 ;;
		-r) runs=$2; shift 2 ;;
		*) break ;;
		esac
	done
	case $runs in '' | *[!0-9]* | 0) echo "kvbench-lab: -r wants a count of runs, not '$runs'" >&2; exit 2 ;; esac
fi
qpg_bench_setup kvb
dev=$(ibv_devices | awk 'NR==3{print $1}')
# -s 131072: the 4 KiB run's client asks for 128 KiB messages (below), so
# that up to 31 4 KiB replies, or a turn's requests, share one SEND
# (docs/protocol.md, "Messages"); the other runs' clients keep their
# default of 8 KiB, which is what they agree.
qpg_serve "$work" --handshake-timeout 120000 --service kv --kv-capacity 256M --kv-max-value 4M -s 131072 \
	--metrics 127.0.0.1:0
# The server's frames and the SENDs they travelled in, both ways: "IN OUT"
# frames per SEND between two snapshots of "FRAMES_IN SENDS_IN FRAMES_OUT SENDS_OUT".
sends() {
	curl -fsS "http://127.0.0.1:$mport/metrics" | awk '
		$1 == "qpgate_messages_total{direction=\"in\"}" {fi = $2}
		$1 == "qpgate_rdma_sends_total{direction=\"in\"}" {si = $2}
		$1 == "qpgate_messages_total{direction=\"out\"}" {fo = $2}
		$1 == "qpgate_rdma_sends_total{direction=\"out\"}" {so = $2}
		END {print fi + 0, si + 0, fo + 0, so + 0}'
}
per_send() { # BEFORE AFTER
	local a b
	read -ra a <<<"$1"
	read -ra b <<<"$2"
	awk -v fi=$((b[0] - a[0])) -v si=$((b[1] - a[1])) -v fo=$((b[2] - a[2])) -v so=$((b[3] - a[3])) \
		'BEGIN {printf "%.2f/%.2f", si ? fi / si : 0, so ? fo / so : 0}'
}
echo " server: $dev, QPs on the device before: $(rdma res show qp | grep -c lqpn)"
# The digest the server chose for one-sided readers; the floor checks the same.
digest=$(sed -n 's/.*values digested with \([a-z0-9-]*\).*/\1/p' "$work/server.log" | head -n 1)
echo " values digested with ${digest:?the server did not say which digest it chose}"
rc=0
kvbench() { # JSON FLAGS...
	local json=$1
	shift
	"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --handshake-timeout 60000 \
		--server-pid "$srv" --json "$json" "$@" 127.0.0.1 localhost || rc=$?
}
send_rate=() read_bps=() floor_bps=() ops4k=() bps64k=() bad=() r1=() r2=() rf=()
read4m=() bps4m=() r3=() zc4m=()
cc4=() sc4=() cc64=() sc64=() # CPU per GET [us]: kvbench's and the server's
fps4=()                       # the 4 KiB run's frames per SEND at the server, in/out
if [ -z "$anchors" ]; then
	kvbench "$out/kvbench.json" "$@"
else
	for r in $(seq 1 "$runs"); do
		echo " run $r of $runs on $dev: ib_send_bw -s 4096, the 4 KiB KV run, ib_read_bw -s 65536, the 64 KiB KV run, the floor" >&2
		# Each KV figure right after its own anchor run, so that a pair
		# shares the VM's pace of the moment (it wanders over minutes:
		# 64 KiB one-sided GETs over ib_read_bw read 1.024 in one round
		# of a VM run and 0.833 two rounds later, about 5 minutes apart,
		# with ib_read_bw within 1% of itself).
		# Columns: #bytes #iterations BW_peak BW_average[MB/s] MsgRate[Mpps];
		# perftest's MB is 2^20 bytes (figure: null for inf, nan or no row).
		send_rate+=("$(qpg_perftest_figure 4096 5 5 1e6 ib_send_bw -s 4096 -n 20000)")
		before=$(sends)
		kvbench "$work/kv4k-$r.json" --value-size 4096 --get-mode two-sided -D "$secs" \
			--num-clients 1 --threads 1 --credits 128 --num-workers 128 -s 131072 "$@"
		fps4+=("$(per_send "$before" "$(sends)")")
		read_bps+=("$(qpg_perftest_figure 65536 5 4 1048576 ib_read_bw -s 65536 -n 5000)")
		kvbench "$work/kv64k-$r.json" --value-size 65536 --num-keys 1000 --get-mode one-sided \
			-D "$secs" "$@"
		read4m+=("$(qpg_perftest_figure 4194304 5 4 1048576 ib_read_bw -s 4194304 -n 200)")
		# (Preloaded each run: the 4 KiB and 64 KiB runs store the same key
		# names with their own sizes.)
		kvbench "$work/kv4m-$r.json" --value-size 4M --num-keys 24 --get-mode one-sided --register \
			-D "$secs" "$@"
		bps4m+=("$(j "kv4m-$r" '.results.runs[0].gib_per_s * 1073741824 | floor')")
		zc4m+=("$(j "kv4m-$r" '"\(.results.runs[0].zero_copy_gets)/\(.results.runs[0].gets)"')")
		r3+=("$(ratio "${bps4m[-1]}" "${read4m[-1]}")")
		floor_out=$("$bin/qpg_read_floor" -d "$dev" -s 65536 -q 16 -t "$(nproc)" -D "$secs" --verify "$digest") || rc=1
		floor_bps+=("$(awk '$1 == "floor" {sub("bytes_per_s=", "", $4); v = $4} END {if (v == "") print "null"; else print v}' <<<"$floor_out")")
		rf+=("$(ratio "${floor_bps[-1]}" "${read_bps[-1]}")")
		ops4k+=("$(j "kv4k-$r" '.results.runs[0].ops_per_s')")
		bps64k+=("$(j "kv64k-$r" '.results.runs[0].gib_per_s * 1073741824 | floor')")
		bad+=("$(j "kv4k-$r" '.results.runs[0].mismatches + .results.runs[0].errors')+$(j "kv64k-$r" '.results.runs[0].mismatches + .results.runs[0].errors')")
		cc4+=("$(j "kv4k-$r" '.results.runs[0].client_cpu_us_per_get')")
		sc4+=("$(j "kv4k-$r" '.results.runs[0].server_cpu_us_per_get')")
		cc64+=("$(j "kv64k-$r" '.results.runs[0].client_cpu_us_per_get')")
		sc64+=("$(j "kv64k-$r" '.results.runs[0].server_cpu_us_per_get')")
		r1+=("$(ratio "${ops4k[-1]}" "${send_rate[-1]}")")
		r2+=("$(ratio "${bps64k[-1]}" "${read_bps[-1]}")")
	done
fi
echo " server RSS: $(awk '/VmRSS/{print $2}' "/proc/$srv/status") kB"
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log" | sed 's/^/ /'
echo " QPs on the device after: $(rdma res show qp | grep -c lqpn)"
if [ -n "$anchors" ]; then
	m1=$(medr "${r1[@]}")
	m2=$(medr "${r2[@]}")
	printf '\n %-50s %14s %14s %8s %8s   %s\n' "KV figure / anchor (same VM, medians of $runs)" "qpgate" "anchor" \
		"ratio" "target" "ratio in each run"
	printf ' %-50s %14s %14s %8s %8s   %s\n' "4 KiB two-sided GETs/s / ib_send_bw 4 KiB msg/s" \
		"$(num %14.0f "$(med "${ops4k[@]}")")" "$(num %14.0f "$(med "${send_rate[@]}")")" "$m1" ">= 0.9" "${r1[*]}"
	printf ' %-50s %14s %14s %8s %8s   %s\n' "64 KiB one-sided GET B/s / ib_read_bw 64 KiB B/s" \
		"$(num %14.0f "$(med "${bps64k[@]}")")" "$(num %14.0f "$(med "${read_bps[@]}")")" "$m2" ">= 0.8" "${r2[*]}"
	m3=$(medr "${r3[@]}")
	printf ' %-50s %14s %14s %8s %8s   %s\n' "4 MiB one-sided GET B/s, zero copy / ib_read_bw 4 MiB" \
		"$(num %14.0f "$(med "${bps4m[@]}")")" "$(num %14.0f "$(med "${read4m[@]}")")" "$m3" ">= 0.9" "${r3[*]}"
	printf ' 4 MiB GETs READ in place / verified, per run: %s\n' "${zc4m[*]}"
	mf=$(medr "${rf[@]}")
	printf ' %-50s %14s %14s %8s %8s   %s\n' "floor: 64 KiB READs + $digest, $(nproc) QPs / ib_read_bw" \
		"$(num %14.0f "$(med "${floor_bps[@]}")")" "$(num %14.0f "$(med "${read_bps[@]}")")" "$mf" "" "${rf[*]}"
	printf ' mismatches + errors per run (4 KiB+64 KiB): %s\n' "${bad[*]}"
	printf ' 4 KiB run, frames per SEND at the server (requests in / replies out, with the preload), per run: %s\n' "${fps4[*]}"
	# Less noisy than a rate here: what a GET costs, whatever else the
	# host was doing. The device's work lands in whichever process posts.
	us() { med "$@" | awk '{if ($1 == "null") print "-"; else printf "%.0f", $1}'; }
	printf ' CPU per GET [us], qpgate-kvbench + qpgate-server, medians: 4 KiB two-sided %s + %s, 64 KiB one-sided %s + %s\n' \
		"$(us "${cc4[@]}")" "$(us "${sc4[@]}")" "$(us "${cc64[@]}")" "$(us "${sc64[@]}")"
	version=$("$bin/qpgate-kvbench" --version | awk '{print $3}')
	jq -n --arg version "$version" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg dev "$dev" \
		--argjson secs "$secs" --argjson runs "$runs" --arg ia32cap "$qpg_ia32cap" --arg digest "$digest" \
		--argjson r4m "$(med "${read4m[@]}")" --argjson b4m "$(med "${bps4m[@]}")" --argjson r3 "$m3" \
		--argjson ar4m "$(jarr "${read4m[@]}")" --argjson ab4m "$(jarr "${bps4m[@]}")" --argjson ar3 "$(jarr "${r3[@]}")" \
		--argjson sr "$(med "${send_rate[@]}")" --argjson rb "$(med "${read_bps[@]}")" \
		--argjson o4 "$(med "${ops4k[@]}")" --argjson b64 "$(med "${bps64k[@]}")" --argjson r1 "$m1" --argjson r2 "$m2" \
		--argjson asr "$(jarr "${send_rate[@]}")" --argjson arb "$(jarr "${read_bps[@]}")" \
		--argjson ao4 "$(jarr "${ops4k[@]}")" --argjson ab64 "$(jarr "${bps64k[@]}")" \
		--argjson ar1 "$(jarr "${r1[@]}")" --argjson ar2 "$(jarr "${r2[@]}")" \
		--argjson fb "$(med "${floor_bps[@]}")" --argjson rfm "$mf" --argjson afb "$(jarr "${floor_bps[@]}")" \
		--argjson arf "$(jarr "${rf[@]}")" --argjson nthr "$(nproc)" \
		--argjson cc4 "$(med "${cc4[@]}")" --argjson sc4 "$(med "${sc4[@]}")" \
		--argjson cc64 "$(med "${cc64[@]}")" --argjson sc64 "$(med "${sc64[@]}")" \
		--slurpfile k4 "$work/kv4k-1.json" --slurpfile k64 "$work/kv64k-1.json" \
		'{schema_version: 1, tool: "bench/kvbench-lab.sh", version: $version, date: $date,
		  parameters: {device: $dev, duration_s: $secs, runs: $runs, openssl_ia32cap: $ia32cap, kv_digest: $digest},
		  results: {ib_send_bw_4k_msgs_per_s: $sr, ib_read_bw_64k_bytes_per_s: $rb,
		            ib_read_bw_4m_bytes_per_s: $r4m,
		            one_sided_4m_registered: {bytes_per_s: $b4m, ratio: $r3,
		                                      runs: {ib_read_bw_4m_bytes_per_s: $ar4m, bytes_per_s: $ab4m, ratio: $ar3}},
		            two_sided_4k: {gets_per_s: $o4, ratio: $r1, client_cpu_us_per_get: $cc4,
		                           server_cpu_us_per_get: $sc4, run: $k4[0].results.runs[0]},
		            one_sided_64k: {bytes_per_s: $b64, ratio: $r2, client_cpu_us_per_get: $cc64,
		                            server_cpu_us_per_get: $sc64, run: $k64[0].results.runs[0]},
		            verified_read_floor_64k: {bytes_per_s: $fb, ratio: $rfm, threads: $nthr},
		            runs: {ib_send_bw_4k_msgs_per_s: $asr, ib_read_bw_64k_bytes_per_s: $arb,
		                   gets_per_s_4k: $ao4, bytes_per_s_64k: $ab64, ratio_4k: $ar1, ratio_64k: $ar2,
		                   verified_read_floor_bytes_per_s: $afb, verified_read_floor_ratio: $arf}}}' \
		>"$out/kvbench-anchors.json"
	"$bin/json_check" "$out/kvbench-anchors.json" >&2 || echo " kvbench-anchors.json does not have the schema" >&2
	echo " json: $out/kvbench-anchors.json"
fi
exit $rc
