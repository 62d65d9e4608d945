#!/usr/bin/env bash
# The test runner itself (tests/run.sh): what it counts and what it refuses,
# run on fake build dirs and fake test files in a temp directory, never on
# the real suite (TG_TEST_DIR points it at the fake files).
#
#   b1/, b2/        two build dirs: a stub plugin, unit binaries (scripts
#                   printing cmocka's TAP) as each case needs
#   it/test_*.sh    integration files printing TAP, some of them broken
#
# Cases: a check that runs in two builds is one check, and passes only when
# it passes in both (per-build figures on the lines before the last); a unit
# binary printing fewer results than its plan, and a shell file that exits 0
# before tap_done's end-of-file marker, each fail as "stopped early"; a build
# dir without unit binaries fails; TG_TEST_FILTER and FP_SCENARIOS narrowing
# the run are said in the summary. Each case has its control: the same run
# without the defect passes.
#
# Standalone: bash tests/integration/test_runner.sh
# shellcheck disable=SC2016,SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_traps
TG_TMP=$(mktemp -d /tmp/tollgate-runner.XXXXXX) || tap_bail "no temp directory"
F=$TG_TMP

# unit NAME DIR BODY: a fake cmocka binary DIR/tests/unit_NAME printing BODY
unit() {
	mkdir -p "$2/tests"
	printf '#!/bin/sh\ncat <<"EOT"\n%s\nEOT\n' "$3" >"$2/tests/unit_$1"
	chmod +x "$2/tests/unit_$1"
}
# shell_test NAME BODY: a fake integration file it/test_NAME.sh
shell_test() {
	mkdir -p "$F/it"
	printf '. %q\n%s\n' "$TG_LIB_DIR/lib.sh" "$2" >"$F/it/test_$1.sh"
}
# run_runner OUT ARGS...: tests/run.sh over the fake files, its output in OUT
run_runner() {
	local out=$1
	shift
	(cd "$F" && env TG_TEST_DIR="$F/it" TG_TEST_FILTER="${FILTER:-}" FP_SCENARIOS="${FPS:-}" \
		TG_FUZZ_DIR= TG_LATE_BUILD= TG_SAN_EXCLUDE="${SAN_EXCLUDE:-}" TG_BOTH="${BOTH:-0}" \
		bash "$TG_ROOT/tests/run.sh" "$@") >"$out" 2>&1
}
last() { tail -n 1 "$1"; }
fresh() {
	rm -rf "$F/b1" "$F/b2" "$F/it"
	mkdir -p "$F/b1" "$F/b2"
	printf '#!/bin/sh\n' >"$F/b1/tollgate"
	cp "$F/b1/tollgate" "$F/b2/tollgate"
	chmod +x "$F/b1/tollgate" "$F/b2/tollgate"
}
good_unit='1..2
ok 1 - t_parses
ok 2 - t_refuses'

t_begin "a check that runs in two builds is one check; per-build figures before the last line"
fresh
unit a "$F/b1" "$good_unit"
unit a "$F/b2" "$good_unit"
shell_test ok 'tap_ok "answers"; tap_ok "rate: 941 Mbit/s"; tap_ok "rate: 957 Mbit/s"; tap_done'
BOTH=1 run_runner "$F/out" "$F/b1" "$F/b2"
# 2 unit + 3 shell checks, and the host check
t_expect "last line" "$(last "$F/out")" "6 passed, 0 failed"
grep -qx "\[$F/b1\] 5 passed, 0 failed" "$F/out" || t_fail "no per-build line for b1: $(tail -n 6 "$F/out")"
grep -qx "\[$F/b2\] 5 passed, 0 failed" "$F/out" || t_fail "no per-build line for b2"
t_end

t_begin "a check failing in one build of two fails once, passes nowhere"
shell_test ok 'tap_ok "answers"
if [[ $TOLLGATE_BIN_DIR == */b2 ]]; then tap_not_ok "counts" "grew by 10, expected 20"; else tap_ok "counts"; fi
tap_done'
BOTH=1 run_runner "$F/out" "$F/b1" "$F/b2"
t_expect "last line" "$(last "$F/out")" "4 passed, 1 failed"
grep -qx "\[$F/b2\] 3 passed, 1 failed" "$F/out" || t_fail "b2's own figures: $(tail -n 6 "$F/out")"
t_end

t_begin "an integration file runs once: in the sanitizer build, a TG_SAN_EXCLUDE one in the plain build; units in both"
fresh
mkdir -p "$F/b2-san"
cp "$F/b1/tollgate" "$F/b2-san/tollgate"
unit a "$F/b1" "$good_unit"
unit a "$F/b2-san" "$good_unit"
shell_test ok 'tap_ok "ran in $(basename "$TOLLGATE_BIN_DIR")"; tap_done'
shell_test rate 'tap_ok "measured in $(basename "$TOLLGATE_BIN_DIR")"; tap_done'
SAN_EXCLUDE=test_rate run_runner "$F/out" "$F/b1" "$F/b2-san"
# 2 unit + 2 shell checks, and the host check: the same count as in both builds
t_expect "last line" "$(last "$F/out")" "5 passed, 0 failed"
grep -qx "ok - ran in b2-san" "$F/out" || t_fail "test_ok did not run against b2-san"
! grep -qx "ok - ran in b1" "$F/out" || t_fail "test_ok ran against b1 too"
grep -qx "ok - measured in b1" "$F/out" || t_fail "test_rate did not run against b1"
! grep -qx "ok - measured in b2-san" "$F/out" || t_fail "test_rate ran against b2-san"
grep -qx "\[$F/b1\] 3 passed, 0 failed" "$F/out" || t_fail "b1's figures: $(tail -n 6 "$F/out")"
grep -qx "\[$F/b2-san\] 3 passed, 0 failed" "$F/out" || t_fail "b2-san's figures"
t_end

t_begin "files run two at a time are each counted whole, a failure in one with it (control: one at a time)"
fresh
unit a "$F/b1" "$good_unit"
shell_test slow 'sleep 1; tap_ok "slow one"; tap_ok "rate: 12 Mbit/s"; tap_done'
shell_test quick 'tap_ok "quick one"; tap_not_ok "counts" "grew by 1"; tap_done'
shell_test short 'tap_ok "short one"; exit 0'
TG_JOBS=1 run_runner "$F/control" "$F/b1"
run_runner "$F/out" "$F/b1"
t_expect "control" "$(last "$F/control")" "7 passed, 2 failed"
t_expect "last line" "$(last "$F/out")" "7 passed, 2 failed"
grep -q 'test_short.sh.*stopped early' "$F/out" || t_fail "the file that stopped early was not seen"
t_end

t_begin "a unit binary printing fewer results than its plan stopped early (control: the whole plan passes)"
fresh
unit a "$F/b1" "$good_unit"
run_runner "$F/out" "$F/b1"
t_expect "control" "$(last "$F/out")" "3 passed, 0 failed"
unit a "$F/b1" '1..3
ok 1 - t_parses'
run_runner "$F/out" "$F/b1"
t_expect "last line" "$(last "$F/out")" "2 passed, 1 failed"
grep -q 'stopped early: its plans announce 3 results, it printed 1' "$F/out" || t_fail "no reason given"
t_end

t_begin "a shell test that exits 0 before tap_done stopped early (control: with tap_done it passes)"
fresh
unit a "$F/b1" "$good_unit"
shell_test early 'tap_ok "first"; tap_done'
run_runner "$F/out" "$F/b1"
t_expect "control" "$(last "$F/out")" "4 passed, 0 failed"
shell_test early 'tap_ok "first"; exit 0; tap_ok "second"; tap_done'
run_runner "$F/out" "$F/b1"
t_expect "last line" "$(last "$F/out")" "4 passed, 1 failed"
grep -q 'stopped early: no plan, and no end-of-file marker' "$F/out" || t_fail "no reason given"
t_end

t_begin "a build dir without unit test binaries fails"
fresh
shell_test ok 'tap_ok "answers"; tap_done'
run_runner "$F/out" "$F/b1"
t_expect "last line" "$(last "$F/out")" "2 passed, 1 failed"
grep -q 'no unit test binaries' "$F/out" || t_fail "no reason given"
t_end

t_begin "TG_TEST_FILTER and FP_SCENARIOS narrowing the run are said in the summary (control: a full run says nothing)"
fresh
unit a "$F/b1" "$good_unit"
shell_test ok 'tap_ok "answers"; tap_done'
run_runner "$F/out" "$F/b1"
! grep -q '^narrowed' "$F/out" || t_fail "a full run says it was narrowed"
FILTER=test_ok FPS=declare run_runner "$F/out" "$F/b1"
t_expect "last line" "$(last "$F/out")" "2 passed, 0 failed"
grep -qx "narrowed: TG_TEST_FILTER='test_ok' (not every test file ran)" "$F/out" || t_fail "filter not said"
grep -qx "narrowed: FP_SCENARIOS='declare' (not every failpoint scenario ran)" "$F/out" || t_fail "scenarios not said"
t_end

tap_done
