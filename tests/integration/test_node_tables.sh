#!/usr/bin/env bash
# What a tenant can exhaust of the node it shares: its conntrack table and
# its neighbour table (nodeAccess.namespaceConnections,
# nodeAccess.newNeighboursPerSecond). A pod of namespace flood opens
# thousands of UDP flows to internal addresses (each one a conntrack entry)
# and sends to thousands of on-link addresses (each one a neighbour entry the
# node must resolve), while a pod of namespace calm keeps opening TCP
# connections to the peer. What the node holds is read from its own tables
# (conntrack -L) and on its link (the ARP requests the fabric sees: one per
# neighbour entry the node makes); the refusals from the counters and /metrics.
# Each bound has its control: the same attack against a namespace the bound
# does not hold shows that the attack fills the table.
#
#   pod flood-a (ns flood)   pod calm-a (ns calm)
#      |  node 10.0.0.1, eth0 on-link to 10.50.0.0/16 too (a large flat subnet)
#   fabric -- peer 10.0.1.1 (TCP echo on 8080), lo 10.2.0.5
#          \- inet 203.0.113.10
#
# Config: nodeAccess {namespaceConnections: $CEIL, newNeighboursPerSecond: $RATE}
# (and the defaults in the first check: a quarter of nf_conntrack_max, 200/s).
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_node_tables.sh
# shellcheck disable=SC1091,SC2016,SC2015  # jq filters with $vars; a && b || t_fail: t_fail on either
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_require_tools curl python3 conntrack
tg_traps
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
PY=$(python3 -c 'import sys; print(sys.executable)')
FLOOD=$TG_LIB_DIR/conn_flood.py
TOOL=$TG_LIB_DIR/exporter_tool.py
MPORT=9617
# The neighbour table is one per host, shared by every network namespace
# (gc_thresh3 is the host's, 1024 by default): the walk stays well under it.
CEIL=1000 FLOWS=3000 RATE=20 ADDRS=600

N() { ip netns exec "$TG_NODE" "$@"; }
ctr() { # packets of a counter of table inet tollgate ("-" when absent)
	local j
	j=$(N nft -j list counter inet tollgate "$1" 2>/dev/null) || { echo -; return; }
	jq -r '[.nftables[] | .counter // empty][0].packets // "-"' <<<"$j"
}
metric() {
	N curl -s --max-time 3 -o "$TG_TMP/m.prom" "http://127.0.0.1:$MPORT/metrics" || { echo "no page"; return; }
	"$PY" "$TOOL" parse --tsv "$TG_TMP/m.prom" | awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "absent" : v) }'
}
# tracked POD: the node's conntrack entries whose original source is the pod
tracked() { N conntrack -L -s "${POD_IP[$1]}" 2>/dev/null | grep -c . || true; }
# udp_flows POD COUNT [FIRST]: one datagram to each of COUNT ports of 10.2.0.5 (the peer's
# pod address, internal) from FIRST (default 20000) on, each a new flow
udp_flows() {
	ip netns exec "$TG_ID-$1" timeout 30 "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
n = 0
for p in range(int(sys.argv[2]), int(sys.argv[2]) + int(sys.argv[1])):
    try:
        s.sendto(b"x", ("10.2.0.5", p))
        n += 1
    except OSError:
        pass
print(n)' "$2" "${3:-20000}"
}
# onlink POD PREFIX COUNT: one datagram to each of COUNT addresses of PREFIX.0.0/16
onlink() {
	ip netns exec "$TG_ID-$1" timeout 30 "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
n = 0
for i in range(int(sys.argv[2])):
    try:
        s.sendto(b"x", ("%s.%d.%d" % (sys.argv[1], i // 250, i % 250 + 1), 9))
        n += 1
    except OSError:
        pass
print(n)' "$2" "$3"
}
# neigh PREFIX: the node's neighbour entries for PREFIX.x.y on its uplink (diagnostics: the
# table is the host's, and its garbage collection may already have taken some)
neigh() { N ip -4 neigh show dev eth0 2>/dev/null | grep -c "^$1\." || true; }
# asked PREFIX: the addresses of PREFIX.x.y the node asked the link for (ARP requests seen
# by the fabric: one per neighbour entry the node made), after which the record starts anew
asked() {
	ip netns exec "$TG_FABRIC" nft -j list set arp tgobs asked |
		jq --arg p "$1." '[.nftables[] | .set? // empty | .elem // [] | .[] | select(startswith($p))] | length'
	ip netns exec "$TG_FABRIC" nft flush set arp tgobs asked
}
jget() { jq -r "$1" <<<"$2"; }

t_begin "topology, the peer's echo server, an on-link /16 on the node's uplink, the agent"
topo_up || t_fail "topology"
(exec ip netns exec "$TG_PEER" "$PY" "$FLOOD" serve 8080) &
TG_PIDS+=("$!")
# a large flat subnet, as an Azure VNet's: every address in it is resolved on the link
N ip route add 10.50.0.0/16 dev eth0 && N ip route add 10.51.0.0/16 dev eth0 || t_fail "on-link routes"
ip netns exec "$TG_FABRIC" nft -f - <<-'EOF' || t_fail "the fabric's record of ARP requests"
	table arp tgobs {
		set asked { type ipv4_addr; size 65535; flags dynamic; }
		chain in {
			type filter hook input priority 0; policy accept;
			arp operation request add @asked { arp daddr ip }
		}
	}
EOF
(exec ip netns exec "$TG_NODE" "$AGENT" --metrics-only --listen "127.0.0.1:$MPORT" --data-dir "$TG_TMP/data" \
	--network "$TG_NETNAME" --page-cache-ms 0 >"$TG_TMP/agent.out" 2>"$TG_TMP/agent.log") &
TG_PIDS+=("$!")
wait_for 5 sh -c "[ \"\$(ip netns exec $TG_NODE curl -s --max-time 1 http://127.0.0.1:$MPORT/healthz)\" = ok ]" ||
	t_fail "agent: no 'ok' on /healthz within 5 s: $(tail -n 3 "$TG_TMP/agent.log")"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the topology"

t_begin "defaults: each namespace's guard chain starts with a ceiling of a quarter of nf_conntrack_max; 200 new next hops a second"
CONF0=$(tg_conf)
pod_add probe-a probe "$CONF0" || t_fail "ADD probe-a: $TG_OUT"
max=$(N cat /proc/sys/net/netfilter/nf_conntrack_max)
N nft list chain inet tollgate guard_probe | grep -q "ct count over $((max / 4)) counter name \"ns_probe_refused_ceiling\"" ||
	t_fail "guard_probe holds no ceiling of $((max / 4)): $(N nft list chain inet tollgate guard_probe 2>&1 | head -5)"
N nft list ruleset | grep -q 'limit ns_probe_nexthops {' || t_fail "no limit object ns_probe_nexthops"
t_expect "ns_probe_nexthops" "$(N nft -j list limit inet tollgate ns_probe_nexthops | jq -c '[.nftables[] | .limit? // empty | [.rate, .per, .burst, .inv]][0]')" \
	'[200,"second",2000,true]'
pod_del probe-a "$CONF0" || t_fail "DEL probe-a: $TG_OUT"
t_end

CONF=$(tg_conf '.nodeAccess = {namespaceConnections: $c, newNeighboursPerSecond: $r}' --argjson c "$CEIL" --argjson r "$RATE")
CONF_OFF=$(tg_conf '.nodeAccess = {namespaceConnections: 0, newNeighboursPerSecond: 0}')
t_begin "ADD flood-a (ns flood) and calm-a (ns calm) under a ceiling of $CEIL and $RATE next hops a second"
pod_add flood-a flood "$CONF" || t_fail "ADD flood-a: $TG_OUT"
pod_add calm-a calm "$CONF" || t_fail "ADD calm-a: $TG_OUT"
N nft list chain inet tollgate guard_flood | grep -q "ct count over $CEIL " || t_fail "guard_flood holds no 'ct count over $CEIL'"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the pods"

# ---------------------------------------------------------------- neighbours
t_begin "flood sends to $ADDRS on-link addresses: the node resolves at most its burst and rate; the rest dropped and counted"
t0=$(date +%s%N)
sent=$(onlink flood-a 10.50 "$ADDRS")
t1=$(date +%s%N)
sleep 0.5
got=$(asked 10.50)
secs_x10=$(((t1 - t0) / 100000000 + 6)) # the send's time and the wait, in tenths, rounded up
bound=$((RATE * 10 + RATE * secs_x10 / 10))
diag "sent $sent in $(((t1 - t0) / 1000000)) ms, $got addresses asked for (bound $bound), $(neigh 10.50) in the table, $(ctr ns_flood_neighbour_dropped) dropped, $(N nft -j list set inet tollgate nexthops | jq '[.nftables[] | .set? // empty | .elem // [] | length][0]') next hops remembered"
[ "${sent:-0}" -ge $((ADDRS * 9 / 10)) ] || t_fail "the flood sent only ${sent:-0} datagrams"
[ "$got" -le "$bound" ] || t_fail "the node asked for $got of flood's addresses, over its burst and rate ($bound)"
[ "$got" -ge $((RATE * 10 * 9 / 10)) ] || t_fail "the node asked for only $got addresses: the limit is not what held them"
dropped=$(ctr ns_flood_neighbour_dropped)
[ "$dropped" != - ] && [ "$dropped" -ge $((sent - bound)) ] || t_fail "ns_flood_neighbour_dropped: $dropped, expected >= $((sent - bound))"
t_expect "/metrics flood neighbour drops" \
	"$(metric 'tollgate_namespace_neighbour_dropped_packets_total{namespace="flood"}')" "$dropped"
t_end

t_begin "while flood is at its rate: calm reaches the peer (a next hop resolved already) and a fresh on-link address"
res=$(ip netns exec "$TG_ID-calm-a" timeout 60 "$PY" "$FLOOD" open 10.2.0.5 8080 50 --probe 5)
t_expect "calm connected" "$(jget .connected "$res")" 50
sent=$(onlink calm-a 10.51 20)
sleep 0.5
t_expect "calm's on-link addresses asked for" "$(asked 10.51)" 20
t_expect "ns_calm_neighbour_dropped" "$(ctr ns_calm_neighbour_dropped)" 0
t_end

# ---------------------------------------------------------------- conntrack
t_begin "flood opens $FLOWS UDP flows to an internal address: the node tracks at most $CEIL of them; the rest refused and counted"
sent=$(udp_flows flood-a "$FLOWS")
sleep 0.3
got=$(tracked flood-a)
diag "sent $sent, tracked $got"
[ "${sent:-0}" -ge $((FLOWS * 9 / 10)) ] || t_fail "the flood sent only ${sent:-0} datagrams"
[ "$got" -le "$CEIL" ] || t_fail "the node tracks $got of flood's flows, over the ceiling of $CEIL"
[ "$got" -ge $((CEIL * 9 / 10)) ] || t_fail "the node tracks only $got of flood's flows: the ceiling is not what held them"
refused=$(ctr ns_flood_refused_ceiling)
[ "$refused" != - ] && [ "$refused" -ge $((sent - CEIL)) ] || t_fail "ns_flood_refused_ceiling: $refused, expected >= $((sent - CEIL))"
t_expect "/metrics flood ceiling" \
	"$(metric 'tollgate_namespace_connections_refused_total{namespace="flood",reason="ceiling"}')" "$refused"
t_end

t_begin "while flood is at its ceiling: calm opens 200 TCP connections to the peer, each answered"
res=$(ip netns exec "$TG_ID-calm-a" timeout 60 "$PY" "$FLOOD" open 10.2.0.5 8080 200 --probe 20)
diag "calm: $res"
t_expect "calm connected" "$(jget .connected "$res")" 200
t_expect "calm echoed" "$(jget .echoed "$res")" 20
t_expect "calm refused" "$(jget .refused "$res")" 0
t_expect "ns_calm_refused_ceiling" "$(ctr ns_calm_refused_ceiling)" 0
t_end

# ---------------------------------------------------------------- controls
t_begin "control: the node declared without either bound (namespaceConnections 0, newNeighboursPerSecond 0), the same attacks fill both tables"
jq '{cniVersion: .cniVersion, name: .name, plugins: [.]}' <<<"$CONF_OFF" >"$TG_TMP/off.conflist"
N "$AGENT" --config "$TG_TMP/off.conflist" --once >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
N nft list chain inet tollgate forward | grep -q "vmap @guard_ns\|rt ip nexthop" && t_fail "the declaration kept a bound"
before=$(tracked flood-a)
sent=$(udp_flows flood-a "$FLOWS" 30000)
sleep 0.3
got=$(($(tracked flood-a) - before))
diag "conntrack: sent $sent, $got more tracked"
[ "$got" -ge $((FLOWS * 9 / 10)) ] || t_fail "only $got more of flood's $FLOWS flows tracked: the flood did not fill the table"
N ip neigh flush dev eth0 to 10.50.0.0/16 2>/dev/null
asked 10.50 >/dev/null
sent=$(onlink flood-a 10.50 "$ADDRS")
sleep 0.5
got=$(asked 10.50)
diag "neighbours: sent $sent, $got addresses asked for, $(neigh 10.50) in the table"
[ "$got" -ge $((ADDRS * 9 / 10)) ] || t_fail "the node asked for only $got addresses of $ADDRS: the walk did not fill the table"
t_end

t_begin "DEL every pod: its elements of the nodeAccess maps go"
for p in flood-a calm-a; do pod_del "$p" "$CONF_OFF" || t_fail "DEL $p: $TG_OUT"; done
for m in nexthop_limit neighbour_drop invalid_drop; do
	n=$(N nft -j list map inet tollgate "$m" | jq '[.nftables[] | .map? // empty | .elem // [] | length][0]')
	t_expect "elements of $m" "$n" 0
done
t_end

tap_done
