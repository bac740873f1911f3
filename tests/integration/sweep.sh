#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# qpgate-sweep end to end: against servers limited to LIMIT clients, the
# progressive steps and the binary search must find exactly LIMIT, and the
# report directory must hold valid JSON, the Markdown table and an HTML page
# with its four charts. Timings are reported, never asserted.
#   sweep.sh TRANSPORT [LIMIT]
transport=$1
limit=${2:-60}
. "$(dirname "$0")/lib.sh"
qpg_test_setup sweep
"$bin/qpgate-sweep" --steps 10,40,80 --resolution 0 --out "$work/rep" --compare-seeds \
	--server-args "--transport $transport --cert $work/server.crt --key $work/server.key --max-clients $limit --max-qps-per-peer 0" \
	-- --transport "$transport" --ca "$work/ca.crt" -n 3 -s 128 127.0.0.1 localhost >"$work/out" 2>"$work/err"
rc=$?
cat "$work/out"
check_json_run qpgate-sweep $rc "$work/rep/report.json"
check "progressive steps 10, 40, 80 ran first" j '[.results.points[] | select(.stage == "step") | .clients] == [10, 40, 80]'
check "10 and 40 at 100% with every echo verified" j '[.results.points[] | select(.clients <= 40) | .success_rate == 1 and .all_verified] | all'
check "80 refused beyond the limit ($limit of 80)" j ".results.points[] | select(.clients == 80) | .connected == $limit and .success_rate < 1"
check "binary search found exactly $limit at 100%" j ".results.largest_at_100.clients == $limit and .results.largest_at_100.first_failure_at == $((limit + 1))"
check "and at >= 99%" j ".results.largest_at_99.clients == $limit"
check "refusals are reported by reason" j '.results.points[] | select(.clients == 80) | .failures | test("server_full 20")'
check "every run settled and its server exited cleanly" j '[.results.points[] | .settled and .server_exit_ok] | all'
check "every run kept qpgate-perf's own JSON" j '[.results.points[] | .perf.tool == "qpgate-perf"] | all'
check "with --compare-seeds, the seeds' published numbers are in the report" j '.parameters.compare_seeds and .results.seeds.largest_at_100 == 300 and (.results.seeds.runs | length) == 7'
check "report.md sets them beside ours, from the data file" grep -q '^| largest N at 100% success | .* | 300 |' "$work/rep/report.md"
mkdir -p "$work/badseeds"
echo '{"source": "x", "runs": []}' >"$work/badseeds/seed-runs.json"
out=$(QPGATE_DATADIR=$work/badseeds "$bin/qpgate-sweep" --compare-seeds -- 127.0.0.1 localhost 2>&1); rc=$?
check "a seed file that does not parse is refused before any run, naming it (exit $rc)" \
	eval '[ $rc -eq 2 ] && grep -q "seed figures in $work/badseeds/seed-runs.json" <<<"$out"'
check "report.md has the table" grep -q "^| $limit | search-100 | $limit | 100.00% | all verified" "$work/rep/report.md"
check "report.html has four SVG charts" [ "$(grep -c '<svg ' "$work/rep/report.html")" -eq 4 ]
check "report.html is self-contained (no external fetches)" sh -c "! grep -Eq '(src|href)=\"?(https?:)?//' '$work/rep/report.html'"
check "the breaking point ($((limit + 1))) names the limit that refused, with the client's reason" \
	j ".results.breaking_point.clients == $((limit + 1)) and .results.breaking_point.resource == \"server admission limit\" and (.results.breaking_point.evidence | test(\"server full\"))"
check "report.md names it" grep -q "^\*\*Breaking point:\*\* at $((limit + 1)) clients, server admission limit ran out first" "$work/rep/report.md"

# A resource, not a setting: with open files limited to 100, the server runs
# out of fds past about 90 clients, and the sweep must say so, with the limit.
(
	ulimit -n 100
	"$bin/qpgate-sweep" --steps 20,200 --search-iters 1 --out "$work/fds" \
		--server-args "--transport $transport --cert $work/server.crt --key $work/server.key" \
		-- --transport "$transport" --ca "$work/ca.crt" -n 3 --handshake-timeout 3000 --timeout 30000 127.0.0.1 localhost
) >"$work/out" 2>&1
qpg_json_file=$work/fds/report.json
check "fd-limited sweep: 20 clients at 100%" j '.results.points[] | select(.clients == 20) | .success_rate == 1'
check "fd-limited sweep: 200 clients missed, and fds ran out first, at RLIMIT_NOFILE 100" \
	j '.results.points[] | select(.clients == 200) | .success_rate < 1 and .exhausted.resource == "fds" and .exhausted.value == "RLIMIT_NOFILE 100"'
check "fd-limited sweep: the breaking point is fds" j '.results.breaking_point.resource == "fds"'
check "connects that failed at once (EMFILE) end the run: it did not wait for its timeout" \
	sh -c "! grep -l 'run timed out' '$work'/fds/runs/perf-*.txt"
finish_checks
