#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The lean build a packager may want: -DBUILD_TESTING=OFF (no cmocka, no
# tests) and -DQPG_METRICS=OFF (no libmicrohttpd) still builds the
# libraries and every tool, and --metrics then fails with a clear reason.
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/qpg-variant.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake -S "$here" -B "$work/b" -DBUILD_TESTING=OFF -DQPG_METRICS=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/cfg.log" 2>&1 &&
	cmake --build "$work/b" -j"$(nproc)" >"$work/build.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -20 "$work/build.log" "$work/cfg.log" | sed 's/^/  /'
check "configure and build with BUILD_TESTING=OFF QPG_METRICS=OFF (exit $rc)" [ $rc = 0 ]
check "cmocka was not looked for" bash -c "! grep -qi '^CMOCKA' '$work/b/CMakeCache.txt'"
check "libmicrohttpd was not linked" bash -c "! ldd '$work/b/bin/qpgate-server' | grep -q microhttpd"
for t in qpgate-server qpgate-client qpgate-perf qpgate-sweep qpgate-kv qpgate-kvbench; do
	check "$t built and runs (--version)" "$work/b/bin/$t" --version
done
"$here/scripts/make-certs" "$work" localhost >/dev/null 2>&1
out=$("$work/b/bin/qpgate-server" --transport tcp -p 0 --cert "$work/server.crt" \
	--key "$work/server.key" --metrics 127.0.0.1:0 2>&1)
rc=$?
echo "  $out"
check "--metrics without libmicrohttpd: exit 1 with the reason (exit $rc)" \
	eval '[ $rc -ne 0 ] && grep -q "built without libmicrohttpd" <<<"$out"'
finish_checks
