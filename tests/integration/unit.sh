#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The shipped systemd unit's sandbox, applied without systemd
# (unit_sandbox.py), around a real server: it listens, brings clients up
# (rdma: through /dev/infiniband, with locked memory), serves /metrics, and
# holds no device but the verbs ones. First, that the sandbox is real: what
# the unit forbids fails inside it.
#   unit.sh TRANSPORT
transport=$1
. "$(dirname "$0")/lib.sh"
qpg_test_setup unit
unit=$bin/../systemd/qpgate-server.service
sandbox() { /usr/bin/python3 "$here/tests/integration/unit_sandbox.py" "$unit" -- "$@"; }
[ -f "$unit" ] || { echo "FAIL no unit at $unit (build first)"; exit 1; }
# The sandbox has a tmpfs of its own on /tmp and runs as nobody: the
# certificates go where it can read them.
certs=$(mktemp -d /var/tmp/qpg-unit.XXXXXX)
trap 'kill -9 $srv 2>/dev/null; rm -rf "$certs" "$work"' EXIT
cp "$work"/ca.crt "$work"/server.crt "$work"/server.key "$certs/"
chmod 755 "$certs" && chmod 644 "$certs"/*
# A directory anyone may write to: inside, only ProtectSystem keeps it so.
mkdir -m 1777 "$certs/w"
srv=""

# The sandbox is real: each of these fails inside it, and works outside.
# One sandbox run tries them all, each printing its exit status (a Python
# process takes about 5 s to start in the lab VM, so the probes are shell,
# util-linux's taskset and perl-base's syscall).
probe='echo "uid $(id -u)"
taskset -c 0 true 2>/dev/null; echo "affinity $?"
perl -e "exit(syscall(9, 0, 4096, 7, 0x22, -1, 0) == -1 ? 1 : 0)"; echo "wx $?"
test -e /proc/1/status; echo "proc $?"
touch "$1/w/probe" 2>/dev/null; echo "write $?"'
sandbox bash -c "$probe" probe "$certs" >"$work/inside" 2>&1
rc=$?
check "the sandbox ran the probes (exit $rc; 125: the sandbox itself failed)" [ $rc -eq 0 ]
bash -c "$probe" probe "$certs" >"$work/outside" 2>&1
rm -f "$certs/w/probe"
said() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
# denied PROBE: it ran inside, and failed there.
denied() { local v; v=$(said "$1" "$work/inside"); [ -n "$v" ] && [ "$v" != 0 ]; }
check "inside, it runs as no account (uid $(said uid "$work/inside"))" [ "$(said uid "$work/inside")" = 65534 ]
check "a system call the unit denies fails (sched_setaffinity, in ~@resources)" denied affinity
check "memory writable and executable at once is refused (MemoryDenyWriteExecute)" denied wx
check "other processes are invisible (ProtectProc=invisible)" denied proc
check "the tree is read-only (ProtectSystem=strict)" denied write
check "...and outside the sandbox all of these work" \
	bash -c "[ '$(said affinity "$work/outside")$(said wx "$work/outside")$(said proc "$work/outside")$(said write "$work/outside")' = 0000 ]"

# The server inside it. (In a sanitizer build, LeakSanitizer's check at
# exit stops the process's threads with ptrace, which the unit forbids:
# the check fails fatally and the server exits 1. Leaks are checked by
# every other test, outside the sandbox.)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
port=17000 mport=$((17000 + 1 + RANDOM % 1000))
port=$((port + RANDOM % 1000))
/usr/bin/python3 "$here/tests/integration/unit_sandbox.py" "$unit" -- "$bin/qpgate-server" --cert "$certs/server.crt" --key "$certs/server.key" --transport "$transport" \
	-p "$port" --metrics "127.0.0.1:$mport" 2>"$work/server.log" &
srv=$!
for _ in $(seq 1 100); do
	ss -ltn | grep -q ":$port " && break
	sleep 0.1
done
out=$("$bin/qpgate-client" --transport "$transport" --ca "$certs/ca.crt" -p "$port" -c 4 -n 100 127.0.0.1 localhost 2>&1)
rc=$?
grep -E '^ 4 ' <<<"$out" | sed 's/^/  /'
check "4 $transport clients connected and verified 400 echoes through the sandboxed server (exit $rc)" [ $rc -eq 0 ]
curl -fsS "http://127.0.0.1:$mport/metrics" >"$work/metrics" 2>&1
check "its /metrics answers" grep -q '^qpgate_handshakes_total{result="ok"} 4' "$work/metrics"
if command -v promtool >/dev/null; then
	check "promtool check metrics accepts it" bash -c "promtool check metrics <'$work/metrics'"
fi
devs=$(for f in /proc/$srv/fd/*; do readlink "$f"; done | grep '^/dev/' | sort -u | paste -sd ' ' -)
echo "  character devices it holds: ${devs:-none}"
# (DevicePolicy=closed always leaves /dev/null, zero, full, random, urandom.)
others=$(tr ' ' '\n' <<<"$devs" | grep -Ev '^(/dev/infiniband/uverbs[0-9]+|/dev/(null|zero|full|u?random))$')
check "it holds no device but the verbs ones (DeviceAllow=char-infiniband_verbs)" [ -z "$others" ]
# (Over rdma in the lab the verbs device does not show as a /dev path in
# the sandbox's own mount namespace; that the clients above came up over
# rdma is what shows verbs working in it.)
kill -TERM "$srv"
wait "$srv"
rc=$?
srv=""
check "it stopped cleanly (exit $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -5 "$work/server.log" | sed 's/^/   /'
finish_checks
