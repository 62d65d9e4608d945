#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD_DIR (build-fuzz) for FUZZ_SECONDS each
# (default 20), from the seed corpus in tests/fuzz/corpus/<target> (copied:
# the seeds are never written). A crash, a leak or a sanitizer report fails it;
# the input that did is kept in BUILD_DIR/crashes/. Ends with `N passed, M failed`.
#
#   tests/fuzz/run.sh [BUILD_DIR]
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-build-fuzz}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
SECONDS_EACH=${FUZZ_SECONDS:-20}
pass=0 fail=0
mkdir -p "$BUILD/crashes"
for bin in "$BUILD"/fuzz_*; do
	[ -x "$bin" ] || continue
	name=${bin##*/}
	work=$(mktemp -d /tmp/tollgate-fuzz.XXXXXX)
	[ -d "$ROOT/tests/fuzz/corpus/$name" ] && cp -r "$ROOT/tests/fuzz/corpus/$name/." "$work/"
	if "$bin" -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix="$BUILD/crashes/$name-" -print_final_stats=1 "$work" >"$BUILD/$name.log" 2>&1; then
		echo "ok - $name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/$name.log" | awk '{print $2}') runs in ${SECONDS_EACH} s, no crash"
		pass=$((pass + 1))
	else
		echo "not ok - $name: see $BUILD/$name.log"
		tail -n 20 "$BUILD/$name.log" | sed 's/^/# /'
		fail=$((fail + 1))
	fi
	rm -rf "$work"
done
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
