#!/usr/bin/env bash
# Cases of Tollgate's cmocka groups that need the kernel: nftables tables and
# counters made with nft (the accounting table at node scale, the counter
# reader, the batch transport, exporter_render), a PID namespace of its
# own (gc's /proc paths), loopback (the metrics endpoint's HTTP server) and
# tc (the kernel's extended-ack text reaching the CNI error). They are
# tests/kernel/ktest_*.c, built by make into $TOLLGATE_BIN_DIR/tests/ktest_*; the unit tests run the same cases
# (tests/unit/*_cases.h) against a fake nf_tables and link-time seams.
#
#   +---------------------------------------------+
#   | $TG_ID-k<name>   (one per binary, fresh)    |
#   |   lo only; ktest_<name> runs here as root,  |
#   |   unshares once more before its first table |
#   +---------------------------------------------+
#
# Each binary runs in a network namespace made for it and deleted after it
# (and by the EXIT trap, on any failure); nothing is made in the root
# namespace. Its TAP lines (cmocka's) are this file's.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

tg_traps

if [ "$(id -u)" -ne 0 ]; then
	echo "not ok - preconditions: must run as root (network namespaces)"
	exit 1
fi
command -v nft >/dev/null 2>&1 || {
	echo "not ok - preconditions: 'nft' not installed (make deps)"
	exit 1
}

bins=()
for b in "$TOLLGATE_BIN_DIR"/tests/ktest_*; do
	[ -f "$b" ] && [ -x "$b" ] && [[ $b != *.d ]] && bins+=("$b")
done
if [ "${#bins[@]}" -eq 0 ]; then
	echo "not ok - preconditions: no ktest_* binaries in $TOLLGATE_BIN_DIR/tests (run make)"
	exit 1
fi

failed=0
for b in "${bins[@]}"; do
	name=$(basename "$b")
	ns=$TG_ID-k${name#ktest_}
	_tg_netns_add "$ns" || tap_bail "cannot create network namespace $ns"
	echo "# $name in $ns"
	# from the repository root, as every cmocka binary (fixtures are relative)
	(cd "$TG_ROOT" && ip netns exec "$ns" env -i PATH="$TG_PATH" CMOCKA_MESSAGE_OUTPUT=TAP "$b")
	rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "# $name exited $rc"
		failed=$((failed + 1))
	fi
	ip netns del "$ns"
done
echo "# $(basename "$0"): ${#bins[@]} binaries, $failed failed"
[ "$failed" -eq 0 ]
