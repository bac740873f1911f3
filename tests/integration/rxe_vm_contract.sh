#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The lab's contract: it shows the device, passes exit codes through, and
# never hangs. Each step prints what it saw; any mismatch fails the test.
set -u
vm="$(cd "$(dirname "$0")/../.." && pwd -P)/scripts/rxe-vm"
fail=0
tmp=${TMPDIR:-/tmp}
before=$(ls -d "$tmp"/rxe-vm.* 2>/dev/null | sort)

# One boot for both (a boot is about 9 s of both cores): the device, then
# the command's own exit status.
out=$("$vm" -- sh -c 'ibv_devinfo -d rxe0 || exit 1; exit 7' 2>&1); rc=$?
if grep -q 'PORT_ACTIVE' <<<"$out" && grep -q 'hca_id:.*rxe0' <<<"$out"; then
	echo "PASS ibv_devinfo shows rxe0 PORT_ACTIVE"
else
	echo "FAIL ibv_devinfo (rc=$rc): $out"; fail=1
fi
if [ $rc -eq 7 ]; then echo "PASS exit status 7 passed through"; else echo "FAIL exit status: got $rc, want 7"; fail=1; fi

start=$SECONDS
err=$("$vm" --timeout 15 -- sleep 1000 2>&1 >/dev/null); rc=$?
took=$((SECONDS - start))
if [ $rc -eq 124 ] && grep -q TIMEOUT <<<"$err"; then
	echo "PASS timeout: exit 124 after ${took}s with '$err'"
else
	echo "FAIL timeout: rc=$rc after ${took}s: $err"; fail=1
fi

left=$(comm -13 <(echo "$before") <(ls -d "$tmp"/rxe-vm.* 2>/dev/null | sort) | grep -c . || true)
if [ "$left" -eq 0 ]; then echo "PASS the two runs left no state dir behind"; else echo "FAIL $left state dir(s) left behind"; fail=1; fi
exit $fail
