# Shared by the integration scripts, sourced first: . "$(dirname "$0")/lib.sh"
# Sets -u and $here (the checkout); one way to report a check.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
# check DESCRIPTION COMMAND...: runs COMMAND, prints PASS/FAIL, counts the failures.
qpg_check_fails=0
check() {
	local what=$1
	shift
	if "$@"; then echo "PASS $what"; else echo "FAIL $what"; qpg_check_fails=$((qpg_check_fails + 1)); fi
}
# check_json_run TOOL RC FILE: TOOL exited RC and wrote the JSON FILE;
# checks both, and defines j EXPR (jq -e EXPR on FILE) for the checks after.
check_json_run() {
	qpg_json_file=$3
	check "$1 exit 0" [ "$2" -eq 0 ]
	check "$(basename "$3") parses with jq" j '.'
	check "$(basename "$3") has the tools' one JSON schema (docs/json.md)" "$bin/json_check" "$3"
}
j() { jq -e "$1" "$qpg_json_file" >/dev/null; }
finish_checks() {
	[ $qpg_check_fails -eq 0 ] && echo "all checks passed" || echo "$qpg_check_fails check(s) failed"
	exit $((qpg_check_fails > 0))
}

. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/serve.sh"

# qpg_test_setup NAME: the preamble every integration test shares. Sets
# $bin (QPG_BIN or build/bin), $work (a temporary directory with fresh
# certificates for localhost, removed at exit) and $srv (empty; a server
# started with qpg_serve is killed at exit, as is any background job).
qpg_test_setup() {
	bin=${QPG_BIN:-$here/build/bin}
	work=$(mktemp -d "${TMPDIR:-/tmp}/qpg-$1.XXXXXX")
	srv=""
	trap 'if [ -n "$srv" ]; then kill -9 "$srv" 2>/dev/null; fi; jobs -p | xargs -r kill -9 2>/dev/null; rm -rf "$work"' EXIT
	qpg_certs "$work"
}

# qpg_certs DIR: the test PKI of scripts/make-certs (a CA, a server
# certificate for localhost, a client certificate) in DIR. A copy of
# $QPG_TEST_CERTS when the build made one there (the test-certs target):
# making it costs the lab VM about 2.4 s of emulated openssl per test, a
# copy 0.05 s. A test that needs a second, unrelated PKI (another CA) calls
# make-certs itself.
qpg_certs() {
	if [ -n "${QPG_TEST_CERTS:-}" ] && [ -s "$QPG_TEST_CERTS/client.key" ]; then
		mkdir -p "$1" && cp -p "$QPG_TEST_CERTS"/* "$1"/
	else
		"$here/scripts/make-certs" "$1" localhost >/dev/null 2>&1
	fi
}

# metric NAME: one metric's value (NAME with its labels, as /metrics writes
# them) from the server qpg_serve started last with --metrics ($mport).
metric() { curl -fsS "http://127.0.0.1:$mport/metrics" | sed -n "s/^$1 //p"; }

# The device's QP count (rdma), or 0.
qps() { if [ "${transport:-tcp}" = rdma ]; then rdma res show qp | grep -c lqpn; else echo 0; fi; }
# qps_back N: the device's QP count comes back to N within 60 s (a server
# closes its side after the client's; says where it stopped if not).
qps_back() {
	local i
	for i in $(seq 1 600); do
		[ "$(qps)" -eq "$1" ] && return 0
		sleep 0.1
	done
	echo "  device QPs: $(qps), baseline $1"
	return 1
}

# qpg_stop_checked QP0: stop the server ($srv) with SIGTERM and check it went
# cleanly: exit 0, the device's QPs back to QP0, no sanitizer report in
# $work/server.log.
qpg_stop_checked() {
	kill -TERM "$srv"
	wait "$srv"
	local rc=$?
	srv=""
	check "server stopped cleanly (exit $rc)" [ $rc -eq 0 ]
	check "device QPs back to baseline $1" [ "$(qps)" -eq "$1" ]
	check "server log has no sanitizer report" \
		bash -c "! grep -Eq '(ERROR|WARNING): (Address|Leak|Thread|UndefinedBehavior)Sanitizer|runtime error:' '$work/server.log'"
}
