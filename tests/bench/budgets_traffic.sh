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
# for datasets (the allocator's policy file: the nodes' conflists say only
# how to reach the allocator, and the nodes learn the budget from its
# answers), fallback 10M, reportSeconds 1, leaseSeconds 4; no other cap
# (a budget alone makes the namespace's class).
#
#   1. the allocator unreachable from the start (the fabric drops what goes
#      to it; no node has heard a policy, so datasets is held as a budgeted
#      namespace): every node at its fallback (state, metric, class ceil), a heavy
#      node held to it on the wire, pods reach the internet and each other,
#      every /readyz stays 200. (An agent that knows
#      budgets.fallbackAfterSeconds holds a namespace never granted at the
#      join rate until the allocator has gone unanswered that long: the run
#      sets it to 1 s, and the fallback is awaited for up to 5 s.)
#   2. the allocator starts; skewed demand (node1 heavy, nodes 2-6 light):
#      every node within 10% of its max-min fair share of B within lease + 5 s;
#      the allocator's usage equals the internet host's figure within 2%
#   3. the demand moves (node1 light, node2 heavy): fair shares within 5 s
#   4. node7 joins (agent started, pod ADDed, heavy): within 5 s
#   5. node2 leaves (its pod DELeted, then its agent stopped): within 5 s
#   6. the allocator SIGKILLed: every lease runs out (lease-expired, ceil =
#      min(grant, safe share)), the aggregate stays <= 1.05 B; restarted, the
#      aggregate is back to >= 0.9 B within lease + 5 s
#   7. control: the allocator restarted with a policy of 30G for datasets
#      (granting all it is asked for): the same pods then send more than 1.2 B, so the
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
# The world and its helpers (topology, agents, pods, demand, the meter and
# its statistics) are tests/bench/budgets_lib.sh's, shared with
# tests/chaos/chaos_failover.sh.
# Run by tests/bench/bench_budgets.sh (make bench); standalone:
#   TOLLGATE_BIN_DIR=build bash tests/bench/budgets_traffic.sh
# shellcheck disable=SC2016,SC1091,SC2153,SC2034  # jq filters with $vars; lib.sh globals
set -u
export LC_NUMERIC=C # EPOCHREALTIME with a decimal point
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/budgets_lib.sh"
tg_require
budgets_require
T0=$SECONDS

case ${TOLLGATE_BIN_DIR%/} in *san*) SHORT=${TG_BUDGETS_SHORT:-1} ;; *) SHORT=${TG_BUDGETS_SHORT:-0} ;; esac
# phase lengths (s): the bound a phase checks, then a tail that shows it holds
if [ "$SHORT" = 1 ]; then TAIL=2; else TAIL=4; fi

diag "budget B = $B_CONF ($B_BITS bit/s) for datasets, fallback $FALLBACK_CONF, reportSeconds $REPORT_S, leaseSeconds $LEASE_S; light nodes $(mbit "$LIGHT_BITS") Mbit/s UDP, heavy nodes $HEAVY_STREAMS TCP streams$([ "$SHORT" = 1 ] && echo "; short phases (tail $TAIL s)")"

NODES_ALL="1 2 3 4 5 6 7"
if grep -q fallbackAfterSeconds "$AGENT"; then
	FALLBACK_AFTER_S=1
	diag "budgets.fallbackAfterSeconds $FALLBACK_AFTER_S (the agents know it)"
fi
tg_traps

# ---------------------------------------------------------------- topology
t_begin "topology: seven nodes, an allocator and an internet host on a simulated cloud fabric"
TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || tap_bail "mktemp"
chmod 755 "$TG_TMP"
METER_OUT=$TG_TMP/meter.txt
# (not in a subshell: the namespaces it makes are recorded for the cleanup)
topo_world >"$TG_TMP/topo.err" 2>&1 || tap_bail "could not build the topology: $(tail -3 "$TG_TMP/topo.err")"
t_end

# The allocator is unreachable until phase 2: the fabric drops its traffic
ip netns exec "$FAB" nft -f - <<EOF || tap_bail "cannot cut the allocator off"
table ip tgcut {
	chain forward { type filter hook forward priority 0; policy accept; ip daddr $ALLOC_IP drop; ip saddr $ALLOC_IP drop; }
}
EOF

t_begin "the internet host: a sink for TCP and UDP, its counters read every 100 ms"
meter_start 290 || tap_bail "inet_meter.py serve did not start: $(cat "$TG_TMP/meter.err")"
wait_for 5 test -s "$METER_OUT" || t_fail "no counter read within 5 s: $(cat "$TG_TMP/meter.err")"
t_end

# ---------------------------------------------------------------- agents
t_begin "six agents (--node-name node1..node6) turn ready with a budget configured and the allocator unreachable"
for i in 1 2 3 4 5 6; do agent_start "$i" || tap_bail "cannot derive node $i's conflist from $CONFLIST"; done
for i in 1 2 3 4 5 6; do
	wait_for 20 agent_ready "$i" || t_fail "node $i's agent not ready within 20 s: $(tail -3 "$TG_TMP/n$i/agent.log")"
	[ -x "$TG_TMP/n$i/bin/tollgate" ] || t_fail "node $i: plugin not installed"
done
t_end
for i in 1 2 3 4 5 6; do kill -0 "${AGENT_PID[$i]}" 2>/dev/null || tap_bail "node $i's agent exited: $(tail -5 "$TG_TMP/n$i/agent.log")"; done

# ---------------------------------------------------------------- pods
t_begin "a pod of namespace datasets on each of the six nodes, ADDed through the node's installed plugin"
for i in 1 2 3 4 5 6; do pod_up "$i"; done
for i in 1 2 3 4 5 6; do
	[ -n "${POD_IP[d$i]:-}" ] || continue
	[ -n "$(ns_classid "$i")" ] || t_fail "node $i: no namespace class for datasets in the store"
done
t_end
for i in 1 2 3 4 5 6; do [ -n "${POD_IP[d$i]:-}" ] || tap_bail "cannot continue without pod d$i"; done

# ---------------------------------------------------------------- phases
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
at_fallback() { [ "$(node_budget "$1" | cut -d' ' -f1)" = fallback ]; }
for i in 1 2 3 4 5 6; do wait_for 5 at_fallback "$i"; done
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
policy_put "$TG_TMP/allocator-policy.json" "$B_CONF" || tap_bail "cannot write the allocator's policy"
policy_put "$TG_TMP/allocator-policy-control.json" "$CONTROL_CONF" || tap_bail "cannot write the control policy"
ALLOC_PID=""
alloc_get() { timeout -k 1 5 ip netns exec "$ALLOC_NS" curl -s --max-time 2 "$ALLOC_URL$1"; }
alloc_up() { [ -n "$(alloc_get /metrics)" ]; }
alloc_start() { # POLICY
	daemon "$ALLOC_NS" "$ALLOC" --policy "$1" --insecure-no-auth --listen "$ALLOC_IP:$ALLOC_PORT" 2>>"$TG_TMP/allocator.log"
	ALLOC_PID=$!
	wait_for 10 alloc_up
}
USAGE='tollgate_allocator_usage_bytes_per_second{namespace="datasets",direction="egress"}'
ALLOC_GRANTED='tollgate_allocator_granted_bytes_per_second{namespace="datasets",direction="egress"}'
ALLOC_NODES='tollgate_allocator_nodes{namespace="datasets",direction="egress"}'

t_begin "the allocator starts, skewed demand (node1 heavy, nodes 2-6 light): every node within 10% of its max-min fair share of B within lease + 5 s"
ip netns exec "$FAB" nft delete table ip tgcut || t_fail "cannot reconnect the allocator"
alloc_start "$TG_TMP/allocator-policy.json" || t_fail "the allocator did not serve /metrics within 10 s: $(tail -3 "$TG_TMP/allocator.log")"
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
alloc_start "$TG_TMP/allocator-policy.json" || t_fail "the allocator did not serve /metrics within 10 s: $(tail -3 "$TG_TMP/allocator.log")"
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
[[ $line == *"datasets egress: granted "* ]] || t_fail "no 'budget ... datasets egress: granted' line: $(tr '\n' ' ' <<<"$r" | cut -c1-300)"
t_end

# ---------------------------------------------------------------- 7. control
t_begin "control: with the allocator granting all it is asked for, the same pods send more than 1.2 B"
stop_pid "$ALLOC_PID" TERM
ALLOC_PID=""
alloc_start "$TG_TMP/allocator-policy-control.json" || t_fail "the allocator did not serve /metrics within 10 s: $(tail -3 "$TG_TMP/allocator.log")"
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
