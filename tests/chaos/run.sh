#!/usr/bin/env bash
# Tollgate chaos suite (`make chaos`): the long runs of tests/chaos/chaos_*.sh.
#
#   tests/chaos/run.sh [BUILD_DIR...]     (default: build; `make chaos` passes build build-san)
#
# Each chaos file runs against each build dir with its store on tmpfs, and
# (chaos_kill.sh, not chaos_failover.sh) against the first build dir twice
# more for half the rounds: with the store
# on a disk (TG_TMP_BASE=/var/tmp: fsync before rename, no cache), and with
# pods spread over 12 namespaces (namespaces empty and are retired while pods
# come and go), the agent killed 4 times a round, and the table and the
# internet classes deleted under it all twice a round (CHAOS_FLUSH). Lengths, for the plain
# build (a sanitizer build gets a third of the rounds):
#   CHAOS_ROUNDS  (default 12)  CHAOS_PODS (default 30)
# chaos_failover.sh (allocator replicas on etcd, real traffic) scales its
# repeats by CHAOS_ROUNDS (12: 20 leader kills; the sanitizer build's 4: 7)
# and ignores CHAOS_PODS.
# (see each file's header for its other knobs). The runner is tests/run.sh's
# (sourced): TAP lines are counted as there, a skip counts as a failure, the
# last line is `N passed, M failed` and the exit status is 1 when M > 0.
# Env: TG_TEST_TIMEOUT per-run time limit (default 1800)
set -u

RUN_NAME=tests/chaos/run.sh RUN_DEFAULT_TIMEOUT=1800
# shellcheck source=tests/run.sh
. "$(dirname "${BASH_SOURCE[0]}")/../run.sh"
[ $# -gt 0 ] || set -- build
ROUNDS=${CHAOS_ROUNDS:-12}
PODS=${CHAOS_PODS:-30}

first=1
for build in "$@"; do
	bdir=$build
	case $bdir in /*) ;; *) bdir=$ROOT/$bdir ;; esac
	rounds=$ROUNDS
	[[ $build == *san* ]] && rounds=$(((ROUNDS + 2) / 3))
	RUN_BUILD=$build
	for t in tests/chaos/chaos_*.sh; do
		what="$rounds x $PODS"
		[ "$t" = tests/chaos/chaos_failover.sh ] && what="$rounds rounds"
		run_one "$t [$build] $what" env TOLLGATE_BIN_DIR="$bdir" CHAOS_ROUNDS="$rounds" CHAOS_PODS="$PODS" \
			bash "$t"
		# the store's variants are the SIGKILL storm's (chaos_kill.sh): the
		# failover test's store is the agents' own, its chaos elsewhere
		if [ "$first" = 1 ] && [ "$t" != tests/chaos/chaos_failover.sh ]; then
			half=$(((rounds + 1) / 2))
			run_one -k "$t, store on disk" "$t [$build, store on disk] $half x $PODS" env TOLLGATE_BIN_DIR="$bdir" TG_TMP_BASE=/var/tmp \
				CHAOS_ROUNDS="$half" CHAOS_PODS="$PODS" bash "$t"
			run_one -k "$t, 12 namespaces, agent kills, flushes" \
				"$t [$build, 12 namespaces, 4 agent kills a round, flushes] $half x $PODS" env TOLLGATE_BIN_DIR="$bdir" \
				CHAOS_NAMESPACES=12 CHAOS_AGENT_KILLS=4 CHAOS_FLUSH=1 CHAOS_ROUNDS="$half" CHAOS_PODS="$PODS" bash "$t"
		fi
	done
	first=0
done

run_summary
