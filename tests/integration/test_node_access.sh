#!/usr/bin/env bash
# nodeAccess: what a tenant root in its own pod can reach of the node and of
# the cloud. A pod floods the node with forged ARP requests; it asks IMDS
# and the WireServer for tokens; it opens the agents' port on its own node
# and on a peer's, and the control plane's ports (the allocator's, etcd's),
# directly and through a Service; it forges a reply of another pod's connection. Each
# attack is checked for what it did (neighbour entries, HTTP answers, TCP
# connections, conntrack entries) and for the counter that says it was
# stopped, with a control that shows the check can see the attack succeed.
#
#   pod tenant (ns tenant)   pod mon (ns monitoring)   pod victim (ns tenant)
#   eth0 10.1.0.x/32         eth0 10.1.0.y/32          eth0 10.1.0.z/32
#      | tg… (plugin)           | tg… (plugin)            | tg… (plugin)
#   node 10.0.0.1   agent --metrics-only on 0.0.0.0:9617     xv…: a veth made by
#      |                                                     hand to netns "ctl"
#   fabric 10.0.0.254 ── routes 169.254.169.254/32, 168.63.129.16/32 to inet
#      |-- peer 10.0.1.1:9617 (a listener: another node's agent), lo 10.2.0.5
#      \-- inet 203.0.113.10, lo 169.254.169.254 (HTTP :80), lo 168.63.129.16
#          (HTTP :80, echo :53 UDP and TCP): the cloud, in a throwaway netns
#
# Config: nodeAccess {metadataNamespaces: [monitoring], metricsNamespaces: [monitoring]};
# then servicePorts as shipped (9618: monitoring, 2379-2380: kube-system),
# with listeners on the peer (10.0.1.1) and the node and two "Services"
# (DNAT in the node) translating to and away from a guarded port.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_node_access.sh
# shellcheck disable=SC2016,SC2015,SC1091  # jq filters with $vars; a && b || t_fail: t_fail on either
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
for t in curl python3 conntrack; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
[ -x "$AGENT" ] || { echo "not ok - preconditions: $AGENT not found (run make)"; exit 1; }
PY=$(python3 -c 'import sys; print(sys.executable)')
SEND=$TG_LIB_DIR/spoof_send.py
TRY=$TG_LIB_DIR/net_try.py
TOOL=$TG_LIB_DIR/exporter_tool.py
IMDS=169.254.169.254
WIRE=168.63.129.16
MPORT=9617
NARP=500
CTL=$TG_ID-ctl
CTL_LINK=xv${TG_ID#tgt}
CTL_LINK=${CTL_LINK:0:15}

N() { ip netns exec "$TG_NODE" "$@"; }
P() { local p=$1; shift; ip netns exec "$TG_ID-$p" "$@"; }
# ctr FAMILY NAME: packets of a counter of table FAMILY tollgate ("-" when absent)
ctr() {
	N nft -j list counter "$1" tollgate "$2" 2>/dev/null |
		jq -r '[.nftables[] | .counter // empty][0].packets // "-"'
}
# http POD ADDR: the HTTP status a GET from the pod gets (000: no connection in 0.5 s)
http() { P "$1" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 0.5 --max-time 3 "http://$2/" 2>/dev/null; }
http_node() { N curl -s -o /dev/null -w '%{http_code}' --connect-timeout 0.5 --max-time 3 "http://$1/" 2>/dev/null; }
try() { P "$1" "$PY" "$TRY" "$2" "$3" "$4" 2>&1; } # POD tcp|udp ADDR PORT
# stale_on NETNS LINK: neighbour entries of the forged senders (10.77/16) on LINK
neigh_on() { ip -n "$1" -4 neigh show dev "$2" 2>/dev/null | grep -c '^10\.77\.' || true; }
metric() { # KEY -> value on the agent's /metrics ("absent" when missing)
	N curl -s --max-time 3 -o "$TG_TMP/m.prom" "http://127.0.0.1:$MPORT/metrics" || { echo "no page"; return; }
	"$PY" "$TOOL" parse --tsv "$TG_TMP/m.prom" | awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "absent" : v) }'
}
map_count() { # MAP: its elements in table inet tollgate ("missing" when it is not there)
	N nft -j list map inet tollgate "$1" 2>/dev/null |
		jq -r '[.nftables[] | .map? // empty][0] | if . == null then "missing" else (.elem // [] | length) end'
}
nsmetric() { printf 'tollgate_namespace_%s_dropped_packets_total{namespace="%s"}' "$1" "$2"; }

# ---------------------------------------------------------------- setup
t_begin "topology, the cloud's endpoints in the inet netns, a peer's agent port, the agent"
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_INET" addr add "$IMDS/32" dev lo && ip -n "$TG_INET" addr add "$WIRE/32" dev lo ||
	t_fail "cloud addresses"
ip -n "$TG_FABRIC" route add "$IMDS/32" via "$TG_INET_IP" && ip -n "$TG_FABRIC" route add "$WIRE/32" via "$TG_INET_IP" ||
	t_fail "fabric routes to the cloud"
ip netns exec "$TG_INET" "$PY" "$TG_LIB_DIR/cloud_serve.py" --http "$IMDS:80" --http "$WIRE:80" --echo "$WIRE:53" \
	>"$TG_TMP/cloud.out" 2>"$TG_TMP/cloud.err" &
TG_PIDS+=("$!")
ip netns exec "$TG_PEER" "$PY" "$TG_LIB_DIR/cloud_serve.py" --http "10.0.1.1:$MPORT" >/dev/null 2>"$TG_TMP/peer.err" &
TG_PIDS+=("$!")
wait_for 10 grep -q ready "$TG_TMP/cloud.out" || t_fail "cloud server: $(cat "$TG_TMP/cloud.err")"
[ "$(http_node "$IMDS")" = 200 ] || t_fail "the node does not reach the fake IMDS before any pod"
# exec: $! is the agent itself, which the cleanup ends (a backgrounded N would leave it running)
(exec ip netns exec "$TG_NODE" "$AGENT" --metrics-only --listen "0.0.0.0:$MPORT" --data-dir "$TG_TMP/data" \
	--network "$TG_NETNAME" --page-cache-ms 0 >"$TG_TMP/agent.out" 2>"$TG_TMP/agent.log") &
TG_PIDS+=("$!")
wait_for 5 sh -c "[ \"\$(ip netns exec $TG_NODE curl -s --max-time 1 http://127.0.0.1:$MPORT/healthz)\" = ok ]" ||
	t_fail "agent: no 'ok' on /healthz within 5 s: $(tail -n 3 "$TG_TMP/agent.log")"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the topology"

CONF=$(tg_conf '.nodeAccess = {metadataNamespaces: ["monitoring"], metricsNamespaces: ["monitoring"]}')
t_begin "ADD tenant, victim (ns tenant) and mon (ns monitoring): full connectivity"
pod_add tenant tenant "$CONF" || t_fail "ADD tenant: $TG_OUT"
pod_add victim tenant "$CONF" || t_fail "ADD victim: $TG_OUT"
pod_add mon monitoring "$CONF" || t_fail "ADD mon: $TG_OUT"
for p in tenant mon; do
	for dst in "$TG_NODE_IP" "$TG_PEER_POD_IP" "$TG_INET_IP" "${POD_IP[victim]:-none}"; do
		pingq "$TG_ID-$p" "$dst" || t_fail "$p does not reach $dst"
	done
done
N nft list table arp tollgate >/dev/null 2>&1 || t_fail "no table arp tollgate"
t_end

# ---------------------------------------------------------------- ARP
t_begin "a forged-ARP flood from a pod leaves no neighbour entry and is counted"
before=$(ctr arp node_arp_dropped)
P tenant timeout 20 "$PY" "$SEND" arp --ifname eth0 --target "$TG_NODE_IP" --sender-net 10.77 --count "$NARP" >/dev/null ||
	t_fail "sender failed"
sleep 0.3
got=$(neigh_on "$TG_NODE" "${POD_VETH[tenant]}")
t_expect "neighbour entries of 10.77.x.y on ${POD_VETH[tenant]}" "$got" 0
after=$(ctr arp node_arp_dropped)
if [ "$before" != - ] && [ "$after" != - ]; then
	t_expect "node_arp_dropped grew by" "$((after - before))" "$NARP"
else
	t_fail "counter node_arp_dropped missing ($before, $after)"
fi
t_expect "tollgate_pod_arp_dropped_packets_total" "$(metric tollgate_pod_arp_dropped_packets_total)" "$after"
for dst in "$TG_NODE_IP" "$TG_INET_IP"; do pingq "$TG_ID-tenant" "$dst" || t_fail "tenant lost $dst after the flood"; done
t_end

t_begin "control: the same flood on a veth Tollgate did not make ($CTL_LINK) fills the table"
_tg_netns_add "$CTL" || t_fail "netns ctl"
ip -n "$TG_NODE" link add "$CTL_LINK" type veth peer name eth0 netns "$CTL" &&
	ip -n "$TG_NODE" addr add 192.168.77.1/24 dev "$CTL_LINK" && ip -n "$TG_NODE" link set "$CTL_LINK" up &&
	ip -n "$CTL" link set eth0 up || t_fail "control veth"
ip netns exec "$CTL" timeout 20 "$PY" "$SEND" arp --ifname eth0 --target "$TG_NODE_IP" --sender-net 10.77 --count "$NARP" >/dev/null ||
	t_fail "sender failed"
sleep 0.3
got=$(neigh_on "$TG_NODE" "$CTL_LINK")
[ "$got" -ge $((NARP * 9 / 10)) ] || t_fail "only $got neighbour entries on $CTL_LINK, expected about $NARP"
t_expect "node_arp_dropped after the control" "$(ctr arp node_arp_dropped)" "$after"
ip -n "$TG_NODE" link del "$CTL_LINK"
t_end

# ---------------------------------------------------------------- metadata
t_begin "a pod of an unlisted namespace gets nothing from IMDS and the WireServer; counted"
before=$(ctr inet ns_tenant_metadata_dropped)
t_expect "tenant -> IMDS" "$(http tenant "$IMDS")" 000
t_expect "tenant -> WireServer" "$(http tenant "$WIRE")" 000
after=$(ctr inet ns_tenant_metadata_dropped)
# one SYN each: curl gives up after 0.5 s, before the first retransmission
if [ "$before" != - ]; then
	t_expect "ns_tenant_metadata_dropped grew by" "$((after - before))" 2
else
	t_fail "counter ns_tenant_metadata_dropped missing"
fi
t_expect "exported" "$(metric "$(nsmetric metadata tenant)")" "$after"
t_end

t_begin "its DNS on the WireServer works (53/udp, 53/tcp), and is not counted"
before=$(ctr inet ns_tenant_metadata_dropped)
t_expect "tenant -> $WIRE:53/udp" "$(try tenant udp "$WIRE" 53)" ok
t_expect "tenant -> $WIRE:53/tcp" "$(try tenant tcp "$WIRE" 53)" ok
t_expect "ns_tenant_metadata_dropped" "$(ctr inet ns_tenant_metadata_dropped)" "$before"
t_end

t_begin "controls: a listed namespace's pod and the node itself reach both"
t_expect "mon -> IMDS" "$(http mon "$IMDS")" 200
t_expect "mon -> WireServer" "$(http mon "$WIRE")" 200
t_expect "node -> IMDS" "$(http_node "$IMDS")" 200
t_expect "node -> WireServer" "$(http_node "$WIRE")" 200
t_expect "ns_monitoring_metadata_dropped" "$(ctr inet ns_monitoring_metadata_dropped)" 0
t_end

t_begin "a config change of metadataNamespaces reaches running pods (the agent's declaration)"
jq -n --argjson p "$(tg_conf '.nodeAccess = {metadataNamespaces: ["monitoring", "tenant"], metricsNamespaces: ["monitoring"]}')" \
	'{cniVersion: $p.cniVersion, name: $p.name, plugins: [$p | del(.cniVersion, .name)]}' >"$TG_TMP/listed.conflist"
N "$AGENT" --config "$TG_TMP/listed.conflist" --once --listen 127.0.0.1:9699 >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
t_expect "tenant -> IMDS, tenant listed" "$(http tenant "$IMDS")" 200
jq -n --argjson p "$CONF" '{cniVersion: $p.cniVersion, name: $p.name, plugins: [$p | del(.cniVersion, .name)]}' \
	>"$TG_TMP/back.conflist"
N "$AGENT" --config "$TG_TMP/back.conflist" --once --listen 127.0.0.1:9699 >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
t_expect "tenant -> IMDS, listed no more" "$(http tenant "$IMDS")" 000
t_expect "mon -> IMDS throughout" "$(http mon "$IMDS")" 200
t_end

# pod_check POD: the runtime's CHECK of a pod (the plugin's exit status in TG_RC)
pod_check() {
	tg_run CHECK "${POD_CID[$1]}" eth0 "${POD_NETNS[$1]}" "$(k8s_args "$2" "$1" "${POD_CID[$1]}")" \
		<<<"$(jq --argjson p "${POD_RESULT[$1]}" '.prevResult = $p' <<<"$CONF")"
}
t_begin "CHECK sees a pod's nodeAccess elements drift; the agent's declaration puts them right"
pod_check tenant tenant
t_expect "CHECK before any drift" "$TG_RC" 0
N nft delete element inet tollgate metadata_drop "{ ${POD_IP[tenant]} }" || t_fail "cannot delete the element"
pod_check tenant tenant
t_expect "CHECK without its metadata_drop element" "$TG_RC" 1
[[ $TG_OUT == *metadata_drop* ]] || t_fail "CHECK's message names no metadata_drop: $TG_OUT"
N nft add element inet tollgate metadata_ok "{ ${POD_IP[victim]} }" || t_fail "cannot add the element"
pod_check victim tenant
t_expect "CHECK of an unlisted pod given a pass" "$TG_RC" 1
t_expect "victim -> IMDS with the planted pass" "$(http victim "$IMDS")" 200
N "$AGENT" --config "$TG_TMP/back.conflist" --once --listen 127.0.0.1:9699 >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
pod_check tenant tenant
t_expect "CHECK of tenant after the declaration" "$TG_RC" 0
pod_check victim tenant
t_expect "CHECK of victim after the declaration" "$TG_RC" 0
t_expect "victim -> IMDS after the declaration" "$(http victim "$IMDS")" 000
pod_check mon monitoring
t_expect "CHECK of mon (listed) throughout" "$TG_RC" 0
t_end

# ---------------------------------------------------------------- agents' port
t_begin "a pod of an unlisted namespace cannot connect to the agents' port, here or on a peer; counted"
before=$(ctr inet ns_tenant_agent_dropped)
t_expect "tenant -> $TG_NODE_IP:$MPORT" "$(try tenant tcp "$TG_NODE_IP" "$MPORT")" "no: timed out"
t_expect "tenant -> 10.0.1.1:$MPORT (peer)" "$(try tenant tcp 10.0.1.1 "$MPORT")" "no: timed out"
after=$(ctr inet ns_tenant_agent_dropped)
if [ "$before" != - ]; then
	t_expect "ns_tenant_agent_dropped grew by" "$((after - before))" 2
else
	t_fail "counter ns_tenant_agent_dropped missing"
fi
t_expect "exported" "$(metric "$(nsmetric metrics_port tenant)")" "$after"
t_expect "tenant -> $TG_NODE_IP:22 (another port: not dropped, refused by the node)" \
	"$(try tenant tcp "$TG_NODE_IP" 22)" "no: Connection refused"
t_end

t_begin "control: a pod of a listed namespace connects to both"
t_expect "mon -> $TG_NODE_IP:$MPORT" "$(try mon tcp "$TG_NODE_IP" "$MPORT")" ok
t_expect "mon -> 10.0.1.1:$MPORT (peer)" "$(try mon tcp 10.0.1.1 "$MPORT")" ok
t_expect "ns_monitoring_agent_dropped" "$(ctr inet ns_monitoring_agent_dropped)" 0
t_end

t_begin "a Service's address translated to the agents' port is refused too (here and on a peer); counted"
# kube-proxy's part, in a table of its own in the node: two "Services" on
# port 8080 whose endpoints are this node's and the peer's agent port
printf '%s\n' "table ip tgtest_svc {" \
	"  chain pre {" \
	"    type nat hook prerouting priority -100;" \
	"    ip daddr 10.96.0.10 tcp dport 8080 dnat to $TG_NODE_IP:$MPORT" \
	"    ip daddr 10.96.0.11 tcp dport 8080 dnat to 10.0.1.1:$MPORT" \
	"  }" "}" >"$TG_TMP/svc.nft"
N nft -f "$TG_TMP/svc.nft" || t_fail "cannot add the Services' DNAT"
before=$(ctr inet ns_tenant_agent_dropped)
t_expect "tenant -> 10.96.0.10:8080 (this node's agent)" "$(try tenant tcp 10.96.0.10 8080)" "no: timed out"
t_expect "tenant -> 10.96.0.11:8080 (the peer's)" "$(try tenant tcp 10.96.0.11 8080)" "no: timed out"
after=$(ctr inet ns_tenant_agent_dropped)
t_expect "ns_tenant_agent_dropped grew by" "$((after - before))" 2
t_end

t_begin "control: a pod of a listed namespace reaches both through the Services"
t_expect "mon -> 10.96.0.10:8080" "$(try mon tcp 10.96.0.10 8080)" ok
t_expect "mon -> 10.96.0.11:8080" "$(try mon tcp 10.96.0.11 8080)" ok
N nft delete table ip tgtest_svc || t_fail "cannot delete the Services' DNAT"
t_end

t_begin "a Service's address translated to IMDS or the WireServer is dropped too; counted"
# a tenant's Service (or an EndpointSlice it writes) whose endpoints are the
# cloud's metadata addresses: kube-proxy's DNAT, in a table of its own
printf '%s\n' "table ip tgtest_svc {" \
	"  chain pre {" \
	"    type nat hook prerouting priority -100;" \
	"    ip daddr 10.96.0.20 tcp dport 80 dnat to $IMDS:80" \
	"    ip daddr 10.96.0.21 tcp dport 80 dnat to $WIRE:80" \
	"  }" "}" >"$TG_TMP/svc.nft"
N nft -f "$TG_TMP/svc.nft" || t_fail "cannot add the Services' DNAT"
before=$(ctr inet ns_tenant_metadata_dropped)
t_expect "tenant -> 10.96.0.20 (IMDS behind a Service)" "$(http tenant 10.96.0.20)" 000
t_expect "tenant -> 10.96.0.21 (the WireServer behind a Service)" "$(http tenant 10.96.0.21)" 000
after=$(ctr inet ns_tenant_metadata_dropped)
[ "$before" != - ] && [ "$after" != - ] && [ "$((after - before))" -ge 2 ] ||
	t_fail "ns_tenant_metadata_dropped did not count the translated attempts ($before -> $after)"
t_end

t_begin "control: a pod of a listed namespace reaches both through the Services"
t_expect "mon -> 10.96.0.20" "$(http mon 10.96.0.20)" 200
t_expect "mon -> 10.96.0.21" "$(http mon 10.96.0.21)" 200
N nft delete table ip tgtest_svc || t_fail "cannot delete the Services' DNAT"
t_end

# ---------------------------------------------------------------- control plane's ports
# servicePorts as shipped: the allocator's port for monitoring, etcd's for
# kube-system. Echo listeners on a peer's address (10.0.1.1: 9618, 2379, and 9700,
# a port no entry names) and on the node's own (9618); two "Services" in the
# node: 10.96.0.30:80 -> 10.0.1.1:9618 (translated to a guarded port) and
# 10.96.0.31:9618 -> 10.0.1.1:9700 (a guarded port translated away).
SVC_PORTS='[{ports: [9618], namespaces: ["monitoring"]}, {ports: ["2379-2380"], namespaces: ["kube-system"]}]'
SCONF=$(tg_conf ".nodeAccess = {metadataNamespaces: [\"monitoring\"], metricsNamespaces: [\"monitoring\"], servicePorts: $SVC_PORTS}")
jq -n --argjson p "$SCONF" '{cniVersion: $p.cniVersion, name: $p.name, plugins: [$p | del(.cniVersion, .name)]}' \
	>"$TG_TMP/services.conflist"
# svc_try POD ADDR PORT...: net_try's answer for each, space-separated
svc_try() {
	local p=$1 a=$2 out="" port
	shift 2
	for port in "$@"; do out+="$(try "$p" tcp "$a" "$port") "; done
	echo "${out% }"
}
t_begin "servicePorts absent: any pod reaches 9618 and 2379 on a peer and the node, direct and through a Service"
# echo servers (an HTTP server looks its own name up first, which in a netns without DNS takes seconds)
ip netns exec "$TG_PEER" "$PY" "$TG_LIB_DIR/cloud_serve.py" --echo 10.0.1.1:9618 --echo 10.0.1.1:2379 \
	--echo 10.0.1.1:9700 >"$TG_TMP/svc-peer.out" 2>"$TG_TMP/svc-peer.err" &
TG_PIDS+=("$!")
(exec ip netns exec "$TG_NODE" "$PY" "$TG_LIB_DIR/cloud_serve.py" --echo "$TG_NODE_IP:9618" \
	>"$TG_TMP/svc-node.out" 2>"$TG_TMP/svc-node.err") &
TG_PIDS+=("$!")
wait_for 10 grep -q ready "$TG_TMP/svc-peer.out" || t_fail "peer listeners: $(cat "$TG_TMP/svc-peer.err")"
wait_for 10 grep -q ready "$TG_TMP/svc-node.out" || t_fail "node listener: $(cat "$TG_TMP/svc-node.err")"
printf '%s\n' "table ip tgtest_svc {" \
	"  chain pre {" \
	"    type nat hook prerouting priority -100;" \
	"    ip daddr 10.96.0.30 tcp dport 80 dnat to 10.0.1.1:9618" \
	"    ip daddr 10.96.0.31 tcp dport 9618 dnat to 10.0.1.1:9700" \
	"  }" "}" >"$TG_TMP/svc.nft"
N nft -f "$TG_TMP/svc.nft" || t_fail "cannot add the Services' DNAT"
t_expect "tenant -> 10.0.1.1:9618, :2379" "$(svc_try tenant 10.0.1.1 9618 2379)" "ok ok"
t_expect "tenant -> $TG_NODE_IP:9618" "$(try tenant tcp "$TG_NODE_IP" 9618)" ok
t_expect "tenant -> 10.96.0.30:80 (-> :9618)" "$(try tenant tcp 10.96.0.30 80)" ok
t_expect "tenant -> 10.96.0.31:9618 (-> :9700)" "$(try tenant tcp 10.96.0.31 9618)" ok
t_expect "chain to_service's rules" "$(N nft -j list chain inet tollgate to_service 2>/dev/null | jq '[.nftables[] | .rule? // empty] | length')" 0
t_end

t_begin "servicePorts declared (agent --once): an unlisted pod's first packet to 9618 is dropped, on a peer, the node, through both Services; counted"
N "$AGENT" --config "$TG_TMP/services.conflist" --once --listen 127.0.0.1:9699 >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
# each entry's ports matched as translated and as first addressed (nft's own reading of the rules)
N nft list chain inet tollgate to_service >"$TG_TMP/to_service.nft" 2>&1 || t_fail "no chain to_service"
for m in "tcp dport 9618" "ct original proto-dst 9618" "tcp dport 2379-2380" "ct original proto-dst 2379-2380"; do
	grep -q "$m ip saddr . meta l4proto . .* != @service_ok goto service_deny" "$TG_TMP/to_service.nft" ||
		t_fail "to_service has no rule '$m': $(cat "$TG_TMP/to_service.nft")"
done
before=$(ctr inet ns_tenant_agent_dropped)
start=$(date +%s%N)
t_expect "tenant -> 10.0.1.1:9618, :2379" "$(svc_try tenant 10.0.1.1 9618 2379)" "no: timed out no: timed out"
t_expect "tenant -> $TG_NODE_IP:9618" "$(try tenant tcp "$TG_NODE_IP" 9618)" "no: timed out"
t_expect "tenant -> 10.96.0.30:80 (translated to :9618)" "$(try tenant tcp 10.96.0.30 80)" "no: timed out"
t_expect "tenant -> 10.96.0.31:9618 (translated to :9700)" "$(try tenant tcp 10.96.0.31 9618)" "no: timed out"
ms=$((($(date +%s%N) - start) / 1000000))
after=$(ctr inet ns_tenant_agent_dropped)
# one packet each, the SYN: net_try gives up after 0.5 s, before the first retransmission
t_expect "ns_tenant_agent_dropped grew by" "$((after - before))" 5
[ "$ms" -lt 5000 ] || t_fail "five refused connects took $ms ms"
t_expect "exported" "$(metric "$(nsmetric metrics_port tenant)")" "$after"
t_expect "tenant -> 10.0.1.1:9700 (no entry's port)" "$(try tenant tcp 10.0.1.1 9700)" ok
t_expect "tenant -> $TG_NODE_IP:22 (another port: refused by the node, not dropped)" \
	"$(try tenant tcp "$TG_NODE_IP" 22)" "no: Connection refused"
t_expect "ns_tenant_agent_dropped after the other ports" "$(ctr inet ns_tenant_agent_dropped)" "$after"
t_end

t_begin "each entry its own list: monitoring reaches 9618 (everywhere) but not etcd's 2379; a kube-system pod ADDed now the reverse"
before=$(ctr inet ns_monitoring_agent_dropped)
t_expect "mon -> 10.0.1.1:9618, :2379" "$(svc_try mon 10.0.1.1 9618 2379)" "ok no: timed out"
t_expect "mon -> $TG_NODE_IP:9618" "$(try mon tcp "$TG_NODE_IP" 9618)" ok
t_expect "mon -> 10.96.0.30:80, 10.96.0.31:9618" "$(try mon tcp 10.96.0.30 80) $(try mon tcp 10.96.0.31 9618)" "ok ok"
t_expect "ns_monitoring_agent_dropped grew by" "$(($(ctr inet ns_monitoring_agent_dropped) - before))" 1
pod_add sys kube-system "$SCONF" || t_fail "ADD sys: $TG_OUT"
t_expect "sys -> 10.0.1.1:2379, :9618" "$(svc_try sys 10.0.1.1 2379 9618)" "ok no: timed out"
t_expect "ns_kube-system_agent_dropped" "$(ctr inet ns_kube-system_agent_dropped)" 1
t_end

t_begin "servicePorts gone again (agent --once): the same connections succeed"
N "$AGENT" --config "$TG_TMP/back.conflist" --once --listen 127.0.0.1:9699 >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
t_expect "tenant -> 10.0.1.1:9618, 10.96.0.30:80, 10.96.0.31:9618" \
	"$(try tenant tcp 10.0.1.1 9618) $(try tenant tcp 10.96.0.30 80) $(try tenant tcp 10.96.0.31 9618)" "ok ok ok"
t_expect "elements of set service_ok" "$(nft_set_count service_ok)" 0
N "$AGENT" --config "$TG_TMP/services.conflist" --once --listen 127.0.0.1:9699 >/dev/null 2>"$TG_TMP/once.err" ||
	t_fail "agent --once: $(tail -n 3 "$TG_TMP/once.err")"
t_expect "elements of set service_ok, declared again (mon, sys)" "$(nft_set_count service_ok)" 2
N nft delete table ip tgtest_svc || t_fail "cannot delete the Services' DNAT"
t_end

# ---------------------------------------------------------------- conntrack
ct_entry() { # the node's conntrack entry of victim's UDP flow to the peer pod
	N conntrack -L -p udp --orig-src "${POD_IP[victim]}" --orig-dst "$TG_PEER_POD_IP" --dport 7777 2>/dev/null
}
t_begin "a forged reply of another pod's connection leaves its conntrack entry as it was"
ip netns exec "$TG_PEER" nft -f - <<-'EOF' || t_fail "peer drop"
	table inet tgobs {
		chain pre {
			type filter hook prerouting priority -500; policy accept;
			udp dport 7777 drop
		}
	}
EOF
P victim timeout 10 "$PY" "$SEND" ipv4 --src "${POD_IP[victim]}" --dst "$TG_PEER_POD_IP" --port 7777 --sport 40000 \
	--count 1 --size 10 >/dev/null || t_fail "victim's datagram"
ct_entry | grep -q UNREPLIED || t_fail "no unreplied entry of the victim's flow: $(ct_entry)"
before=$(ctr inet ns_tenant_spoofed_ipv4)
P tenant timeout 10 "$PY" "$SEND" ipv4 --src "$TG_PEER_POD_IP" --dst "${POD_IP[victim]}" --port 40000 --sport 7777 \
	--count 3 --size 10 >/dev/null || t_fail "forged reply"
sleep 0.2
ct_entry | grep -q UNREPLIED || t_fail "the forged reply updated the entry: $(ct_entry)"
t_expect "ns_tenant_spoofed_ipv4 grew by" "$(($(ctr inet ns_tenant_spoofed_ipv4) - before))" 3
t_end

t_begin "control: a real reply from the peer does update it"
ip netns exec "$TG_PEER" timeout 10 "$PY" "$SEND" ipv4 --src "$TG_PEER_POD_IP" --dst "${POD_IP[victim]}" --port 40000 \
	--sport 7777 --count 1 --size 10 >/dev/null || t_fail "peer's reply"
sleep 0.2
[ -n "$(ct_entry)" ] && ! ct_entry | grep -q UNREPLIED || t_fail "the real reply did not show: $(ct_entry)"
t_end

# ---------------------------------------------------------------- DEL
t_begin "DEL takes the pods' nodeAccess elements; the namespaces keep their counters"
for p in tenant victim mon sys; do pod_del "$p" "$CONF" || t_fail "DEL $p: $TG_OUT"; done
for s in metadata_ok agent_ok service_ok; do t_expect "elements of set $s" "$(nft_set_count "$s")" 0; done
for s in metadata_drop agent_drop; do t_expect "elements of map $s" "$(map_count "$s")" 0; done
[ "$(ctr inet ns_tenant_metadata_dropped)" != - ] || t_fail "ns_tenant_metadata_dropped went with the pods"
t_end

tap_done
