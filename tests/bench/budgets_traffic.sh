#!/usr/bin/env bash
# Cluster budgets on real traffic: one namespace's internet egress held to
# its budget B across a cluster whose demand moves, grows and shrinks.
#
# Seven nodes on a simulated cloud fabric (as test_cluster.sh), each with its
# own tollgate-agent --node-name nodeN and one pod of namespace "datasets"
# ADDed through the node's installed plugin, as a runtime does; one
# tollgate-allocator in a namespace of its own; an internet host that counts,
# every 100 ms, the bytes each node's pods send it (nft counters per source:
# masquerade makes the source the node's address). The pods' eth0 have TSO
# and GSO off, so that every TCP segment reaches the internet host as its
# own packet: its counters then see what HTB's ceil counts, Ethernet frames
# (IP bytes + 14 per packet).
#
# Demand: a "heavy" node's pod runs 8 TCP streams as fast as they may go, a
# "light" node's pod sends UDP paced at 3 Mbit/s on the wire. The TCP
# streams have small send buffers (32 KiB): when a sender stops, the kernel
# would otherwise send what autotuned buffers hold for seconds after the
# demand has moved. B = 120 Mbit/s
# for datasets, fallback 10M, reportSeconds 1, leaseSeconds 4; no other cap
# (a budget alone makes the namespace's class).
#
#   1. the allocator unreachable from the start (the fabric drops what goes
#      to it): every node at its fallback (state, metric, class ceil), a heavy
#      node held to it on the wire, pods reach the internet and each other,
#      every /readyz stays 200
#   2. the allocator starts; skewed demand (node1 heavy, nodes 2-6 light):
#      every node within 10% of its max-min fair share of B within lease + 5 s;
#      the allocator's usage equals the internet host's figure within 2%
#   3. the demand moves (node1 light, node2 heavy): fair shares within 5 s
#   4. node7 joins (agent started, pod ADDed, heavy): within 5 s
#   5. node2 leaves (its pod DELeted, then its agent stopped): within 5 s
#   6. the allocator SIGKILLed: every lease runs out (lease-expired, ceil =
#      min(grant, safe share)), the aggregate stays <= 1.05 B; restarted, the
#      aggregate is back to >= 0.9 B within lease + 5 s
#   7. control: the allocator restarted with a budget of 100G (granting all
#      it is asked for): the same pods then send more than 1.2 B, so the
#      traffic can exceed B and the bounds above mean something
# Over phases 2-6: the p99 of the aggregate over 1 s windows <= 1.05 B, and
# its mean >= 0.9 B (demand exceeds B throughout). The figures are TAP
# diag lines.
#
#   pod d1        pod d2               pod d7 (joins)
#   10.0.1.x      10.0.2.x      ...    10.0.7.x
#    | tg* veth    |                    |
#   node1 eth0    node2 eth0           node7 eth0        allocator
#   10.0.0.1/16   10.0.0.2/16          10.0.0.7/16       10.0.0.200/16
#    agent         agent                agent            tollgate-allocator
#    :9617         :9617                :9617             :9618
#    | v1          | v2                 | v7              | valloc
#   +-+-------------+--------------------+-----------------+--------------+
#   | fabric ($TG_ID-fab) "the cloud": proxy ARP, 10.0.0.N/32 dev vN,      |
#   |   10.0.N.0/27 via 10.0.0.N; table ip tgcut drops what goes to the     |
#   |   allocator while it is "unreachable"                                |
#   |   inet0 203.0.113.1/24                                               |
#   +-------------------------------+--------------------------------------+
#                                   | inet0
#                    inet ($TG_ID-inet) 203.0.113.10, route 10.0.0.0/24 only
#                    inet_meter.py serve: TCP :9001, UDP :9002 discarded;
#                    table inet tgmeter: counter nN per node (ip saddr
#                    10.0.0.N), read every 100 ms
#
# The sanitizer build runs the same phases, shorter (TG_BUDGETS_SHORT=1 is
# the default there): the same checks, each phase's tail cut.
# Run by tests/bench/bench_budgets.sh (make bench); standalone:
#   TOLLGATE_BIN_DIR=build bash tests/bench/budgets_traffic.sh
# shellcheck disable=SC2016,SC1091,SC2153,SC2034  # jq filters with $vars; lib.sh globals
set -u
export LC_NUMERIC=C # EPOCHREALTIME with a decimal point
. "$(dirname "$0")/../integration/lib.sh"
tg_require
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
T0=$SECONDS

case ${TOLLGATE_BIN_DIR%/} in *san*) SHORT=${TG_BUDGETS_SHORT:-1} ;; *) SHORT=${TG_BUDGETS_SHORT:-0} ;; esac
# phase lengths (s): the bound a phase checks, then a tail that shows it holds
if [ "$SHORT" = 1 ]; then TAIL=2; else TAIL=4; fi

B_BITS=120000000 B_CONF=120M
FALLBACK_BITS=10000000 FALLBACK_CONF=10M
REPORT_S=1 LEASE_S=4
LIGHT_BITS=3000000 HEAVY_STREAMS=8
CONTROL_CONF=30G
mbit() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
diag "budget B = $B_CONF ($B_BITS bit/s) for datasets, fallback $FALLBACK_CONF, reportSeconds $REPORT_S, leaseSeconds $LEASE_S; light nodes $(mbit "$LIGHT_BITS") Mbit/s UDP, heavy nodes $HEAVY_STREAMS TCP streams$([ "$SHORT" = 1 ] && echo "; short phases (tail $TAIL s)")"

FAB=$TG_ID-fab
INET=$TG_INET
INET_IP=$TG_INET_IP
ALLOC_NS=$TG_ID-alloc
ALLOC_IP=10.0.0.200
ALLOC_PORT=9618
ALLOC_URL=http://$ALLOC_IP:$ALLOC_PORT
TCP_PORT=9001 UDP_PORT=9002
NODES_ALL="1 2 3 4 5 6 7"
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
tg_traps

# ---------------------------------------------------------------- topology
t_begin "topology: seven nodes, an allocator and an internet host on a simulated cloud fabric"
TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || tap_bail "mktemp"
chmod 755 "$TG_TMP"
METER_OUT=$TG_TMP/meter.txt
topo() {
	local i ns rules=""
	_tg_netns_add "$FAB" || return 1
	_tg_sysctl "$FAB" net.ipv4.ip_forward 1 || return 1
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
	for i in $NODES_ALL; do
		ns=$(node_ns "$i")
		_tg_netns_add "$ns" || return 1
		_tg_sysctl "$ns" net.ipv4.ip_forward 0 # the agent's job
		fabric_link "v$i" "$ns" "$(node_ip "$i")" || return 1
		ip -n "$FAB" route add "10.0.$i.0/27" via "$(node_ip "$i")" dev "v$i" || return 1
	done
	_tg_netns_add "$ALLOC_NS" || return 1
	fabric_link valloc "$ALLOC_NS" "$ALLOC_IP" || return 1
	_tg_netns_add "$INET" || return 1
	ip -n "$FAB" link add inet0 type veth peer name eth0 netns "$INET" || return 1
	ip -n "$FAB" addr add 203.0.113.1/24 dev inet0
	ip -n "$FAB" link set inet0 up
	ip -n "$INET" addr add "$INET_IP/24" dev eth0
	ip -n "$INET" link set eth0 up
	ip -n "$INET" route add 10.0.0.0/24 via 203.0.113.1 || return 1
	# the internet host's meter: what each node's pods send to the sink ports
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
	for i in $NODES_ALL; do
		pingq "$(node_ns "$i")" "$INET_IP" || { echo "node $i cannot reach the internet host"; return 1; }
		pingq "$(node_ns "$i")" "$ALLOC_IP" || { echo "node $i cannot reach the allocator's address"; return 1; }
	done
}
# (not in a subshell: the namespaces it makes are recorded for the cleanup)
topo >"$TG_TMP/topo.err" 2>&1 || tap_bail "could not build the topology: $(tail -3 "$TG_TMP/topo.err")"
t_end

# The allocator is unreachable until phase 2: the fabric drops its traffic
ip netns exec "$FAB" nft -f - <<EOF || tap_bail "cannot cut the allocator off"
table ip tgcut {
	chain forward { type filter hook forward priority 0; policy accept; ip daddr $ALLOC_IP drop; ip saddr $ALLOC_IP drop; }
}
EOF

t_begin "the internet host: a sink for TCP and UDP, its counters read every 100 ms"
daemon "$INET" "$PY" "$METER" serve --tcp-port "$TCP_PORT" --udp-port "$UDP_PORT" --table tgmeter \
	--out "$METER_OUT" --ready "$TG_TMP/meter.ready" --interval 0.1 --seconds 290 2>"$TG_TMP/meter.err"
METER_PID=$!
wait_for 10 test -e "$TG_TMP/meter.ready" || tap_bail "inet_meter.py serve did not start: $(cat "$TG_TMP/meter.err")"
wait_for 5 test -s "$METER_OUT" || t_fail "no counter read within 5 s: $(cat "$TG_TMP/meter.err")"
t_end

# ---------------------------------------------------------------- agents
# shipped_conf BUDGET: the shipped conflist (its tollgate entry) with the
# budgets block: what the ConfigMap holds, and what the allocator reads
shipped_conf() {
	jq --arg url "$ALLOC_URL" --argjson rs "$REPORT_S" --argjson ls "$LEASE_S" --arg fb "$FALLBACK_CONF" --arg b "$1" '
		.plugins |= map(select(.type == "tollgate")) |
		.plugins[0].budgets = {allocator: $url, reportSeconds: $rs, leaseSeconds: $ls, fallback: $fb,
		                       internetEgress: {datasets: $b}}' "$CONFLIST"
}
# conflist I: that conflist made node I's (own dataDir and log, a static pool)
conflist() {
	shipped_conf "$B_CONF" | jq --arg dd "$TG_TMP/n$1/data" --arg lf "$TG_TMP/n$1/tollgate.log" --arg pool "10.0.$1.2-10.0.$1.30" '
		.plugins[0] |= (.dataDir = $dd | .logFile = $lf |
			.ipam = {source: "static", addresses: [$pool], cooldownSeconds: 0})'
}
declare -A AGENT_PID=()
agent_start() { # I
	local i=$1 d=$TG_TMP/n$1
	mkdir -p "$d/cm" "$d/net.d" "$d/bin"
	conflist "$i" >"$d/cm/10-tollgate.conflist" || return 1
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
GRANT='tollgate_budget_grant_bytes_per_second{namespace="datasets"}'
CEIL='tollgate_budget_ceil_bytes_per_second{namespace="datasets"}'
state_m() { echo "tollgate_budget_state{namespace=\"datasets\",state=\"$1\"}"; }
# node_budget I: "STATE GRANT CEIL" (bytes/s) from node I's metrics
node_budget() {
	local m s st=none
	m=$(agent_get "$1" /metrics)
	for s in granted lease-expired fallback; do
		[ "$(metric_of "$m" "$(state_m "$s")")" = 1 ] && st=$s
	done
	echo "$st $(metric_of "$m" "$GRANT") $(metric_of "$m" "$CEIL")"
}

t_begin "six agents (--node-name node1..node6) turn ready with a budget configured and the allocator unreachable"
for i in 1 2 3 4 5 6; do agent_start "$i" || tap_bail "cannot derive node $i's conflist from $CONFLIST"; done
for i in 1 2 3 4 5 6; do
	wait_for 20 agent_ready "$i" || t_fail "node $i's agent not ready within 20 s: $(tail -3 "$TG_TMP/n$i/agent.log")"
	[ -x "$TG_TMP/n$i/bin/tollgate" ] || t_fail "node $i: plugin not installed"
done
t_end
for i in 1 2 3 4 5 6; do kill -0 "${AGENT_PID[$i]}" 2>/dev/null || tap_bail "node $i's agent exited: $(tail -5 "$TG_TMP/n$i/agent.log")"; done

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

t_begin "a pod of namespace datasets on each of the six nodes, ADDed through the node's installed plugin"
for i in 1 2 3 4 5 6; do pod_up "$i"; done
for i in 1 2 3 4 5 6; do
	[ -n "${POD_IP[d$i]:-}" ] || continue
	[ -n "$(ns_classid "$i")" ] || t_fail "node $i: no namespace class for datasets in the store"
done
t_end
for i in 1 2 3 4 5 6; do [ -n "${POD_IP[d$i]:-}" ] || tap_bail "cannot continue without pod d$i"; done

# ---------------------------------------------------------------- demand
declare -A LOAD_PID=() DEMAND=()
# demand I heavy|light|none: what node I's pod sends from now on
demand() {
	local i=$1 kind=$2 args
	[ "${DEMAND[$i]:-none}" = "$kind" ] && return 0
	stop_pid "${LOAD_PID[$i]:-}"
	LOAD_PID[$i]="" DEMAND[$i]=$kind
	case $kind in
	heavy) args=(--port "$TCP_PORT" --tcp "$HEAVY_STREAMS") ;;
	light) args=(--port "$UDP_PORT" --udp-bps "$LIGHT_BITS") ;;
	none) return 0 ;;
	esac
	daemon "$TG_ID-d$i" "$PY" "$METER" load --dst "$INET_IP" "${args[@]}" --seconds 280 2>>"$TG_TMP/load-$i.err"
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
	read -r _m ST_MEAN _p ST_P99 _x ST_MAX _n ST_MIN _n ST_N < <(meter_py stats --from "$1" --to "$2" "${names[@]}")
}
stats_line() { echo "mean $(mbit "$ST_MEAN"), p99 $(mbit "$ST_P99"), max $(mbit "$ST_MAX"), min $(mbit "$ST_MIN") Mbit/s over $ST_N windows of 1 s"; }
# converge T0 T1: CONV_AFTER (seconds or "never") and CONV_LAST (per node:
# rate/share over the last window), against the fair shares of B for the
# demand in force
converge() {
	local out
	out=$(meter_py converge --from "$1" --to "$2" --budget "$B_BITS" --demand "$(demand_spec)" --tol 0.1)
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
		read -r st g c < <(node_budget "$i")
		out+="node$i $st grant $(mbit "$((${g:-0} * 8))") ceil $(mbit "$((${c:-0} * 8))"); "
	done
	echo "${out%; } (Mbit/s)"
}
# alloc_line: the allocator's own figures for datasets (Mbit/s), when it runs
alloc_line() {
	local m f v out=""
	[ -n "${ALLOC_PID:-}" ] || { echo "allocator down"; return; }
	m=$(alloc_get /metrics)
	for f in granted committed demand usage; do
		v=$(metric_of "$m" "tollgate_allocator_${f}_bytes_per_second{namespace=\"datasets\"}")
		out+="$f $(mbit "$((${v:-0} * 8))"), "
	done
	echo "allocator: ${out}nodes $(metric_of "$m" "$ALLOC_NODES")"
}
# run_phase NAME BOUND: waits BOUND + TAIL s from now; then checks that
# every node reached its fair share within BOUND s and stayed there
PHASE_T0="" PHASE_T1=""
run_phase() {
	PHASE_T0=$EPOCHREALTIME
	sleep "$(($2 + TAIL))"
	settle
	PHASE_T1=$EPOCHREALTIME
	converge "$PHASE_T0" "$PHASE_T1"
	stats "$PHASE_T0" "$PHASE_T1"
	diag "$1: fair shares reached after $CONV_AFTER s (bound $2 s); last window, node rate/share: $CONV_LAST"
	diag "$1: aggregate $(stats_line)"
	diag "$1: $(grants_line)"
	diag "$1: $(alloc_line)"
	sh_le "$CONV_AFTER" "$2" || t_fail "not every node within 10% of its fair share from $2 s on (after: $CONV_AFTER; last window, rate/share Mbit/s: $CONV_LAST)"
}

# ---------------------------------------------------------------- 1. unreachable
t_begin "allocator unreachable from the start: every node at its fallback (state fallback, ceil metric and class ceil = $FALLBACK_CONF)"
demand 1 heavy
for i in 2 3 4 5 6; do demand "$i" light; done
READYZ_BAD=0 READYZ_N=0
readyz_all() {
	local i c
	for i in 1 2 3 4 5 6; do
		c=$(readyz_code "$i")
		READYZ_N=$((READYZ_N + 1))
		[ "$c" = 200 ] || { READYZ_BAD=$((READYZ_BAD + 1)); diag "node $i /readyz: $c"; }
	done
}
F_T0=$EPOCHREALTIME
for _ in 1 2 3 4; do readyz_all; sleep 0.5; done
for i in 1 2 3 4 5 6; do
	read -r st g c < <(node_budget "$i")
	t_expect "node $i state" "$st" fallback
	t_expect "node $i ceil metric" "$c" $((FALLBACK_BITS / 8))
	t_expect "node $i class ceil" "$(class_ceil_of "$i")" 10Mbit
done
diag "$(grants_line)"
t_end

t_begin "allocator unreachable: the heavy node is held to the fallback on the wire, pods reach the internet and each other, every /readyz stays 200"
for _ in 1 2 3 4; do readyz_all; sleep 0.5; done
pingq "$TG_ID-d3" "$INET_IP" || t_fail "pod d3 cannot reach the internet host"
pingq "$TG_ID-d4" "${POD_IP[d5]}" || t_fail "pod d4 cannot reach pod d5 on node 5"
pingq "$TG_ID-d1" "${POD_IP[d6]}" || t_fail "pod d1 (heavy) cannot reach pod d6 on node 6"
# (a figure, not a check: the queue a budgeted namespace's heavy pod builds)
rtt() { ip netns exec "$TG_ID-$1" ping -n -q -c 8 -i 0.1 -W 3 "$INET_IP" 2>/dev/null | sed -nE 's|.* = ([0-9.]+)/([0-9.]+)/([0-9.]+)/.*|\2 ms (min \1, max \3)|p'; }
diag "RTT to the internet host: from heavy pod d1 (held to the fallback) avg $(rtt d1), from light pod d3 avg $(rtt d3)"
settle
F_T1=$EPOCHREALTIME
stats "$(awk -v a="$F_T0" 'BEGIN { printf "%.6f", a + 1.5 }')" "$F_T1" n1
diag "unreachable: node1 (heavy) $(stats_line)"
sh_le "$ST_P99" "$((FALLBACK_BITS * 105 / 100))" || t_fail "node1's p99 $(mbit "$ST_P99") Mbit/s > 1.05 x the fallback"
sh_ge "$ST_MEAN" "$((FALLBACK_BITS * 90 / 100))" || t_fail "node1's mean $(mbit "$ST_MEAN") Mbit/s < 0.9 x the fallback: the class holds it below"
stats "$F_T0" "$F_T1"
diag "unreachable: aggregate $(stats_line)"
diag "/readyz answered 200 $((READYZ_N - READYZ_BAD)) of $READYZ_N times"
t_expect "/readyz answers other than 200" "$READYZ_BAD" 0
for i in 1 2 3 4 5 6; do kill -0 "${AGENT_PID[$i]}" 2>/dev/null || t_fail "node $i's agent exited"; done
t_end

# ---------------------------------------------------------------- 2. allocator starts
shipped_conf "$B_CONF" >"$TG_TMP/allocator.conflist"
shipped_conf "$CONTROL_CONF" >"$TG_TMP/allocator-control.conflist"
ALLOC_PID=""
alloc_get() { timeout -k 1 5 ip netns exec "$ALLOC_NS" curl -s --max-time 2 "$ALLOC_URL$1"; }
alloc_up() { [ -n "$(alloc_get /metrics)" ]; }
alloc_start() { # CONFIG
	daemon "$ALLOC_NS" "$ALLOC" --config "$1" --listen "$ALLOC_IP:$ALLOC_PORT" 2>>"$TG_TMP/allocator.log"
	ALLOC_PID=$!
	wait_for 10 alloc_up
}
USAGE='tollgate_allocator_usage_bytes_per_second{namespace="datasets"}'
ALLOC_GRANTED='tollgate_allocator_granted_bytes_per_second{namespace="datasets"}'
ALLOC_NODES='tollgate_allocator_nodes{namespace="datasets"}'

t_begin "the allocator starts, skewed demand (node1 heavy, nodes 2-6 light): every node within 10% of its max-min fair share of B within lease + 5 s"
ip netns exec "$FAB" nft delete table ip tgcut || t_fail "cannot reconnect the allocator"
alloc_start "$TG_TMP/allocator.conflist" || t_fail "the allocator did not serve /metrics within 10 s: $(tail -3 "$TG_TMP/allocator.log")"
run_phase "skewed" $((LEASE_S + 5))
A_T0=$PHASE_T0 A_CONV=$CONV_AFTER
t_end

t_begin "skewed demand: the allocator's usage equals what the internet host measured, within 2%"
# The allocator's figure is each node's last report, up to a period old: it
# is compared over seconds when the aggregate held steady (every 1 s window
# within 3% of the mean; up to three tries of 5 reads)
usage_try() {
	local u
	U_T0=$EPOCHREALTIME usage_sum=0 usage_n=0
	for _ in 1 2 3 4 5; do
		u=$(metric_of "$(alloc_get /metrics)" "$USAGE")
		[ -n "$u" ] && { usage_sum=$((usage_sum + u)); usage_n=$((usage_n + 1)); }
		sleep 1
	done
	settle
	stats "$(awk -v a="$U_T0" 'BEGIN { printf "%.6f", a - 1 }')" "$EPOCHREALTIME"
	awk -v m="$ST_MEAN" -v x="$ST_MAX" -v n="$ST_MIN" 'BEGIN { exit !(m ~ /^[0-9.]+$/ && m > 0 && x / m - 1 <= 0.03 && 1 - n / m <= 0.03) }'
}
for try in 1 2 3; do
	usage_try && break
	diag "usage, try $try: the aggregate was not steady ($(stats_line)); again"
done
if [ "$usage_n" -eq 0 ]; then
	t_fail "no $USAGE in the allocator's metrics"
else
	alloc_bits=$((usage_sum * 8 / usage_n))
	diag "allocator usage $(mbit "$alloc_bits") Mbit/s (mean of $usage_n reads, one a second), internet host $(mbit "$ST_MEAN") Mbit/s from a second before the first read to the last ($(stats_line))"
	awk -v a="$alloc_bits" -v m="$ST_MEAN" 'BEGIN { exit !(m ~ /^[0-9.]+$/ && m > 0 && a / m - 1 <= 0.02 && 1 - a / m <= 0.02) }' ||
		t_fail "allocator usage $(mbit "$alloc_bits") Mbit/s vs $(mbit "$ST_MEAN") measured: more than 2% apart"
fi
t_end

# ---------------------------------------------------------------- 3. demand moves
t_begin "demand moves from node1 to node2: every node within 10% of its fair share within 5 s"
demand 1 light
demand 2 heavy
run_phase "moved" 5
t_end

# ---------------------------------------------------------------- 4-5. join, leave
t_begin "node7 joins (agent started, pod ADDed, heavy demand): every node within 10% of its fair share within 5 s"
agent_start 7 || t_fail "cannot derive node 7's conflist"
wait_for 20 agent_ready 7 || t_fail "node 7's agent not ready within 20 s: $(tail -3 "$TG_TMP/n7/agent.log")"
pod_up 7
demand 7 heavy
run_phase "joined" 5
t_end

t_begin "node2 leaves (its pod DELeted, then its agent stopped): every node within 10% of its fair share within 5 s"
demand 2 none
pod_down 2
L_T0=$EPOCHREALTIME
sleep 1
stop_pid "${AGENT_PID[2]}"
AGENT_PID[2]=""
PHASE_T0=$L_T0
sleep $((4 + TAIL))
settle
converge "$L_T0" "$EPOCHREALTIME"
stats "$L_T0" "$EPOCHREALTIME"
diag "left: fair shares reached after $CONV_AFTER s (bound 5 s); last window, node rate/share: $CONV_LAST"
diag "left: aggregate $(stats_line)"
diag "left: $(grants_line)"
diag "left: $(alloc_line)"
sh_le "$CONV_AFTER" 5 || t_fail "not every node within 10% of its fair share from 5 s on (after: $CONV_AFTER; last window, rate/share Mbit/s: $CONV_LAST)"
t_end

# ---------------------------------------------------------------- 6. allocator killed
t_begin "allocator SIGKILLed: every lease runs out (lease-expired, ceil = min(grant, safe share), safe shares within 0.9 B) and the aggregate stays <= 1.05 B"
K_T0=$EPOCHREALTIME
stop_pid "$ALLOC_PID" KILL
ALLOC_PID=""
sleep $((LEASE_S + 2))
safe_sum=0
for i in 1 3 4 5 6 7; do
	read -r st g c < <(node_budget "$i")
	t_expect "node $i state" "$st" lease-expired
	# what the node holds, as it wrote it (budgets.json): its grant and the
	# safe share that came with it
	read -r jg js jn < <(jq -r '.namespaces[] | select(.namespace == "datasets") | "\(.grant) \(.safeShare) \(.nodes)"' \
		"$TG_TMP/n$i/data/tollgate/budgets.json" 2>/dev/null)
	t_expect "node $i grant in budgets.json vs its metric" "${jg:-?}" "${g:-}"
	want=$(( ${jg:-0} < ${js:-0} ? ${jg:-0} : ${js:-0} ))
	t_expect "node $i ceil (min(grant ${jg:-?}, safe share ${js:-?}))" "${c:-?}" "$want"
	safe_sum=$((safe_sum + ${js:-0}))
done
diag "allocator down: $(grants_line); safe shares $(mbit $((js * 8))) Mbit/s each (${jn:-?} nodes said to hold grants), $(mbit $((safe_sum * 8))) Mbit/s together"
sh_le "$((safe_sum * 8))" "$((B_BITS * 9 / 10 + 100))" || t_fail "the safe shares add up to $(mbit $((safe_sum * 8))) Mbit/s > 0.9 B"
settle
K_T1=$EPOCHREALTIME
stats "$K_T0" "$K_T1"
diag "allocator down: aggregate $(stats_line)"
sh_le "$ST_MAX" "$((B_BITS * 105 / 100))" || t_fail "aggregate max $(mbit "$ST_MAX") Mbit/s > 1.05 B while the allocator was down"
t_end

t_begin "allocator restarted: the aggregate is back to >= 0.9 B within lease + 5 s and stays <= 1.05 B"
alloc_start "$TG_TMP/allocator.conflist" || t_fail "the allocator did not serve /metrics within 10 s: $(tail -3 "$TG_TMP/allocator.log")"
R_T0=$EPOCHREALTIME
sleep $((LEASE_S + 5 + TAIL))
settle
R_T1=$EPOCHREALTIME
back=$(meter_py windows --from "$R_T0" --to "$R_T1" 2>/dev/null | awk -v b="$B_BITS" -v t0="$R_T0" '$3 >= 0.9 * b { printf "%.2f\n", $2 - t0; exit }')
stats "$R_T0" "$R_T1"
diag "restarted: aggregate >= 0.9 B after ${back:-never} s (bound $((LEASE_S + 5)) s); $(stats_line)"
diag "restarted: $(grants_line)"
diag "restarted: $(alloc_line)"
sh_le "${back:-never}" $((LEASE_S + 5)) || t_fail "aggregate not back to 0.9 B within $((LEASE_S + 5)) s of the restart (${back:-never})"
sh_le "$ST_MAX" "$((B_BITS * 105 / 100))" || t_fail "aggregate max $(mbit "$ST_MAX") Mbit/s > 1.05 B after the restart"
t_end
RUN_T1=$R_T1

# ---------------------------------------------------------------- the whole run
t_begin "over the whole budgeted run: p99 of the aggregate over 1 s windows <= 1.05 B"
stats "$A_T0" "$RUN_T1"
diag "whole run (allocator start to the end of the restart): aggregate $(stats_line)"
sh_le "$ST_P99" "$((B_BITS * 105 / 100))" || t_fail "p99 $(mbit "$ST_P99") Mbit/s > 1.05 B ($(mbit $((B_BITS * 105 / 100))))"
t_end

t_begin "while demand exceeds B: the mean aggregate >= 0.9 B from the first fair shares to the allocator's kill"
M_T0=$(awk -v a="$A_T0" -v c="${A_CONV/never/0}" 'BEGIN { printf "%.6f", a + c }')
stats "$M_T0" "$K_T0"
diag "first fair shares to the kill: aggregate $(stats_line)"
sh_ge "$ST_MEAN" "$((B_BITS * 90 / 100))" || t_fail "mean $(mbit "$ST_MEAN") Mbit/s < 0.9 B ($(mbit $((B_BITS * 90 / 100))))"
t_end

t_begin "tollgate-ipam status prints the node's budget: granted, with its lease and ceil"
r=$(ip netns exec "$(node_ns 7)" "$IPAM_BIN" --data-dir "$TG_TMP/n7/data" --network tollgate status 2>&1)
line=$(grep '^budget ' <<<"$r")
diag "node7: $line"
[[ $line == *"datasets: granted "* ]] || t_fail "no 'budget ... datasets: granted' line: $(tr '\n' ' ' <<<"$r" | cut -c1-300)"
t_end

# ---------------------------------------------------------------- 7. control
t_begin "control: with the allocator granting all it is asked for, the same pods send more than 1.2 B"
stop_pid "$ALLOC_PID" TERM
ALLOC_PID=""
alloc_start "$TG_TMP/allocator-control.conflist" || t_fail "the allocator did not serve /metrics within 10 s: $(tail -3 "$TG_TMP/allocator.log")"
C_T0=$EPOCHREALTIME
# until a window passes 1.2 B (the heavy node's grant grows report by
# report), at most lease + 20 s
over() { stats "$C_T0" "$EPOCHREALTIME"; sh_ge "$ST_MAX" "$((B_BITS * 12 / 10))" || { sleep 0.5; return 1; }; }
wait_for $((LEASE_S + 20)) over
settle
stats "$C_T0" "$EPOCHREALTIME"
diag "control (budget $CONTROL_CONF): aggregate $(stats_line)"
diag "control: $(grants_line)"
sh_ge "$ST_MAX" "$((B_BITS * 12 / 10))" || t_fail "aggregate max $(mbit "$ST_MAX") Mbit/s <= 1.2 B: the traffic cannot show the budget holding"
t_end

# ---------------------------------------------------------------- the end
for i in $NODES_ALL; do demand "$i" none; done
t_begin "every pod DELeted: no attachment left on any node, every agent and the allocator still running"
for i in 1 3 4 5 6 7; do
	pod_down "$i"
	t_expect "node $i attachments" "$(jq '.attachments | length' "$TG_TMP/n$i/data/tollgate/state.json")" 0
	kill -0 "${AGENT_PID[$i]}" 2>/dev/null || t_fail "node $i's agent died"
done
kill -0 "$ALLOC_PID" 2>/dev/null || t_fail "the allocator died: $(tail -3 "$TG_TMP/allocator.log")"
t_expect "bytes from elsewhere than a node's address" "$(ip netns exec "$INET" nft -j list counter inet tgmeter other | jq '.nftables[] | .counter.bytes // empty')" 0
t_end

diag "test took $((SECONDS - T0)) s"
tap_done
