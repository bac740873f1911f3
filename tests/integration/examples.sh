#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# examples/ against an installed qpgate, as an application would build
# them: cmake --install into a fresh prefix, then the examples built once
# with pkg-config and once with find_package(qpgate), and run over tcp
# (kv_cluster against three members and an etcd of the test's own).
. "$(dirname "$0")/lib.sh"
. "$here/scripts/etcd.sh"
build=${QPG_BUILD:-$here/build}
work=$(mktemp -d "${TMPDIR:-/tmp}/qpg-examples.XXXXXX")
srv="" esrv="" members=""
trap 'kill -9 $srv $esrv $members 2>/dev/null; qpg_etcd_stop; rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1
check "cmake --install into a fresh prefix" [ -f "$prefix/lib/libqpgate.a" ]
for f in include/qpgate/service.h include/qpgate/version.h lib/pkgconfig/qpgate.pc \
	lib/pkgconfig/qpgate-kv.pc lib/pkgconfig/qpgate-cluster.pc lib/cmake/qpgate/qpgateConfig.cmake \
	lib/libqpgate-kv.a lib/libqpgate-cluster.a lib/libqpgate.so.0 lib/libqpgate-kv.so.0 \
	lib/libqpgate-cluster.so.0 include/qpgate/kv_target.h share/qpgate/seed-runs.json bin/qpgate-server share/man/man8/qpgate-server.8 \
	share/man/man1/qpgate-client.1 share/man/man1/qpgate-perf.1 share/man/man1/qpgate-sweep.1 \
	share/man/man1/qpgate-kv.1 share/man/man1/qpgate-kvbench.1 \
	lib/systemd/system/qpgate-server.service share/doc/qpgate/LICENSE; do
	check "installed: $f" [ -f "$prefix/$f" ]
done
check "the man pages render and name their tool's flags" \
	bash -c "man -l '$prefix/share/man/man8/qpgate-server.8' 2>/dev/null | grep -q -- '--handshake-timeout'"
check "the unit runs the installed server, Type=notify, LimitMEMLOCK=infinity" \
	bash -c "grep -q '^ExecStart=/.*/bin/qpgate-server --cert ' '$prefix/lib/systemd/system/qpgate-server.service' &&
		grep -q '^Type=notify' '$prefix/lib/systemd/system/qpgate-server.service' &&
		grep -q '^LimitMEMLOCK=infinity' '$prefix/lib/systemd/system/qpgate-server.service'"
if command -v systemd-analyze >/dev/null; then
	check "systemd-analyze verify accepts the unit" \
		bash -c "systemd-analyze verify '$prefix/lib/systemd/system/qpgate-server.service' 2>&1 | grep -v 'not executable\|No such file\|Failed to prepare\|Command .* is not' | { ! grep -qi 'error\|unknown\|invalid\|failed to parse'; }"
fi
check "libqpgate.so has its SONAME" bash -c "readelf -d '$prefix/lib/libqpgate.so' | grep -q 'SONAME.*libqpgate.so.0'"
check "libqpgate.so exports no internal qpg__ name but the client's test hooks" \
	bash -c "! nm -D --defined-only '$prefix/lib/libqpgate.so' | awk '{print \$3}' | grep '^qpg__' | grep -v '^qpg__client_'"
check "libqpgate-cluster.so has its SONAME, and exports no qpg__ name" \
	bash -c "readelf -d '$prefix/lib/libqpgate-cluster.so' | grep -q 'SONAME.*libqpgate-cluster.so.0' &&
		! nm -D --defined-only '$prefix/lib/libqpgate-cluster.so' | awk '{print \$3}' | grep -q '^qpg__'"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export LD_LIBRARY_PATH=$prefix/lib
# A sanitizer build's libraries need the same flags in what links them.
san=$(sed -n 's/^QPG_SANITIZE:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null)
sanflags=""
[ "$san" = address ] && sanflags="-fsanitize=address,undefined"
[ "$san" = thread ] && sanflags="-fsanitize=thread"
mkdir -p "$work/pc"
ok=1
for ex in echo_server echo_client hello; do
	cc -std=c11 -Wall -Werror $sanflags -o "$work/pc/$ex" "$here/examples/$ex.c" \
		$(pkg-config --cflags --libs qpgate) >>"$work/cc.log" 2>&1 || ok=0
done
cc -std=c11 -Wall -Werror $sanflags -o "$work/pc/kv_putget" "$here/examples/kv_putget.c" \
	$(pkg-config --cflags --libs qpgate-kv) >>"$work/cc.log" 2>&1 || ok=0
cc -std=c11 -Wall -Werror $sanflags -o "$work/pc/kv_cluster" "$here/examples/kv_cluster.c" \
	$(pkg-config --cflags --libs qpgate-cluster) >>"$work/cc.log" 2>&1 || ok=0
[ $ok = 1 ] || sed 's/^/  /' "$work/cc.log"
check "the examples build with pkg-config qpgate / qpgate-kv / qpgate-cluster" [ $ok = 1 ]
check "kv_cluster links the installed libqpgate-cluster.so.0" \
	bash -c "ldd '$work/pc/kv_cluster' | grep -q '$prefix/lib/libqpgate-cluster.so.0'"
check "and link the shared library" bash -c "ldd '$work/pc/echo_client' | grep -q '$prefix/lib/libqpgate.so.0'"
cmake -S "$here/examples" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS="$sanflags" -DCMAKE_EXE_LINKER_FLAGS="$sanflags" >"$work/cm.log" 2>&1 &&
	cmake --build "$work/cm" >>"$work/cm.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -20 "$work/cm.log" | sed 's/^/  /'
check "the examples build with find_package(qpgate)" [ $rc = 0 ]

"$here/scripts/make-certs" "$work" localhost >/dev/null 2>&1
"$work/pc/echo_server" 0 "$work/server.crt" "$work/server.key" tcp >"$work/echo.out" 2>&1 &
esrv=$!
for _ in $(seq 1 50); do grep -q listening "$work/echo.out" && break; sleep 0.1; done
eport=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$work/echo.out")
out=$("$work/cm/echo_client" 127.0.0.1 "${eport:-1}" "$work/ca.crt" 100 tcp 2>&1)
echo "  $out"
check "the example service echoed 100 of 100, all verified" grep -q '100 of 100 echoes, 0 wrong' <<<"$out"
kill -TERM "$esrv"; wait "$esrv"; rc=$?; esrv=""
check "echo_server stopped cleanly (exit $rc)" [ $rc = 0 ]

bin=$prefix/bin
qpg_serve "$work" --transport tcp || exit 1
out=$("$work/pc/hello" 127.0.0.1 "$port" "$work/ca.crt" tcp 2>&1); rc=$?
echo "  $out"
check "examples/hello.c (a dozen lines, pkg-config qpgate): one echo against the installed server (exit $rc)" \
	eval '[ $rc -eq 0 ] && [ "$out" = "echoed: hello, qpgate" ]'
kill -TERM "$srv"; wait "$srv"; srv=""
qpg_serve "$work" --transport tcp --service kv --kv-capacity 4M || exit 1
out=$("$work/pc/kv_putget" 127.0.0.1 "$port" "$work/ca.crt" greeting "hello, qpgate" tcp 2>&1)
echo "  $out"
check "kv_putget stored a value and read it back" grep -q 'PUT ok, GET ok: "hello, qpgate"' <<<"$out"
kill -TERM "$srv"; wait "$srv"; srv=""
# kv_cluster (pkg-config qpgate-cluster) against three installed servers
# that join a cluster in an etcd of this test's own.
if qpg_etcd_start "$work"; then
	for m in m1 m2 m3; do
		"$bin/qpgate-server" --transport tcp --service kv --kv-capacity 16M -p 0 \
			--cert "$work/server.crt" --key "$work/server.key" --cluster "$etcd_url" \
			--cluster-name ex --cluster-id $m --advertise-name localhost --cluster-ttl 3 \
			2>>"$work/$m.log" &
		members="$members $!"
	done
	for _ in $(seq 1 150); do
		[ "$("$bin/qpgate-cluster" --cluster "$etcd_url" --cluster-name ex status 2>/dev/null |
			grep -c ' active ')" = 3 ] && break
		sleep 0.1
	done
	out=$("$work/pc/kv_cluster" "$etcd_url" ex "$work/ca.crt" 300 2>&1); rc=$?
	echo "$out" | sed 's/^/  /'
	check "examples/kv_cluster.c (pkg-config qpgate-cluster): 300 values through a 3-member cluster (exit $rc)" \
		eval '[ $rc -eq 0 ] && grep -q "300 of 300 values stored and read back" <<<"$out"'
	check "kv_cluster: every member served some (the keys spread over 3)" \
		[ "$(grep -cE '^ +m[123] +up +ops [1-9]' <<<"$out")" = 3 ]
	out=$("$work/cm/kv_cluster" "$etcd_url" ex "$work/ca.crt" 20 2>&1); rc=$?
	check "kv_cluster built with find_package (qpgate::cluster) runs too (exit $rc)" [ $rc = 0 ]
	kill -TERM $members; wait $members 2>/dev/null; members=""
	qpg_etcd_stop
else
	check "an etcd for kv_cluster started" false
fi
qpg_serve "$work" --transport tcp --service kv --kv-capacity 4M || exit 1
# The Python package, installed as a user would (a venv of Debian's python3,
# no downloads), over the installed library; then its example. (An ASan
# library needs its runtime loaded first; under TSan, not run.)
pyrun=()
[ "$san" = address ] && pyrun=(env "LD_PRELOAD=$(cc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
if [ "$san" != thread ]; then
cp -r "$here/python" "$work/python"
/usr/bin/python3 -m venv --system-site-packages "$work/venv" >"$work/pip.log" 2>&1 &&
	"$work/venv/bin/python" -m pip install --no-index --no-build-isolation "$work/python" >>"$work/pip.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -5 "$work/pip.log" | sed 's/^/  /'
check "pip install ./python into a venv, offline (exit $rc)" [ $rc = 0 ]
head -c 300000 /dev/urandom >"$work/blob.bin"
out=$(cd "$work" && "${pyrun[@]}" "$work/venv/bin/python" "$here/examples/kv_file.py" 127.0.0.1 localhost \
	"$work/ca.crt" "$work/blob.bin" "$port" tcp 2>&1)
echo "  $out"
check "examples/kv_file.py put a 300 kB file and got the same bytes back" grep -q 'got 300000 back, the same' <<<"$out"
fi
kill -TERM "$srv"; wait "$srv"; srv=""
finish_checks
