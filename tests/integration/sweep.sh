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
	--server-args "--transport $transport --cert $work/server.crt --key $work/server.key --max-clients $limit" \
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
check "report.md has the table" grep -q "^| $limit | search-100 | $limit | 100.00% | all verified" "$work/rep/report.md"
check "report.html has four SVG charts" [ "$(grep -c '<svg ' "$work/rep/report.html")" -eq 4 ]
check "report.html is self-contained (no external fetches)" sh -c "! grep -Eq '(src|href)=\"?(https?:)?//' '$work/rep/report.html'"
finish_checks
