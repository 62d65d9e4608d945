#!/usr/bin/env bash
# Cluster budgets on real traffic (tests/bench/budgets_traffic.sh): seven
# simulated nodes with their agents, one allocator, an internet host that
# counts what the cluster sends it every 100 ms; the figures (p99
# and mean of the aggregate against the budget, time to every node's fair
# share after demand moves, recovery after the allocator's restart, the
# allocator's view of usage against the internet host's). It takes about two
# minutes and needs a quiet machine, so it is a measurement (make bench),
# not a test: each figure is printed with PASS (ok) or MISS (not ok).
#
#   bench_budgets.sh BUILD_DIR
#   BENCH_STRICT=1    exit 1 (after the report) when a figure is missed; 0: report only
set -u
here=$(dirname "$0")
out=$(TOLLGATE_BIN_DIR=${1:-build} bash "$here/budgets_traffic.sh" 2>&1)
rc=$?
printf '%s\n' "$out" | sed -e 's/^ok - /PASS  /' -e 's/^not ok - /MISS  /'
missed=$(printf '%s\n' "$out" | grep -c '^not ok - ')
echo "bench_budgets: $missed figure(s) missed (script exit $rc)"
if [ "${BENCH_STRICT:-0}" = 1 ] && [ "$missed" -gt 0 ]; then exit 1; fi
exit 0
