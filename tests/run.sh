#!/usr/bin/env bash
# Tollgate test runner.
#
#   tests/run.sh [BUILD_DIR...]        (default: build; `make test` passes build build-san)
#
# For each BUILD_DIR: runs every unit test binary BUILD_DIR/tests/unit_* (cmocka,
# TAP output) and every tests/integration/test_*.sh with TOLLGATE_BIN_DIR=BUILD_DIR.
# Counts TAP lines: `ok ...` passes, `not ok ...` fails. A file that exits
# non-zero without printing a `not ok` counts one failure; a file that prints
# no test line at all counts one failure. A skipped test (`ok ... # SKIP`,
# cmocka's `not ok N # SKIP`, or a line starting with `skip`) counts as a
# failure, in `make test` as in CI: a test that could not run proved nothing
# (each file's line and the summary say how many of its failures were skips).
# The last line is always `N passed, M failed`; exit status 1 when M > 0.
#
# Env: TG_TEST_FILTER=regex  run only files whose name matches
#      TG_TEST_TIMEOUT=secs  per-file time limit (default 300)
#      TG_FUZZ_DIR=dir       also run every libFuzzer target of dir for FUZZ_SECONDS
#                            (default 3) each; `make test` passes build-fuzz
#      TG_SAN_EXCLUDE=regex  integration files not run against a sanitizer build
#                            (default: test_shaping_rates and test_node_state,
#                            whose rate measurements and churn timing mean nothing
#                            at ASan's speed; test_shaping drives the shaping code
#                            under ASan without measuring a rate; and
#                            test_valgrind, which runs the plain binaries under
#                            valgrind: valgrind and ASan do not mix)
#
# tests/chaos/run.sh sources this file for its runner (everything down to
# run_summary: the counting is one code): it sets RUN_NAME and
# RUN_DEFAULT_TIMEOUT first, and the sourcing stops before the suite.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
if [ "${BASH_SOURCE[0]}" = "$0" ]; then RUN_NAME=tests/run.sh RUN_DEFAULT_TIMEOUT=300; fi

if [ "$(id -u)" -ne 0 ]; then
	echo "$RUN_NAME: must run as root (the tests create network namespaces)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

TIMEOUT=${TG_TEST_TIMEOUT:-$RUN_DEFAULT_TIMEOUT}
PASS=0 FAIL=0 SKIP=0
FAILED_FILES=()
LOG=$(mktemp /tmp/tollgate-run.XXXXXX)
trap 'rm -f "$LOG"' EXIT
trap 'echo "$RUN_NAME: interrupted"; echo "$PASS passed, $((FAIL + 1)) failed"; exit 130' INT TERM

# run_one LABEL CMD... : run one test file, stream its output, count its lines.
run_one() {
	local label=$1
	shift
	local t0=$SECONDS rc p f s
	echo "=== $label"
	# timeout (not --foreground) signals the file's whole process group: what
	# it started goes with it, and its traps still clean up
	timeout -k 10 "$TIMEOUT" "$@" 2>&1 | tee "$LOG"
	rc=${PIPESTATUS[0]}
	# skips first (cmocka prints them as `not ok N # SKIP name`)
	s=$(grep -Eci '^((not )?ok\b.*#[[:space:]]*skip)|^skip\b' "$LOG")
	p=$(grep -E '^ok\b' "$LOG" | grep -Evci '#[[:space:]]*skip')
	f=$(grep -E '^not ok\b' "$LOG" | grep -Evci '#[[:space:]]*skip')
	local why=""
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		why=" (exit status $rc without a 'not ok'$([ "$rc" = 124 ] && echo ": timed out after ${TIMEOUT}s"))"
	fi
	if [ $((p + f + s)) -eq 0 ]; then
		f=1
		why=" (printed no test result)"
	fi
	if [ "$s" -gt 0 ]; then
		why="$why ($s skipped, counted as failed)"
	fi
	PASS=$((PASS + p)) FAIL=$((FAIL + f + s)) SKIP=$((SKIP + s))
	[ $((f + s)) -eq 0 ] || FAILED_FILES+=("$label")
	echo "--- $label: ok=$p not_ok=$f skipped=$s in $((SECONDS - t0))s$why"
}

# run_summary: the failed files, the skips, and the last line `N passed, M
# failed`; false when M > 0.
run_summary() {
	echo
	[ "${#FAILED_FILES[@]}" -eq 0 ] || printf 'failed: %s\n' "${FAILED_FILES[@]}"
	[ "$SKIP" -eq 0 ] || echo "skipped: $SKIP (counted in the failures below)"
	echo "$PASS passed, $FAIL failed"
	[ "$FAIL" -eq 0 ]
}

# sourced (tests/chaos/run.sh): the runner only
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

[ $# -gt 0 ] || set -- build
# Every build dir of this run, for the files that divide work between them
export TG_RUN_BUILDS="$*"
FILTER=${TG_TEST_FILTER:-}
SAN_EXCLUDE=${TG_SAN_EXCLUDE-test_shaping_rates|test_node_state|test_valgrind}

for build in "$@"; do
	bdir=$build
	case $bdir in /*) ;; *) bdir=$ROOT/$bdir ;; esac
	echo "##### build dir: $build"
	if [ ! -x "$bdir/tollgate" ]; then
		echo "not ok - $build/tollgate: plugin binary missing (run make)"
		FAIL=$((FAIL + 1))
		FAILED_FILES+=("$build/tollgate")
	fi
	units=0
	for u in "$bdir"/tests/unit_*; do
		{ [ -f "$u" ] && [ -x "$u" ]; } || continue
		[ -z "$FILTER" ] || [[ $u =~ $FILTER ]] || continue
		units=$((units + 1))
		CMOCKA_MESSAGE_OUTPUT=TAP run_one "$build/tests/$(basename "$u")" "$u"
	done
	[ "$units" -gt 0 ] || echo "# no unit test binaries in $build/tests"
	for t in tests/integration/test_*.sh; do
		[ -f "$t" ] || continue
		[ -z "$FILTER" ] || [[ $t =~ $FILTER ]] || continue
		if [[ $build == *san* ]] && [ -n "$SAN_EXCLUDE" ] && [[ $t =~ $SAN_EXCLUDE ]]; then
			echo "# $t [$build]: not run against the sanitizer build (TG_SAN_EXCLUDE)"
			continue
		fi
		TOLLGATE_BIN_DIR=$bdir run_one "$t [$build]" bash "$t"
	done
done

# The libFuzzer targets, briefly (make test builds them into build-fuzz)
if [ -n "${TG_FUZZ_DIR:-}" ] && { [ -z "$FILTER" ] || [[ fuzz =~ $FILTER ]]; }; then
	fuzz_s=${FUZZ_SECONDS:-3}
	FUZZ_SECONDS=$fuzz_s run_one "tests/fuzz/run.sh [$TG_FUZZ_DIR, $fuzz_s s each]" \
		tests/fuzz/run.sh "$TG_FUZZ_DIR"
fi

run_summary
