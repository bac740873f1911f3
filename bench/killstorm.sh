#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The kill -9 storm at full size: 1,000 client processes per round, SIGKILLed
# at random points of TLS, bootstrap, QP bring-up and data, 10 rounds, while
# bystanders echo; prints the server's RSS, fds and QPs after every round.
#   scripts/rxe-vm --mem 8192 -- bench/killstorm.sh [N] [ROUNDS]   (rdma, in the lab)
#   bench/killstorm.sh --tcp [N] [ROUNDS]                           (tcp, here)
set -u
here=$(cd "$(dirname "$0")/.." && pwd -P)
transport=rdma
if [ "${1:-}" = --tcp ]; then transport=tcp; shift; fi
export QPG_BIN=${QPG_BIN:-$here/build/bin}
exec "$here/tests/integration/storm.sh" "$transport" kill "${1:-1000}" "${2:-10}"
