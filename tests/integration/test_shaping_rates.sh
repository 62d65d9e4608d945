#!/usr/bin/env bash
# Traffic shaping measured on the wire: each cap's accuracy (internet egress
# and ingress, Kubernetes egressRate/ingressRate), internal traffic at full
# speed beside a capped internet class, queueing delay under load, a cap that
# holds after the pod's own tc changes, pod annotations that lower a cap but
# never raise it, and the nesting and fairness of pod, namespace and node
# caps. What shaping makes and removes is test_shaping.sh; this suite is not
# run against the sanitizer build (TG_SAN_EXCLUDE in tests/run.sh): rates
# measured at ASan's speed mean nothing.
#
#   pods (one k8s namespace per case) -- tgX (HTB 1: to the pod; ingress ->
#        |                               mirred -> IFB tiX, HTB 1: from the pod)
#   node 10.0.0.1, uplink eth0 (clsact: internet traffic -> IFB tollgate-inet,
#   where HTB 1: node 1:1 -> namespace 1:<ns> -> pod 1:<pod> + bfifo;
#        |                      nft sets meta priority on internet-bound packets)
#   fabric -- peer 10.2.0.5 (internal: only Kubernetes limits apply)
#          -- inet 203.0.113.10 (internet: pods reach it masqueraded)
#
# Rates are IP bytes/s from the kernel's counters over the steady part of each
# run (HTB class bytes minus 14 bytes of Ethernet header per packet, or the
# accounting table's nft counters where no class exists). Beside each cap's
# own counter, the receiver's goodput over the same interval (TCP payload
# that reached the receiving namespace, counted there: sh_rx_setup) must match
# the cap once the headers each full-size segment carries on the wire are
# allowed for (sh_goodput_at_cap: 95.6% of the cap at MTU 1500). iperf3 runs
# last 4 s; servers start per run with -1 and are killed by PID
# (shaping_lib.sh).
#
# Standalone: CI=true TOLLGATE_BIN_DIR=build bash tests/integration/test_shaping_rates.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091,SC2034  # jq filters with $vars; associative arrays; SH_* read by shaping_lib.sh
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/shaping_lib.sh"
sh_start

# acc_report LABEL CONFIGURED_MBIT RATE GOODPUT WHERE (after sh_measure with one flow)
acc_report() {
	diag "$1: configured $2 Mbit/s, measured $3 Mbit/s IP ($5); receiver goodput ${SH_RXGOOD[0]:-?} Mbit/s over the same interval (exact cap: $(sh_goodput_at_cap "$2" "${SH_MSS[0]:-1448}") at MSS ${SH_MSS[0]:-?}), $4 over the whole run; ${SH_RETR[0]:-?} retransmitted segments"
}
# try2 LABEL CHECK COUNTERS FLOW...: sh_measure, then CHECK (a function that
# reads SH_RATE and prints why and fails when a bound is missed). The machine
# is shared with other suites: a miss is measured once more, and noted in
# RETRIED (listed at the end) so that it stays visible.
RETRIED=()
try2() {
	local label=$1 check=$2 why
	shift 2
	sh_measure "$@" || { t_fail "iperf3 did not start"; return 1; }
	why=$("$check") && return 0
	diag "$label: first attempt missed: $why (goodput ${SH_GOOD[*]}, retransmitted ${SH_RETR[*]}); measuring again"
	RETRIED+=("$label: $why")
	sh_measure "$@" || { t_fail "iperf3 did not start"; return 1; }
	why=$("$check") && return 0
	t_fail "$why (and on the first attempt)"
	return 1
}
# chk_goodput FLOW CAP_MBIT: the receiver's goodput of flow FLOW over the
# measured interval within 5% of what an exact cap lets through
chk_goodput() {
	local want
	want=$(sh_goodput_at_cap "$2" "${SH_MSS[$1]:-1448}")
	sh_within "${SH_RXGOOD[$1]}" "$want" 0.05 ||
		{ echo "receiver goodput ${SH_RXGOOD[$1]} Mbit/s, expected $want (cap $2 less headers at MSS ${SH_MSS[$1]:-?})"; return 1; }
}
# chk_cap: SH_RATE[0] within 5% of CAP_MBIT, and flow 0's receiver goodput
# within 5% of the goodput CAP_MBIT allows
CAP_MBIT=0
chk_cap() {
	local w=""
	sh_within "${SH_RATE[0]}" "$CAP_MBIT" 0.05 || w="measured ${SH_RATE[0]} Mbit/s, configured $CAP_MBIT"
	chk_goodput 0 "$CAP_MBIT" >/dev/null || w="${w:+$w; }$(chk_goodput 0 "$CAP_MBIT")"
	[ -z "$w" ] || { echo "$w"; return 1; }
}

# ============================================================ isolation
# First, on a node without any shaping: the unshaped figures (internal, and
# internet for the 1G precheck). Then a pod whose internet egress is capped
# at 100M sends to the peer (internal): the uplink's HTB must send it direct.
t_begin "isolation: with internet egress capped at 100M, pod -> peer (internal) keeps >= 0.9 x the unshaped throughput"
sect isolation
spod_ns plain plain '{}' || { tg_diag_last; tap_bail "ADD plain: rc=$TG_RC"; }
sh_measure "nft/ns_plain_egress_internet" "plain $INET 5201" || t_fail "iperf3 did not start"
U_NET=${SH_RATE[0]} U_NET_G=${SH_GOOD[0]}
diag "unshaped pod -> internet (node without shaping): $U_NET Mbit/s IP (nft), goodput $U_NET_G"
# iso_round: one unshaped figure (node without any qdisc on the uplink), then
# the capped pod's, each over 0.6..3.5 s of a 4 s run (multi-Gbit TCP ramps
# up in milliseconds). The machine is shared and these CPU-bound figures
# swing by 2x within seconds, so the two figures of one round, measured back
# to back, are compared with each other: never the best of one side against
# the best of the other, where one lucky unshaped run decides. On a miss up
# to four more rounds run; the best round's ratio is reported.
BEST_RATIO=0 BEST_ROUND=""
iso_round() {
	local SH_WARMUP=0.6 SH_WINDOW=2.9 unshaped capped ratio
	if [ "$1" -gt 1 ]; then
		# back to a node without shaping: the pod goes, and so does the
		# uplink's HTB root, which Tollgate leaves behind for future pods
		sdel iso || t_fail "DEL iso rc=$TG_RC $TG_OUT"
		ip netns exec "$TG_NODE" tc qdisc del dev eth0 clsact 2>/dev/null
		ip -n "$TG_NODE" link del "$UPQ" 2>/dev/null
	fi
	sh_measure "nft/ns_plain_egress_internal" "plain $PEER 5201" || t_fail "iperf3 did not start"
	unshaped=${SH_RATE[0]}
	diag "round $1: unshaped pod -> peer $unshaped Mbit/s IP (nft), goodput ${SH_GOOD[0]}"
	spod_ns iso iso '{"internetEgress": {"podDefault": "100M"}}' || { tg_diag_last; tap_bail "ADD iso: rc=$TG_RC"; }
	ISO_PC=$(sh_pod_class iso)
	[ -n "$ISO_PC" ] && [ "$(class_ceil "$UPQ" "$ISO_PC")" = 100Mbit ] ||
		t_fail "iso: no uplink class with ceil 100Mbit (class '$ISO_PC': $(class_line "$UPQ" "$ISO_PC"))"
	sh_measure "nft/ns_iso_egress_internal tc/$UPQ/$ISO_PC" "iso $PEER 5201" || t_fail "iperf3 did not start"
	capped=${SH_RATE[0]}
	sh_cmp "$unshaped" ">" 0 && ratio=$(awk -v a="$capped" -v b="$unshaped" 'BEGIN {printf "%.3f\n", a / b}') || ratio=0
	diag "round $1: capped pod -> peer $capped Mbit/s IP (nft), goodput ${SH_GOOD[0]} (its internet class saw ${SH_RATE[1]}): $ratio x the unshaped figure"
	sh_cmp "$ratio" ">" "$BEST_RATIO" && { BEST_RATIO=$ratio; BEST_ROUND="round $1: $capped of $unshaped Mbit/s"; }
	sh_cmp "${SH_RATE[1]}" "<" 1 || t_fail "internal traffic went through the pod's internet class (${SH_RATE[1]} Mbit/s)"
}
for round in 1 2 3 4 5; do
	iso_round "$round"
	sh_cmp "$BEST_RATIO" ">=" 0.9 && break
done
sh_cmp "$BEST_RATIO" ">=" 0.9 ||
	t_fail "internal throughput of the capped pod < 0.9 x the unshaped figure of the same round in all $round rounds (best $BEST_RATIO x, $BEST_ROUND)"
t_end

# ============================================================ latency
sect "latency"
t_begin "latency: RTT to the internet host while saturating a 100M internet cap is at most idle + 25 ms"
ip netns exec "$TG_ID-iso" ping -n -c 10 -i 0.1 -W 1 "$TG_INET_IP" >"$TG_TMP/ping-idle.txt" 2>&1
read -r IDLE_N IDLE_MIN IDLE_AVG IDLE_MED IDLE_MAX < <(ping_stats "$TG_TMP/ping-idle.txt")
SH_DURING="ip netns exec $TG_ID-iso ping -n -c 20 -i 0.1 -W 1 $TG_INET_IP >$TG_TMP/ping-load.txt 2>&1"
sh_measure "tc/$UPQ/$ISO_PC" "iso $INET 5201" || t_fail "iperf3 did not start"
SH_DURING=""
read -r LOAD_N LOAD_MIN LOAD_AVG LOAD_MED LOAD_MAX < <(ping_stats "$TG_TMP/ping-load.txt")
LIM=$(leaf_limit "$UPQ" "$ISO_PC")
diag "idle RTT: $IDLE_N replies, min/avg/median/max $IDLE_MIN/$IDLE_AVG/$IDLE_MED/$IDLE_MAX ms"
diag "loaded RTT: $LOAD_N/20 replies, min/avg/median/max $LOAD_MIN/$LOAD_AVG/$LOAD_MED/$LOAD_MAX ms"
diag "while the pod sent ${SH_RATE[0]} Mbit/s IP (goodput ${SH_GOOD[0]}); leaf bfifo limit $LIM (100M x 20 ms = 250000b)"
t_expect "leaf bfifo limit (queueLatencyMs 20 at 100M)" "$LIM" 250000b
sh_cmp "${SH_RATE[0]}" ">=" 90 || t_fail "the cap was not saturated (${SH_RATE[0]} Mbit/s): the RTT says nothing"
[ "$IDLE_N" -ge 5 ] || t_fail "idle ping: only $IDLE_N replies"
[ "$LOAD_N" -ge 10 ] || t_fail "loaded ping: only $LOAD_N of 20 replies"
sh_cmp "$LOAD_AVG" "<=" "$(awk -v a="$IDLE_AVG" 'BEGIN {print a + 25}')" ||
	t_fail "average RTT under load $LOAD_AVG ms > idle $IDLE_AVG ms + 25 ms"
t_end
sdel iso || t_fail "DEL iso rc=$TG_RC $TG_OUT"

# ============================================================ accuracy: internet egress
sect "accuracy: internet egress"
for R in 10M 100M 1G; do
	r=${R,,} mbit=${R%[MG]}
	[ "${R: -1}" = G ] && mbit=$((mbit * 1000))
	t_begin "accuracy: internet egress pod cap $R (pod -> $TG_INET_IP, masqueraded) within 5%"
	if [ "$R" = 1G ] && ! sh_cmp "$U_NET" ">=" 1200; then
		why="unshaped pod -> internet reaches only $U_NET Mbit/s IP (goodput $U_NET_G) on this machine, < 1.2 x 1000"
		if [ "${CI:-}" = true ]; then
			t_fail "cannot be measured (CI=true counts a skip as a failure): $why"
			t_end
		else
			echo "ok - $T_NAME # SKIP $why"
			T_NAME=""
		fi
		continue
	fi
	p=eg$r
	spod_ns "$p" "$p" "$(jq -nc --arg r "$R" '{internetEgress: {podDefault: $r}}')" || { t_fail "ADD rc=$TG_RC $TG_OUT"; t_end; continue; }
	pc=$(sh_pod_class "$p")
	t_expect "uplink class ceil" "$(class_ceil "$UPQ" "$pc")" "${R}bit"
	CAP_MBIT=$mbit
	try2 "internet egress $R" chk_cap "tc/$UPQ/$pc" "$p $INET 5201"
	acc_report "internet egress $R" "$mbit" "${SH_RATE[0]}" "${SH_GOOD[0]}" "uplink class $pc"
	sdel "$p" || t_fail "DEL rc=$TG_RC $TG_OUT"
	t_end
done

# ============================================================ accuracy: internet ingress
sect "accuracy: internet ingress"
for R in 10M 100M; do
	r=${R,,} mbit=${R%M}
	t_begin "accuracy: internet ingress pod cap $R (internet -> pod, iperf3 -R) within 5%"
	p=in$r
	spod_ns "$p" "$p" "$(jq -nc --arg r "$R" '{internetIngress: {podDefault: $r}}')" || { t_fail "ADD rc=$TG_RC $TG_OUT"; t_end; continue; }
	pc=$(sh_pod_class "$p")
	t_expect "download class $pc ceil on $DLQ" "$(class_ceil "$DLQ" "$pc")" "${mbit}Mbit"
	CAP_MBIT=$mbit
	try2 "internet ingress $R" chk_cap "tc/$DLQ/$pc" "$p $INET 5201 R"
	acc_report "internet ingress $R" "$mbit" "${SH_RATE[0]}" "${SH_GOOD[0]}" "the pod's class on $DLQ"
	sdel "$p" || t_fail "DEL rc=$TG_RC $TG_OUT"
	t_end
done

# ============================================================ accuracy: Kubernetes bandwidth
sect "accuracy: Kubernetes bandwidth"
# runtimeConfig.bandwidth as kubelet passes it (bits/s integers), pod <-> peer
# (internal): no internet cap is configured, so only the Kubernetes limit applies.
for R in 10M 100M; do
	r=${R,,} mbit=${R%M}
	p=k8s$r
	if ! spod_ns "$p" "$p" '{}' "$(jq -nc --argjson b "$((mbit * 1000000))" '{bandwidth: {ingressRate: $b, egressRate: $b}}')"; then
		tap_not_ok "accuracy: Kubernetes egressRate/ingressRate $R" "ADD rc=$TG_RC $TG_OUT"
		continue
	fi
	v=${POD_VETH[$p]} ifb=$(sh_ifb "${POD_VETH[$p]}")
	t_begin "accuracy: Kubernetes egressRate $R (pod -> peer, through the IFB) within 5%"
	t_expect "class 1:1 ceil on $ifb" "$(class_ceil "$ifb" 1:1)" "${mbit}Mbit"
	CAP_MBIT=$mbit
	try2 "k8s egressRate $R" chk_cap "tc/$ifb/1:1" "$p $PEER 5201"
	acc_report "k8s egressRate $R" "$mbit" "${SH_RATE[0]}" "${SH_GOOD[0]}" "class 1:1 on $ifb"
	t_end
	t_begin "accuracy: Kubernetes ingressRate $R (peer -> pod, iperf3 -R) within 5%"
	t_expect "class 1:1 ceil on $v" "$(class_ceil "$v" 1:1)" "${mbit}Mbit"
	CAP_MBIT=$mbit
	try2 "k8s ingressRate $R" chk_cap "tc/$v/1:1 tc/$v/1:3" "$p $PEER 5201 R"
	acc_report "k8s ingressRate $R" "$mbit" "${SH_RATE[0]}" "${SH_GOOD[0]}" "class 1:1 on the host veth; internal class 1:3 saw ${SH_RATE[1]}"
	t_end
	sdel "$p" || tap_not_ok "DEL $p" "rc=$TG_RC $TG_OUT"
done

# ============================================================ a pod cannot loosen its shaping
sect "pod cannot loosen"
t_begin "a pod cannot loosen its shaping: after tc changes inside the pod its 50M cap holds"
if spod_ns loose loose '{"internetEgress": {"podDefault": "50M"}}' '{"bandwidth": {"egressRate": 80000000}}'; then
	pc=$(sh_pod_class loose)
	sh_pod_tamper loose
	CAP_MBIT=50
	try2 "internet egress 50M after the pod's tc changes" chk_cap "tc/$UPQ/$pc" "loose $INET 5201"
	acc_report "internet egress 50M after the pod's tc changes" 50 "${SH_RATE[0]}" "${SH_GOOD[0]}" "uplink class $pc"
	sdel loose || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

sdel plain || tap_not_ok "DEL plain" "rc=$TG_RC $TG_OUT"

# ============================================================ annotations only lower
sect "annotations only lower"
# A tenant writes its pod's annotations: they may lower its internet caps,
# never raise them. Under 5M caps (egress podDefault; ingress the namespace's
# entry, podDefault being 100M) pod "ahi" asks for 32G each way and must stay
# at 5M; pod "alo" asks for 2M and gets 2M. The two pods send together, one
# run per direction (both directions of one pod at once would queue each
# flow's ACKs behind the other's data). At 2M a loss costs TCP a round trip
# through up to 786 ms of queue (the 192 KiB floor), so these runs last 5 s
# and are measured over 2.3..4.7 s.
AN_SH='{"internetEgress": {"podDefault": "5M"}, "internetIngress": {"podDefault": "5M"}}'
an_rc() { jq -nc --arg r "$1" '{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-egress-bandwidth": $r, "tollgate.io/internet-ingress-bandwidth": $r}}'; }
# chk_annot: counter/flow 0 is the 32G pod's, 1 the 2M pod's
chk_annot() {
	local w=""
	sh_cmp "${SH_RATE[0]}" "<=" 5.5 && sh_cmp "${SH_RATE[0]}" ">=" 4.5 ||
		w="32G: class ${SH_RATE[0]} Mbit/s, expected 4.5..5.5 (the 5M cap)"
	sh_cmp "${SH_RXGOOD[0]}" "<=" 5.5 || w="${w:+$w; }32G: receiver goodput ${SH_RXGOOD[0]} Mbit/s > 5.5"
	sh_within "${SH_RATE[1]}" 2 0.10 || w="${w:+$w; }2M: class ${SH_RATE[1]} Mbit/s, expected 2 +- 10%"
	sh_cmp "${SH_RXGOOD[1]}" "<=" 2.2 || w="${w:+$w; }2M: receiver goodput ${SH_RXGOOD[1]} Mbit/s > 2.2"
	[ -z "$w" ] || { echo "$w"; return 1; }
}
an_try() { local SH_DURATION=5 SH_WARMUP=2.3 SH_WINDOW=2.4; try2 "$@"; }
an_report() {
	diag "$1: 32G pod ${SH_RATE[0]} Mbit/s IP (receiver goodput ${SH_RXGOOD[0]}, ${SH_RETR[0]} retransmitted), 2M pod ${SH_RATE[1]} Mbit/s IP (receiver goodput ${SH_RXGOOD[1]}, exact cap $(sh_goodput_at_cap 2 "${SH_MSS[1]:-1448}"); ${SH_RETR[1]} retransmitted)"
}
t_begin "annotations only lower: ADD of pods annotated 32G and 2M under 5M caps; class ceilings 5M and 2M"
AN_OK=0
if spod_ns ahi annot "$AN_SH" "$(an_rc 32G)" && spod_ns alo annot "$AN_SH" "$(an_rc 2M)"; then
	hpc=$(sh_pod_class ahi) lpc=$(sh_pod_class alo)
	t_expect "32G: uplink class ceil" "$(class_ceil "$UPQ" "$hpc")" 5Mbit
	t_expect "32G: download class ceil" "$(class_ceil "$DLQ" "$hpc")" 5Mbit
	t_expect "2M: uplink class ceil" "$(class_ceil "$UPQ" "$lpc")" 2Mbit
	t_expect "2M: download class ceil" "$(class_ceil "$DLQ" "$lpc")" 2Mbit
	AN_OK=1
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end
for d in egress ingress; do
	t_begin "annotations only lower, internet $d: 32G under a 5M cap <= 5.5 Mbit/s, 2M gives 2 Mbit/s +- 10%"
	if [ "$AN_OK" = 1 ]; then
		if [ "$d" = egress ]; then
			an_try "annotations, egress" chk_annot "tc/$UPQ/$hpc tc/$UPQ/$lpc" "ahi $INET 5201" "alo $INET 5202"
		else
			an_try "annotations, ingress" chk_annot "tc/$DLQ/$hpc tc/$DLQ/$lpc" "ahi $INET 5201 R" "alo $INET 5202 R"
		fi
		an_report "internet $d"
	else
		t_fail "no pods"
	fi
	t_end
done
for p in ahi alo; do [ -n "${POD_IP[$p]:-}" ] && { sdel "$p" || tap_not_ok "DEL $p" "rc=$TG_RC $TG_OUT"; }; done

# ============================================================ nesting and fairness
sect "nesting and fairness"
# A fresh node: namespace "nsa" capped at 200M (pods 1G each), namespace
# "nsb" at the namespaceDefault 150M; no node cap at first, then 300M.
topo_down
topo_up || tap_bail "could not rebuild the topology"
NEST_SH='{"internetEgress": {"namespaceDefault": "150M", "podDefault": "1G", "namespaces": {"nsa": "200M"}}}'
NEST_SH_NODE='{"internetEgress": {"node": "300M", "namespaceDefault": "150M", "podDefault": "1G", "namespaces": {"nsa": "200M"}}}'
t_begin "nesting: setup (nsa: a1, a2; nsb: b1)"
spod_ns a1 nsa "$NEST_SH" && spod_ns a2 nsa "$NEST_SH" && spod_ns b1 nsb "$NEST_SH" || { tg_diag_last; tap_bail "ADD rc=$TG_RC $TG_OUT"; }
t_expect "nsa class ceil" "$(class_ceil "$UPQ" "$(sh_ns_class a1)")" 200Mbit
t_expect "nsb class ceil" "$(class_ceil "$UPQ" "$(sh_ns_class b1)")" 150Mbit
t_end
CA1=tc/$UPQ/$(sh_pod_class a1) CA2=tc/$UPQ/$(sh_pod_class a2) CB1=tc/$UPQ/$(sh_pod_class b1)
CNA=tc/$UPQ/$(sh_ns_class a1) CNB=tc/$UPQ/$(sh_ns_class b1)

t_begin "nesting: one pod of a 200M namespace alone gets >= 180 Mbit/s"
chk_alone() {
	sh_cmp "${SH_RATE[0]}" ">=" 180 || { echo "a1 got ${SH_RATE[0]} Mbit/s"; return 1; }
	sh_cmp "${SH_RATE[1]}" "<=" 210 || { echo "namespace class ${SH_RATE[1]} Mbit/s > 200 x 1.05"; return 1; }
}
try2 "a1 alone" chk_alone "$CA1 $CNA" "a1 $INET 5201"
diag "a1 alone: ${SH_RATE[0]} Mbit/s IP (goodput ${SH_GOOD[0]}); namespace class ${SH_RATE[1]}"
t_end

t_begin "fairness: two pods of the 200M namespace sending together get 100 +- 20 Mbit/s each"
chk_two() {
	local w=""
	sh_within "${SH_RATE[0]}" 100 0.2 || w="a1 got ${SH_RATE[0]} Mbit/s"
	sh_within "${SH_RATE[1]}" 100 0.2 || w="${w:+$w; }a2 got ${SH_RATE[1]} Mbit/s"
	sh_cmp "${SH_RATE[2]}" "<=" 210 || w="${w:+$w; }namespace class ${SH_RATE[2]} Mbit/s > 200 x 1.05"
	[ -z "$w" ] || { echo "$w"; return 1; }
}
try2 "a1 + a2" chk_two "$CA1 $CA2 $CNA" "a1 $INET 5201" "a2 $INET 5202"
diag "a1 ${SH_RATE[0]}, a2 ${SH_RATE[1]} Mbit/s IP (goodput ${SH_GOOD[0]}, ${SH_GOOD[1]}); namespace class ${SH_RATE[2]}"
t_end

t_begin "nesting: meanwhile a pod of a second namespace (150M) gets its cap (and its receiver the goodput of it)"
chk_three() {
	local w=""
	sh_within "${SH_RATE[2]}" 150 0.05 || w="b1 got ${SH_RATE[2]} Mbit/s, cap 150"
	chk_goodput 2 150 >/dev/null || w="${w:+$w; }b1: $(chk_goodput 2 150)"
	sh_within "${SH_RATE[0]}" 100 0.2 || w="${w:+$w; }a1 got ${SH_RATE[0]} Mbit/s"
	sh_within "${SH_RATE[1]}" 100 0.2 || w="${w:+$w; }a2 got ${SH_RATE[1]} Mbit/s"
	[ -z "$w" ] || { echo "$w"; return 1; }
}
try2 "a1 + a2 + b1" chk_three "$CA1 $CA2 $CB1 $CNA $CNB" "a1 $INET 5201" "a2 $INET 5202" "b1 $INET 5203"
diag "a1 ${SH_RATE[0]}, a2 ${SH_RATE[1]}, b1 ${SH_RATE[2]} Mbit/s IP (goodput ${SH_GOOD[0]}, ${SH_GOOD[1]}, ${SH_GOOD[2]}); nsa ${SH_RATE[3]}, nsb ${SH_RATE[4]}"
t_end

t_begin "nesting: with a node cap of 300M the sum of all pods stays <= 315 Mbit/s"
for p in a1 a2 b1; do sdel "$p" || t_fail "DEL $p rc=$TG_RC"; done
chk_node() {
	local sum
	sum=$(awk -v a="${SH_RATE[0]}" -v b="${SH_RATE[1]}" -v c="${SH_RATE[2]}" 'BEGIN {printf "%.1f", a + b + c}')
	sh_cmp "$sum" "<=" 315 || { echo "sum of the pods $sum Mbit/s > 300 x 1.05"; return 1; }
	sh_cmp "${SH_RATE[3]}" "<=" 315 || { echo "node class ${SH_RATE[3]} Mbit/s > 300 x 1.05"; return 1; }
	sh_cmp "$sum" ">=" 270 || { echo "sum $sum Mbit/s: the node's 300M are not used (work conservation)"; return 1; }
}
if spod_ns a1 nsa "$NEST_SH_NODE" && spod_ns a2 nsa "$NEST_SH_NODE" && spod_ns b1 nsb "$NEST_SH_NODE"; then
	t_expect "node class 1:1 ceil" "$(class_ceil "$UPQ" 1:1)" 300Mbit
	try2 "node cap 300M" chk_node "tc/$UPQ/$(sh_pod_class a1) tc/$UPQ/$(sh_pod_class a2) tc/$UPQ/$(sh_pod_class b1) tc/$UPQ/1:1" \
		"a1 $INET 5201" "a2 $INET 5202" "b1 $INET 5203"
	diag "a1 ${SH_RATE[0]}, a2 ${SH_RATE[1]}, b1 ${SH_RATE[2]} Mbit/s IP (goodput ${SH_GOOD[0]}, ${SH_GOOD[1]}, ${SH_GOOD[2]}); node class 1:1 ${SH_RATE[3]}"
	for p in a1 a2 b1; do sdel "$p" || t_fail "DEL $p rc=$TG_RC"; done
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "after all DELs: no tg/ti link, no attachment, and $UPQ holds only the node class 1:1"
sh_node_clean
t_end

for r in "${RETRIED[@]}"; do diag "missed on the first attempt (passed or failed on the second, see above): $r"; done
diag "duration: $((SECONDS - T_START)) s"
tap_done
