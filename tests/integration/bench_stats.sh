#!/usr/bin/env bash
# The bench scripts' statistics (bench/lib.sh: median, med, medr, ratio, num)
# and bench/anchors.sh's report rows (lib.sh's row), under the shell options
# the bench scripts run with (set -euo pipefail). A figure that no run has (every
# value null, or a ratio that is no plain number, such as auth's extra
# cost when noise makes it negative) must come out as null, and the script
# must go on: before, `med null` failed under pipefail and the report ended
# there, with no table and no anchors.json.
. "$(dirname "$0")/lib.sh"

# strict SNIPPET: SNIPPET's output in a bash of the bench's options with
# bench/lib.sh loaded, and "ok" when it ran to the end.
strict() {
	bash -c 'set -euo pipefail
		. "$1/bench/lib.sh"
		eval "$2"
		echo ok' strict "$here" "$1" 2>&1
}
is() { [ "$(strict "$1")" = "$2" ]; } # SNIPPET EXPECTED

check "med of 3 values: the middle one" is 'med 3 1 2' $'2\nok'
check "med of 2 values: their mean" is 'med 1 2' $'1.5\nok'
check "med skips null" is 'med null 4 null' $'4\nok'
check "med of nulls alone: null, and the script goes on" is 'med null null' $'null\nok'
check "medr of nulls alone: null, and the script goes on" is 'medr null' $'null\nok'
check "medr: three decimals" is 'medr 0.5 2 1' '1.000ok'
check "ratio of two numbers" is 'ratio 3 2' '1.500ok'
check "ratio of a negative: null" is 'ratio -9.5 1.23' $'null\nok'
check "ratio over 0: null" is 'ratio 1 0' $'null\nok'
check "ratio of a missing figure: null" is 'ratio null 2' $'null\nok'
check "num: a number in its format" is 'num %12.1f 3.14159' '         3.1ok'
check "num: a negative number too" is 'num %12.2f -9.5' '       -9.50ok'
check "num: null as it is, in the format's width" is 'num %14.0f null' '          nullok'
check "num: nothing at all is null" is 'num %10.1f ""' '      nullok'

out=$(strict 'row on "negative" "%12.2f" "-9.50 " "1.23 " "<= 2.0"; echo "rr=$rr"')
echo "$out" | sed 's/^/  /'
check "a report row whose only ratio is null: printed, null, and the report goes on" \
	grep -qx 'rr=null' <<<"$out"
check "  ... and the script reached its end" grep -qx ok <<<"$out"
out=$(strict 'row on "missing" "%12.1f" "null null " "1.23 2.0 " ""; echo "rr=$rr"')
echo "$out" | sed 's/^/  /'
check "a report row with no run's figure: null printed as it is, and the report goes on" \
	eval 'grep -q "missing  *null  *1.615  *null" <<<"$out" && grep -qx ok <<<"$out"'
out=$(strict 'row on "normal" "%12.1f" "3 4 5 " "2 2 2 " ">= 1.0"; echo "rr=$rr"')
check "a report row of numbers: the median figure and the median ratio" \
	eval 'grep -q "normal  *4.0  *2  *2.000  *>= 1.0  *1.500 2.000 2.500" <<<"$out" && grep -qx "rr=2.000" <<<"$out"'
finish_checks
