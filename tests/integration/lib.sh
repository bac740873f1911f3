# Shared by the integration scripts: one way to report a check.
# check DESCRIPTION COMMAND...: runs COMMAND, prints PASS/FAIL, counts fails.
fails=0
check() {
	local what=$1
	shift
	if "$@"; then echo "PASS $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
finish_checks() {
	[ $fails -eq 0 ] && echo "all checks passed" || echo "$fails check(s) failed"
	exit $((fails > 0))
}
