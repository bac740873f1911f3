#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The nemesis test at length: tests/nemesis/nemesis.sh for SECONDS (600 by
# default) with a seed, on the host (tcp) or in the lab (rdma: one VM, the
# servers, etcd, the proxies and the clients on one rxe device). Prints the
# faults, every read's verdict and the seed; exits non-zero on any stale,
# phantom or torn read.
#   bench/nemesis.sh [-t tcp|rdma] [-s SECONDS] [-S SEED]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd -P)
transport=tcp secs=600 seed=$((RANDOM * 32768 + RANDOM))
while getopts "t:s:S:" o; do
	case $o in
	t) transport=$OPTARG ;;
	s) secs=$OPTARG ;;
	S) seed=$OPTARG ;;
	*) echo "usage: $0 [-t tcp|rdma] [-s SECONDS] [-S SEED]" >&2; exit 2 ;;
	esac
done
case $transport in
tcp) exec "$here/tests/nemesis/nemesis.sh" tcp "$secs" "$seed" ;;
rdma) QPG_LAB_MEM=${QPG_LAB_MEM:-4096} exec "$here/tests/lab-run" "$here/tests/nemesis/nemesis.sh" rdma "$secs" "$seed" ;;
*) echo "nemesis.sh: -t is tcp or rdma" >&2; exit 2 ;;
esac
