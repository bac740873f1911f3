#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# A short server/client session under valgrind memcheck (tcp transport, on
# the host): no invalid access, no uninitialised use, no leak, in either.
. "$(dirname "$0")/lib.sh"
qpg_test_setup vg
# Valgrind cannot run a sanitizer build (make asan / make tsan): skipped
# there (ctest's SKIP_RETURN_CODE), not failed.
if nm -D "$bin/qpgate-server" 2>/dev/null | grep -Eq '__(asan|tsan)_init'; then
	echo "SKIP: $bin/qpgate-server is a sanitizer build"
	exit 77
fi
vg=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect
	--errors-for-leak-kinds=definite,indirect --error-exitcode=99 --track-fds=no)
"${vg[@]}" --log-file="$work/server.vg" "$bin/qpgate-server" --transport tcp \
	--cert "$work/server.crt" --key "$work/server.key" -p 0 --port-file "$work/port" \
	--metrics 127.0.0.1:0 2>"$work/server.log" &
srv=$!
for _ in $(seq 1 600); do [ -s "$work/port" ] && break; sleep 0.1; done
read -r port mport <"$work/port"
"${vg[@]}" --log-file="$work/client.vg" "$bin/qpgate-client" --transport tcp --ca "$work/ca.crt" \
	-p "$port" -c 5 -n 20 -s 512 127.0.0.1 localhost >"$work/client.out" 2>&1
crc=$?
curl -sf "http://127.0.0.1:$mport/metrics" >/dev/null
check "metrics scraped under valgrind" [ $? -eq 0 ]
kill -TERM "$srv"; wait "$srv"; src=$?; srv=""
for who in client server; do
	grep -E "ERROR SUMMARY|definitely lost|indirectly lost" "$work/$who.vg" | sed "s/^==[0-9]*== /  $who: /"
done
check "client: 100 echoes verified, valgrind clean (exit $crc)" [ $crc -eq 0 ]
check "server: valgrind clean after SIGTERM (exit $src)" [ $src -eq 0 ]
check "client: 0 errors" grep -q "ERROR SUMMARY: 0 errors" "$work/client.vg"
check "server: 0 errors" grep -q "ERROR SUMMARY: 0 errors" "$work/server.vg"
finish_checks
