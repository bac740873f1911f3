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
	if [ -n "${QPG_BENCH_INNER:-}" ]; then
		qpg_bench_lab_cpu
		return 0
	fi
	QPG_BENCH_INNER=1 QPG_LAB_MEM=${QPG_LAB_MEM:-$mem} QPG_LAB_TIMEOUT=${QPG_LAB_TIMEOUT:-$timeout} \
		exec "$repo/tests/lab-run" "$0" "$@"
}

# qpg_bench_lab_cpu: in the lab VM under TCG (emulated CPU), tell OpenSSL
# not to use AVX or SSSE3 code: QPG_LAB_IA32CAP (default
# ~0x1000020000000000, OpenSSL's OPENSSL_ia32cap syntax) becomes
# OPENSSL_ia32cap for everything the bench runs there, and the chosen mask
# is in $qpg_ia32cap for its JSON. TCG translates AVX instructions one by
# one into slow helpers, so OpenSSL's choice for the CPU qemu describes is
# the slow one here. In the lab VM: AES-128-GCM over 4 KiB 25.7 MB/s with
# AVX, 49.1 MB/s with the mask (openssl speed); a 64 KiB SHA-256 digest
# the same in one process, but qpg_read_floor's 2 threads of READs and
# SHA-256 reach 68.6 MB/s instead of 60.4. On real hardware (or --kvm) the
# mask is not set: there AVX is the fast path. QPG_LAB_IA32CAP= (empty)
# keeps OpenSSL's own choice in the lab too.
qpg_ia32cap=""
qpg_bench_lab_cpu() {
	[ -n "${QPG_IN_LAB:-}" ] && [ "${QPG_LAB_ACCEL:-}" = tcg ] || return 0
	qpg_ia32cap=${QPG_LAB_IA32CAP-~0x1000020000000000}
	[ -n "$qpg_ia32cap" ] || return 0
	export OPENSSL_ia32cap=$qpg_ia32cap
	echo " lab CPU is emulated (tcg): OPENSSL_ia32cap=$qpg_ia32cap (no AVX/SSSE3 code in OpenSSL; QPG_LAB_IA32CAP= to keep its choice)"
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
# prints the client's output. $work must exist. A pair that fails is
# stopped (its server would hold the port against the next) and tried once
# more; if that fails too, its output goes to stderr and it returns 1: the
# caller records a missing figure (null), and the run goes on.
qpg_perftest() {
	local tool=$1 try sp
	shift
	for try in 1 2; do
		"$tool" -d "$dev" -x 1 -p 18515 "$@" >"$work/$tool.srv" 2>&1 &
		sp=$!
		sleep 2
		if "$tool" -d "$dev" -x 1 -p 18515 "$@" 127.0.0.1 >"$work/$tool.cli" 2>&1; then
			wait "$sp" || true
			cat "$work/$tool.cli"
			return 0
		fi
		kill "$sp" 2>/dev/null || true
		wait "$sp" 2>/dev/null || true
		echo "bench: $tool $* failed (try $try of 2):" >&2
		cat "$work/$tool.cli" "$work/$tool.srv" >&2
	done
	return 1
}

# Repeated runs: a median, and ratios that survive a missing figure.
# median: the median of the numbers on stdin ("null" lines are skipped;
# none left prints null). med VALUES...: the same of its arguments. Both
# succeed then: under pipefail grep's "no line left" (exit 1) would fail
# the caller, and a bench script (set -e) would end with no report.
median() { { grep -v '^null$' || true; } | sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "null"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
med() { printf '%s\n' "$@" | median; }
# num FORMAT VALUE: VALUE in printf's FORMAT (%W.Pf), or, when it is no
# number (null: no run had the figure), VALUE as it is in the same width,
# where printf %f would fail and end a script of set -e.
num() {
	if [[ $2 =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then
		printf "$1" "$2"
	else
		local w=${1#%}
		printf "%${w%%.*}s" "${2:-null}"
	fi
}
# medr RATIOS...: their median to 3 decimals (null when none is left).
medr() { med "$@" | awk '{if ($1 == "null") print; else printf "%.3f", $1}'; }
# ratio A B: A / B to 3 decimals, or null when either is missing (null, inf,
# nan: anything but a plain number) or B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{n = "^[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"; if (a ~ n && b ~ n && b + 0 > 0) printf "%.3f", a / b; else print "null"}'; }
# figure V [SCALE]: a figure read from perftest's table, V (or V * SCALE,
# rounded), or null when V is no plain positive number: empty (no row),
# or inf or nan (perftest's cycle clock failed).
figure() { awk -v v="$1" -v s="${2:-}" 'BEGIN{if (v !~ /^[0-9]+(\.[0-9]+)?$/ || v + 0 <= 0) print "null"; else if (s == "") print v; else printf "%.0f", v * s}'; }
# qpg_perftest_figure SIZE FIELDS COLUMN SCALE TOOL FLAGS...: runs the pair
# (qpg_perftest) and prints, as a figure (SCALE "" for none), COLUMN of its
# table's row for SIZE bytes (a row of FIELDS fields or more). Under TCG
# perftest now and then prints no number there (inf): then the pair runs
# once more before the figure is null. A pair that failed twice is null.
qpg_perftest_figure() {
	local size=$1 fields=$2 col=$3 scale=$4 try out v=""
	shift 4
	for try in 1 2; do
		out=$(qpg_perftest "$@") || break
		v=$(awk -v s="$size" -v n="$fields" -v c="$col" '$1 == s && NF >= n {v = $c} END {print v}' <<<"$out")
		[ "$(figure "$v")" != null ] && break
		echo "bench: $1's figure for $size bytes is '$v', not a number (try $try of 2)" >&2
	done
	figure "$v" "$scale"
}
# scaled V [K]: V x K (K 1 when not given), or null when V is null.
scaled() { awk -v v="$1" -v k="${2:-1}" 'BEGIN{if (v == "null") print "null"; else print v * k}'; }
# per_run_ratio A-VALUES B-VALUES [SCALE_B]: the ratios A/(B x SCALE_B),
# run by run, a line each (null where either run has no figure).
per_run_ratio() {
	local -a a b
	read -ra a <<<"$1"
	read -ra b <<<"$2"
	local i
	for i in "${!a[@]}"; do ratio "${a[$i]}" "$(scaled "${b[$i]:-null}" "${3:-1}")"; echo; done
}
# row AUTH LABEL FORMAT QPGATE-VALUES ANCHOR-VALUES TARGET [SCALE_ANCHOR]:
# a report row: the medians of both, the median of the ratios run by run
# (also left in $rr), the target and each run's ratio. A figure that no
# run has is printed as null.
# shellcheck disable=SC2046,SC2086 # the runs' values travel as one list, split on purpose
row() {
	local rs m
	rs=$(per_run_ratio "$4" "$5" "${7:-1}" | tr '\n' ' ')
	rr=$(medr $rs)
	m=$(med $4) # null when no run has the figure: printed as it is
	printf " %-5s %-48s %12s %12s %8s %8s   %s\n" "$1" "$2" "$(num "$3" "$m")" \
		"$(med $(for v in $5; do scaled "$v" "${7:-1}"; done))" \
		"$rr" "$6" "$rs"
}
# jarr VALUES...: a JSON array of them (numbers or null).
jarr() { printf '%s\n' "$@" | jq -s -c .; }
# j NAME FILTER: jq -r FILTER on $work/NAME.json.
j() { jq -r "$2" "$work/$1.json"; }
# jn NAME EXPR: the same, or null when the run left no JSON or no number.
jn() { j "$@" 2>/dev/null || echo null; }

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
