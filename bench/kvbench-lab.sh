#!/usr/bin/env bash
# qpgate-kvbench against a fresh KV server on one rxe device, in the lab.
#   bench/kvbench-lab.sh [qpgate-kvbench flags]      e.g. --scaling -D 5
# Boots the lab unless it already runs on an RDMA device. Writes
# build/bench/kvbench.json.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
if [ -z "${QPG_KVB_INNER:-}" ]; then
	QPG_KVB_INNER=1 QPG_LAB_MEM=${QPG_LAB_MEM:-6144} QPG_LAB_TIMEOUT=${QPG_LAB_TIMEOUT:-2400} \
		exec "$repo/tests/lab-run" "$0" "$@"
fi
bin=${QPG_BIN:-$repo/build/bin}
out=${QPG_BENCH_OUT:-$repo/build/bench}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/qpg-kvb.XXXXXX")
srv=""
trap 'if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
. "$repo/scripts/serve.sh"
"$repo/scripts/make-certs" "$work" localhost 2>/dev/null
qpg_serve "$work" --handshake-timeout 120000 --service kv --kv-capacity 256M -s 8192
echo " server: $(ibv_devices | awk 'NR==3{print $1}'), QPs on the device before: $(rdma res show qp | grep -c lqpn)"
rc=0
"$bin/qpgate-kvbench" --ca "$work/ca.crt" -p "$port" --handshake-timeout 60000 \
	--json "$out/kvbench.json" "$@" 127.0.0.1 localhost || rc=$?
echo " server RSS: $(awk '/VmRSS/{print $2}' "/proc/$srv/status") kB"
kill -TERM "$srv"
wait "$srv" || true
srv=""
grep 'stats:' "$work/server.log" | sed 's/^/ /'
echo " QPs on the device after: $(rdma res show qp | grep -c lqpn)"
exit $rc
