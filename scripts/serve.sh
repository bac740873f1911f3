# Sourced by the integration tests and the bench scripts: one way to start a
# qpgate-server for a run.
# qpg_serve DIR [qpgate-server flags...]: a server on a free port with the
# certificates made in DIR by scripts/make-certs (srv_cert/srv_key pick
# others), its port file and log (server.log) in DIR. Needs $bin. Sets $srv
# (pid), $port and $mport (metrics port, if any) once it listens; prints the
# log and returns 1 if it never does.
qpg_serve() {
	local dir=$1
	shift
	rm -f "$dir/port"
	# shellcheck disable=SC2086 # $srv_wrap: an optional command prefix, split
	${srv_wrap:-} "$bin/qpgate-server" --cert "${srv_cert:-$dir/server.crt}" --key "${srv_key:-$dir/server.key}" \
		-p 0 --port-file "$dir/port" "$@" 2>"$dir/server.log" &
	srv=$!
	for _ in $(seq 1 300); do
		[ -s "$dir/port" ] && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.1
	done
	port="" mport=""
	[ -s "$dir/port" ] && read -r port mport <"$dir/port"
	[ -n "$port" ] || { echo "FAIL server did not start:"; cat "$dir/server.log"; return 1; }
}
