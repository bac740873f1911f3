# Shared by the bench scripts.
# bench_serve WORK [qpgate-server flags...]: a server on a free port with the
# certificates in WORK, logging to WORK/server.log; sets $srv and $port.
bench_serve() {
	local dir=$1
	shift
	rm -f "$dir/port"
	"$bin/qpgate-server" --cert "$dir/server.crt" --key "$dir/server.key" -p 0 \
		--port-file "$dir/port" --handshake-timeout 120000 "$@" 2>"$dir/server.log" &
	srv=$!
	for _ in $(seq 1 300); do
		[ -s "$dir/port" ] && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.1
	done
	read -r port _ <"$dir/port"
}
