#!/usr/bin/env bash
# Tollgate demo (`make demo`): a simulated node in network namespaces,
# tollgate-agent starting on it (declares the node, installs the plugin and
# its conflist), three pods added through the installed plugin binary exactly
# as kubelet/containerd would, traffic between them, to a pod on another node
# and to an "internet" host, the agent repairing a flushed table and applying
# a policy change to a running pod, the kernel objects and store Tollgate
# keeps; then two more nodes sharing one namespace's cluster budget through
# two tollgate-allocator replicas electing a leader on etcd (over TLS, each
# report proven by its node's service-account token), their grants moving
# when the demand moves, forged reports refused and counted while the
# honest nodes' grants stay, the budget lowered by an edit of the
# allocator's policy (its ConfigMap, as kubelet updates it) with nothing
# restarted, and the leader SIGKILLed while the other takes over; then
# everything deleted.
#
#   pod research/train-0   pod research/train-1   pod datasets/fetch-0, fetch-1
#          \                       |                      /
#           `---- veth tg* ---- node 10.0.0.1 ---- veth tg* ----'
#                                  | eth0
#              fabric (cloud router: 10.1.0.0/24 -> node, 10.2.0.0/24 -> peer)
#                   |                                     |
#      peer node 10.0.1.1 (pod 10.2.0.5)      internet host 203.0.113.10
#                                             (knows only 10.0.0.0/24: pods reach
#                                              it only when masqueraded)
#
# Nothing touches the host: every namespace is new and uniquely named, and is
# deleted on exit, even when interrupted.
#
#   scripts/demo.sh            (TOLLGATE_BIN_DIR=build by default)
# shellcheck disable=SC2016,SC2015,SC2004,SC2001,SC1091  # jq filters with $vars; associative arrays
set -u
. "$(dirname "$0")/../tests/integration/lib.sh"

if [ -t 1 ]; then B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' D=$'\e[2m' N=$'\e[0m'; else B="" G="" R="" D="" N=""; fi
STEP=0
section() { STEP=$((STEP + 1)); printf '\n%s== %d. %s ==%s\n' "$B" "$STEP" "$*" "$N"; }
say() { printf '%s\n' "$*"; }
show() { printf '%s$ %s%s\n' "$D" "$*" "$N"; "$@" 2>&1 | sed 's/^/    /'; }
FAILS=0
result() { # OK? TEXT
	if [ "$1" = 0 ]; then printf '  %s[ok]%s   %s\n' "$G" "$N" "$2"; else printf '  %s[FAIL]%s %s\n' "$R" "$N" "$2"; FAILS=$((FAILS + 1)); fi
}
die() { printf '%sdemo failed: %s%s\n' "$R" "$*" "$N"; exit 1; }

tg_require
tg_traps
START=$SECONDS

section "Build a simulated node (network namespaces: $TG_ID-*)"
topo_up || die "could not build the topology"
say "node   $TG_NODE: eth0 10.0.0.1/24, default via 10.0.0.254 (alias pool 10.1.0.0/24)"
say "peer   $TG_PEER: eth0 10.0.1.1/24, a remote pod at 10.2.0.5"
say "inet   $TG_INET: 203.0.113.10, route back only to 10.0.0.0/24"
say "fabric $TG_FABRIC: routes 10.1.0.0/24 -> 10.0.0.1, 10.2.0.0/24 -> 10.0.1.1"
say "plugin $TG_BIN"

TG_NETNAME=tollgate
# The datasets namespace may send at most 50 Mbit/s to the internet and its pods download
# at most 40 Mbit/s together; nothing else is capped.
# nodeAccess: no namespace reaches the cloud's metadata; only "monitoring" reaches the agents' port.
# internetGuard: a namespace's pods hold at most 20 connections to the internet at once,
# and each namespace's internet bytes are counted by outside /24 (its top 3 exported).
APORT=$((20000 + RANDOM % 20000))
policy() {
	tg_conf '.shaping = {internetEgress: {namespaces: {datasets: $cap}},
		            internetIngress: {namespaces: {datasets: "40M"}}}
		| .nodeAccess = {metadataNamespaces: [], metricsNamespaces: ["monitoring"], metricsPort: $port}
		| .internetGuard = {connections: {namespaceDefault: 20},
		                    destinations: {top: 3, prefixLength: 24}}' \
		--arg cap "$1" --argjson port "$APORT"
}
# configmap_write STAMP CAP: the ConfigMap as kubelet mounts it (FILE -> ..data/FILE, ..data -> ..STAMP)
CM=$TG_TMP/configmap
configmap_write() {
	mkdir -p "$CM/..$1"
	policy "$2" | jq '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' >"$CM/..$1/10-tollgate.conflist"
	ln -sfn "..$1" "$CM/..data_tmp" && mv -T "$CM/..data_tmp" "$CM/..data"
	[ -L "$CM/10-tollgate.conflist" ] || ln -s ..data/10-tollgate.conflist "$CM/10-tollgate.conflist"
}
configmap_write v1 50M

section "Check the config before it ships: tollgate-ipam validate"
say "$ tollgate-ipam --version"
"$TOLLGATE_BIN_DIR/tollgate-ipam" --version | sed 's/^/    /'
say "$ tollgate-ipam validate 10-tollgate.conflist   (the plugin's own verdict, offline)"
"$TOLLGATE_BIN_DIR/tollgate-ipam" validate "$CM/10-tollgate.conflist" 2>&1 | sed 's/^/    /'
jq '.plugins[0].shaping.internetEgress.namespaces.datasets = "50 parsecs"' "$CM/10-tollgate.conflist" >"$TG_TMP/typo.conflist"
say "$ tollgate-ipam validate typo.conflist   (the same file with a typo in a rate)"
"$TOLLGATE_BIN_DIR/tollgate-ipam" validate "$TG_TMP/typo.conflist" 2>&1 | sed 's/^/    /'

section "Start tollgate-agent, the node daemon"
AGENT_BIN=$TOLLGATE_BIN_DIR/tollgate-agent
NETD=$TG_TMP/net.d CNIBIN=$TG_TMP/cni-bin AGENT_LOG=$TG_TMP/agent.log
mkdir -p "$NETD" "$CNIBIN"
ip -n "$TG_NODE" link set lo up
say "$ tollgate-agent --config $CM/10-tollgate.conflist --cni-conf-dir $NETD --cni-bin-dir $CNIBIN --host-root / --listen 0.0.0.0:$APORT"
ip netns exec "$TG_NODE" "$AGENT_BIN" --config "$CM/10-tollgate.conflist" --listen "0.0.0.0:$APORT" \
	--cni-conf-dir "$NETD" --cni-bin-dir "$CNIBIN" --plugin "$TG_BIN" --host-root / \
	--declare-interval 2 --page-cache-ms 0 2>"$AGENT_LOG" &
TG_PIDS+=("$!")
agent_get() { ip netns exec "$TG_NODE" curl -s --max-time 2 "http://127.0.0.1:$APORT$1"; }
# the first line says ready; any further line is something this host lacks
agent_ready() { [ "$(agent_get /readyz | head -n 1)" = ready ]; }
wait_for 20 agent_ready
result $? "/readyz: ready (node declared, pool in place, this host's libraries checked for the plugin, plugin installed)"
say "$ curl -s http://127.0.0.1:$APORT/readyz   # 'ready', then one line per thing the host lacks"
agent_get /readyz | sed 's/^/    /'
sed 's/^/    /' "$AGENT_LOG"
show ls -l "$NETD" "$CNIBIN"
TG_BIN=$CNIBIN/tollgate
CONF=$(policy 50M | jq .)
PODS=("research/train-0" "research/train-1" "datasets/fetch-0" "datasets/fetch-1")
declare -A SHORT=()

section "ADD the pods, as kubelet/containerd would"
first=1
for p in "${PODS[@]}"; do
	ns=${p%%/*} pod=${p#*/}
	s=${pod//-/}
	SHORT[$p]=$s
	pod_ns_add "$s" || die "netns"
	cid=$(cid_for "$s")
	POD_CID[$s]=$cid
	POD_NETNS[$s]=$(netns_path "$s")
	args=$(k8s_args "$ns" "$pod" "$cid")
	if [ "$first" = 1 ]; then
		say "The runtime creates the pod's netns, then runs the plugin in the host (node)"
		say "network namespace with this environment and the network config on stdin:"
		say ""
		say "  ip netns exec $TG_NODE env -i \\"
		say "    CNI_COMMAND=ADD CNI_CONTAINERID=$cid \\"
		say "    CNI_NETNS=${POD_NETNS[$s]} CNI_IFNAME=eth0 \\"
		say "    CNI_ARGS='$args' \\"
		say "    CNI_PATH=$TOLLGATE_BIN_DIR $TG_BIN <<'EOF'"
		sed 's/^/    /' <<<"$CONF"
		say "EOF"
		say ""
	fi
	t0=$(date +%s%N)
	tg_run ADD "$cid" eth0 "${POD_NETNS[$s]}" "$args" <<<"$CONF"
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$TG_RC" -ne 0 ]; then
		say "$TG_OUT"
		[ -n "$TG_ERR" ] && say "$TG_ERR"
		die "ADD $p failed (exit $TG_RC)"
	fi
	POD_IP[$s]=$(jq -r '.ips[0].address | split("/")[0]' <<<"$TG_OUT")
	POD_VETH[$s]=$(jq -r '.interfaces[0].name' <<<"$TG_OUT")
	if [ "$first" = 1 ]; then
		say "Result (stdout, ${ms} ms):"
		jq . <<<"$TG_OUT" | sed 's/^/    /'
		first=0
	fi
done

section "Pod addresses (from the ADD results)"
printf '  %-20s %-14s %-16s %s\n' "POD" "IP" "HOST VETH" "CONTAINER ID"
for p in "${PODS[@]}"; do
	s=${SHORT[$p]}
	printf '  %-20s %-14s %-16s %.12s…\n' "$p" "${POD_IP[$s]}" "${POD_VETH[$s]}" "${POD_CID[$s]}"
done
s=${SHORT[research/train-0]}
say ""
show ip -n "$TG_ID-$s" addr show dev eth0
show ip -n "$TG_ID-$s" route
show ip -n "$TG_ID-$s" neigh
say "On the node: one /32 route per pod, no bridge, no tunnel:"
show ip -n "$TG_NODE" route

A=${SHORT[research/train-0]} Bp=${SHORT[research/train-1]} C=${SHORT[datasets/fetch-0]}
section "Traffic"
pingq "$TG_ID-$A" "${POD_IP[$Bp]}"
result $? "research/train-0 -> research/train-1 (${POD_IP[$Bp]}), same node, routed by the host"
pingq "$TG_ID-$C" "${POD_IP[$A]}"
result $? "datasets/fetch-0 -> research/train-0 (${POD_IP[$A]}), across k8s namespaces"
pingq "$TG_ID-$A" "$TG_PEER_POD_IP"
result $? "research/train-0 -> peer-node pod $TG_PEER_POD_IP, through the fabric, no encapsulation"
pingq "$TG_PEER" "${POD_IP[$A]}"
result $? "peer node -> research/train-0 (${POD_IP[$A]}): pods are routable by their own IP"
pingq "$TG_ID-$C" "$TG_INET_IP"
result $? "datasets/fetch-0 -> internet host $TG_INET_IP, masqueraded to the node's 10.0.0.1"

section "Accounting: bytes per Kubernetes namespace, internal vs internet"
say "  research/train-0 sends 20 x 1000-byte pings to research/train-1 (internal),"
say "  datasets/fetch-0 sends 10 x 1400-byte pings to the internet host:"
ip netns exec "$TG_ID-$A" ping -q -c 20 -i 0.01 -s 972 -W 1 "${POD_IP[$Bp]}" >/dev/null
ip netns exec "$TG_ID-$C" ping -q -c 10 -i 0.01 -s 1372 -W 1 "$TG_INET_IP" >/dev/null
show ip netns exec "$TG_NODE" nft list counters table inet tollgate
say "$ curl http://127.0.0.1:$APORT/metrics   (tollgate-agent in the node namespace)"
agent_get /metrics | grep -E '^tollgate_(namespace_bytes|host_bytes|ipam_addresses|collector_up|scrape_duration)' |
	sed 's/^/    /'

section "Node access: a tenant pod is refused by IMDS and by the agents' port, and takes no more than its share of the node"
IMDS=169.254.169.254
ip -n "$TG_INET" addr add "$IMDS/32" dev lo && ip -n "$TG_FABRIC" route add "$IMDS/32" via "$TG_INET_IP" ||
	die "the fake IMDS's address"
ip netns exec "$TG_INET" python3 "$TG_LIB_DIR/cloud_serve.py" --http "$IMDS:80" >"$TG_TMP/cloud.out" 2>&1 &
TG_PIDS+=("$!")
wait_for 10 grep -q ready "$TG_TMP/cloud.out" || die "the fake IMDS did not start"
say "A stand-in IMDS on $IMDS (a loopback address of the internet host's netns)."
code=$(ip netns exec "$TG_NODE" curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://$IMDS/")
[ "$code" = 200 ]
result $? "the node itself: GET http://$IMDS/ -> $code"
code=$(ip netns exec "$TG_ID-$A" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 0.5 "http://$IMDS/")
[ "$code" = 000 ]
result $? "research/train-0 (namespace not in metadataNamespaces): GET http://$IMDS/ -> no connection"
code=$(ip netns exec "$TG_ID-$A" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 0.5 "http://$TG_NODE_IP:$APORT/metrics")
[ "$code" = 000 ]
result $? "research/train-0 (namespace not in metricsNamespaces): GET http://$TG_NODE_IP:$APORT/metrics -> no connection"
show ip netns exec "$TG_NODE" nft list counter inet tollgate ns_research_metadata_dropped
show ip netns exec "$TG_NODE" nft list counter inet tollgate ns_research_agent_dropped
say "$ curl http://127.0.0.1:$APORT/metrics | grep -E 'dropped_packets'   (the node itself reaches its agent)"
agent_get /metrics | grep -E '^tollgate_(namespace_(metadata|metrics_port)_dropped|pod_arp_dropped)' | sed 's/^/    /'
say "  a Service (kube-proxy's DNAT, here by hand) whose endpoint is IMDS: the translated connection is dropped too"
printf '%s\n' "table ip tgdemo_svc {" "  chain pre {" "    type nat hook prerouting priority -100;" \
	"    ip daddr 10.96.0.20 tcp dport 80 dnat to $IMDS:80" "  }" "}" >"$TG_TMP/svc.nft"
ip netns exec "$TG_NODE" nft -f "$TG_TMP/svc.nft" || die "the stand-in Service"
code=$(ip netns exec "$TG_ID-$A" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 0.5 "http://10.96.0.20/")
[ "$code" = 000 ]
result $? "research/train-0: GET http://10.96.0.20/ (a Service in front of IMDS) -> no connection"
ip netns exec "$TG_NODE" nft delete table ip tgdemo_svc
say "  what no tenant may exhaust of the node: each namespace's guard chain starts with its share of the"
say "  conntrack table (a quarter of nf_conntrack_max by default), and new on-link next hops have a rate:"
show ip netns exec "$TG_NODE" sh -c "nft list chain inet tollgate guard_research | grep 'ct count'"
show ip netns exec "$TG_NODE" nft list limit inet tollgate ns_research_nexthops
say "  and a hostPort on kubelet's port (nodeAccess.hostPortDeny) is refused before anything changes:"
pod_add kubelet research "$(jq -c '. + {runtimeConfig: {portMappings: [{hostPort: 10250, containerPort: 10250}]}}' <<<"$CONF")"
msg=$(jq -r .msg <<<"$TG_OUT" 2>/dev/null)
[ "$TG_RC" != 0 ] && grep -q "hostPort 10250 is in nodeAccess.hostPortDeny" <<<"$msg"
result $? "ADD research/kubelet-0 with hostPort 10250 -> error $(jq -r .code <<<"$TG_OUT" 2>/dev/null): $msg"
pod_ns_del kubelet

section "Internet guard: a namespace holds at most 20 connections to the internet at once"
ip netns exec "$TG_INET" python3 "$TG_LIB_DIR/conn_flood.py" serve 8081 &
TG_PIDS+=("$!")
inet_listens() { ip netns exec "$TG_INET" ss -Htln '( sport = :8081 )' | grep -q .; }
wait_for 10 inet_listens || die "the internet host's echo server did not start"
# what datasets already holds to the internet (the pings above are flows too)
had=$(ip netns exec "$TG_NODE" conntrack -L -s "${POD_IP[$C]}" 2>/dev/null |
	awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^dst=/) { print $i; break } }' | grep -vc '^dst=10\.')
say "  datasets/fetch-0 holds $had flows to the internet (the pings above); it opens 30 connections at once:"
res=$(ip netns exec "$TG_ID-$C" python3 "$TG_LIB_DIR/conn_flood.py" open "$TG_INET_IP" 8081 30 --probe 5)
say "    $res"
[ "$(jq .connected <<<"$res")" = $((20 - had)) ] && [ "$(jq .refused <<<"$res")" = $((10 + had)) ] &&
	[ "$(jq .echoed <<<"$res")" = "$(jq .probed <<<"$res")" ] && [ "$(jq .probed <<<"$res")" -gt 0 ]
result $? "$((20 - had)) held, up to the limit of 20 (they still echo), $((10 + had)) refused at their first packet with a TCP reset"
ip netns exec "$TG_ID-$A" python3 "$TG_LIB_DIR/conn_flood.py" serve 8081 &
TG_PIDS+=("$!")
a_listens() { ip netns exec "$TG_ID-$A" ss -Htln '( sport = :8081 )' | grep -q .; }
wait_for 10 a_listens || die "research/train-0's echo server did not start"
res=$(ip netns exec "$TG_ID-$C" python3 "$TG_LIB_DIR/conn_flood.py" open "${POD_IP[$A]}" 8081 30)
[ "$(jq .connected <<<"$res")" = 30 ]
result $? "internal connections are not limited: 30 of 30 to research/train-0"
show ip netns exec "$TG_NODE" nft list chain inet tollgate guard_datasets
say "$ curl http://127.0.0.1:$APORT/metrics | grep connections_refused"
agent_get /metrics | grep -E '^tollgate_namespace_connections_refused_total' | sed 's/^/    /'

section "Internet guard: which outside prefixes each namespace sends to"
# two more outside networks, answered by the internet host
for net in 198.51.100.0/24 192.0.2.0/24; do
	ip -n "$TG_INET" route add local "$net" dev lo && ip -n "$TG_FABRIC" route add "$net" via "$TG_INET_IP" ||
		die "the outside network $net"
done
say "  datasets/fetch-0 sends 300 x 1000-byte datagrams to 198.51.100.7, 100 to 192.0.2.9 and 50 to $TG_INET_IP;"
say "  research/train-0 sends 20 to 192.0.2.9:"
ip netns exec "$TG_ID-$C" python3 "$TG_LIB_DIR/dst_send.py" send --dst "198.51.100.7,192.0.2.9,$TG_INET_IP" \
	--count 300,100,50 --size 972 >/dev/null
ip netns exec "$TG_ID-$A" python3 "$TG_LIB_DIR/dst_send.py" send --dst 192.0.2.9 --count 20 --size 972 >/dev/null
say "$ tollgate-ipam top   (on the node; the agent's /destinations, the same numbers as /metrics)"
ip netns exec "$TG_NODE" "$TOLLGATE_BIN_DIR/tollgate-ipam" top --agent "http://127.0.0.1:$APORT" 2>&1 | sed 's/^/    /'
agent_get /metrics >"$TG_TMP/dst.prom"
grep -E '^tollgate_namespace_destination_bytes_total\{namespace="datasets",.*direction="egress"' "$TG_TMP/dst.prom" | sed 's/^/    /'
first=$(ip netns exec "$TG_NODE" "$TOLLGATE_BIN_DIR/tollgate-ipam" --json top datasets --agent "http://127.0.0.1:$APORT" |
	jq -r '[.[] | select(.direction == "egress")][0].destinations[0] | "\(.destination) \(.bytes)"')
[ "$first" = "198.51.100.0/24 300000" ]
result $? "datasets' top egress prefix: 198.51.100.0/24, 300,000 bytes to the byte (got: $first)"
sum=$(awk '/^tollgate_namespace_destination_bytes_total\{namespace="datasets",.*direction="egress"/ { s += $2 } END { print s }' "$TG_TMP/dst.prom")
total=$(awk '/^tollgate_namespace_bytes_total\{namespace="datasets",direction="egress",traffic="internet"\}/ { print $2 }' "$TG_TMP/dst.prom")
[ -n "$sum" ] && [ "$sum" = "$total" ]
result $? "datasets' destination series add up to its internet egress bytes ($sum = $total)"

section "Shaping: datasets' internet traffic held to its 50M cap, internal traffic at full speed"
iperf_to() { # NETNS_FROM SERVER_NETNS SERVER_IP: Mbit/s received in 2 s
	local port=$((30000 + RANDOM % 20000)) pid bps
	ip netns exec "$2" iperf3 -s -1 -B "$3" -p "$port" >/dev/null 2>&1 &
	pid=$!
	TG_PIDS+=("$pid")
	for _ in $(seq 50); do
		ip netns exec "$2" ss -ltn 2>/dev/null | grep -q ":$port " && break
		sleep 0.1
	done
	bps=$(ip netns exec "$1" iperf3 -c "$3" -p "$port" -t 2 -J 2>/dev/null |
		jq -r '.end.sum_received.bits_per_second // 0')
	wait "$pid" 2>/dev/null
	awk -v b="${bps:-0}" 'BEGIN { printf "%.1f", b / 1e6 }'
}
say "  datasets/fetch-0 -> internet host:    $(iperf_to "$TG_ID-$C" "$TG_INET" "$TG_INET_IP") Mbit/s (cap 50M)"
say "  datasets/fetch-0 -> research/train-0: $(iperf_to "$TG_ID-$C" "$TG_ID-$A" "${POD_IP[$A]}") Mbit/s (internal: not capped)"
say "  research/train-1 -> internet host:    $(iperf_to "$TG_ID-$Bp" "$TG_INET" "$TG_INET_IP") Mbit/s (research has no cap)"
show ip netns exec "$TG_NODE" tc -s class show dev tollgate-inet
say "$ curl http://127.0.0.1:$APORT/metrics | grep tollgate_shaper_   (the same classes, as Prometheus sees them)"
agent_get /metrics |
	grep -E '^tollgate_shaper_(node|namespace|pod)_(sent_bytes_total|dropped_packets_total|limit_bytes_per_second)' |
	sed 's/^/    /'

section "Downloads: datasets' pods share its 40M download cap on the node; internal downloads at full speed"
# downloads_to NETNS...: the internet host sends to each pod at once for 2 s; Mbit/s each pod received
downloads_to() {
	local i port pids=() outs=()
	i=0
	for ns in "$@"; do
		port=$((30000 + RANDOM % 20000))
		ip netns exec "$TG_INET" iperf3 -s -1 -B "$TG_INET_IP" -p "$port" >/dev/null 2>&1 &
		TG_PIDS+=("$!")
		pids+=("$!")
		for _ in $(seq 50); do
			ip netns exec "$TG_INET" ss -ltn 2>/dev/null | grep -q ":$port " && break
			sleep 0.1
		done
		ip netns exec "$ns" iperf3 -c "$TG_INET_IP" -p "$port" -R -t 2 -J >"$TG_TMP/dl-$i.json" 2>/dev/null &
		pids+=("$!")
		outs+=("$TG_TMP/dl-$i.json")
		i=$((i + 1))
	done
	for i in "${pids[@]}"; do wait "$i" 2>/dev/null; done
	for i in "${outs[@]}"; do
		jq -r '.end.sum_received.bits_per_second // 0' "$i" 2>/dev/null | awk '{ printf "%.1f ", $1 / 1e6 }'
	done
}
F1=${SHORT[datasets/fetch-1]}
read -r d0 d1 <<<"$(downloads_to "$TG_ID-$C" "$TG_ID-$F1")"
say "  internet host -> datasets/fetch-0 and datasets/fetch-1 at once: $d0 + $d1 Mbit/s (datasets' cap 40M, together)"
read -r d0 <<<"$(downloads_to "$TG_ID-$C")"
say "  internet host -> datasets/fetch-0 alone:                        $d0 Mbit/s (the whole 40M is its to use)"
say "  research/train-0 -> datasets/fetch-0 (internal download):       $(iperf_to "$TG_ID-$A" "$TG_ID-$C" "${POD_IP[$C]}") Mbit/s (not capped)"
say "Each pod's veth steers only its internet downloads (marked by nftables) to tollgate-inetdl:"
show ip netns exec "$TG_NODE" tc filter show dev "${POD_VETH[$C]}" egress
show ip netns exec "$TG_NODE" tc -s class show dev tollgate-inetdl

section "hostPort: a pod's port on the node's address, mapped by Tollgate itself (no portmap)"
WEB_CONF=$(jq -c '. + {runtimeConfig: {portMappings: [{hostPort: 8080, containerPort: 80, protocol: "tcp"}]}}' <<<"$CONF")
say "  ADD research/web-0 with runtimeConfig.portMappings [{hostPort: 8080, containerPort: 80, protocol: tcp}]"
pod_add web research "$WEB_CONF" || die "ADD research/web-0 failed: $TG_OUT"
ip netns exec "$TG_ID-web" python3 "$TG_LIB_DIR/hostport_probe.py" serve 80 --name web-0 --bind "${POD_IP[web]}" &
TG_PIDS+=("$!")
web_up() { ip netns exec "$TG_ID-web" python3 "$TG_LIB_DIR/hostport_probe.py" tcp "${POD_IP[web]}" 80 >/dev/null; }
wait_for 10 web_up || die "research/web-0's listener did not start"
show ip netns exec "$TG_NODE" nft list map inet tollgate hostport
got=$(ip netns exec "$TG_PEER" python3 "$TG_LIB_DIR/hostport_probe.py" tcp "$TG_NODE_IP" 8080)
[ "$got" = "web-0 10.0.1.1" ]
result $? "peer node -> $TG_NODE_IP:8080: answered by web-0, which saw the peer's own address ($got)"
got=$(ip netns exec "$TG_INET" python3 "$TG_LIB_DIR/hostport_probe.py" tcp "$TG_NODE_IP" 8080)
[ "$got" = "web-0 $TG_INET_IP" ]
result $? "internet host -> $TG_NODE_IP:8080: answered by web-0 ($got)"
pod_del web "$WEB_CONF" || die "DEL research/web-0 failed: $TG_OUT"
pod_ns_del web
got=$(ip netns exec "$TG_PEER" python3 "$TG_LIB_DIR/hostport_probe.py" tcp "$TG_NODE_IP" 8080)
left=$(ip netns exec "$TG_NODE" nft -j list map inet tollgate hostport | jq '[.nftables[] | .map // empty][0].elem // [] | length')
[ "$got" = "no: Connection refused" ] && [ "$left" = 0 ]
result $? "after DEL the map is empty and the port refuses ($got)"

section "The agent repairs what someone flushed"
DS_EGRESS='tollgate_namespace_bytes_total{namespace="datasets",direction="egress",traffic="internet"}'
ds_egress() { agent_get /metrics | awk -v m="$DS_EGRESS" '$1 == m { print $2 }'; }
ds_before=$(ds_egress)
show ip netns exec "$TG_NODE" nft delete table inet tollgate
table_back() { ip netns exec "$TG_NODE" nft list set inet tollgate pods 2>/dev/null | grep -qw "${POD_IP[$C]}"; }
t0=$SECONDS
wait_for 10 table_back
result $? "table inet tollgate back with every pod's elements within $((SECONDS - t0 + 1)) s (declaration every 2 s here, 30 s by default)"
grep 'repaired' "$AGENT_LOG" | tail -1 | sed 's/^/    /'
agent_get /metrics | grep -E '^tollgate_agent_repairs_total\{object="nft_(table|sets|chains|rules)"\}' | sed 's/^/    /'
ip netns exec "$TG_ID-$C" ping -q -c 5 -i 0.01 -s 1372 -W 1 "$TG_INET_IP" >/dev/null
result $? "datasets/fetch-0 reaches the internet host again, counted to datasets:"
ds_after=$(ds_egress)
say "    $DS_EGRESS $ds_after"
# the kernel's counter started from zero; the agent knows it is a new object and carries the old value
[ "${ds_after:-0}" -gt "${ds_before:-0}" ] 2>/dev/null
result $? "datasets' series went on from $ds_before (the new counter's bytes on top), it never went backwards"

section "A policy change reaches a running pod: datasets' cap 50M -> 20M"
say "The ConfigMap is updated; kubelet swaps its ..data symlink; the agent sees the directory change:"
configmap_write v2 20M
capped() { ip netns exec "$TG_NODE" tc class show dev tollgate-inet | grep -q 'ceil 20Mbit'; }
wait_for 10 capped
result $? "datasets' class on tollgate-inet now has ceil 20Mbit"
grep -E 'config changed|installed' "$AGENT_LOG" | tail -2 | sed 's/^/    /'
say "  datasets/fetch-0 -> internet host:    $(iperf_to "$TG_ID-$C" "$TG_INET" "$TG_INET_IP") Mbit/s (cap now 20M)"
cmp -s "$NETD/10-tollgate.conflist" "$CM/..v2/10-tollgate.conflist"
result $? "the new conflist is installed for the next pods"
CONF=$(policy 20M | jq .)

section "Node-wide state: declared by the agent, only read by each ADD"
say "Each ADD's log line says where its time went; 'node' is the node-wide probe,"
say "which declares the table, tollgate-inet and the uplink's filters only when missing:"
grep 'cmd=ADD' "$TG_TMP/tollgate.log" | sed -E 's/.* pod=([^ ]+) .*duration_ms=([0-9.]+) steps_ms=([^ ]+).*/    \1  \2 ms  \3/'
say "The declaration's stamps: tollgate-inet's alias, and each rule's comment:"
show ip -n "$TG_NODE" -d link show tollgate-inet
ip -n "$TG_NODE" -d link show tollgate-inet | grep -q 'alias tollgate declared' || die "tollgate-inet carries no declaration stamp"

section "nftables on the node: nft list table inet tollgate"
show ip netns exec "$TG_NODE" nft list table inet tollgate

section "The store: $(tg_state_file)"
show ls -l "$(dirname "$(tg_state_file)")"
tg_state | jq -r '"version \(.version), bootId \(.bootId), pool \(.pool.source) \(.pool.addresses | join(" ")), \(.attachments|length) attachments, \(.cooling|length) cooling"' | sed 's/^/    /'
tg_state | jq -r '.attachments[] | "    \(.ip)\t\(.namespace)/\(.pod)\t\(.hostVeth)\t\(.containerId[0:12])…"'

section "IPAM debug CLI: tollgate-ipam"
IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
if [ -x "$IPAM_BIN" ]; then
	# run in the node namespace: `show` looks for the veth and the nft element there
	ipam() { show ip netns exec "$TG_NODE" "$IPAM_BIN" --data-dir "$TG_TMP/data" --network "$TG_NETNAME" "$@"; }
	ipam status
	ipam list
	ipam show research/train-0
	# a veth nobody owns, as a crashed runtime might leave: doctor finds it and says how to fix it
	ip -n "$TG_NODE" link add tg0000deadbeef type veth peer name tgdemo-peer
	ipam doctor || true
	ip -n "$TG_NODE" link del tg0000deadbeef
	ipam doctor
else
	say "  ($IPAM_BIN not built)"
fi

section "Cluster budgets: two more nodes share datasets' 40M through tollgate-allocator"
ALLOC_BIN=$TOLLGATE_BIN_DIR/tollgate-allocator
METER=$TG_LIB_DIR/inet_meter.py
BUDGET_CONF=40M BUDGET_BPS=40e6
# policy_write STAMP BUDGET: the allocator's policy (datasets budgeted at
# BUDGET; the lease it grants the nodes' 4 s) as kubelet mounts its ConfigMap:
# policy.json -> ..data/policy.json, ..data -> ..STAMP; an edit is a new
# ..STAMP, ..data swapped to it by rename, the old one removed
PDIR=$TG_TMP/allocator-policy
policy_write() {
	local old
	old=$(readlink "$PDIR/..data" 2>/dev/null)
	mkdir -p "$PDIR/..$1"
	jq -n --arg b "$2" '{version: 1, reportSeconds: 1, leaseSeconds: 4, namespaces: {datasets: {internetEgress: $b}}}' \
		>"$PDIR/..$1/policy.json"
	ln -sfn "..$1" "$PDIR/..data_tmp" && mv -T "$PDIR/..data_tmp" "$PDIR/..data"
	[ -L "$PDIR/policy.json" ] || ln -s ..data/policy.json "$PDIR/policy.json"
	[ -z "$old" ] || rm -rf "${PDIR:?}/$old"
}
# bnode_up I: node b<I> (10.0.<I+1>.1, pool 10.3.<I>.0/28) on the fabric, its agent
# reporting to the allocator as node-b<I>
bnode_up() {
	local i=$1 ns=$TG_ID-b$1 ip=10.0.$(($1 + 1)).1 d=$TG_TMP/b$1
	_tg_netns_add "$ns" || return 1
	ip -n "$TG_FABRIC" link add "fb$i" type veth peer name eth0 netns "$ns" || return 1
	ip -n "$TG_FABRIC" addr add "10.0.$((i + 1)).254/24" dev "fb$i"
	ip -n "$TG_FABRIC" link set "fb$i" up
	ip -n "$TG_FABRIC" route add "10.3.$i.0/28" via "$ip" || return 1
	ip -n "$ns" addr add "$ip/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" route add default via "10.0.$((i + 1)).254" || return 1
	ip -n "$TG_INET" route add "10.0.$((i + 1)).0/24" via 203.0.113.1 || return 1
	mkdir -p "$d/net.d" "$d/bin"
	tg_conf '.name = "tollgate" | .dataDir = $dd | .logFile = $lf
		| .ipam = {source: "static", addresses: [$pool], cooldownSeconds: 0}
		| .budgets = {allocator: "https://10.0.4.100:9618", reportSeconds: 1, leaseSeconds: 4, fallback: "10M",
		              tokenFile: $tok, caFile: $ca}' \
		--arg dd "$d/data" --arg lf "$d/tollgate.log" --arg pool "10.3.$i.2-10.3.$i.9" \
		--arg tok "$d/token/token" --arg ca "$PKI/ca.crt" |
		jq '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' >"$d/10-tollgate.conflist"
	ip netns exec "$ns" "$AGENT_BIN" --config "$d/10-tollgate.conflist" --listen "$ip:9617" \
		--cni-conf-dir "$d/net.d" --cni-bin-dir "$d/bin" --plugin "$TOLLGATE_BIN_DIR/tollgate" \
		--node-name "node-b$i" --page-cache-ms 0 2>"$d/agent.log" &
	TG_PIDS+=("$!")
	BAGENT[$i]=$!
}
# bstop PID: end one of this section's processes, reap it, and drop it from
# TG_PIDS (a reaped PID may be someone else's by the time the cleanup runs)
bstop() {
	local p keep=()
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	for p in "${TG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	TG_PIDS=("${keep[@]}")
}
bget() { ip netns exec "$TG_ID-b$1" curl -s --max-time 2 "http://10.0.$(($1 + 1)).1:9617$2"; }
bready() { [ "$(bget "$1" /readyz)" = ready ]; }
# bgrant I: node b<I>'s grant of datasets' budget, bytes/s, from its metrics
bgrant() { bget "$1" /metrics | awk '$1 == "tollgate_budget_grant_bytes_per_second{namespace=\"datasets\"}" { print $2 }'; }
# bload I heavy|light: what pod datasets/fetch-b<I> sends to the internet host from now on
declare -A BAGENT=() BLOAD=()
bload() {
	[ -n "${BLOAD[$1]:-}" ] && bstop "${BLOAD[$1]}"
	local a=(--port 9002 --udp-bps 3e6)
	[ "$2" = heavy ] && a=(--port 9001 --tcp 4)
	ip netns exec "$TG_ID-fetchb$1" python3 "$METER" load --dst "$TG_INET_IP" "${a[@]}" --seconds 60 2>/dev/null &
	TG_PIDS+=("$!")
	BLOAD[$1]=$!
}
# btable: each node's grant and ceil (its metrics), its `tollgate-ipam status`
# budget line, and what the internet host received from it over the last 2 s
btable() {
	local i m t1=$EPOCHREALTIME
	printf '  %-8s %-10s %12s %12s %20s\n' NODE STATE GRANT CEIL "SENT (last 2 s)"
	for i in 1 2; do
		m=$(bget "$i" /metrics)
		printf '  %-8s %-10s %12s %12s %20s\n' "node-b$i" \
			"$(awk '/^tollgate_budget_state\{namespace="datasets"/ && $2 == 1 { sub(/.*state="/, "", $1); sub(/".*/, "", $1); print $1 }' <<<"$m")" \
			"$(awk '$1 ~ /^tollgate_budget_grant_bytes_per_second\{namespace="datasets"/ { printf "%.1f Mbit/s", $2 * 8 / 1e6 }' <<<"$m")" \
			"$(awk '$1 ~ /^tollgate_budget_ceil_bytes_per_second\{namespace="datasets"/ { printf "%.1f Mbit/s", $2 * 8 / 1e6 }' <<<"$m")" \
			"$(python3 "$METER" stats --file "$TG_TMP/meter.txt" --names "b$i" --from "$(awk -v t="$t1" 'BEGIN { printf "%.6f", t - 2 }')" --to "$t1" |
				awk '{ printf "%.1f Mbit/s", $2 / 1e6 }')"
	done
	for i in 1 2; do
		say "$ tollgate-ipam status   (on node-b$i)"
		ip netns exec "$TG_ID-b$i" "$IPAM_BIN" --data-dir "$TG_TMP/b$i/data" --network tollgate status | grep '^budget' | sed 's/^/    /'
	done
}
if [ ! -x "$ALLOC_BIN" ] || [ ! -x "$IPAM_BIN" ]; then
	say "  ($ALLOC_BIN or $IPAM_BIN not built)"
else
	say "A budget caps one namespace's internet egress across the cluster: datasets gets $BUDGET_CONF"
	say "in all, split by the allocator between the nodes where it runs, by demand. Each agent"
	say "reports every second; each answer is a grant (a lease of 4 s here), applied as the"
	say "ceil of datasets' class on the node's tollgate-inet. The budgets are the allocator's"
	say "policy, a ConfigMap of its own; the answers carry them, and the nodes' conflists say"
	say "only where the allocator is and how a node proves itself:"
	policy_write v1 "$BUDGET_CONF"
	say "$ cat policy.json   (the allocator's ConfigMap, mounted as kubelet mounts it)"
	jq -c . "$PDIR/policy.json" | sed 's/^/    /'
	say ""
	say "Tenants reach every address of the cluster network, the allocator's port included."
	say "So each report carries its node's bound service-account token (kubelet projects it"
	say "into the agent's pod with audience tollgate-allocator, and rotates it), which the"
	say "allocator checks offline against the cluster's service-account issuer keys (the JWKS"
	say "the API server publishes at /openid/v1/jwks), over TLS the agents verify. Here"
	say "sa_token.py signs as the API server does, and openssl makes a CA and the allocator's"
	say "certificate (its Service's and replicas' addresses):"
	PKI=$TG_TMP/pki ISS=$TG_TMP/issuer
	MINT=$TG_LIB_DIR/sa_token.py PY=/usr/bin/python3 # Debian's python3-jwt and python3-cryptography
	mkdir -p "$PKI"
	pki() { openssl "$@" >>"$PKI/openssl.log" 2>&1; }
	pki req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 1 -subj "/CN=tollgate-demo-ca" &&
		pki req -newkey rsa:2048 -nodes -keyout "$PKI/tls.key" -out "$PKI/tls.csr" -subj "/CN=tollgate-allocator" &&
		pki x509 -req -in "$PKI/tls.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 1 -out "$PKI/tls.crt" \
			-extfile <(printf 'subjectAltName=DNS:tollgate-allocator.kube-system.svc,IP:10.0.4.100,IP:10.0.4.1,IP:10.0.4.2\nextendedKeyUsage=serverAuth\n') ||
		die "openssl: $(tail -3 "$PKI/openssl.log")"
	"$PY" "$MINT" keygen "$ISS" || die "sa_token.py keygen (python3-jwt, python3-cryptography: scripts/deps.sh)"
	for i in 1 2; do
		mkdir -p "$TG_TMP/b$i/token"
		"$PY" "$MINT" mint "$ISS" --node "node-b$i" >"$TG_TMP/b$i/token/token" || die "sa_token.py mint"
	done
	say "$ openssl x509 -noout -ext subjectAltName -in tls.crt"
	openssl x509 -noout -ext subjectAltName -in "$PKI/tls.crt" | sed 's/^ */    /'
	say "$ jq -c '.keys[] | {kty, alg, kid}' jwks.json   (the issuer's keys: tollgate-allocator --jwks)"
	jq -c '.keys[] | {kty, alg, kid}' "$ISS/jwks.json" | sed 's/^/    /'
	say "node-b1's token (its claims; signed RS256 by the issuer's key):"
	jq -cR 'split(".")[1] | gsub("-"; "+") | gsub("_"; "/") | @base64d | fromjson
		| {iss, aud, sub, node: .["kubernetes.io"].node.name, exp: (.exp | todate)}' "$TG_TMP/b1/token/token" |
		sed 's/^/    /'
	_tg_netns_add "$TG_ID-alloc" || die "netns"
	ip -n "$TG_FABRIC" link add balloc type veth peer name eth0 netns "$TG_ID-alloc" || die "the allocator's link"
	ip -n "$TG_FABRIC" addr add 10.0.4.254/24 dev balloc
	ip -n "$TG_FABRIC" link set balloc up
	ip -n "$TG_ID-alloc" addr add 10.0.4.1/24 dev eth0
	ip -n "$TG_ID-alloc" addr add 10.0.4.2/24 dev eth0
	ip -n "$TG_ID-alloc" link set eth0 up
	ip -n "$TG_ID-alloc" route add default via 10.0.4.254
	# the allocator's Service, 10.0.4.100:9618, as kube-proxy makes it: DNAT to its live endpoints
	ip netns exec "$TG_FABRIC" nft -f - <<-'EOF' || die "the allocator's Service"
		table ip tgsvc {
			map backends { typeof numgen inc mod 2 : ip daddr; elements = { 0 : 10.0.4.1, 1 : 10.0.4.2 } }
			chain prerouting {
				type nat hook prerouting priority dstnat; policy accept;
				ip daddr 10.0.4.100 tcp dport 9618 dnat to numgen inc mod 2 map @backends
			}
		}
	EOF
	bnode_up 1 && bnode_up 2 || die "could not build the budget nodes"
	say "$ jq .plugins[0].budgets 10-tollgate.conflist   (node-b1's; node-b2's names its own token)"
	jq -c '.plugins[0].budgets' "$TG_TMP/b1/10-tollgate.conflist" | sed 's/^/    /'
	say "Two replicas elect a leader on etcd (one member here; three in a cluster): only the"
	say "leader grants, the other answers the nodes with where the leader is."
	ip netns exec "$TG_ID-alloc" env -i PATH="$PATH" etcd --name demo --data-dir "$TG_TMP/etcd.data" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster demo=http://127.0.0.1:2380 >"$TG_TMP/etcd.log" 2>&1 &
	TG_PIDS+=("$!")
	ETCD_PID=$!
	declare -A APID=()
	for r in 1 2; do
		say "$ tollgate-allocator --policy policy.json --jwks jwks.json --tls-cert tls.crt --tls-key tls.key --listen 10.0.4.$r:9618 --etcd http://127.0.0.1:2379 --advertise https://10.0.4.$r:9618 --election-ttl 3"
		ip netns exec "$TG_ID-alloc" "$ALLOC_BIN" --policy "$PDIR/policy.json" --jwks "$ISS/jwks.json" \
			--tls-cert "$PKI/tls.crt" --tls-key "$PKI/tls.key" --listen "10.0.4.$r:9618" \
			--etcd http://127.0.0.1:2379 --advertise "https://10.0.4.$r:9618" --election-ttl 3 2>"$TG_TMP/allocator$r.log" &
		TG_PIDS+=("$!")
		APID[$r]=$!
	done
	aget() { ip netns exec "$TG_ID-alloc" curl -s --max-time 2 --cacert "$PKI/ca.crt" "https://10.0.4.$1:9618/metrics"; }
	ametric() { aget "$1" | awk -v m="$2" '$1 == m { print $2; exit }'; }
	leader_of() { local r; for r in "$@"; do [ "$(ametric "$r" tollgate_allocator_leader)" = 1 ] && { echo "$r"; return 0; }; done; return 1; }
	wait_for 10 leader_of 1 2 >/dev/null
	LEAD=$(leader_of 1 2)
	result $? "replica 10.0.4.${LEAD:-?} leads (epoch $(ametric "${LEAD:-1}" tollgate_allocator_epoch)), the other follows"
	# the internet host counts what each node sends it (masqueraded: the node's address)
	ip netns exec "$TG_INET" nft -f - <<-'EOF' || die "the internet host's counters"
		table inet tgmeter {
			counter b1 { }
			counter b2 { }
			chain input {
				type filter hook input priority 0; policy accept;
				ip saddr 10.0.2.1 meta l4proto { tcp, udp } th dport { 9001, 9002 } counter name b1
				ip saddr 10.0.3.1 meta l4proto { tcp, udp } th dport { 9001, 9002 } counter name b2
			}
		}
	EOF
	ip netns exec "$TG_INET" python3 "$METER" serve --tcp-port 9001 --udp-port 9002 --table tgmeter \
		--out "$TG_TMP/meter.txt" --ready "$TG_TMP/meter.ready" --seconds 120 2>"$TG_TMP/meter.err" &
	TG_PIDS+=("$!")
	METER_PID=$!
	wait_for 10 test -e "$TG_TMP/meter.ready" || die "the internet host's sink did not start"
	wait_for 20 bready 1 && wait_for 20 bready 2
	result $? "node-b1 and node-b2: agents ready (--node-name node-b1, node-b2)"
	SAVED_NODE=$TG_NODE SAVED_BIN=$TG_BIN
	for i in 1 2; do
		TG_NODE=$TG_ID-b$i TG_BIN=$TG_TMP/b$i/bin/tollgate
		pod_add "fetchb$i" datasets "$(jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$TG_TMP/b$i/net.d/10-tollgate.conflist")" ||
			die "ADD datasets/fetch-b$i on node-b$i: $TG_OUT"
		# every TCP segment its own packet: the internet host's counters see frames as HTB counts them
		ip netns exec "$TG_ID-fetchb$i" python3 "$METER" nogso eth0
	done
	TG_NODE=$SAVED_NODE TG_BIN=$SAVED_BIN
	say "  datasets/fetch-b1 on node-b1 (${POD_IP[fetchb1]}), datasets/fetch-b2 on node-b2 (${POD_IP[fetchb2]})"
	say ""
	say "fetch-b1 downloads hard (4 TCP streams to the internet host), fetch-b2 only 3 Mbit/s:"
	bload 1 heavy
	bload 2 light
	t0=$SECONDS
	b1_leads() { local a b; a=$(bgrant 1) b=$(bgrant 2); [ "${a:-0}" -gt $((3 * ${b:-0})) ] && [ "${b:-0}" -gt 0 ] || { sleep 0.5; return 1; }; }
	wait_for 25 b1_leads
	result $? "node-b1's grant grows to most of the budget, node-b2 keeps what it uses ($((SECONDS - t0)) s)"
	sleep 2
	btable
	say ""
	say "The demand moves: fetch-b1 now sends 3 Mbit/s, fetch-b2 downloads hard:"
	bload 1 light
	bload 2 heavy
	t0=$SECONDS
	b2_leads() { local a b; a=$(bgrant 1) b=$(bgrant 2); [ "${b:-0}" -gt $((3 * ${a:-0})) ] && [ "${a:-0}" -gt 0 ] || { sleep 0.5; return 1; }; }
	wait_for 30 b2_leads
	result $? "the grants move with it: node-b2's grows, node-b1's shrinks ($((SECONDS - t0)) s)"
	sleep 2
	btable
	sum=$(python3 "$METER" stats --file "$TG_TMP/meter.txt" --from "$(awk -v t="$EPOCHREALTIME" 'BEGIN { printf "%.6f", t - 4 }')" --to "$EPOCHREALTIME" | awk '{ print $6 }')
	awk -v s="${sum:-x}" -v b="$BUDGET_BPS" 'BEGIN { exit !(s ~ /^[0-9.]+$/ && s <= 1.05 * b) }'
	result $? "both nodes together: at most $BUDGET_CONF (+5%) at the internet host over the last 4 s (the most in 1 s: $(awk -v s="${sum:-0}" 'BEGIN { printf "%.1f", s / 1e6 }') Mbit/s)"
	say "$ curl https://10.0.4.$LEAD:9618/metrics   (the leading tollgate-allocator)"
	aget "$LEAD" | grep -E '^tollgate_allocator_(leader|epoch|budget|granted|usage|nodes)' | sed 's/^/    /'
	say ""
	say "Forged reports. A tenant pod on node-b1 (datasets/fetch-b1) reaches the leader's port"
	say "like anything on the cluster network and claims node-b1's datasets is starved; then"
	say "node-b1's own token (what root on node-b1 can read) speaks for node-b2:"
	FURL=https://10.0.4.$LEAD:9618/v1/report
	# forge NODE: a report for NODE as the wire has it, datasets saturated at 90 MB/s
	forge() {
		jq -nc --arg n "$1" '{version: 1, node: $n, seq: 1, budgets: [{namespace: "datasets", sentBytes: 90000000,
			intervalMs: 1000, saturated: true, applied: 15000000, limit: 0, state: "granted", pods: 1,
			safeShare: 0, nodes: 0}]}'
	}
	# forged NETNS NODE [CURL-ARGS...]: POSTs forge NODE to the leader; the HTTP status
	forged() {
		local ns=$1 node=$2
		shift 2
		ip netns exec "$ns" curl -s -D "$TG_TMP/forged.hdr" -o "$TG_TMP/forged.out" -w '%{http_code}' --max-time 3 \
			--cacert "$PKI/ca.crt" -X POST -H 'Content-Type: application/json' --data "$(forge "$node")" "$@" "$FURL"
	}
	answer() { head -n 1 "$TG_TMP/forged.out"; }
	challenge() { tr -d '\r' <"$TG_TMP/forged.hdr" | sed -n 's/^[Ww][Ww][Ww]-[Aa]uthenticate: //p'; }
	anodes() { ametric "$LEAD" 'tollgate_allocator_nodes{namespace="datasets"}'; }
	# reports_total{result=R} and auth_refusals_total{reason=R} on the leader
	arep() { ametric "$LEAD" "tollgate_allocator_reports_total{result=\"$1\"}"; }
	aref() { ametric "$LEAD" "tollgate_allocator_auth_refusals_total{reason=\"$1\"}"; }
	g1=$(bgrant 1) g2=$(bgrant 2) n0=$(anodes)
	un0=$(arep unauthenticated) fb0=$(arep forbidden) ok0=$(arep ok) ma0=$(aref malformed) su0=$(aref subject)
	code=$(forged "$TG_ID-fetchb1" node-b1)
	say "$ curl -X POST $FURL --data '{\"node\": \"node-b1\", ... \"saturated\": true}'   (from datasets/fetch-b1, no token)"
	say "    $code; WWW-Authenticate: $(challenge)"
	say "    $(answer)"
	[ "$code" = 401 ] && challenge | grep -q 'error="invalid_token"'
	result $? "a report without a token: 401, with the Bearer challenge"
	TENANT=$("$PY" "$MINT" mint "$ISS" --node node-b1 --namespace datasets --account default)
	code=$(forged "$TG_ID-fetchb1" node-b1 -H "Authorization: Bearer $TENANT")
	say "$ curl ... -H 'Authorization: Bearer <datasets' default ServiceAccount's token, audience tollgate-allocator>'"
	say "    $code; $(answer)"
	[ "$code" = 401 ]
	result $? "a token the tenant can have projected for itself, of its own ServiceAccount: 401"
	code=$(forged "$TG_ID-b1" node-b2 -H "Authorization: Bearer $(cat "$TG_TMP/b1/token/token")")
	say "$ curl ... --data '{\"node\": \"node-b2\", ...}' -H 'Authorization: Bearer <node-b1's token>'   (from node-b1)"
	say "    $code; $(answer)"
	[ "$code" = 403 ]
	result $? "node-b1's valid token speaking for node-b2: 403"
	sleep 2 # two report periods: the honest nodes' next answers
	say "$ curl https://10.0.4.$LEAD:9618/metrics | grep -E 'reports_total|auth_'   (refusal reasons that are not 0)"
	aget "$LEAD" | grep -E '^tollgate_allocator_(reports_total|auth_)' | grep -Ev '^tollgate_allocator_auth_refusals_total\{.*\} 0$' |
		sed 's/^/    /'
	[ "$(arep unauthenticated)" = $((un0 + 2)) ] && [ "$(arep forbidden)" = $((fb0 + 1)) ] &&
		[ "$(aref malformed)" = $((ma0 + 1)) ] && [ "$(aref subject)" = $((su0 + 1)) ] && [ "$(arep ok)" -gt "$ok0" ]
	result $? "counted: unauthenticated +2 (malformed +1: no token; subject +1: not the agents' ServiceAccount), forbidden +1; the agents' reports still taken (ok +$(($(arep ok) - ok0)))"
	h1=$(bgrant 1) h2=$(bgrant 2) n1=$(anodes) rf="$(bget 1 /metrics | awk '$1 == "tollgate_budget_reports_total{result=\"refused\"}" { print $2 }') $(bget 2 /metrics | awk '$1 == "tollgate_budget_reports_total{result=\"refused\"}" { print $2 }')"
	# within 20 %: a grant follows the measured demand, which moves a little from one second to the next
	near() { awk -v a="${1:-0}" -v b="${2:-x}" 'BEGIN { exit !(b ~ /^[0-9]+$/ && a > 0 && (b - a) <= a / 5 && (a - b) <= a / 5) }'; }
	[ "$n1" = "$n0" ] && [ "$n1" = 2 ] && near "$g1" "$h1" && near "$g2" "$h2" && [ "$rf" = "0 0" ]
	result $? "the honest nodes' grants stay: node-b1 $(awk -v a="${g1:-0}" -v b="${h1:-0}" 'BEGIN { printf "%.1f -> %.1f", a * 8 / 1e6, b * 8 / 1e6 }') Mbit/s, node-b2 $(awk -v a="${g2:-0}" -v b="${h2:-0}" 'BEGIN { printf "%.1f -> %.1f", a * 8 / 1e6, b * 8 / 1e6 }') Mbit/s; nodes holding datasets' grants $n0 -> $n1; their reports refused: $rf"
	say ""
	say "The budget is edited: datasets 40M -> 20M in the allocator's policy. The ConfigMap is"
	say "updated; kubelet swaps its ..data link; both replicas re-read it, and the nodes hear"
	say "the new budget in their next answers. Nothing restarts:"
	pids() { printf 'agents node-b1 %s node-b2 %s, allocators 10.0.4.1 %s 10.0.4.2 %s' \
		"${BAGENT[1]}" "${BAGENT[2]}" "${APID[1]}" "${APID[2]}"; }
	running() {
		local p
		for p in "${BAGENT[@]}" "${APID[@]}"; do
			[ -r "/proc/$p/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" || return 1
		done
	}
	# bpolicy I: the id of the policy node-b<I> holds (tollgate_budget_policy_info)
	bpolicy() { bget "$1" /metrics | sed -n 's/^tollgate_budget_policy_info{policy="\([0-9a-f]*\)".*/\1/p'; }
	pids_before=$(pids) pol_before="node-b1 $(bpolicy 1), node-b2 $(bpolicy 2)"
	say "  PIDs before: $pids_before"
	say "  policy held: $pol_before"
	policy_write v2 20M
	BUDGET_CONF=20M BUDGET_BPS=20e6
	say "$ cat policy.json"
	jq -c . "$PDIR/policy.json" | sed 's/^/    /'
	t_edit=$EPOCHREALTIME
	# both nodes together within 20M (+5%) in every 1 s window of the last 2 s
	under() {
		local now=$EPOCHREALTIME most
		awk -v a="$t_edit" -v b="$now" 'BEGIN { exit !(b - a >= 2) }' || { sleep 0.5; return 1; }
		most=$(python3 "$METER" stats --file "$TG_TMP/meter.txt" --from "$(awk -v t="$now" 'BEGIN { printf "%.6f", t - 2 }')" --to "$now" | awk '{ print $6 }')
		awk -v s="${most:-x}" 'BEGIN { exit !(s ~ /^[0-9.]+$/ && s <= 1.05 * 20e6) }' || { sleep 0.5; return 1; }
	}
	wait_for 10 under
	result $? "both nodes together: at most 20M (+5%) at the internet host in every 1 s of the 2 s from $(awk -v a="$t_edit" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a - 2 }') s after the edit"
	say "  at the internet host, both nodes together, the 1 s ending at (s after the edit):"
	python3 "$METER" windows --file "$TG_TMP/meter.txt" --from "$(awk -v t="$t_edit" 'BEGIN { printf "%.6f", t - 2 }')" --to "$EPOCHREALTIME" |
		awk -v e="$t_edit" 'BEGIN { nxt = -1 } { d = $2 - e; if (d >= nxt) { printf "    %+5.1f s  %5.1f Mbit/s\n", d, $3 / 1e6; nxt = d + 0.5 } }'
	r_ok=""
	for r in 1 2; do r_ok+=" $(ametric "$r" 'tollgate_allocator_policy_reloads_total{result="ok"}')"; done
	say "  PIDs after:  $(pids)"
	new_id=$(aget "$LEAD" | sed -n 's/^tollgate_allocator_policy_info{policy="\([0-9a-f]*\)".*/\1/p')
	say "  policy held: node-b1 $(bpolicy 1), node-b2 $(bpolicy 2) (in force: $new_id)"
	[ "$(pids)" = "$pids_before" ] && running && [ "$r_ok" = " 1 1" ] &&
		[ "$(bpolicy 1) $(bpolicy 2)" = "$new_id $new_id" ] && [ "$pol_before" != "node-b1 $new_id, node-b2 $new_id" ]
	result $? "the same agents and allocators, running; each replica took the new policy once (policy reloads ok:$r_ok), both nodes hold it"
	btable
	say ""
	say "The leading replica is SIGKILLed (its pod is gone: the Service drops it):"
	OTHER=$((3 - LEAD)) old_epoch=$(ametric "$LEAD" tollgate_allocator_epoch)
	kill -KILL "${APID[$LEAD]}"
	bstop "${APID[$LEAD]}"
	ip netns exec "$TG_FABRIC" nft delete element ip tgsvc backends "{ $((LEAD - 1)) }" &&
		ip netns exec "$TG_FABRIC" nft add element ip tgsvc backends "{ $((LEAD - 1)) : 10.0.4.$OTHER }"
	t0=$EPOCHREALTIME
	wait_for 10 leader_of "$OTHER" >/dev/null
	result $? "replica 10.0.4.$OTHER leads after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s (the etcd lease's TTL is 3 s), epoch $(ametric "$OTHER" tollgate_allocator_epoch) (was $old_epoch)"
	new_epoch=$(ametric "$OTHER" tollgate_allocator_epoch)
	both_follow() { local i; for i in 1 2; do bget "$i" /metrics | grep -qx "tollgate_budget_epoch $new_epoch" || return 1; done; }
	wait_for 15 both_follow
	result $? "both nodes take their grants from the new leader (tollgate_budget_epoch $new_epoch); no grant of the old term is applied again"
	btable
	say ""
	say "node-b2's agent is SIGKILLed (an OOM kill, say): nothing lowers its class, which keeps"
	say "its grant in the kernel. fetch-b1 downloads hard again; the allocator counts node-b2 at"
	say "all it held for as long as it is silent, so none of it goes to node-b1:"
	kill -KILL "${BAGENT[2]}"
	bstop "${BAGENT[2]}"
	bload 1 heavy
	bload 2 heavy
	t_kill=$EPOCHREALTIME
	sleep 8 # past the lease (4 s) and a few reports
	most=$(python3 "$METER" stats --file "$TG_TMP/meter.txt" --from "$t_kill" --to "$EPOCHREALTIME" | awk '{ print $6 }')
	awk -v s="${most:-x}" -v b="$BUDGET_BPS" 'BEGIN { exit !(s ~ /^[0-9.]+$/ && s <= 1.05 * b) }'
	result $? "both nodes together, for the 8 s after the kill: at most $BUDGET_CONF (+5%) at the internet host in every 1 s (the most: $(awk -v s="${most:-0}" 'BEGIN { printf "%.1f", s / 1e6 }') Mbit/s)"
	btable
	for i in 1 2; do
		bstop "${BLOAD[$i]}"
		TG_NODE=$TG_ID-b$i TG_BIN=$TG_TMP/b$i/bin/tollgate
		tg_run DEL "${POD_CID[fetchb$i]}" eth0 "${POD_NETNS[fetchb$i]}" "$(k8s_args datasets "fetch-b$i" "${POD_CID[fetchb$i]}")" \
			<<<"$(jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$TG_TMP/b$i/net.d/10-tollgate.conflist")"
		result "$TG_RC" "DEL datasets/fetch-b$i on node-b$i"
		bstop "${BAGENT[$i]}"
	done
	TG_NODE=$SAVED_NODE TG_BIN=$SAVED_BIN
	bstop "${APID[$OTHER]}"
	bstop "$ETCD_PID"
	bstop "$METER_PID"
fi

section "DEL every pod"
for p in "${PODS[@]}"; do
	s=${SHORT[$p]}
	tg_run DEL "${POD_CID[$s]}" eth0 "${POD_NETNS[$s]}" "$(k8s_args "${p%%/*}" "${p#*/}" "${POD_CID[$s]}")" <<<"$CONF"
	result "$TG_RC" "DEL $p"
done

section "Nothing is left behind"
links=$(node_links_tg)
[ -z "$links" ]
result $? "no tg* links in the node${links:+: $links}"
routes=$(node_host_routes)
[ -z "$routes" ]
result $? "no /32 pod routes in the node${routes:+: $routes}"
n=$(state_count)
[ "$n" = 0 ]
result $? "no attachments in state.json ($n)"
show ip -n "$TG_NODE" route
show ip netns exec "$TG_NODE" nft list set inet tollgate pods

section "Done in $((SECONDS - START)) s"
if [ "$FAILS" -eq 0 ]; then
	say "${G}all demo checks passed${N}; the namespaces are deleted on exit."
else
	say "${R}$FAILS demo check(s) failed${N}"
	exit 1
fi
