# SPDX-License-Identifier: BSD-2-Clause
# bench/anchors.sh's report, sourced by it once every run is in: the
# anchors' medians, qpgate's figures against them (the median of the ratios
# taken run by run), and build/bench/anchors.json. Reads the arrays and
# q[] that anchors.sh filled; measures nothing.
# shellcheck shell=bash disable=SC2034,SC2046,SC2086,SC2154 # anchors.sh's variables; run-by-run lists split on purpose

# ---- medians, and ratios taken run by run -----------------------------------
vals() { echo "${q[$1]:-}"; } # the runs' values of one qpgate figure (none: empty)
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
row on "switch between processes / within one [us]" "%12.2f" "${sw_proc[*]}" "${sw_thread[*]}" ""
r31=$rr
row on "ceiling, full / TLS library floor" "%12.1f" "${qp_ceil_full[*]}" "${lib_full[*]}" ""
r18=$rr
row on "ceiling, resumed / TLS library floor" "%12.1f" "${qp_ceil_res[*]}" "${lib_res[*]}" ""
r19=$rr
row on "QP pair floor, bring-ups/s / cmtime" "%12.1f" "${qp_up[*]}" "${cm_rate[*]}" ""
r20=$rr
# Sessions of 64: every run, each against its own run's cmtime.
sess_rows=()
row on "QPs/s, $(med $(vals sess64ok)) in sessions of 64 / cmtime" "%12.1f" "$(vals sess64)" "${cm_rate[*]}" ">= 3.0"
sess_rows+=("{\"qps_per_session\":64,\"qps\":$(med $(vals sess64ok)),\"qps_per_s\":$(med $(vals sess64)),\"ratio\":$rr,\"runs\":{\"qps_per_s\":$(jarr $(vals sess64)),\"cmtime_per_s\":$(jarr "${cm_rate[@]}")}}")
if [ "$data_threads" = 1 ]; then
	row on "  the same, one thread a side, as cmtime" "%12.1f" "$(vals sess1)" "${cm_rate[*]}" ">= 3.0"
	sess_rows+=("{\"qps_per_session\":64,\"threads_per_side\":1,\"qps\":$(med $(vals sess1ok)),\"qps_per_s\":$(med $(vals sess1)),\"ratio\":$rr,\"runs\":{\"qps_per_s\":$(jarr $(vals sess1))}}")
fi
# Sessions of 256 (the wire's bound): one run, context.
# (A run that failed left no JSON, or no numbers: null, and the report goes on.)
qps=$(jn sess-256 '.results.connections.succeeded / .results.connections.connect_phase_s')
ok=$(jn sess-256 '.results.connections.succeeded')
r6=$(ratio "$qps" "$m_cm")
printf ' %-5s %-48s %12s %12s %8s %8s   (one run, against the median cmtime)\n' "on" "QPs/s, $ok in sessions of 256 / cmtime" "$(num %12.1f "$qps")" "$m_cm" "$r6" ""
sess_rows+=("{\"qps_per_session\":256,\"qps\":$ok,\"qps_per_s\":$qps,\"ratio\":$r6}")
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
	--argjson swp "$(m=$(med "${sw_proc[@]}"); echo "${m:-null}")" --argjson swt "$(m=$(med "${sw_thread[@]}"); echo "${m:-null}")" \
	--argjson r31 "$r31" \
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
	                                              tls_full_vs_one_thread: $r29, tls_resumed_vs_one_thread: $r30,
	                                              switch_us: $swp, switch_in_process_us: $swt, switch_ratio: $r31}},
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
