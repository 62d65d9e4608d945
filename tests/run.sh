#!/usr/bin/env bash
# Tollgate test runner.
#
#   tests/run.sh [BUILD_DIR...]        (default: build; `make test` passes build build-san)
#
# For each BUILD_DIR: runs every unit test binary BUILD_DIR/tests/unit_* (cmocka,
# TAP output) and every tests/integration/test_*.sh with TOLLGATE_BIN_DIR=BUILD_DIR.
# Counts TAP lines: `ok ...` passes, `not ok ...` fails. A check is the same
# check in every build it runs in (its file, and its name up to the first
# ": " with numbers blanked, in order): the last line counts distinct
# checks, and a check passes only when it passes in every build; the lines
# before it give each build's own figures. A file fails, as a check of its
# own, when it exits non-zero without a `not ok`, prints no test line at all,
# or stops early: a cmocka binary must print as many results as its plans
# (`1..N`) announce, a shell test must reach tap_done's end-of-file marker
# (`# tollgate-tap: end of FILE`). A build dir without unit test binaries is
# a failure. A skipped test (`ok ... # SKIP`, cmocka's `not ok N # SKIP`, or
# a line starting with `skip`) counts as a failure, in `make test` as in CI:
# a test that could not run proved nothing (each file's line and the summary
# say how many of its failures were skips). The whole run is one more check:
# the host's runtime and CNI directories (tests/host_dirs.sh) are
# byte-identical before and after it. The last line is always `N passed, M
# failed`; exit status 1 when M > 0. A run narrowed by TG_TEST_FILTER or
# FP_SCENARIOS says so in the summary.
#
# Which build runs what: unit binaries run in every build dir (they are
# quick). An integration file runs once, against the sanitizer build (the
# first build dir whose name holds "san": it catches more), or against the
# first build dir when none is one; a check is one distinct check however
# many builds it runs in, so running it once counts the same. Exceptions:
# TG_SAN_EXCLUDE (timing and memory measurements, tools that do not mix
# with ASan) run against the first plain build only, and TG_EVERY_BUILD
# (files whose checks differ by build) against every build dir.
# TG_BOTH=1 runs every integration file against every build dir, as
# before (TG_SAN_EXCLUDE still holds).
#
# Files outside TG_SERIAL run two at a time (TG_JOBS), whichever build they
# run against, each in throwaway namespaces of its own (lib.sh's per-run
# prefix), its output to a log of its own printed whole when it ends; the
# files that measure rates, timing or memory, and those that start real
# runtimes, run alone after them.
#
# Env: TG_TEST_FILTER=regex  run only files whose name matches
#      TG_TEST_TIMEOUT=secs  per-file time limit (default 300)
#      TG_TEST_DIR=dir       the integration test files (default tests/integration;
#                            tests/integration/test_runner.sh points it elsewhere)
#      TG_FUZZ_DIR=dir       also run every libFuzzer target of dir for FUZZ_SECONDS
#                            (default 3) each; `make test` passes build-fuzz
#      TG_SAN_EXCLUDE=regex  integration files run against the plain build only
#                            (default: test_shaping_rates, test_downloads and
#                            test_node_state, whose rate measurements and churn
#                            timing mean nothing at ASan's speed;
#                            test_budget_agent, which times the
#                            agent's reports against its period; test_metrics_http,
#                            which bounds the agent's RSS; test_shaping drives the
#                            shaping code under ASan without measuring a rate; and
#                            test_valgrind, which runs the plain binaries under
#                            valgrind: valgrind and ASan do not mix; and
#                            test_arm64, whose arm64 build has no sanitizer;
#                            and test_cri, which measures caps)
#      TG_EVERY_BUILD=regex  integration files run against every build dir
#                            (default: test_failpoints, which checks the plain
#                            build holds no failpoint and walks the points in
#                            the sanitizer build; test_kernel_cases, the kernel
#                            cases' cmocka binaries of each build; test_runner)
#      TG_BOTH=1             every integration file against every build dir
#      TG_JOBS=n             files run at once outside TG_SERIAL (default 2; 1: one by one)
#      TG_LONG=regex         files that start first among those run side by side
#                            (default: the longest of them, about a minute each)
#      TG_SERIAL=regex       files that run alone (default: those that measure
#                            rates, timing or memory: test_shaping_rates,
#                            test_downloads, test_node_state, test_budget_agent,
#                            test_metrics_http, test_cri; test_allocator, whose
#                            leases last 2 s; test_allocator_ha, which times a
#                            failover; test_ipam_cli, which times IMDS
#                            deadlines; test_declare_commits, which needs
#                            100 commits in 12 s; test_guard, which counts
#                            connections against newPerSecond; test_runtimes
#                            and test_deploy, which start real runtimes and
#                            took longer beside another file than alone;
#                            test_failpoints, which walks its points in three
#                            workers of its own, and test_destinations, whose
#                            100,000 datagrams must all go out)
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
SKIP=0
FAILED_FILES=()
# Distinct checks: CHECK[key] is pass or fail (fail wins), CHECK_KEYS in order.
declare -A CHECK=()
CHECK_KEYS=()
# Per build (RUN_BUILD, set by the caller before run_one): passes and failures.
declare -A BUILD_PASS=() BUILD_FAIL=()
BUILDS=()
RUN_BUILD=""
LOG=$(mktemp /tmp/tollgate-run.XXXXXX)
trap 'rm -f "$LOG"' EXIT
trap 'echo "$RUN_NAME: interrupted"; run_bg_kill; run_counts; echo "$CHECKS_PASS passed, $((CHECKS_FAIL + 1)) failed"; exit 130' INT TERM

# check_record KEY pass|fail: one result of a distinct check, in RUN_BUILD.
check_record() {
	if [ -z "${CHECK[$1]+x}" ]; then
		CHECK_KEYS+=("$1")
		CHECK[$1]=$2
	elif [ "$2" = fail ]; then
		CHECK[$1]=fail
	fi
	local b=${RUN_BUILD:--}
	if [ -z "${BUILD_PASS[$b]+x}" ]; then
		BUILDS+=("$b")
		BUILD_PASS[$b]=0 BUILD_FAIL[$b]=0
	fi
	if [ "$2" = pass ]; then BUILD_PASS[$b]=$((BUILD_PASS[$b] + 1)); else BUILD_FAIL[$b]=$((BUILD_FAIL[$b] + 1)); fi
}

# check_key_names FILE < TAP: "KIND<TAB>NAME" per result line, KIND pass,
# fail or skip; NAME up to the first ": " (failure reasons follow it), with
# runs of digits blanked (measured figures, counts), then numbered in order
# of appearance so that equal names stay apart.
check_key_names() {
	awk '
	/^(not )?ok([ \t]|$)/ {
		kind = /^ok/ ? "pass" : "fail"
		if (tolower($0) ~ /#[[:space:]]*skip/) kind = "skip"
		name = $0
		sub(/^(not )?ok( [0-9]+)?( - )?/, "", name)
		sub(/[[:space:]]*#[[:space:]]*[Ss][Kk][Ii][Pp].*$/, "", name)
		i = index(name, ": "); if (i) name = substr(name, 1, i - 1)
		gsub(/[0-9]+/, "#", name)
		seen[name]++
		print kind "\t" name " (" seen[name] ")"
		next
	}
	tolower($0) ~ /^skip([ \t]|$)/ { seen["skip"]++; print "skip\tskip (" seen["skip"] ")" }
	'
}

# run_one [-k KEY] LABEL CMD... : run one test file, stream its output, count
# its lines. KEY names the file across builds (default: LABEL without its
# " [build...]" part).
run_one() {
	local key=""
	if [ "$1" = -k ]; then key=$2; shift 2; fi
	local label=$1
	shift
	[ -n "$key" ] || key=${label%% \[*}
	local t0=$SECONDS rc
	echo "=== $label"
	# timeout (not --foreground) signals the file's whole process group: what
	# it started goes with it, and its traps still clean up
	timeout -k 10 "$TIMEOUT" "$@" 2>&1 | tee "$LOG"
	rc=${PIPESTATUS[0]}
	run_tally "$label" "$key" "$LOG" "$rc" $((SECONDS - t0))
}

# run_tally LABEL KEY LOG RC SECS: counts a file's lines (its output in LOG,
# its exit status RC) and prints its summary line.
run_tally() {
	local label=$1 key=$2 log=$3 rc=$4 secs=$5 p=0 f=0 s=0 kind name
	while IFS=$'\t' read -r kind name; do
		case $kind in
		pass) p=$((p + 1)) ;;
		fail) f=$((f + 1)) ;;
		*) s=$((s + 1)) kind=fail ;;
		esac
		check_record "$key"$'\t'"$name" "$kind"
	done < <(check_key_names <"$log")
	local why="" results=$((p + f + s)) plan
	plan=$(awk '/^1\.\.[0-9]+$/ { n += substr($0, 4) } END { print n + 0 }' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		why=" (exit status $rc without a 'not ok'$([ "$rc" = 124 ] && echo ": timed out after ${TIMEOUT}s"))"
	elif [ "$results" -eq 0 ]; then
		why=" (printed no test result)"
	elif [ "$rc" -ne 0 ]; then
		: # stopped at a failure it reported (tap_bail)
	elif grep -q '^1\.\.[0-9]' "$log"; then
		[ "$plan" -eq "$results" ] || why=" (stopped early: its plans announce $plan results, it printed $results)"
	elif ! grep -qx "# tollgate-tap: end of .*" "$log"; then
		why=" (stopped early: no plan, and no end-of-file marker from tap_done)"
	fi
	if [ -n "$why" ]; then
		f=$((f + 1))
		check_record "$key"$'\t'"(the file ran to its end)" fail
	fi
	[ "$s" -eq 0 ] || why="$why ($s skipped, counted as failed)"
	SKIP=$((SKIP + s))
	[ $((f + s)) -eq 0 ] || FAILED_FILES+=("$label")
	echo "--- $label: ok=$p not_ok=$f skipped=$s in ${secs}s$why"
}

# Files running in the background (run_bg): label, build, log, start, pid.
BG_LABEL=() BG_BUILD=() BG_LOG=() BG_T0=() BG_PID=()

# run_bg LABEL CMD... : start one test file in the background, its output to
# a log of its own (LOG.rc: its exit status, once it ended); run_reap prints
# and counts it.
run_bg() {
	local label=$1 log
	shift
	log=$(mktemp /tmp/tollgate-run.XXXXXX)
	(
		timeout -k 10 "$TIMEOUT" "$@" >"$log" 2>&1 </dev/null
		echo $? >"$log.rc.tmp" && mv "$log.rc.tmp" "$log.rc"
	) &
	BG_PID+=($!) BG_LABEL+=("$label") BG_BUILD+=("$RUN_BUILD") BG_LOG+=("$log") BG_T0+=("$SECONDS")
	echo "# started: $label (its output follows when it ends)"
}

# run_reap N: wait until at most N background files run, printing and
# counting each one that ended, in the order they end.
run_reap() {
	local i log keep_build=$RUN_BUILD
	while :; do
		for i in "${!BG_LOG[@]}"; do
			log=${BG_LOG[$i]}
			[ -e "$log.rc" ] || continue
			wait "${BG_PID[$i]}" 2>/dev/null
			echo "=== ${BG_LABEL[$i]}"
			cat "$log"
			RUN_BUILD=${BG_BUILD[$i]}
			run_tally "${BG_LABEL[$i]}" "${BG_LABEL[$i]%% \[*}" "$log" "$(cat "$log.rc")" \
				$((SECONDS - BG_T0[i]))
			rm -f "$log" "$log.rc"
			unset "BG_LOG[$i]" "BG_LABEL[$i]" "BG_BUILD[$i]" "BG_T0[$i]" "BG_PID[$i]"
		done
		RUN_BUILD=$keep_build
		[ "${#BG_LOG[@]}" -gt "$1" ] || return 0
		sleep 0.5
	done
}

# run_bg_kill: the background files go (interrupted run), their groups with them.
run_bg_kill() {
	local i
	for i in "${!BG_PID[@]}"; do
		# timeout, the subshell's child, passes TERM on to the file's group
		pkill -TERM -P "${BG_PID[$i]}" 2>/dev/null
		kill -TERM "${BG_PID[$i]}" 2>/dev/null
		rm -f "${BG_LOG[$i]}" "${BG_LOG[$i]}.rc"
	done
}

# run_fail LABEL WHY: a failure that is no file's (a missing binary).
run_fail() {
	echo "not ok - $1: $2"
	check_record "$1" fail
	FAILED_FILES+=("$1")
}

# run_counts: CHECKS_PASS and CHECKS_FAIL over the distinct checks.
run_counts() {
	local k
	CHECKS_PASS=0 CHECKS_FAIL=0
	for k in "${CHECK_KEYS[@]}"; do
		if [ "${CHECK[$k]}" = pass ]; then CHECKS_PASS=$((CHECKS_PASS + 1)); else CHECKS_FAIL=$((CHECKS_FAIL + 1)); fi
	done
}

# run_summary [NOTE...]: the failed files, the skips, each build's figures,
# the notes (a narrowed run), and the last line `N passed, M failed` over
# distinct checks; false when M > 0.
run_summary() {
	local b n
	echo
	[ "${#FAILED_FILES[@]}" -eq 0 ] || printf 'failed: %s\n' "${FAILED_FILES[@]}"
	[ "$SKIP" -eq 0 ] || echo "skipped: $SKIP (counted in the failures below)"
	for b in "${BUILDS[@]}"; do
		echo "[$b] ${BUILD_PASS[$b]} passed, ${BUILD_FAIL[$b]} failed"
	done
	for n in "$@"; do echo "$n"; done
	run_counts
	echo "$CHECKS_PASS passed, $CHECKS_FAIL failed"
	[ "$CHECKS_FAIL" -eq 0 ]
}

# sourced (tests/chaos/run.sh): the runner only
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

[ $# -gt 0 ] || set -- build
# Every build dir of this run, for the files that divide work between them
export TG_RUN_BUILDS="$*"
FILTER=${TG_TEST_FILTER:-}
SAN_EXCLUDE=${TG_SAN_EXCLUDE-test_shaping_rates|test_downloads|test_node_state|test_budget_agent|test_metrics_http|test_valgrind|test_arm64|test_cri}
EVERY_BUILD=${TG_EVERY_BUILD-test_failpoints|test_kernel_cases|test_runner}
SERIAL=${TG_SERIAL-test_shaping_rates|test_downloads|test_node_state|test_budget_agent|test_metrics_http|test_cri|test_allocator\.sh|test_allocator_ha|test_ipam_cli|test_declare_commits|test_guard|test_runtimes|test_deploy|test_failpoints|test_destinations}
JOBS=${TG_JOBS:-2}
LONG=${TG_LONG-test_arm64\.sh|test_badinput|test_chaos_short|test_shaping\.sh|test_accounting}
HOST_BEFORE=$(bash tests/host_dirs.sh)

# The build an integration file runs in once: the first sanitizer build,
# else the first build; the measurements' build: the first plain one.
HOME_BUILD=$1 PLAIN_BUILD=""
for build in "$@"; do
	if [[ $build == *san* ]]; then
		[[ $HOME_BUILD == *san* ]] || HOME_BUILD=$build
	elif [ -z "$PLAIN_BUILD" ]; then
		PLAIN_BUILD=$build
	fi
done

# run_here FILE BUILD: true when FILE runs against BUILD (else says why not)
run_here() {
	local why=""
	if [[ $2 == *san* ]] && [ -n "$SAN_EXCLUDE" ] && [[ $1 =~ $SAN_EXCLUDE ]]; then
		why="not run against the sanitizer build (TG_SAN_EXCLUDE)"
	elif [ "${TG_BOTH:-0}" = 1 ] || { [ -n "$EVERY_BUILD" ] && [[ $1 =~ $EVERY_BUILD ]]; }; then
		return 0
	elif [ -n "$SAN_EXCLUDE" ] && [[ $1 =~ $SAN_EXCLUDE ]]; then
		[ "$2" = "$PLAIN_BUILD" ] && return 0
		why="run against $PLAIN_BUILD only (TG_SAN_EXCLUDE; TG_BOTH=1: every build)"
	else
		[ "$2" = "$HOME_BUILD" ] && return 0
		why="run against $HOME_BUILD only (TG_BOTH=1: every build)"
	fi
	echo "# $1 [$2]: $why"
	return 1
}

# Unit binaries, build by build; the integration files of every build
# gathered: those that may share the machine (POOL), the others (ALONE), as
# "build<TAB>dir<TAB>file".
POOL=() POOL_LONG=() ALONE=()
for build in "$@"; do
	bdir=$build
	case $bdir in /*) ;; *) bdir=$ROOT/$bdir ;; esac
	RUN_BUILD=$build
	echo "##### build dir: $build"
	[ -x "$bdir/tollgate" ] || run_fail "$build/tollgate" "plugin binary missing (run make)"
	units=0
	for u in "$bdir"/tests/unit_*; do
		{ [ -f "$u" ] && [ -x "$u" ]; } || continue
		units=$((units + 1))
		[ -z "$FILTER" ] || [[ $u =~ $FILTER ]] || continue
		CMOCKA_MESSAGE_OUTPUT=TAP run_one "tests/$(basename "$u") [$build]" "$u"
	done
	[ "$units" -gt 0 ] || run_fail "$build/tests/unit_*" "no unit test binaries (run make)"
	for t in "${TG_TEST_DIR:-tests/integration}"/test_*.sh; do
		[ -f "$t" ] || continue
		[ -z "$FILTER" ] || [[ $t =~ $FILTER ]] || continue
		run_here "$t" "$build" || continue
		if [ "$JOBS" -le 1 ] || { [ -n "$SERIAL" ] && [[ $t =~ $SERIAL ]]; }; then
			ALONE+=("$build"$'\t'"$bdir"$'\t'"$t")
		elif [ -n "$LONG" ] && [[ $t =~ $LONG ]]; then
			# the longest start first: the pool ends when its last file does
			POOL_LONG+=("$build"$'\t'"$bdir"$'\t'"$t")
		else
			POOL+=("$build"$'\t'"$bdir"$'\t'"$t")
		fi
	done
done
# the files that may share the machine first, TG_JOBS at a time, whatever
# their build; then, alone, the others
POOL=("${POOL_LONG[@]}" "${POOL[@]}")
echo "##### integration files: ${#POOL[@]} side by side ($JOBS at a time), ${#ALONE[@]} alone"
# The libFuzzer targets, briefly (make test builds them into build-fuzz), as
# the pool's first member: they measure nothing
if [ -n "${TG_FUZZ_DIR:-}" ] && { [ -z "$FILTER" ] || [[ fuzz =~ $FILTER ]]; }; then
	RUN_BUILD=$TG_FUZZ_DIR
	fuzz_s=${FUZZ_SECONDS:-3}
	FUZZ_SECONDS=$fuzz_s run_bg "tests/fuzz/run.sh [$TG_FUZZ_DIR, $fuzz_s s each]" \
		tests/fuzz/run.sh "$TG_FUZZ_DIR"
fi
for e in "${POOL[@]}"; do
	IFS=$'\t' read -r build bdir t <<<"$e"
	run_reap $((JOBS - 1))
	RUN_BUILD=$build
	TOLLGATE_BIN_DIR=$bdir run_bg "$t [$build]" bash "$t"
done
run_reap 0
for e in "${ALONE[@]}"; do
	IFS=$'\t' read -r build bdir t <<<"$e"
	RUN_BUILD=$build
	TOLLGATE_BIN_DIR=$bdir run_one "$t [$build]" bash "$t"
done

# Nothing of the run may reach the host's runtime and CNI directories
RUN_BUILD=host
host_diff=$(diff <(printf '%s\n' "$HOST_BEFORE") <(bash tests/host_dirs.sh))
if [ -z "$host_diff" ]; then
	echo "ok - host: the runtime and CNI directories are byte-identical after the run (tests/host_dirs.sh)"
	check_record "tests/run.sh"$'\t'"host directories" pass
else
	run_fail "host: the runtime and CNI directories changed during the run" "$(head -c 2000 <<<"$host_diff")"
fi

notes=()
[ -z "$FILTER" ] || notes+=("narrowed: TG_TEST_FILTER='$FILTER' (not every test file ran)")
[ -z "${FP_SCENARIOS:-}" ] || notes+=("narrowed: FP_SCENARIOS='$FP_SCENARIOS' (not every failpoint scenario ran)")
run_summary "${notes[@]}"
