#!/usr/bin/env bash
# Traffic shaping: caps measured on the wire, their nesting and fairness,
# queueing delay under load, the runtime's spellings and the pod annotations,
# bad input, DEL/CHECK of every tc object, and a pod that tries to loosen its
# own shaping.
#
#   pods (one k8s namespace per case) -- tgX (HTB 1: to the pod; ingress ->
#        |                               mirred -> IFB tiX, HTB 1: from the pod)
#   node 10.0.0.1, uplink eth0 (clsact: internet traffic -> IFB tollgate-inet,
#   where HTB 1: node 1:1 -> namespace -> pod + bfifo;
#        |                      nft sets meta priority on internet-bound packets)
#   fabric -- peer 10.2.0.5 (internal: only Kubernetes limits apply)
#          -- inet 203.0.113.10 (internet: pods reach it masqueraded)
#
# Rates are IP bytes/s from the kernel's counters over the steady part of each
# run (HTB class bytes minus 14 bytes of Ethernet header per packet, or the
# accounting table's nft counters where no class exists); iperf3's TCP
# goodput is printed next to them. iperf3 runs last 4 s; servers start per
# run with -1 and are killed by PID (shaping_lib.sh).
#
# Standalone: CI=true TOLLGATE_BIN_DIR=build bash tests/integration/test_shaping.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091,SC2034  # jq filters with $vars; associative arrays; SH_* read by shaping_lib.sh
set -u
. "$(dirname "$0")/lib.sh"
UPQ=tollgate-inet # where the internet egress classes live (shaper.h)
. "$(dirname "$0")/shaping_lib.sh"
tg_require
for t in iperf3 tc ss; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
sh_traps
T_START=$SECONDS
t_begin topology
topo_up || tap_bail "could not build the namespace topology"

CAPS='{"bandwidth": true, "io.kubernetes.cri.pod-annotations": true}'
# sconf SHAPING [RUNTIMECONFIG]: the network config with this shaping block
# (JSON) and runtimeConfig (JSON, as libcni passes it)
sconf() {
	tg_conf '.capabilities = $c | .shaping = $s | .runtimeConfig = $r' \
		--argjson c "$CAPS" --argjson s "${1:-"{}"}" --argjson r "${2:-"{}"}"
}
declare -A POD_CONF=()
# spod POD NAMESPACE SHAPING [RUNTIMECONFIG]: ADD, remembering the config
spod() {
	POD_CONF[$1]=$(sconf "${3:-"{}"}" "${4:-"{}"}")
	pod_add "$1" "$2" "${POD_CONF[$1]}"
}
# sdel POD: DEL with the pod's own config and namespace
sdel() { tg_run DEL "${POD_CID[$1]}" eth0 "${POD_NETNS[$1]:-}" "$(k8s_args "${POD_NS[$1]:-default}" "$1" "${POD_CID[$1]}")" <<<"${POD_CONF[$1]}"; }
declare -A POD_NS=()
spod_ns() { POD_NS[$1]=$2; spod "$@"; }
# scheck POD: CHECK with prevResult, as a conflist sends it
scheck() {
	local c
	c=$(jq -c --argjson p "${POD_RESULT[$1]}" '.prevResult = $p' <<<"${POD_CONF[$1]}")
	tg_run CHECK "${POD_CID[$1]}" eth0 "${POD_NETNS[$1]}" "$(k8s_args "${POD_NS[$1]}" "$1" "${POD_CID[$1]}")" <<<"$c"
}
class_line() { ip netns exec "$TG_NODE" tc class show dev "$1" classid "$2" 2>/dev/null; }
class_ceil() { class_line "$1" "$2" | sed -nE 's/.* ceil ([0-9.]+[KMG]?bit).*/\1/p'; }
leaf_limit() { ip netns exec "$TG_NODE" tc qdisc show dev "$1" parent "$2" 2>/dev/null | sed -nE 's/^qdisc bfifo .* limit ([0-9]+[KMG]?b).*/\1/p'; }
link_exists() { ip -n "$TG_NODE" link show "$1" >/dev/null 2>&1; }
egress_map_has() { ip netns exec "$TG_NODE" nft list map inet tollgate egress_class 2>/dev/null | grep -qw -- "$1"; }
# acc_report LABEL CONFIGURED_MBIT RATE GOODPUT WHERE (after sh_measure with one flow)
acc_report() { diag "$1: configured $2 Mbit/s, measured $3 Mbit/s IP ($5), TCP goodput $4 Mbit/s, ${SH_RETR[0]:-?} retransmitted segments"; }
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
# chk_cap: SH_RATE[0] within 5% of CAP_MBIT
CAP_MBIT=0
chk_cap() { sh_within "${SH_RATE[0]}" "$CAP_MBIT" 0.05 || { echo "measured ${SH_RATE[0]} Mbit/s, configured $CAP_MBIT"; return 1; }; }
# sect NAME: elapsed time, for the log
sect() { diag "[$((SECONDS - T_START)) s] $*"; }
# ping_stats FILE: "n min avg median max" of the replies' RTTs (ms)
ping_stats() {
	sed -nE 's/.* time=([0-9.]+) ms.*/\1/p' "$1" | sort -n | awk '
		{ v[NR] = $1; s += $1 }
		END { if (NR == 0) { print "0 NA NA NA NA"; exit }
		      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      printf "%d %.2f %.2f %.2f %.2f\n", NR, v[1], s / NR, m, v[NR] }'
}

PEER="$TG_PEER $TG_PEER_POD_IP"
INET="$TG_INET $TG_INET_IP"

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
# swing by 2x within seconds, so on a miss up to two more rounds run and the
# best of each side is compared.
U_BEST=0 S_BEST=0
iso_round() {
	local SH_WARMUP=0.6 SH_WINDOW=2.9
	if [ "$1" -gt 1 ]; then
		# back to a node without shaping: the pod goes, and so does the
		# uplink's HTB root, which Tollgate leaves behind for future pods
		sdel iso || t_fail "DEL iso rc=$TG_RC $TG_OUT"
		ip netns exec "$TG_NODE" tc qdisc del dev eth0 clsact 2>/dev/null
		ip -n "$TG_NODE" link del "$UPQ" 2>/dev/null
	fi
	sh_measure "nft/ns_plain_egress_internal" "plain $PEER 5201" || t_fail "iperf3 did not start"
	diag "round $1: unshaped pod -> peer ${SH_RATE[0]} Mbit/s IP (nft), goodput ${SH_GOOD[0]}"
	sh_cmp "${SH_RATE[0]}" ">" "$U_BEST" && U_BEST=${SH_RATE[0]}
	spod_ns iso iso '{"internetEgress": {"podDefault": "100M"}}' || { tg_diag_last; tap_bail "ADD iso: rc=$TG_RC"; }
	ISO_PC=$(sh_pod_class iso)
	[ -n "$ISO_PC" ] && [ "$(class_ceil "$UPQ" "$ISO_PC")" = 100Mbit ] ||
		t_fail "iso: no uplink class with ceil 100Mbit (class '$ISO_PC': $(class_line "$UPQ" "$ISO_PC"))"
	sh_measure "nft/ns_iso_egress_internal tc/$UPQ/$ISO_PC" "iso $PEER 5201" || t_fail "iperf3 did not start"
	diag "round $1: capped pod -> peer ${SH_RATE[0]} Mbit/s IP (nft), goodput ${SH_GOOD[0]} (its internet class saw ${SH_RATE[1]})"
	sh_cmp "${SH_RATE[0]}" ">" "$S_BEST" && S_BEST=${SH_RATE[0]}
	sh_cmp "${SH_RATE[1]}" "<" 1 || t_fail "internal traffic went through the pod's internet class (${SH_RATE[1]} Mbit/s)"
}
for round in 1 2 3; do
	iso_round "$round"
	sh_cmp "$S_BEST" ">=" "$(sh_mul "$U_BEST" 0.9)" && break
done
sh_cmp "$S_BEST" ">=" "$(sh_mul "$U_BEST" 0.9)" ||
	t_fail "internal throughput of the capped pod (best $S_BEST Mbit/s) < 0.9 x unshaped (best $U_BEST Mbit/s)"
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
	v=${POD_VETH[$p]}
	t_expect "class 1:2 ceil on $v" "$(class_ceil "$v" 1:2)" "${mbit}Mbit"
	CAP_MBIT=$mbit
	try2 "internet ingress $R" chk_cap "tc/$v/1:2" "$p $INET 5201 R"
	acc_report "internet ingress $R" "$mbit" "${SH_RATE[0]}" "${SH_GOOD[0]}" "class 1:2 on the host veth"
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
t_begin "a pod cannot loosen its shaping (tc inside the pod changes nothing on the host; the 50M cap holds)"
if spod_ns loose loose '{"internetEgress": {"podDefault": "50M"}}' '{"bandwidth": {"egressRate": 80000000}}'; then
	pc=$(sh_pod_class loose)
	before=$(sh_tc_snapshot)
	pns=$TG_ID-loose
	out=$(ip netns exec "$pns" tc qdisc del dev eth0 root 2>&1)
	diag "in the pod: tc qdisc del dev eth0 root -> rc $? ${out:+($out)}"
	out=$(ip netns exec "$pns" tc qdisc add dev eth0 root handle 1: htb default 1 2>&1 &&
		ip netns exec "$pns" tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit 2>&1)
	diag "in the pod: tc qdisc add dev eth0 root handle 1: htb + class 1:1 rate 10gbit -> rc $? ${out:+($out)}"
	ip netns exec "$pns" tc qdisc del dev eth0 ingress >/dev/null 2>&1
	d=$(snap_diff "$before" "$(sh_tc_snapshot)")
	[ -z "$d" ] || { t_fail "host-side tc objects changed"; diag "$d"; }
	CAP_MBIT=50
	try2 "internet egress 50M after the pod's tc changes" chk_cap "tc/$UPQ/$pc" "loose $INET 5201"
	acc_report "internet egress 50M after the pod's tc changes" 50 "${SH_RATE[0]}" "${SH_GOOD[0]}" "uplink class $pc"
	sdel loose || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ containerd spellings
sect "spellings and annotations"
# kubelet/CRI-O spell the keys in lowerCamelCase; containerd (go-cni) in
# UpperCamelCase and sends burst 4294967295 ("unset"). All three must install
# the same classes.
t_begin "containerd spellings: capitalised keys with IngressBurst/EgressBurst 4294967295 apply the same classes as lowercase"
declare -A SP_CLS=() SP_IFB=() SP_Q=() SP_ST=()
ok=1
for s in cap:'{"bandwidth": {"IngressRate": 20000000, "IngressBurst": 4294967295, "EgressRate": 30000000, "EgressBurst": 4294967295}}' \
	low:'{"bandwidth": {"ingressRate": 20000000, "ingressBurst": 4294967295, "egressRate": 30000000, "egressBurst": 4294967295}}' \
	nob:'{"bandwidth": {"ingressRate": 20000000, "egressRate": 30000000}}'; do
	k=${s%%:*} rc=${s#*:} p=spell${s%%:*}
	if spod_ns "$p" spelling '{}' "$rc"; then
		v=${POD_VETH[$p]}
		SP_CLS[$k]=$(sh_tc_classes "$v")
		SP_IFB[$k]=$(sh_tc_classes "$(sh_ifb "$v")")
		# the qdiscs' settings, not their statistics: a packet that reached the new veth
		# while its classes were being made went direct (direct_packets_stat)
		SP_Q[$k]=$(ip netns exec "$TG_NODE" tc qdisc show dev "$v" |
			sed -E 's/^qdisc (bfifo|htb) [0-9a-f]+:/qdisc \1 X:/; s/direct_packets_stat [0-9]+/direct_packets_stat N/' | sort)
		SP_ST[$k]=$(sh_att_shaping "$p" | jq -c '{ingressRate, egressRate, ingressBurst, egressBurst}')
	else
		t_fail "ADD ($k) rc=$TG_RC $TG_OUT"
		ok=0
	fi
done
if [ "$ok" = 1 ]; then
	for k in cap low; do
		[ "${SP_CLS[$k]}" = "${SP_CLS[nob]}" ] || { t_fail "$k: host veth classes differ from lowercase without burst"; diag "$k: ${SP_CLS[$k]}" "nob: ${SP_CLS[nob]}"; }
		[ "${SP_IFB[$k]}" = "${SP_IFB[nob]}" ] || { t_fail "$k: IFB classes differ"; diag "$k: ${SP_IFB[$k]}" "nob: ${SP_IFB[nob]}"; }
		[ "${SP_Q[$k]}" = "${SP_Q[nob]}" ] || { t_fail "$k: host veth qdiscs differ"; diag "$k: ${SP_Q[$k]}" "nob: ${SP_Q[nob]}"; }
		[ "${SP_ST[$k]}" = "${SP_ST[nob]}" ] || t_fail "$k: state.json shaping ${SP_ST[$k]} != ${SP_ST[nob]}"
	done
	grep -q '^class htb 1:1 root .*ceil 20Mbit' <<<"${SP_CLS[cap]}" || t_fail "no class 1:1 ceil 20Mbit on the host veth: ${SP_CLS[cap]}"
	grep -q '^class htb 1:1 root .*ceil 30Mbit' <<<"${SP_IFB[cap]}" || t_fail "no class 1:1 ceil 30Mbit on the IFB: ${SP_IFB[cap]}"
	# 4294967295 is "unset": the burst comes from the rate, far below 512 MiB
	big=$(printf '%s\n%s\n' "${SP_CLS[cap]}" "${SP_IFB[cap]}" | grep -oE 'c?burst [0-9.]+[KMG]?b' | awk '
		{ v = $2 + 0; if ($2 ~ /Kb$/) v *= 1024; if ($2 ~ /Mb$/) v *= 1048576; if ($2 ~ /Gb$/) v *= 1073741824
		  if (v > 1000000) printf "%s %s; ", $1, $2 }')
	[ -z "$big" ] || t_fail "bursts above 1 MB with IngressBurst/EgressBurst 4294967295 ('unset'): $big"
	diag "capitalised: $(tr '\n' ' ' <<<"${SP_CLS[cap]}")| IFB: ${SP_IFB[cap]}"
fi
t_end
for p in spellcap spelllow spellnob; do [ -n "${POD_CID[$p]:-}" ] && sdel "$p"; done

# containerd sends the whole struct: with only kubernetes.io/egress-bandwidth
# set, IngressRate and IngressBurst arrive as 0 (go-cni BandWidth has no
# omitempty). The Go bandwidth plugin takes rate 0 / burst 0 as "no limit".
t_begin "containerd form with one annotation: IngressRate 0 / IngressBurst 0 means no ingress limit"
if spod_ns spellone spelling '{}' '{"bandwidth": {"IngressRate": 0, "IngressBurst": 0, "EgressRate": 30000000, "EgressBurst": 4294967295}}'; then
	v=${POD_VETH[spellone]}
	t_expect "IFB class 1:1 ceil" "$(class_ceil "$(sh_ifb "$v")" 1:1)" 30Mbit
	t_expect "classes on the host veth (no ingress limit)" "$(sh_tc_classes "$v" | tr '\n' ' ')" ""
	sdel spellone || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD refused the containerd form: rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ annotations
t_begin "pod annotations override podDefault (internet egress 50M, ingress 20M)"
AN_SH='{"internetEgress": {"podDefault": "100M"}, "internetIngress": {"podDefault": "100M"}}'
AN_RC='{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-egress-bandwidth": "50M", "tollgate.io/internet-ingress-bandwidth": "20M", "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\"}"}}'
if spod_ns annot annot "$AN_SH" "$AN_RC" && spod_ns plainannot annot "$AN_SH"; then
	t_expect "annotated pod: uplink class ceil" "$(class_ceil "$UPQ" "$(sh_pod_class annot)")" 50Mbit
	t_expect "annotated pod: leaf bfifo limit (50M x 20 ms = 125000b, raised to the 192 KiB floor)" "$(leaf_limit "$UPQ" "$(sh_pod_class annot)")" 192Kb
	t_expect "annotated pod: class 1:2 ceil on the host veth" "$(class_ceil "${POD_VETH[annot]}" 1:2)" 20Mbit
	t_expect "annotated pod: state internetEgress" "$(sh_att_shaping annot | jq '.internetEgress')" 50000000
	t_expect "pod without annotation: uplink class ceil" "$(class_ceil "$UPQ" "$(sh_pod_class plainannot)")" 100Mbit
	t_expect "pod without annotation: class 1:2 ceil" "$(class_ceil "${POD_VETH[plainannot]}" 1:2)" 100Mbit
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ DEL removes everything
sect "DEL and CHECK"
FULL_SH='{"internetEgress": {"podDefault": "100M", "namespaceDefault": "200M"}, "internetIngress": {"podDefault": "100M"}}'
FULL_RC='{"bandwidth": {"ingressRate": 50000000, "egressRate": 50000000}}'
t_begin "DEL removes the pod's classes, bfifo, IFB and map entry; the namespace class goes with its last pod"
if spod_ns gone1 gone "$FULL_SH" "$FULL_RC" && spod_ns gone2 gone "$FULL_SH" "$FULL_RC"; then
	pc1=$(sh_pod_class gone1) pc2=$(sh_pod_class gone2) nc=$(sh_ns_class gone1)
	v1=${POD_VETH[gone1]} v2=${POD_VETH[gone2]} f1=$(sh_ifb "${POD_VETH[gone1]}") f2=$(sh_ifb "${POD_VETH[gone2]}")
	t_expect "both pods share the namespace class" "$(sh_ns_class gone2)" "$nc"
	for o in "$pc1" "$pc2" "$nc"; do [ -n "$(class_line "$UPQ" "$o")" ] || t_fail "class $o missing after ADD"; done
	link_exists "$f1" && link_exists "$f2" || t_fail "IFBs missing after ADD"
	scheck gone1 || t_fail "CHECK gone1 rc=$TG_RC $TG_OUT"
	sdel gone1 || t_fail "DEL gone1 rc=$TG_RC $TG_OUT"
	[ -z "$(class_line "$UPQ" "$pc1")" ] || t_fail "class $pc1 of gone1 still on the uplink"
	[ -z "$(leaf_limit "$UPQ" "$pc1")" ] || t_fail "bfifo of $pc1 still on the uplink"
	[ -n "$(class_line "$UPQ" "$nc")" ] || t_fail "namespace class $nc removed although gone2 still uses it"
	[ -n "$(class_line "$UPQ" "$pc2")" ] || t_fail "class $pc2 of gone2 removed by DEL of gone1"
	link_exists "$f1" && t_fail "IFB $f1 still exists"
	link_exists "$v1" && t_fail "veth $v1 still exists"
	egress_map_has "${POD_IP[gone1]}" && t_fail "${POD_IP[gone1]} still in map egress_class"
	scheck gone2 || t_fail "CHECK gone2 after DEL gone1 rc=$TG_RC $TG_OUT"
	sdel gone2 || t_fail "DEL gone2 rc=$TG_RC $TG_OUT"
	[ -z "$(class_line "$UPQ" "$pc2")" ] || t_fail "class $pc2 of gone2 still on the uplink"
	[ -z "$(class_line "$UPQ" "$nc")" ] || t_fail "namespace class $nc still on the uplink after its last pod"
	link_exists "$f2" && t_fail "IFB $f2 still exists"
	link_exists "$v2" && t_fail "veth $v2 still exists"
	egress_map_has "${POD_IP[gone2]}" && t_fail "${POD_IP[gone2]} still in map egress_class"
	left=$(ip netns exec "$TG_NODE" tc filter show dev eth0 2>/dev/null)
	[ -z "$left" ] || t_fail "filters on the uplink: $left"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ CHECK
t_begin "CHECK passes on a shaped pod and reports code 100 after 'tc class del' of its uplink class"
if spod_ns drift1 drift "$FULL_SH" "$FULL_RC"; then
	scheck drift1 || t_fail "CHECK before the change rc=$TG_RC $TG_OUT"
	ip netns exec "$TG_NODE" tc class del dev "$UPQ" classid "$(sh_pod_class drift1)" || t_fail "tc class del failed"
	scheck drift1
	r=$(cni_error_problem 100)
	[ -z "$r" ] || t_fail "CHECK after tc class del: $r"
	sdel drift1 || t_fail "DEL after the class was deleted: rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "CHECK reports code 100 after 'ip link del' of the pod's IFB"
if spod_ns drift2 drift "$FULL_SH" "$FULL_RC"; then
	scheck drift2 || t_fail "CHECK before the change rc=$TG_RC $TG_OUT"
	ip -n "$TG_NODE" link del "$(sh_ifb "${POD_VETH[drift2]}")" || t_fail "ip link del failed"
	scheck drift2
	r=$(cni_error_problem 100)
	[ -z "$r" ] || t_fail "CHECK after ip link del of the IFB: $r"
	sdel drift2 || t_fail "DEL after the IFB was deleted: rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "CHECK reports code 100 when the uplink class's ceiling was changed (100Mbit -> 10Gbit)"
if spod_ns drift3 drift "$FULL_SH" "$FULL_RC"; then
	pc=$(sh_pod_class drift3) nc=$(sh_ns_class drift3)
	ip netns exec "$TG_NODE" tc class change dev "$UPQ" parent "$nc" classid "$pc" htb rate 1Mbit ceil 10Gbit ||
		t_fail "tc class change failed"
	diag "after the change: $(class_line "$UPQ" "$pc")"
	scheck drift3
	r=$(cni_error_problem 100)
	[ -z "$r" ] || t_fail "CHECK after the change: $r"
	sdel drift3 || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ bad input
sect "bad input"
# Each case is an ADD of pod "bad" with one invalid value: code 7, a message
# naming the key. The pod netns (must stay empty) and the node (links,
# addresses, routes, nft ruleset, state, every qdisc/class/filter) are
# compared with a snapshot after each group of cases (a snapshot per case
# costs ~0.5 s on a busy 2-core machine); a group that changed the node is
# replayed case by case to name the culprit. The shaped pods "annot" and "plainannot" stay
# attached meanwhile.
pod_ns_add bad || tap_bail "netns bad"
BAD_CID=$(cid_for bad)
BAD_ARGS=$(k8s_args badns bad "$BAD_CID")
BAD_BASE=$(sconf '{}')
bad_snap() { tg_snapshot; echo "## tc"; sh_tc_snapshot; }
BASELINE=$(bad_snap)
BAD_GROUP=()
# bad_case NAME KEYWORD SHAPING RUNTIMECONFIG: one case (KEYWORD must appear
# in msg or details); the case is remembered for the group's snapshot check
bad_case() {
	local name=$1 word=$2 r
	BAD_GROUP+=("$3"$'\t'"$4")
	t_begin "bad input: $name -> code 7"
	bad_run "$3" "$4" || { t_fail "test bug: bad JSON"; t_end; return; }
	# one jq: exit status 1 and exactly one error object with code 7 whose
	# msg or details name the key
	r=$(jq -rs --arg w "$word" '
		if length != 1 or (.[0] | type) != "object" then "stdout holds \(length) JSON values, expected one error object"
		elif .[0].code != 7 then "code \(.[0].code), expected 7"
		elif (.[0].msg | type) != "string" or (.[0].cniVersion | type) != "string" then "not an error object {cniVersion,code,msg}"
		elif ("\(.[0].msg) \(.[0].details // "")" | ascii_downcase | contains($w | ascii_downcase) | not)
			then "message does not name \($w)"
		else "" end' <<<"$TG_OUT" 2>/dev/null) || r="stdout is not JSON"
	[ "$TG_RC" = 1 ] || r="exit status $TG_RC${r:+; $r}"
	[ -z "$r" ] || t_fail "$r: ${TG_OUT:0:300}"
	t_end
}
# bad_run SHAPING RUNTIMECONFIG: the ADD (TG_RC, TG_OUT); one accepted by
# mistake is undone at once so that later cases start clean
bad_run() {
	local conf env=(CNI_CONTAINERID="$BAD_CID" CNI_IFNAME=eth0 CNI_NETNS="$(netns_path bad)"
		CNI_ARGS="$BAD_ARGS" CNI_PATH="$TOLLGATE_BIN_DIR")
	conf=$(jq -c --argjson s "$1" --argjson r "$2" '.shaping = $s | .runtimeConfig = $r' <<<"$BAD_BASE") || return 1
	TG_OUT=$(tg_exec CNI_COMMAND=ADD "${env[@]}" <<<"$conf" 2>/dev/null)
	TG_RC=$?
	[ "$TG_RC" = 0 ] && tg_exec CNI_COMMAND=DEL "${env[@]}" <<<"$conf" >/dev/null 2>&1
	return 0
}
# bad_group_end NAME: the node must equal the snapshot taken before the group
bad_group_end() {
	local now d c g=("${BAD_GROUP[@]}")
	BAD_GROUP=()
	t_begin "bad input: node unchanged after the cases of $1"
	[ "$(ip -n "$TG_ID-bad" -o link show | grep -vc ': lo:')" = 0 ] || {
		t_fail "pod netns 'bad' got interfaces"
		ip -n "$TG_ID-bad" link del eth0 2>/dev/null
	}
	now=$(bad_snap)
	d=$(snap_diff "$BASELINE" "$now")
	if [ -n "$d" ]; then
		t_fail "node changed"
		diag "$d"
		BASELINE=$now
		for c in "${g[@]}"; do # replay one by one, naming the culprit
			IFS=$'\t' read -r sh rc <<<"$c"
			bad_run "$sh" "$rc"
			now=$(bad_snap)
			[ "$now" = "$BASELINE" ] || { t_fail "changed by: shaping $sh runtimeConfig $rc"; BASELINE=$now; }
		done
	fi
	t_end
}
VALS=(-10 '"-10M"' 0 '"0"' '"abc"' '"10Mbps"' '"1m"' '"99999999999G"')
for key in internetEgress.node internetEgress.namespaceDefault internetEgress.podDefault \
	internetEgress.namespaces.badns internetIngress.podDefault internetIngress.namespaces.badns; do
	sec=${key%%.*} leaf=${key#*.}
	word=${leaf%%.*}
	for val in "${VALS[@]}"; do
		sh=$(jq -nc --argjson v "$val" --arg sec "$sec" --arg leaf "$leaf" \
			'{internetEgress: {podDefault: "100M"}} | setpath([$sec] + ($leaf | split(".")); $v)')
		bad_case "shaping.$key = $val" "$word" "$sh" '{}'
	done
done
bad_group_end "shaping.*"
# runtimeConfig.bandwidth: no zero here. containerd sends rate 0 / burst 0 for
# a direction without annotation, and the Go plugins read that as "no limit"
# (see the containerd case above), so 0 is not an invalid value there.
for key in ingressRate egressRate IngressRate; do
	for val in "${VALS[@]}"; do
		case $val in 0 | '"0"') continue ;; esac
		bad_case "runtimeConfig.bandwidth.$key = $val" "$key" '{}' "$(jq -nc --argjson v "$val" --arg k "$key" '{bandwidth: {($k): $v}}')"
	done
done
bad_case "runtimeConfig.bandwidth.ingressBurst without ingressRate" ingressBurst '{}' '{"bandwidth": {"ingressBurst": 1000000}}'
bad_case "runtimeConfig.bandwidth.egressBurst without egressRate" egressBurst '{}' '{"bandwidth": {"egressBurst": 1000000, "ingressRate": 10000000}}'
bad_case "runtimeConfig.bandwidth.IngressBurst without IngressRate (containerd spelling)" ingress '{}' '{"bandwidth": {"IngressRate": 0, "IngressBurst": 1000000}}'
bad_case "runtimeConfig.bandwidth.ingressBurst above 512 MiB" ingressBurst '{}' '{"bandwidth": {"ingressRate": 10000000, "ingressBurst": 5000000000}}'
bad_case 'annotation tollgate.io/internet-egress-bandwidth = "fast"' internet-egress-bandwidth '{"internetEgress": {"podDefault": "100M"}}' \
	'{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-egress-bandwidth": "fast"}}'
bad_case 'annotation tollgate.io/internet-ingress-bandwidth = "fast"' internet-ingress-bandwidth '{"internetIngress": {"podDefault": "100M"}}' \
	'{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-ingress-bandwidth": "fast"}}'
bad_group_end "runtimeConfig (bandwidth and annotations)"
for p in annot plainannot plain; do sdel "$p" || tap_not_ok "DEL $p" "rc=$TG_RC $TG_OUT"; done

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

t_begin "nesting: meanwhile a pod of a second namespace (150M) gets its cap"
chk_three() {
	local w=""
	sh_within "${SH_RATE[2]}" 150 0.05 || w="b1 got ${SH_RATE[2]} Mbit/s, cap 150"
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
