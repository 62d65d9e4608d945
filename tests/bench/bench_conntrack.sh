#!/usr/bin/env bash
# What a released address's conntrack entries cost a DEL: the plugin deletes
# every entry that involves the address under the store's lock (ctnetlink's
# dump filter picks them in the kernel). DEL's median, of ROUNDS pods, with
# the node's table empty and then holding FLOWS flows of another pod, in one
# run on one node of the integration topology (tests/integration/lib.sh: fresh
# network namespaces, traffic only between them).
#
# Usage: tests/bench/bench_conntrack.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
# Knobs: BENCH_CT_FLOWS=100000, BENCH_CT_ROUNDS=7
# shellcheck disable=SC1091
set -u
TOLLGATE_BIN_DIR=${1:-${TOLLGATE_BIN_DIR:-build}}
. "$(dirname "$0")/../integration/lib.sh"
tg_require
tg_traps
FLOWS=${BENCH_CT_FLOWS:-100000} ROUNDS=${BENCH_CT_ROUNDS:-7}
topo_up || { echo "bench_conntrack: no topology" >&2; exit 1; }
CONF=$(tg_conf '.nodeAccess = {namespaceConnections: 0}')

# median of DEL's milliseconds over ROUNDS pods
del_median() {
	local i t0 t1 ms=()
	for i in $(seq 1 "$ROUNDS"); do
		pod_add "d$i" bench "$CONF" >/dev/null || { echo "ADD: $TG_OUT" >&2; return 1; }
		t0=$(date +%s%N)
		pod_del "d$i" "$CONF" >/dev/null || { echo "DEL: $TG_OUT" >&2; return 1; }
		t1=$(date +%s%N)
		ms+=($(((t1 - t0) / 100000)))
		pod_ns_del "d$i"
	done
	printf '%s\n' "${ms[@]}" | sort -n | awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]; printf "%d.%d", m / 10, m % 10 }'
}

empty=$(del_median) || exit 1
pod_add busy busy "$CONF" >/dev/null || { echo "ADD busy: $TG_OUT" >&2; exit 1; }
# FLOWS datagrams, each a new flow (25,000 ports of each of a few peer addresses)
ip netns exec "$TG_ID-busy" python3 -c '
import socket, sys
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setblocking(False)
for i in range(n):
    try: s.sendto(b"x", ("10.2.%d.5" % (i // 25000 + 1), i % 25000 + 1))
    except OSError: pass' "$FLOWS"
sleep 1
tracked=$(ip netns exec "$TG_NODE" conntrack -C)
full=$(del_median) || exit 1
echo "| DEL, median of $ROUNDS | empty table | $tracked flows tracked |"
echo "|---|---|---|"
echo "| Tollgate ($TOLLGATE_BIN_DIR) | $empty ms | $full ms |"
