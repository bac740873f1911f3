#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The kill -9 storm at full size: 1,000 client processes per round, SIGKILLed
# at random points of TLS, bootstrap, QP bring-up and data, 10 rounds, while
# bystanders echo; prints the server's RSS, fds and QPs after every round.
#   scripts/rxe-vm --mem 8192 -- bench/killstorm.sh [N] [ROUNDS] [WINDOW_MS]   (rdma, in the lab)
#   bench/killstorm.sh --tcp [N] [ROUNDS] [WINDOW_MS]                           (tcp, here)
# Each client is killed 0 to WINDOW_MS after its start (default 3000 over tcp,
# 20000 in the lab, where clients started by the hundred take seconds to start).
set -u
here=$(cd "$(dirname "$0")/.." && pwd -P)
transport=rdma window=20000
if [ "${1:-}" = --tcp ]; then transport=tcp window=3000; shift; fi
export QPG_BIN=${QPG_BIN:-$here/build/bin}
exec "$here/tests/integration/storm.sh" "$transport" kill "${1:-1000}" "${2:-10}" "${3:-$window}"
