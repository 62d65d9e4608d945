#!/usr/bin/env bash
# Tollgate chaos suite (`make chaos`): the long runs of tests/chaos/chaos_*.sh.
#
#   tests/chaos/run.sh [BUILD_DIR...]     (default: build; `make chaos` passes build build-san)
#
# Each chaos file runs against each build dir with its store on tmpfs, and
# against the first build dir twice more for half the rounds: with the store
# on a disk (TG_TMP_BASE=/var/tmp: fsync before rename, no cache), and with
# pods spread over 12 namespaces (namespaces empty and are retired while pods
# come and go), the agent killed 4 times a round, and the table and the
# internet classes deleted under it all twice a round (CHAOS_FLUSH). Lengths, for the plain
# build (a sanitizer build gets a third of the rounds):
#   CHAOS_ROUNDS  (default 12)  CHAOS_PODS (default 30)
# (see each file's header for its other knobs). TAP lines are counted as
# tests/run.sh counts them; the last line is `N passed, M failed` and the exit
# status is 1 when M > 0.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
if [ "$(id -u)" -ne 0 ]; then
	echo "tests/chaos/run.sh: must run as root (network namespaces)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
[ $# -gt 0 ] || set -- build
ROUNDS=${CHAOS_ROUNDS:-12}
PODS=${CHAOS_PODS:-30}
TIMEOUT=${TG_TEST_TIMEOUT:-1800}
PASS=0 FAIL=0
FAILED=()
LOG=$(mktemp /tmp/tollgate-chaos.XXXXXX)
trap 'rm -f "$LOG"' EXIT
trap 'echo "tests/chaos/run.sh: interrupted"; echo "$PASS passed, $((FAIL + 1)) failed"; exit 130' INT TERM

# run_one LABEL ENV... -- CMD...
run_one() {
	local label=$1 t0=$SECONDS rc p f
	shift
	echo "=== $label"
	# timeout (not --foreground) signals the file's whole process group: what
	# it started goes with it, and its traps still clean up
	timeout -k 10 "$TIMEOUT" env "$@" 2>&1 | tee "$LOG"
	rc=${PIPESTATUS[0]}
	p=$(grep -Ec '^ok\b' "$LOG")
	f=$(grep -Ec '^not ok\b' "$LOG")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	if [ $((p + f)) -eq 0 ]; then f=1; fi
	PASS=$((PASS + p)) FAIL=$((FAIL + f))
	[ "$f" -eq 0 ] || FAILED+=("$label")
	echo "--- $label: ok=$p not_ok=$f in $((SECONDS - t0))s"
}

first=1
for build in "$@"; do
	bdir=$build
	case $bdir in /*) ;; *) bdir=$ROOT/$bdir ;; esac
	rounds=$ROUNDS
	[[ $build == *san* ]] && rounds=$(((ROUNDS + 2) / 3))
	for t in tests/chaos/chaos_*.sh; do
		run_one "$t [$build] $rounds x $PODS" TOLLGATE_BIN_DIR="$bdir" CHAOS_ROUNDS="$rounds" CHAOS_PODS="$PODS" \
			bash "$t"
		if [ "$first" = 1 ]; then
			half=$(((rounds + 1) / 2))
			run_one "$t [$build, store on disk] $half x $PODS" TOLLGATE_BIN_DIR="$bdir" TG_TMP_BASE=/var/tmp \
				CHAOS_ROUNDS="$half" CHAOS_PODS="$PODS" bash "$t"
			run_one "$t [$build, 12 namespaces, 4 agent kills a round, flushes] $half x $PODS" TOLLGATE_BIN_DIR="$bdir" \
				CHAOS_NAMESPACES=12 CHAOS_AGENT_KILLS=4 CHAOS_FLUSH=1 CHAOS_ROUNDS="$half" CHAOS_PODS="$PODS" bash "$t"
		fi
	done
	first=0
done

echo
[ "${#FAILED[@]}" -eq 0 ] || printf 'failed: %s\n' "${FAILED[@]}"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
