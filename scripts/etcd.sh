# Sourced by the cluster tests and bench/cluster.sh: an etcd of the run's
# own on loopback, with a temporary data directory, stopped at exit.
# qpg_free_port: prints a loopback TCP port that nothing listens on and that
# the kernel never hands out by itself: below (or above) the ephemeral range
# (net.ipv4.ip_local_port_range), which the servers' -p 0 and every outgoing
# connection draw from. A port picked inside that range may be taken by a
# connection between the pick and the bind. Returns 1 if none is found.
qpg_free_port() {
	local lo hi base span p _
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
	if [ "$lo" -gt 12000 ]; then
		base=10000 span=$((lo - 10000))
	elif [ "$hi" -lt 63000 ]; then
		base=$((hi + 1)) span=$((65535 - hi))
	else
		base=20000 span=20000 # the whole range is ephemeral: the bind may race
	fi
	for _ in $(seq 1 50); do
		p=$((base + (RANDOM * 32768 + RANDOM) % span))
		if ! ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	return 1
}
# qpg_etcd_start DIR [tls]: starts etcd with its data in DIR/etcd; sets
# $etcd_pid, $etcd_url (http://127.0.0.1:PORT) and $etcd_args (to restart
# it on the same data). With "tls": https, and client certificates
# required, signed by DIR/ca.crt (scripts/make-certs); etcd's own
# certificate is DIR/etcd.crt (it also carries clientAuth: the JSON gateway
# dials etcd's gRPC with it). Returns 1 with etcd's log if it never becomes
# healthy.
qpg_etcd_start() {
	local dir=$1 tls=${2:-} try scheme=http curl_tls=()
	if [ "$tls" = tls ]; then
		scheme=https
		(cd "$dir" && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj /CN=etcd -keyout etcd.key -out etcd.csr 2>/dev/null &&
			printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >etcd.ext &&
			openssl x509 -req -in etcd.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
				-extfile etcd.ext -out etcd.crt 2>/dev/null) || return 1
		curl_tls=(--cacert "$dir/ca.crt" --cert "$dir/client.crt" --key "$dir/client.key")
	fi
	command -v etcd >/dev/null || { echo "etcd not found: make deps installs etcd-server" >&2; return 1; }
	for try in 1 2 3 4 5; do
		local cport pport
		cport=$(qpg_free_port) && pport=$(qpg_free_port) || return 1
		etcd_url=$scheme://127.0.0.1:$cport
		etcd_args=(--name default --data-dir "$dir/etcd" --listen-client-urls "$etcd_url"
			--advertise-client-urls "$etcd_url" --listen-peer-urls "http://127.0.0.1:$pport"
			--initial-advertise-peer-urls "http://127.0.0.1:$pport"
			--initial-cluster "default=http://127.0.0.1:$pport"
			--experimental-watch-progress-notify-interval 1s)
		[ "$tls" = tls ] && etcd_args+=(--cert-file "$dir/etcd.crt" --key-file "$dir/etcd.key"
			--client-cert-auth --trusted-ca-file "$dir/ca.crt")
		qpg_etcd_run "$dir"
		local i
		for i in $(seq 1 100); do
			if curl -s -m 1 "${curl_tls[@]}" "$etcd_url/health" | grep -q '"health":"true"'; then return 0; fi
			kill -0 "$etcd_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$etcd_pid" 2>/dev/null
		wait "$etcd_pid" 2>/dev/null
		rm -rf "$dir/etcd"
	done
	echo "etcd did not start:" >&2
	tail -20 "$dir/etcd.log" >&2
	return 1
}
# qpg_etcd_run DIR: (re)start etcd with $etcd_args, in the background.
qpg_etcd_run() {
	etcd "${etcd_args[@]}" >>"$1/etcd.log" 2>&1 &
	etcd_pid=$!
}
qpg_etcd_stop() {
	[ -n "${etcd_pid:-}" ] || return 0
	# (Each step may find etcd gone already: that is no error, also under
	# set -e, which would end an EXIT trap with status 1.)
	kill -CONT "$etcd_pid" 2>/dev/null || true
	kill "$etcd_pid" 2>/dev/null || true
	# Bounded: an etcd that does not go within 10 s is killed.
	for _ in $(seq 1 100); do
		kill -0 "$etcd_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$etcd_pid" 2>/dev/null || true
	wait "$etcd_pid" 2>/dev/null || true
	etcd_pid=""
}
