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

. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/serve.sh"
