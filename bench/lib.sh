# Shared by the bench scripts. Source it with the script's own "$@":
#   . "$(dirname "$0")/lib.sh"
# It sets $repo (the checkout), $bin (QPG_BIN or build/bin) and $out
# (QPG_BENCH_OUT or build/bench, created).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
bin=${QPG_BIN:-$repo/build/bin}
out=${QPG_BENCH_OUT:-$repo/build/bench}
. "$repo/scripts/serve.sh"

# qpg_bench_in_lab MEM_MB TIMEOUT_S ARGS...: unless already inside the lab
# (QPG_BENCH_INNER set), run this script there with ARGS and do not come
# back. QPG_LAB_MEM and QPG_LAB_TIMEOUT override the two sizes.
qpg_bench_in_lab() {
	local mem=$1 timeout=$2
	shift 2
	[ -n "${QPG_BENCH_INNER:-}" ] && return 0
	QPG_BENCH_INNER=1 QPG_LAB_MEM=${QPG_LAB_MEM:-$mem} QPG_LAB_TIMEOUT=${QPG_LAB_TIMEOUT:-$timeout} \
		exec "$repo/tests/lab-run" "$0" "$@"
}

# qpg_bench_setup NAME: $work (a temporary directory with certificates for
# localhost, removed at exit) and $srv (a server started there with
# qpg_serve is stopped at exit, as is anything in the $pids array).
qpg_bench_setup() {
	mkdir -p "$out"
	work=$(mktemp -d "${TMPDIR:-/tmp}/qpg-$1.XXXXXX")
	srv=""
	pids=()
	trap 'for p in $srv "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
	"$repo/scripts/make-certs" "$work" localhost 2>/dev/null
}

# qpg_perftest TOOL FLAGS...: a perftest pair (server, then client to
# 127.0.0.1) on the lab's lo-backed device ($dev, GID 1 = ::ffff:127.0.0.1);
# prints the client's output. $work must exist.
qpg_perftest() {
	local tool=$1
	shift
	"$tool" -d "$dev" -x 1 -p 18515 "$@" >"$work/$tool.srv" 2>&1 &
	local sp=$!
	sleep 2
	"$tool" -d "$dev" -x 1 -p 18515 "$@" 127.0.0.1 >"$work/$tool.cli" 2>&1 || {
		cat "$work/$tool.cli" >&2
		return 1
	}
	wait "$sp" || true
	cat "$work/$tool.cli"
}

# Repeated runs: a median, and ratios that survive a missing figure.
# median: the median of the numbers on stdin ("null" lines are skipped;
# none left prints null). med VALUES...: the same of its arguments.
median() { grep -v '^null$' | sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "null"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
med() { printf '%s\n' "$@" | median; }
# medr RATIOS...: their median to 3 decimals (null when none is left).
medr() { med "$@" | awk '{if ($1 == "null") print; else printf "%.3f", $1}'; }
# ratio A B: A / B to 3 decimals, or null when either is missing or B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a != "null" && b != "null" && b + 0 > 0) printf "%.3f", a / b; else print "null"}'; }
# jarr VALUES...: a JSON array of them (numbers or null).
jarr() { printf '%s\n' "$@" | jq -s -c .; }
# j NAME FILTER: jq -r FILTER on $work/NAME.json.
j() { jq -r "$2" "$work/$1.json"; }

# qpg_profile_report PERF_DATA COMMS: the top of perf report for the
# processes named in COMMS (comma-separated): by process over the whole VM,
# then COMMS by object, inclusive by named function, and self by symbol.
qpg_profile_report() (
	set +o pipefail # head closes the pipe early, on purpose
	local data=$1 comms=$2
	echo "# by process"
	perf report -i "$data" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
	echo "# $comms, by object"
	perf report -i "$data" --no-children --sort comm,dso --stdio -g none --comms "$comms" 2>/dev/null |
		grep -E '^ +[0-9]' | head -16
	echo "# $comms, inclusive (children), named functions only"
	perf report -i "$data" --children --sort sym --stdio -g none --comms "$comms" 2>/dev/null |
		grep -E '^ +[0-9]' | grep -v '\] 0x0000' | head -50
	echo "# by symbol (self)"
	perf report -i "$data" --no-children --sort comm,dso,symbol --stdio -g none --comms "$comms" 2>/dev/null |
		grep -E '^ +[0-9]' | head -45
)
