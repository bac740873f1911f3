# Shared by the integration scripts: one way to report a check.
# check DESCRIPTION COMMAND...: runs COMMAND, prints PASS/FAIL, counts the failures.
qpg_check_fails=0
check() {
	local what=$1
	shift
	if "$@"; then echo "PASS $what"; else echo "FAIL $what"; qpg_check_fails=$((qpg_check_fails + 1)); fi
}
finish_checks() {
	[ $qpg_check_fails -eq 0 ] && echo "all checks passed" || echo "$qpg_check_fails check(s) failed"
	exit $((qpg_check_fails > 0))
}

# serve WORK [qpgate-server flags...]: start a server on a free port with
# certificates from WORK (made by scripts/make-certs), log in WORK/server.log;
# sets $srv (pid) and $port once it listens.
serve() {
	local dir=$1
	shift
	rm -f "$dir/port"
	"$bin/qpgate-server" --cert "$dir/server.crt" --key "$dir/server.key" -p 0 \
		--port-file "$dir/port" "$@" 2>"$dir/server.log" &
	srv=$!
	for _ in $(seq 1 300); do
		[ -s "$dir/port" ] && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.1
	done
	read -r port _ <"$dir/port"
}
