# shellcheck shell=bash
# The world of the cluster-budget tests on real traffic, shared by
# tests/bench/budgets_traffic.sh (one allocator) and
# tests/chaos/chaos_failover.sh (three replicas on etcd): nodes on a
# simulated cloud fabric, each with its tollgate-agent --node-name nodeN and
# one pod of namespace "datasets" ADDed through the node's installed plugin;
# the pods' demand (heavy TCP, light UDP) towards an internet host whose nft
# counters per node inet_meter.py reads every 100 ms; the statistics of
# those reads. Sourced after tests/integration/lib.sh; the sourcing script
# sets NODES_ALL (the node numbers of the run) and builds the rest of its
# world (the allocators) itself.
#
#   pod dI 10.0.I.x --tg* veth-- node I ($TG_ID-nI), eth0 10.0.0.I/16
#                                 | vI
#   fabric ($TG_ID-fab): ip_forward, proxy ARP on every link, 10.0.0.N/32
#     dev vN, 10.0.I.0/27 via 10.0.0.I; inet0 203.0.113.1/24
#                                 | inet0
#   inet ($TG_INET) 203.0.113.10, route 10.0.0.0/24 only; table inet
#     tgmeter: counter nI per node (ip saddr 10.0.0.I), "other" for the rest
#
# Budget B = 120M for datasets (the allocator's policy file, policy_json),
# fallback 10M, reportSeconds 1, leaseSeconds 4; the agents' conflists say
# only how to reach the allocator: budgets.allocator is $ALLOC_URL
# (http://10.0.0.200:9618).
#
# Functions (see each): budgets_require; fabric_link, topo_fabric_nodes,
# topo_node, topo_node_late, topo_inet, topo_reach; meter_start;
# shipped_conf, policy_json, policy_put, cm_put, conflist, agent_start,
# in_node, agent_get, readyz_code, agent_ready, metric_of, agent_metric,
# node_budget; on_node, pod_up, pod_down, ns_classid, class_ceil_of; demand,
# demand_spec, meter_py, settle, stats, stats_line, converge, sh_le, sh_ge,
# grants_line; forget_pid, stop_pid, daemon.
# shellcheck disable=SC2034  # globals for the sourcing script

# budgets_require: the tools and binaries, or the test ends not ok; sets
# AGENT, ALLOC, IPAM_BIN, CONFLIST (the shipped conflist), PY, METER
budgets_require() {
	local t b
	for t in curl python3 tc setpriv; do
		command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
	done
	AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
	ALLOC=$TOLLGATE_BIN_DIR/tollgate-allocator
	IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
	for b in "$AGENT" "$ALLOC" "$IPAM_BIN"; do
		[ -x "$b" ] || { echo "not ok - preconditions: $b not found (run make)"; exit 1; }
	done
	CONFLIST=${TG_DEPLOY_DIR:-$TG_ROOT/deploy}/10-tollgate.conflist
	[ -f "$CONFLIST" ] || { echo "not ok - preconditions: $CONFLIST missing"; exit 1; }
	PY=$(python3 -c 'import sys; print(sys.executable)')
	METER=$TG_LIB_DIR/inet_meter.py
}

B_BITS=120000000 B_CONF=120M
FALLBACK_BITS=10000000 FALLBACK_CONF=10M
REPORT_S=1 LEASE_S=4
LIGHT_BITS=3000000 HEAVY_STREAMS=8
CONTROL_CONF=30G
mbit() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }

FAB=$TG_ID-fab
INET=$TG_INET
INET_IP=$TG_INET_IP
ALLOC_NS=$TG_ID-alloc
ALLOC_IP=10.0.0.200
ALLOC_PORT=9618
ALLOC_URL=http://$ALLOC_IP:$ALLOC_PORT
TCP_PORT=9001 UDP_PORT=9002
node_ns() { echo "$TG_ID-n$1"; }
node_ip() { echo "10.0.0.$1"; }

# forget_pid PID: drop a reaped PID from TG_PIDS (the cleanup kills what is
# left there: a reaped PID may be someone else's by then)
forget_pid() {
	local p keep=()
	for p in "${TG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	TG_PIDS=("${keep[@]}")
}
# stop_pid PID [SIGNAL]: signal one of ours, reap it, forget it
stop_pid() {
	[ -n "$1" ] || return 0
	kill "-${2:-TERM}" "$1" 2>/dev/null
	{ wait "$1"; } 2>/dev/null
	forget_pid "$1"
}
# daemon NETNS CMD...: a long-lived process of the test in NETNS (its PID is
# $!, the command's own: ip netns exec and setpriv exec it); SIGTERM should
# this script die without its traps; stdout never held (a runner reads it)
daemon() {
	local ns=$1
	shift
	ip netns exec "$ns" setpriv --pdeathsig TERM "$@" >/dev/null &
	TG_PIDS+=("$!")
}

# ---------------------------------------------------------------- topology
# (call these in the main shell, not in a subshell: the namespaces they make
# are recorded for the cleanup)
# fabric_link NAME NETNS IP: NETNS's eth0 with IP/16 on the fabric's NAME
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
# topo_fabric_nodes: the fabric and the nodes of NODES_ALL on it
topo_fabric_nodes() {
	local i
	_tg_netns_add "$FAB" || return 1
	_tg_sysctl "$FAB" net.ipv4.ip_forward 1 || return 1
	for i in $NODES_ALL; do topo_node "$i" || return 1; done
}
# topo_node I: node I on the fabric (I in 1..199)
topo_node() {
	local i=$1 ns
	ns=$(node_ns "$i")
	_tg_netns_add "$ns" || return 1
	_tg_sysctl "$ns" net.ipv4.ip_forward 0 # the agent's job
	fabric_link "v$i" "$ns" "$(node_ip "$i")" || return 1
	ip -n "$FAB" route add "10.0.$i.0/27" via "$(node_ip "$i")" dev "v$i" || return 1
}
# topo_node_late I: node I added to a running world: on the fabric, and
# counted by the internet host's meter (counter nI, its rule ahead of
# "other")
topo_node_late() {
	topo_node "$1" || return 1
	ip netns exec "$INET" nft -f - <<-EOF
		add counter inet tgmeter n$1
		insert rule inet tgmeter input ip saddr $(node_ip "$1") meta l4proto { tcp, udp } th dport { $TCP_PORT, $UDP_PORT } counter name n$1 accept
	EOF
}
# topo_inet: the internet host and its meter: what each node's pods send to
# the sink ports
topo_inet() {
	local i rules=""
	_tg_netns_add "$INET" || return 1
	ip -n "$FAB" link add inet0 type veth peer name eth0 netns "$INET" || return 1
	ip -n "$FAB" addr add 203.0.113.1/24 dev inet0
	ip -n "$FAB" link set inet0 up
	ip -n "$INET" addr add "$INET_IP/24" dev eth0
	ip -n "$INET" link set eth0 up
	ip -n "$INET" route add 10.0.0.0/24 via 203.0.113.1 || return 1
	for i in $NODES_ALL; do
		rules+="		ip saddr $(node_ip "$i") meta l4proto { tcp, udp } th dport { $TCP_PORT, $UDP_PORT } counter name n$i accept"$'\n'
	done
	ip netns exec "$INET" nft -f - <<-EOF || return 1
		table inet tgmeter {
		$(for i in $NODES_ALL; do echo "counter n$i { }"; done)
			counter other { }
			chain input {
				type filter hook input priority 0; policy accept;
		$rules
				meta l4proto { tcp, udp } th dport { $TCP_PORT, $UDP_PORT } counter name other
			}
		}
	EOF
}
# topo_reach IP WHAT: every node reaches IP (the internet host when empty)
topo_reach() {
	local i
	for i in $NODES_ALL; do
		pingq "$(node_ns "$i")" "$INET_IP" || { echo "node $i cannot reach the internet host"; return 1; }
		[ -z "$1" ] || pingq "$(node_ns "$i")" "$1" || { echo "node $i cannot reach $2"; return 1; }
	done
}

# meter_start SECONDS: the internet host's sink and meter for SECONDS
# (METER_PID; METER_UNTIL, in $SECONDS' count), reads appended to
# $METER_OUT; status 1 when it is not ready within 10 s (its stderr is
# $TG_TMP/meter.err)
# topo_world: the fabric and its nodes, the allocator's namespace on it, the
# internet host, each reachable (not in a subshell: the namespaces it makes
# are recorded for the cleanup)
topo_world() {
	topo_fabric_nodes || return 1
	_tg_netns_add "$ALLOC_NS" || return 1
	fabric_link valloc "$ALLOC_NS" "$ALLOC_IP" || return 1
	topo_inet || return 1
	topo_reach "$ALLOC_IP" "the allocator's address"
}
meter_start() {
	rm -f "$TG_TMP/meter.ready"
	daemon "$INET" "$PY" "$METER" serve --tcp-port "$TCP_PORT" --udp-port "$UDP_PORT" --table tgmeter \
		--out "$METER_OUT" --ready "$TG_TMP/meter.ready" --interval 0.1 --seconds "$1" 2>>"$TG_TMP/meter.err"
	METER_PID=$! METER_UNTIL=$((SECONDS + $1))
	wait_for 10 test -e "$TG_TMP/meter.ready"
}

# ---------------------------------------------------------------- agents
# shipped_conf: the shipped conflist (its tollgate entry) with the budgets
# block, what the nodes' ConfigMap holds: how to reach the allocator, the
# period, the longest lease, the fallback (budgets.fallbackAfterSeconds too
# when FALLBACK_AFTER_S is set). The budgets themselves are the allocator's
# (policy_json).
shipped_conf() {
	jq --arg url "$ALLOC_URL" --argjson rs "$REPORT_S" --argjson ls "$LEASE_S" --arg fb "$FALLBACK_CONF" \
		--arg fa "${FALLBACK_AFTER_S:-}" '
		.plugins |= map(select(.type == "tollgate")) |
		.plugins[0].budgets = {allocator: $url, reportSeconds: $rs, leaseSeconds: $ls, fallback: $fb} |
		if $fa != "" then .plugins[0].budgets.fallbackAfterSeconds = ($fa | tonumber) else . end' "$CONFLIST"
}
# policy_json BUDGET: the allocator's policy file (tollgate-allocator
# --policy) with datasets' internet egress budget BUDGET ("120M"), the
# nodes' period and lease
policy_json() {
	jq -n --argjson rs "$REPORT_S" --argjson ls "$LEASE_S" --arg b "$1" \
		'{version: 1, reportSeconds: $rs, leaseSeconds: $ls, namespaces: {datasets: {internetEgress: $b}}}'
}
# policy_put FILE BUDGET: FILE becomes policy_json BUDGET at once (a file
# beside it, renamed over it: the allocator never reads half a file)
policy_put() {
	policy_json "$2" >"$1.tmp" && [ -s "$1.tmp" ] && mv -f "$1.tmp" "$1"
}
# cm_put DIR [KEY]: stdin becomes DIR/KEY (10-tollgate.conflist by default)
# as kubelet mounts a ConfigMap and swaps a new version in: DIR/..<stamp>/
# holds the file, DIR/..data -> ..<stamp> renamed into place at once,
# DIR/KEY -> ..data/KEY (the watchers see one rename, the readers never a
# half-written file). Call it in the main shell (CM_SEQ counts).
CM_SEQ=0
cm_put() {
	local d=$1 k=${2:-10-tollgate.conflist} v
	CM_SEQ=$((CM_SEQ + 1))
	v=..v$CM_SEQ
	mkdir -p "$d/$v" || return 1
	cat >"$d/$v/$k" && [ -s "$d/$v/$k" ] || return 1
	ln -sfn "$v" "$d/..data_tmp" && mv -T "$d/..data_tmp" "$d/..data" || return 1
	[ -L "$d/$k" ] || ln -s "..data/$k" "$d/$k"
}
# conflist I: that conflist made node I's (own dataDir and log, a static pool)
conflist() {
	shipped_conf | jq --arg dd "$TG_TMP/n$1/data" --arg lf "$TG_TMP/n$1/tollgate.log" --arg pool "10.0.$1.2-10.0.$1.30" '
		.plugins[0] |= (.dataDir = $dd | .logFile = $lf |
			.ipam = {source: "static", addresses: [$pool], cooldownSeconds: 0})'
}
declare -A AGENT_PID=()
# agent_start I: node I's agent, its conflist a plain file ($TG_TMP/nI/cm/),
# or with AGENT_CM_SWAP set a ConfigMap mount (cm_put: swapped later)
agent_start() {
	local i=$1 d=$TG_TMP/n$1
	mkdir -p "$d/cm" "$d/net.d" "$d/bin"
	if [ -n "${AGENT_CM_SWAP:-}" ]; then
		cm_put "$d/cm" < <(conflist "$i") || return 1
	else
		conflist "$i" >"$d/cm/10-tollgate.conflist" || return 1
	fi
	daemon "$(node_ns "$i")" "$AGENT" --config "$d/cm/10-tollgate.conflist" \
		--listen "$(node_ip "$i"):9617" --cni-conf-dir "$d/net.d" --cni-bin-dir "$d/bin" \
		--plugin "$TOLLGATE_BIN_DIR/tollgate" --node-name "node$i" --page-cache-ms 0 2>>"$d/agent.log"
	AGENT_PID[$i]=$!
}
# in_node I CMD...: a client in node I's namespace, bounded in time
in_node() { local ns; ns=$(node_ns "$1"); shift; timeout -k 1 5 ip netns exec "$ns" "$@"; }
agent_get() { in_node "$1" curl -s --max-time 2 "http://$(node_ip "$1"):9617$2"; }
readyz_code() { in_node "$1" curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$(node_ip "$1"):9617/readyz"; }
agent_ready() { [ "$(readyz_code "$1")" = 200 ]; }
# metric_of TEXT NAME{LABELS}: the sample's value ("" when absent)
metric_of() { awk -v m="$2" '$1 == m { print $2; exit }' <<<"$1"; }
agent_metric() { metric_of "$(agent_get "$1" /metrics)" "$2"; }
GRANT='tollgate_budget_grant_bytes_per_second{namespace="datasets",direction="egress"}'
CEIL='tollgate_budget_ceil_bytes_per_second{namespace="datasets",direction="egress"}'
state_m() { echo "tollgate_budget_state{namespace=\"datasets\",direction=\"egress\",state=\"$1\"}"; }
# node_budget I: "STATE GRANT CEIL" (bytes/s) from node I's metrics
node_budget() {
	local m s st=none
	m=$(agent_get "$1" /metrics)
	for s in granted lease-expired fallback; do
		[ "$(metric_of "$m" "$(state_m "$s")")" = 1 ] && st=$s
	done
	echo "$st $(metric_of "$m" "$GRANT") $(metric_of "$m" "$CEIL")"
}

# ---------------------------------------------------------------- pods
# on_node I: the plugin calls that follow run on node I, through its
# installed plugin, with the installed conflist's entry (as a runtime does)
on_node() {
	TG_NODE=$(node_ns "$1")
	TG_BIN=$TG_TMP/n$1/bin/tollgate
	NODE_CONF=$(jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$TG_TMP/n$1/net.d/10-tollgate.conflist")
}
# pod_up I: pod d<I> of namespace datasets on node I, TSO/GSO off on its
# eth0; pod_down I: its DEL. Each t_fails saying why (not in $(...): the
# POD_* arrays are this shell's)
pod_up() {
	on_node "$1"
	pod_add "d$1" datasets "$NODE_CONF" || { t_fail "ADD d$1: rc=$TG_RC $TG_OUT"; return 1; }
	ip netns exec "$TG_ID-d$1" "$PY" "$METER" nogso eth0 || { t_fail "d$1: cannot turn TSO/GSO off"; return 1; }
}
pod_down() { on_node "$1"; pod_del "d$1" "$NODE_CONF" || { t_fail "DEL d$1: rc=$TG_RC $TG_OUT"; return 1; }; }
ns_classid() { # I: datasets' class on node I's tollgate-inet ("1:hex")
	jq -r '[.attachments[] | select(.namespace == "datasets") | .shaping.namespaceClass][0] // 0' \
		"$TG_TMP/n$1/data/tollgate/state.json" 2>/dev/null | awk '$1 > 0 { printf "1:%x\n", $1 }'
}
class_ceil_of() { # I: datasets' class ceil on node I, as tc prints it
	tc -n "$(node_ns "$1")" class show dev tollgate-inet classid "$(ns_classid "$1")" 2>/dev/null |
		awk '{ for (i = 1; i < NF; i++) if ($i == "ceil") { print $(i + 1); exit } }'
}

# ---------------------------------------------------------------- demand
declare -A LOAD_PID=() DEMAND=()
LOAD_SECONDS=280 # how long a load started by demand runs at most
# demand I heavy|light|none: what node I's pod sends from now on
demand() {
	local i=$1 kind=$2 args
	[ "${DEMAND[$i]:-none}" = "$kind" ] && return 0
	stop_pid "${LOAD_PID[$i]:-}"
	LOAD_PID[$i]="" DEMAND[$i]=$kind
	case $kind in
	heavy) args=(--port "$TCP_PORT" --tcp "$HEAVY_STREAMS" ${LOAD_RETRY:+--retry}) ;;
	light) args=(--port "$UDP_PORT" --udp-bps "$LIGHT_BITS") ;;
	none) return 0 ;;
	esac
	daemon "$TG_ID-d$i" "$PY" "$METER" load --dst "$INET_IP" "${args[@]}" --seconds "$LOAD_SECONDS" 2>>"$TG_TMP/load-$i.err"
	LOAD_PID[$i]=$!
}
# demand_spec: "nI=inf|BITS,..." of the nodes with demand (inet_meter.py's --demand)
demand_spec() {
	local i out=""
	for i in $NODES_ALL; do
		case ${DEMAND[$i]:-none} in
		heavy) out+="n$i=inf," ;;
		light) out+="n$i=$LIGHT_BITS," ;;
		esac
	done
	echo "${out%,}"
}
meter_py() { "$PY" "$METER" "$@" --file "$METER_OUT"; }
# settle: the meter's next read is in (a window ending now is complete)
settle() { sleep 0.25; }
# stats T0 T1 [NAMES] -> sets ST_MEAN ST_P99 ST_MAX ST_MIN ST_N (bits/s)
stats() {
	local names=() _m _p _x _n
	[ -n "${3:-}" ] && names=(--names "$3")
	read -r _m ST_MEAN _p ST_P99 _x ST_MAX _n ST_MIN _n ST_N <<<"$(meter_py stats --from "$1" --to "$2" "${names[@]}")"
}
stats_line() { echo "mean $(mbit "$ST_MEAN"), p99 $(mbit "$ST_P99"), max $(mbit "$ST_MAX"), min $(mbit "$ST_MIN") Mbit/s over $ST_N windows of 1 s"; }
# converge T0 T1 [NAMES]: CONV_AFTER (seconds or "never") and CONV_LAST (per
# node: rate/share over the last window), against the fair shares of B for
# the demand in force (with NAMES, "n1,n2", only those nodes must be within)
converge() {
	local out only=()
	[ -n "${3:-}" ] && only=(--only "$3")
	out=$(meter_py converge --from "$1" --to "$2" --budget "$B_BITS" --demand "$(demand_spec)" --tol 0.1 "${only[@]}")
	CONV_AFTER=$(awk '{ print $2 }' <<<"$out")
	CONV_LAST=$(cut -d' ' -f3- <<<"$out" | awk '{ for (i = 1; i <= NF; i++) { split($i, a, "[=/]"); printf "%s %s/%s  ", a[1], sprintf("%.1f", a[2] / 1e6), sprintf("%.1f", a[3] / 1e6) } }')
}
# sh_le A B / sh_ge A B: numeric comparisons, false when either is not a
# number ("never", "nan": mawk holds nan >= anything true)
sh_le() { awk -v a="$1" -v b="$2" 'BEGIN { if (a !~ /^-?[0-9.]+$/ || b !~ /^-?[0-9.]+$/) exit 1; exit !(a + 0 <= b + 0) }'; }
sh_ge() { awk -v a="$1" -v b="$2" 'BEGIN { if (a !~ /^-?[0-9.]+$/ || b !~ /^-?[0-9.]+$/) exit 1; exit !(a + 0 >= b + 0) }'; }
grants_line() { # the grant and state of every node with an agent
	local i out=""
	for i in $NODES_ALL; do
		[ -n "${AGENT_PID[$i]:-}" ] || continue
		read -r st g c <<<"$(node_budget "$i")"
		out+="node$i $st grant $(mbit "$((${g:-0} * 8))") ceil $(mbit "$((${c:-0} * 8))"); "
	done
	echo "${out%; } (Mbit/s)"
}
