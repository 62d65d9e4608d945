#!/usr/bin/env bash
# A three-node cluster on a simulated cloud fabric, monitored as in production.
#
# Each node runs tollgate-agent as the DaemonSet runs it (the shipped
# conflist, --listen NODE_IP:9617, the plugin and the conflist installed into
# the node's CNI directories); nodes 1 and 2 have a static pool, node 3 gets
# its pool from a fake IMDS (its NIC's alias ip-configurations, matched by
# MAC). Pods in two Kubernetes namespaces on every node are ADDed through the
# installed plugin as kubelet would. The fabric, like Azure's virtual
# network, answers every ARP request and routes each node's alias pool to the
# node (no tunnel): pods on different nodes reach each other by pod IP, the
# receiver sees the sending pod's IP (no NAT inside 10.0.0.0/8), and the
# fabric's own counter sees those bytes as plain IP between pod addresses;
# the internet host sees the node's address (masquerade). Exact UDP byte
# counts (and single pings) go pod to pod across nodes, on one node, and to
# and from the internet host. A real Prometheus scrapes the three agents
# through deploy/podmonitor.yaml, converted the way Prometheus Operator
# converts it (tests/integration/podmonitor_to_prom.py; file_sd stands in for
# Kubernetes pod discovery, with a decoy pod the selector must drop), and
# evaluates deploy/prometheusrule.yaml: the namespaces' bytes summed
# tollgate_namespace_bytes_total by (namespace, direction, traffic) across
# nodes equals the IP bytes the test sent, to the byte, as do the per-node
# series under their `node` label; every rule evaluates. A TCP stream across
# nodes shows the client pod's address. Then every pod is DELeted: nothing left.
#
#   pods n1r n1d          pods n2r n2d          pods n3r n3d
#   (research, datasets)  pool 10.0.2.2-30      pool from IMDS
#   pool 10.0.1.2-30       (static)             10.0.3.2-9
#    |  tg* veths          |                     |
#   node-1 eth0 10.0.0.1  node-2 eth0 10.0.0.2  node-3 eth0 10.0.0.3 (/16 each)
#    agent :9617           agent :9617           agent :9617, fake IMDS on lo
#    | v1                  | v2                  | v3
#   +-+---------------------+---------------------+------------------+
#   | fabric ($TG_ID-fab) "the cloud", ip_forward=1, 10.0.0.254/32    |
#   |   and proxy ARP on every link                                   |
#   |   10.0.0.N/32 dev vN, 10.0.N.0/27 via 10.0.0.N (alias routes)   |
#   |   table ip cloud: counter pod_to_pod (pool -> pool)             |
#   |   inet0 203.0.113.1/24                                          |
#   +--+------------------------------------------+-------------------+
#      | vmon                                     | inet0
#   mon ($TG_ID-mon) 10.0.0.250/16            inet ($TG_ID-inet) 203.0.113.10
#     Prometheus :9090                          only route: 10.0.0.0/24 via
#                                               203.0.113.1 (pods reach it only
#                                               masqueraded)
#
# The manifests (podmonitor.yaml, prometheusrule.yaml, daemonset.yaml,
# 10-tollgate.conflist) are read from $ROOT/deploy, or from TG_DEPLOY_DIR.
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_cluster.sh
# shellcheck disable=SC2016,SC1091,SC2153,SC2034  # jq filters with $vars; lib.sh globals (TG_BIN)
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
for t in curl python3; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
PROMETHEUS=${TG_PROMETHEUS:-/usr/bin/prometheus}
[ -x "$PROMETHEUS" ] || { echo "not ok - preconditions: $PROMETHEUS not installed (make deps: prometheus)"; exit 1; }
python3 -c 'import yaml' 2>/dev/null || { echo "not ok - preconditions: python3-yaml not installed (make deps)"; exit 1; }
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
[ -x "$AGENT" ] || { echo "not ok - preconditions: $AGENT not found (run make)"; exit 1; }
PY=$(python3 -c 'import sys; print(sys.executable)')
UDP=$TG_LIB_DIR/udp_send.py
CONV=$TG_LIB_DIR/podmonitor_to_prom.py
T0=$SECONDS

DEPLOY=${TG_DEPLOY_DIR:-$TG_ROOT/deploy}
PODMONITOR=$DEPLOY/podmonitor.yaml
RULES=$DEPLOY/prometheusrule.yaml
DAEMONSET=$DEPLOY/daemonset.yaml
CONFLIST=$DEPLOY/10-tollgate.conflist
for f in "$PODMONITOR" "$RULES" "$DAEMONSET" "$CONFLIST"; do
	[ -f "$f" ] || { echo "not ok - preconditions: $f missing"; exit 1; }
done
diag "manifests: $PODMONITOR $RULES $DAEMONSET $CONFLIST"

NODES="1 2 3"
FAB=$TG_ID-fab
MON=$TG_ID-mon
INET=$TG_INET
INET_IP=$TG_INET_IP
MON_IP=10.0.0.250
PROM=$MON_IP:9090
# daemon NETNS CMD...: start a long-lived server in NETNS, recorded for the
# cleanup; it gets SIGTERM should this script die without its traps
# (SIGKILL), and never holds the script's stdout (a runner reading it would
# wait for it forever)
daemon() {
	local ns=$1
	shift
	ip netns exec "$ns" setpriv --pdeathsig TERM "$@" >/dev/null &
	TG_PIDS+=("$!")
}
# in_mon CMD...: a client in the monitoring namespace, bounded in time
in_mon() { timeout -k 1 10 ip netns exec "$MON" "$@"; }
node_ns() { echo "$TG_ID-n$1"; }
node_ip() { echo "10.0.0.$1"; }
node_name() { echo "node-$1"; }
CLASSES="egress_internal egress_internet ingress_internal ingress_internet"
KNS="research datasets"

# ---------------------------------------------------------------- topology
t_begin "topology: fabric routes each node's alias pool to it, three nodes, monitoring, internet"
TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || tap_bail "mktemp"
chmod 755 "$TG_TMP"
topo() {
	local i ns
	_tg_netns_add "$FAB" || return 1
	# Like Azure's virtual network: every host's subnet is 10.0.0.0/16 and
	# the fabric answers every ARP request on it (proxy ARP, at once), then
	# routes by its own table: a node's address to the node, the node's alias
	# pool to the node's address. Each host is on a link of its own.
	_tg_sysctl "$FAB" net.ipv4.ip_forward 1 || return 1
	# fabric_link NAME NETNS IP: NETNS's eth0 with IP/16, on the fabric's NAME
	fabric_link() {
		ip -n "$FAB" link add "$1" type veth peer name eth0 netns "$2" || return 1
		_tg_sysctl "$FAB" "net.ipv4.conf.$1.proxy_arp" 1 &&
			_tg_sysctl "$FAB" "net.ipv4.neigh.$1.proxy_delay" 0 || return 1
		ip -n "$FAB" addr add 10.0.0.254/32 dev "$1"
		ip -n "$FAB" link set "$1" up
		ip -n "$FAB" route add "$3/32" dev "$1" || return 1
		ip -n "$2" addr add "$3/16" dev eth0
		ip -n "$2" link set eth0 up
		ip -n "$2" route add default via 10.0.0.254 || return 1
	}
	for i in $NODES; do
		ns=$(node_ns "$i")
		_tg_netns_add "$ns" || return 1
		_tg_sysctl "$ns" net.ipv4.ip_forward 0 # the agent's job
		fabric_link "v$i" "$ns" "$(node_ip "$i")" || return 1
		ip -n "$FAB" route add "10.0.$i.0/27" via "$(node_ip "$i")" dev "v$i" || return 1
	done
	_tg_netns_add "$MON" || return 1
	fabric_link vmon "$MON" "$MON_IP" || return 1
	_tg_netns_add "$INET" || return 1
	ip -n "$FAB" link add inet0 type veth peer name eth0 netns "$INET" || return 1
	ip -n "$FAB" addr add 203.0.113.1/24 dev inet0
	ip -n "$FAB" link set inet0 up
	ip -n "$INET" addr add "$INET_IP/24" dev eth0
	ip -n "$INET" link set eth0 up
	ip -n "$INET" route add 10.0.0.0/24 via 203.0.113.1 || return 1
	# what the cloud forwards from one node's pods to another's: seen here
	# with the pods' own addresses, or not at all if it were encapsulated
	ip netns exec "$FAB" nft -f - <<-'EOF' || return 1
		table ip cloud {
			chain forward {
				type filter hook forward priority 0; policy accept;
				ip saddr { 10.0.1.0/27, 10.0.2.0/27, 10.0.3.0/27 } ip daddr { 10.0.1.0/27, 10.0.2.0/27, 10.0.3.0/27 } counter name pod_to_pod
			}
			counter pod_to_pod { }
		}
	EOF
	for i in $NODES; do
		pingq "$(node_ns "$i")" "$INET_IP" || { echo "node $i cannot reach the internet host"; return 1; }
		pingq "$MON" "$(node_ip "$i")" || { echo "monitoring cannot reach node $i"; return 1; }
	done
}
# (not in a subshell: the namespaces it makes are recorded for the cleanup)
topo >"$TG_TMP/topo.err" 2>&1 || tap_bail "could not build the topology: $(tail -3 "$TG_TMP/topo.err")"
for i in $NODES; do
	t_expect "fabric route to node $i's pool" "$(ip -n "$FAB" -4 route show "10.0.$i.0/27")" "10.0.$i.0/27 via $(node_ip "$i") dev v$i "
done
t_end

# ---------------------------------------------------------------- agents
# conflist I: the shipped conflist, made this node's (own dataDir and log;
# nodes 1 and 2 a static pool, node 3 its pool from IMDS)
conflist() {
	local ipam
	if [ "$1" = "$IMDS_NODE" ]; then
		ipam=$(jq -cn --arg u "http://127.0.0.1:$IMDS_PORT" '{source: "imds", imdsURL: $u, cooldownSeconds: 0}')
	else
		ipam=$(jq -cn --arg pool "10.0.$1.2-10.0.$1.30" '{source: "static", addresses: [$pool], cooldownSeconds: 0}')
	fi
	jq --arg dd "$TG_TMP/n$1/data" --arg lf "$TG_TMP/n$1/tollgate.log" --argjson ipam "$ipam" '
		.plugins[0] |= (.dataDir = $dd | .logFile = $lf | .ipam = $ipam)' "$CONFLIST"
}
# node 3's NIC as IMDS describes it: its own address first, then 8 alias
# ip-configurations of its pool, matched by the uplink's MAC
IMDS_NODE=3 IMDS_PORT=18080 IMDS_MAC=00:0d:3a:00:00:03
IMDS_POOL="10.0.3.2 10.0.3.3 10.0.3.4 10.0.3.5 10.0.3.6 10.0.3.7 10.0.3.8 10.0.3.9"
jq -n --arg own "$(node_ip "$IMDS_NODE")" --arg pool "$IMDS_POOL" --arg mac "${IMDS_MAC//:/}" '{interface: [{
	ipv4: {ipAddress: ([{privateIpAddress: $own, publicIpAddress: "198.51.100.3"}] +
		($pool | split(" ") | map({privateIpAddress: ., publicIpAddress: ""}))),
	       subnet: [{address: "10.0.0.0", prefix: "16"}]},
	ipv6: {ipAddress: []}, macAddress: ($mac | ascii_upcase)}]}' >"$TG_TMP/imds.json" || tap_bail "IMDS fixture"

declare -A AGENT_PID=()
t_begin "an agent on every node (static pools, IMDS on node $IMDS_NODE) turns ready on NODE_IP:9617 and installs the plugin"
ns=$(node_ns "$IMDS_NODE")
ip -n "$ns" link set eth0 address "$IMDS_MAC" || tap_bail "cannot set node $IMDS_NODE's MAC"
daemon "$ns" "$PY" "$TG_LIB_DIR/fake_imds.py" --port "$IMDS_PORT" --fixture "$TG_TMP/imds.json" \
	--log "$TG_TMP/imds.log" 2>"$TG_TMP/imds.err"
imds_up() { ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/127.0.0.1/$IMDS_PORT" 2>/dev/null; }
wait_for 10 imds_up || tap_bail "fake IMDS did not start: $(cat "$TG_TMP/imds.err")"
for i in $NODES; do
	d=$TG_TMP/n$i
	mkdir -p "$d/cm" "$d/net.d" "$d/bin"
	conflist "$i" >"$d/cm/10-tollgate.conflist" || tap_bail "cannot derive node $i's conflist from $CONFLIST"
	daemon "$(node_ns "$i")" "$AGENT" --config "$d/cm/10-tollgate.conflist" \
		--listen "$(node_ip "$i"):9617" --cni-conf-dir "$d/net.d" --cni-bin-dir "$d/bin" \
		--plugin "$TOLLGATE_BIN_DIR/tollgate" 2>"$d/agent.log"
	AGENT_PID[$i]=${TG_PIDS[-1]}
done
mon_get() { in_mon curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1"; }
for i in $NODES; do
	ready() { [ "$(mon_get "http://$(node_ip "$i"):9617/readyz")" = 200 ]; }
	wait_for 20 ready || t_fail "node $i's agent not ready within 20 s: $(tail -3 "$TG_TMP/n$i/agent.log")"
	[ -x "$TG_TMP/n$i/bin/tollgate" ] || t_fail "node $i: plugin not installed"
	[ -f "$TG_TMP/n$i/net.d/10-tollgate.conflist" ] || t_fail "node $i: conflist not installed"
	t_expect "node $i ip_forward" "$(ip netns exec "$(node_ns "$i")" cat /proc/sys/net/ipv4/ip_forward)" 1
done
t_end
for i in $NODES; do kill -0 "${AGENT_PID[$i]}" 2>/dev/null || tap_bail "node $i's agent exited"; done

# ---------------------------------------------------------------- Prometheus
t_begin "Prometheus: the PodMonitor and PrometheusRule converted as the Operator does, started in the monitoring namespace"
mkdir -p "$TG_TMP/prom/data"
nodes_args=()
for i in $NODES; do nodes_args+=(--node "$(node_name "$i")=$(node_ip "$i")"); done
r=$(python3 "$CONV" --podmonitor "$PODMONITOR" --daemonset "$DAEMONSET" --rules "$RULES" "${nodes_args[@]}" \
	--decoy "$(node_name 1)=$(node_ip 1)" --out "$TG_TMP/prom" --scrape-interval 1s --eval-interval 1s 2>&1) ||
	tap_bail "converter: $r"
diag "$r"
r=$(promtool check config "$TG_TMP/prom/prometheus.yml" 2>&1) || t_fail "promtool check config: ${r:0:400}"
daemon "$MON" "$PROMETHEUS" --config.file="$TG_TMP/prom/prometheus.yml" --storage.tsdb.path="$TG_TMP/prom/data" \
	--web.listen-address="$PROM" --storage.tsdb.retention.time=1h --log.level=warn 2>"$TG_TMP/prometheus.log"
PROM_PID=${TG_PIDS[-1]}
# The cluster's bytes per namespace, summed across nodes as Prometheus holds
# them: the raw counters' sum, exact while no node leaves (the billing rule,
# namespace:tollgate_namespace_bytes:increase1h, is built from increase()
# instead, so that it never drops when one does; rules_test.yaml checks that).
SUM_RULE='sum by (namespace, direction, traffic) (tollgate_namespace_bytes_total)'
SUM_OK=0
prom_up() { [ "$(mon_get "http://$PROM/-/ready")" = 200 ] || { sleep 0.2; return 1; }; }
wait_for 30 prom_up || t_fail "Prometheus not ready within 30 s: $(tail -3 "$TG_TMP/prometheus.log")"
t_end
kill -0 "$PROM_PID" 2>/dev/null || tap_bail "Prometheus exited: $(tail -5 "$TG_TMP/prometheus.log")"

# prom_tsv QUERY: one line per result: its labels as k=v,... (sorted, without
# __name__) TAB value; fails when the query fails
prom_tsv() {
	in_mon curl -s --max-time 3 -G --data-urlencode "query=$1" "http://$PROM/api/v1/query" |
		jq -re 'if .status != "success" then error("query failed") else
			.data.result[] | [(.metric | del(.__name__) | to_entries | sort_by(.key) |
			map("\(.key)=\(.value)") | join(",")), .value[1]] | @tsv end'
}

t_begin "Prometheus scrapes the three agents (the decoy pod dropped by the selector) with their node names"
all_up() { [ "$(prom_tsv 'count(up == 1)' 2>/dev/null | cut -f2)" = 3 ] || { sleep 0.3; return 1; }; }
wait_for 20 all_up || t_fail "not 3 targets up within 20 s: $(prom_tsv up | tr '\n\t' '  ')"
t_expect "targets" "$(prom_tsv 'count(up)' | cut -f2)" 3
for i in $NODES; do
	t_expect "node-$i's target" "$(prom_tsv "up{instance=\"$(node_ip "$i"):9617\"}" | cut -f1)" \
		"endpoint=metrics,instance=$(node_ip "$i"):9617,job=kube-system/tollgate,node=$(node_name "$i"),tollgate=agent"
done
t_end

# ---------------------------------------------------------------- pods
declare -A POD_NODE=() POD_KNS=()
PODS=""
for i in $NODES; do
	POD_NODE[n${i}r]=$i POD_KNS[n${i}r]=research
	POD_NODE[n${i}d]=$i POD_KNS[n${i}d]=datasets
	PODS="$PODS n${i}r n${i}d"
done
# on_node I: the plugin calls that follow run on node I, through its
# installed plugin, with the installed conflist's entry (as a runtime does)
on_node() {
	TG_NODE=$(node_ns "$1")
	TG_BIN=$TG_TMP/n$1/bin/tollgate
	NODE_CONF=$(jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$TG_TMP/n$1/net.d/10-tollgate.conflist")
}
in_pool() { # IP I
	local ip=$1 i=$2 last=${1##*.}
	if [ "$i" = "$IMDS_NODE" ]; then
		[[ " $IMDS_POOL " == *" $ip "* ]]
	else
		[ "${ip%.*}" = "10.0.$i" ] && [ "$last" -ge 2 ] && [ "$last" -le 30 ]
	fi
}

t_begin "pods in research and datasets on every node, each with an address of its node's pool (node $IMDS_NODE: from IMDS)"
for p in $PODS; do
	on_node "${POD_NODE[$p]}"
	pod_add "$p" "${POD_KNS[$p]}" "$NODE_CONF" || { t_fail "ADD $p: rc=$TG_RC $TG_OUT"; continue; }
	in_pool "${POD_IP[$p]}" "${POD_NODE[$p]}" || t_fail "$p got ${POD_IP[$p]}, not in node ${POD_NODE[$p]}'s pool"
done
t_end
for p in $PODS; do [ -n "${POD_IP[$p]:-}" ] || tap_bail "cannot continue without pod $p"; done

t_begin "no tunnel anywhere: nodes hold no encapsulating device"
# (the fallback devices a loaded tunnel module puts in every namespace do not count)
for i in $NODES; do
	r=$(ip -n "$(node_ns "$i")" -j -d link show | jq -r '.[] |
		select(.linkinfo.info_kind // "" | test("^(vxlan|geneve|ipip|gre|gretap|ip6gre|ip6gretap|sit|ip6tnl|vti|vti6|erspan|wireguard|bareudp)$")) |
		select(.ifname | test("^(tunl0|gre0|gretap0|erspan0|sit0|ip6tnl0|ip6gre0|ip_vti0|ip6_vti0)$") | not) | .ifname' | tr '\n' ' ')
	t_expect "node $i tunnel devices" "$r" ""
done
t_end

t_begin "Prometheus has every pod namespace's counters on every node, all at 0, before any traffic"
# (so that the rate rules see the traffic as an increase)
zero_rows() { prom_tsv 'count(tollgate_namespace_bytes_total == 0)' 2>/dev/null | cut -f2; }
all_zero() { [ "$(zero_rows)" = 24 ] || { sleep 0.3; return 1; }; }
wait_for 20 all_zero || t_fail "series at 0: $(zero_rows), expected 24 (3 nodes x 2 namespaces x 4)"
t_expect "namespace byte series" "$(prom_tsv 'count(tollgate_namespace_bytes_total)' | cut -f2)" 24
t_end

# ---------------------------------------------------------------- traffic
# Expected IP bytes per (namespace|class) across nodes and per
# (node|namespace|class). Every byte a pod sends or receives in this test
# is added here: the pods are otherwise silent (their IPv6 is dropped and
# counted as spoofed, not as bytes; ARP is not IP).
declare -A EXP=() EXP_NODE=()
for k in $KNS; do
	for c in $CLASSES; do
		EXP[$k|$c]=0
		for i in $NODES; do EXP_NODE[$i|$k|$c]=0; done
	done
done
SENT=0 FAB_EXP=0
# account POD DIRECTION TRAFFIC BYTES
account() {
	local k=${POD_KNS[$1]} i=${POD_NODE[$1]}
	EXP[$k|$2_$3]=$((EXP[$k|$2_$3] + $4))
	EXP_NODE[$i|$k|$2_$3]=$((EXP_NODE[$i|$k|$2_$3] + $4))
	[ "$2" = egress ] && SENT=$((SENT + $4))
	return 0
}
traffic_of() { [ "$1" = "$INET_IP" ] && echo internet || echo internal; }
pod_of_ip() { local p; for p in $PODS; do [ "${POD_IP[$p]}" = "$1" ] && echo "$p"; done; }

# ping1 SRC_POD DST_IP: one echo (84 IP bytes each way), no retry: counted exactly
ping1() {
	local src=$1 dst=$2 t d
	t=$(traffic_of "$dst")
	ip netns exec "$TG_ID-$src" ping -n -q -c 1 -W 3 "$dst" >/dev/null 2>&1 || { t_fail "ping $src -> $dst: no reply"; return 1; }
	account "$src" egress "$t" 84
	account "$src" ingress "$t" 84
	d=$(pod_of_ip "$dst")
	if [ -n "$d" ]; then
		account "$d" ingress internal 84
		account "$d" egress internal 84
		[ "${POD_NODE[$d]}" = "${POD_NODE[$src]}" ] || FAB_EXP=$((FAB_EXP + 168))
	fi
}

FLOWS=0
# flow SRC_POD DST_POD|inet COUNT SIZE BACK_COUNT BACK_SIZE: COUNT UDP datagrams
# of SIZE payload bytes, answered with BACK_COUNT of BACK_SIZE; the receiver
# must see the pod's own address (internal) or its node's (internet)
flow() {
	local src=$1 dst=$2 n=$3 size=$4 bn=$5 bsize=$6
	local dns dip t port want seen rpid
	if [ "$dst" = inet ]; then dns=$INET dip=$INET_IP; else dns=$TG_ID-$dst dip=${POD_IP[$dst]}; fi
	t=$(traffic_of "$dip")
	FLOWS=$((FLOWS + 1))
	port=$((6000 + FLOWS))
	rm -f "$TG_TMP/ready"
	ip netns exec "$dns" "$PY" "$UDP" reply --port "$port" --recv "$n" --count "$bn" --size "$bsize" \
		--ready "$TG_TMP/ready" --timeout 10 >"$TG_TMP/reply.out" 2>"$TG_TMP/reply.err" &
	rpid=$!
	TG_PIDS+=("$rpid")
	wait_for 5 test -s "$TG_TMP/ready" || { t_fail "receiver for $src -> $dst did not start"; return 1; }
	ip netns exec "$TG_ID-$src" "$PY" "$UDP" send --dst "$dip" --port "$port" --count "$n" --size "$size" \
		--expect "$bn" --timeout 5 >/dev/null 2>&1 || t_fail "$src -> $dst: fewer than $bn answers came back"
	wait "$rpid" || t_fail "$src -> $dst: $(cat "$TG_TMP/reply.err")"
	seen=$(cut -d: -f1 "$TG_TMP/reply.out")
	if [ "$t" = internet ]; then want=$(node_ip "${POD_NODE[$src]}"); else want=${POD_IP[$src]}; fi
	t_expect "$src -> $dst: source the receiver saw" "$seen" "$want"
	account "$src" egress "$t" $((n * (size + 28)))
	account "$src" ingress "$t" $((bn * (bsize + 28)))
	if [ "$dst" != inet ]; then
		account "$dst" ingress internal $((n * (size + 28)))
		account "$dst" egress internal $((bn * (bsize + 28)))
		[ "${POD_NODE[$dst]}" = "${POD_NODE[$src]}" ] ||
			FAB_EXP=$((FAB_EXP + n * (size + 28) + bn * (bsize + 28)))
	fi
}

t_begin "pods reach pods on other nodes by pod IP through the fabric, and the internet host"
ping1 n1r "${POD_IP[n2d]}"
ping1 n2r "${POD_IP[n3r]}"
ping1 n3d "${POD_IP[n1d]}"
ping1 n1d "$INET_IP"
t_end

t_begin "exact UDP byte counts across nodes (source = pod IP), on a node, to and from the internet (source = node IP)"
flow n1r n2d 40 1000 0 0
flow n2r n3r 30 700 10 200
flow n3d n1r 20 1200 0 0
flow n1d n1r 10 300 0 0
flow n2d n3d 12 64 12 64
flow n2d inet 25 900 15 400
flow n3r inet 35 500 5 100
t_end
diag "$FLOWS UDP flows and 4 pings: $SENT IP bytes sent by pods"

t_begin "the fabric forwarded the cross-node pod traffic as plain IP between pod addresses: $FAB_EXP bytes"
t_expect "fabric pod_to_pod bytes" "$(ip netns exec "$FAB" nft -j list counter ip cloud pod_to_pod | jq '.nftables[] | .counter.bytes // empty')" "$FAB_EXP"
t_end

# ---------------------------------------------------------------- Prometheus's view
sum_rows() { # -> "namespace|direction_traffic value" per result of the sum rule
	prom_tsv "$SUM_RULE" | awk -F'\t' '{
		n = split($1, kv, ","); delete L
		for (j = 1; j <= n; j++) { split(kv[j], p, "="); L[p[1]] = substr(kv[j], length(p[1]) + 2) }
		printf "%s|%s_%s %s\n", L["namespace"], L["direction"], L["traffic"], $2 }' | sort
}
want_rows() {
	local k c
	for k in $KNS; do for c in $CLASSES; do echo "$k|$c ${EXP[$k|$c]}"; done; done | sort
}
settled() { [ "$(sum_rows 2>/dev/null)" = "$(want_rows)" ] || { sleep 0.3; return 1; }; }

t_begin "Prometheus: each namespace's bytes summed across nodes equal the IP bytes sent and received, to the byte"
if [ "$SUM_OK" -ne 0 ]; then
	t_fail "$RULES has no recording rule summing tollgate_namespace_bytes_total by (namespace, direction, traffic) without rate()"
else
	wait_for 30 settled
	got=$(sum_rows)
	diff_out=$(diff <(want_rows) <(printf '%s\n' "$got"))
	[ -z "$diff_out" ] || t_fail "expected (<) vs Prometheus (>): $(tr '\n' ' ' <<<"$diff_out")"
	diag "$(paste -d' ' <(want_rows) <(printf '%s\n' "$got") | awk '{ printf "%-34s sent %8s  rule %8s\n", $1, $2, $4 }')"
fi
t_end

t_begin "per node: tollgate_namespace_bytes_total{node=...} equals what each node's pods sent and received"
node_rows() {
	prom_tsv 'tollgate_namespace_bytes_total' | awk -F'\t' '{
		n = split($1, kv, ","); delete L
		for (j = 1; j <= n; j++) { split(kv[j], p, "="); L[p[1]] = substr(kv[j], length(p[1]) + 2) }
		printf "%s|%s|%s_%s %s\n", L["node"], L["namespace"], L["direction"], L["traffic"], $2 }' | sort
}
want_node_rows() {
	local i k c
	for i in $NODES; do for k in $KNS; do for c in $CLASSES; do
		echo "$(node_name "$i")|$k|$c ${EXP_NODE[$i|$k|$c]}"
	done; done; done | sort
}
node_settled() { [ "$(node_rows 2>/dev/null)" = "$(want_node_rows)" ] || { sleep 0.3; return 1; }; }
wait_for 30 node_settled
diff_out=$(diff <(want_node_rows) <(node_rows))
[ -z "$diff_out" ] || t_fail "expected (<) vs Prometheus (>): $(tr '\n' ' ' <<<"$diff_out" | cut -c1-900)"
r=$(prom_tsv 'count(tollgate_namespace_bytes_total{pod!=""} or tollgate_namespace_bytes_total{container!=""} or tollgate_host_bytes_total{namespace!=""})' 2>/dev/null | cut -f2)
t_expect "series carrying the agent pod's pod/container/namespace" "${r:-0}" 0
t_end

t_begin "every rule of the PrometheusRule evaluates; rules over namespace bytes sum across nodes"
rules_bad=$(in_mon curl -s --max-time 3 "http://$PROM/api/v1/rules" |
	jq -r '.data.groups[].rules[] | select(.health != "ok") | "\(.name): \(.health) \(.lastError // "")"')
t_expect "rules not ok" "$rules_bad" ""
nrules=$(in_mon curl -s --max-time 3 "http://$PROM/api/v1/rules" | jq '[.data.groups[].rules[]] | length')
[ "${nrules:-0}" -gt 0 ] || t_fail "no rule loaded"
nrec=0
for rec in $(python3 "$CONV" --rules "$RULES" --rules-using tollgate_namespace_bytes_total); do
	nrec=$((nrec + 1))
	# a rule's first evaluations may see one sample of a series (a rate of 0): wait for them to settle
	rec_rows() {
		rows=$(prom_tsv "$rec" 2>/dev/null)
		if [ -n "$rows" ] && awk -F'\t' '$2 + 0 <= 0 { bad = 1 } END { exit bad }' <<<"$rows"; then
			return 0
		fi
		sleep 0.3
		return 1
	}
	wait_for 20 rec_rows
	[ -n "$rows" ] || { t_fail "$rec: no series"; continue; }
	grep -q 'node=' <<<"$rows" && t_fail "$rec keeps a node label: not summed across nodes"
	# a rate rule is > 0 for every class the test sent bytes in
	awk -F'\t' '$2 + 0 <= 0 { bad = 1 } END { exit bad }' <<<"$rows" || t_fail "$rec: a zero value: $(tr '\n\t' '  ' <<<"$rows")"
done
# an empty listing (the converter failing, the rules renamed) checks nothing
[ "$nrec" -gt 0 ] || t_fail "$(basename "$CONV") --rules-using tollgate_namespace_bytes_total listed no rule of $(basename "$RULES")"
diag "$nrules rules loaded from $(basename "$RULES"), $nrec over namespace bytes"
t_end

# ---------------------------------------------------------------- TCP (after the byte counts)
t_begin "TCP across nodes by pod IP: the server sees the client pod's address"
rm -f "$TG_TMP/tcp.ready"
ip netns exec "$TG_ID-n3d" "$PY" - "$TG_TMP/tcp.ready" >"$TG_TMP/tcp.out" 2>&1 <<'EOF' &
import socket, sys, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen(1); s.settimeout(10)
open(sys.argv[1] + ".tmp", "w").close(); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, peer = s.accept(); c.settimeout(10); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    n += len(b)
print(peer[0], n)
EOF
tpid=$!
TG_PIDS+=("$tpid")
wait_for 5 test -e "$TG_TMP/tcp.ready" || t_fail "TCP server did not start"
ip netns exec "$TG_ID-n1r" "$PY" "$UDP" tcp-send --dst "${POD_IP[n3d]}" --port 7000 --bytes 1000000 >/dev/null 2>&1 ||
	t_fail "TCP n1r -> n3d failed"
wait "$tpid"
t_expect "server saw" "$(cat "$TG_TMP/tcp.out")" "${POD_IP[n1r]} 1000000"
t_end

# ---------------------------------------------------------------- DEL
t_begin "DEL every pod through its node's plugin: nothing left on any node"
for p in $PODS; do
	on_node "${POD_NODE[$p]}"
	pod_del "$p" "$NODE_CONF" || t_fail "DEL $p: rc=$TG_RC $TG_OUT"
done
for i in $NODES; do
	on_node "$i"
	t_expect "node $i attachments" "$(jq '.attachments | length' "$TG_TMP/n$i/data/tollgate/state.json")" 0
	t_expect "node $i tg links" "$(node_links_tg | tr '\n' ' ')" ""
	t_expect "node $i pod routes" "$(ip -n "$TG_NODE" -4 route show | grep -c "^10\.0\.$i\.")" 0
	r=$(ip netns exec "$TG_NODE" nft -j list set inet tollgate pods 2>/dev/null | jq '[.nftables[].set.elem // empty | .[]] | length')
	t_expect "node $i pods set" "${r:-missing}" 0
	kill -0 "${AGENT_PID[$i]}" 2>/dev/null || t_fail "node $i's agent died"
done
t_end

diag "test took $((SECONDS - T0)) s"
tap_done
