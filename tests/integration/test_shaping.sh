#!/usr/bin/env bash
# Traffic shaping, what it makes and removes (no rate is measured here, so
# this suite runs against the sanitizer build too; test_shaping_rates.sh
# measures the caps on the wire): which traffic goes through which class
# (internal traffic never through an internet class), the runtime's spellings
# of runtimeConfig.bandwidth, pod annotations lowering a cap, a pod's tc
# changes leaving the host alone, DEL and CHECK of every tc object, bad input,
# the nesting of pod, namespace and node classes, and a node left with only
# its node class once every pod is gone.
#
#   pods (one k8s namespace per case) -- tgX (HTB 1: to the pod; ingress ->
#        |                               mirred -> IFB tiX, HTB 1: from the pod)
#   node 10.0.0.1, uplink eth0 (clsact: internet traffic -> IFB tollgate-inet,
#   where HTB 1: node 1:1 -> namespace 1:<ns> -> pod 1:<pod> + bfifo;
#        |                      nft sets meta priority on internet-bound packets)
#   fabric -- peer 10.2.0.5 (internal: only Kubernetes limits apply)
#          -- inet 203.0.113.10 (internet: pods reach it masqueraded)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_shaping.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091,SC2034  # jq filters with $vars; associative arrays; SH_* read by shaping_lib.sh
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/shaping_lib.sh"
sh_start

# ============================================================ which traffic takes which class
sect "classification"
# A pod with internet caps both ways pings the peer (internal) and the
# internet host: only the internet pings (and their replies) go through the
# pod's uplink class and its download class on tollgate-inetdl.
t_begin "internal traffic goes through no internet class; internet traffic does, both ways"
# pings_through POD DST CLASS...: sends 10 pings, prints "replies d1 d2 ..."
# (d: bytes each class "DEV/CLASSID" sent meanwhile)
pings_through() {
	local pod=$1 dst=$2 c b0=() b1=() n out=""
	shift 2
	for c in "$@"; do b0+=("$(class_bytes "${c%/*}" "${c#*/}")"); done
	n=$(ip netns exec "$TG_ID-$pod" ping -n -c 10 -i 0.05 -W 1 "$dst" 2>/dev/null | grep -c 'bytes from')
	for c in "$@"; do b1+=("$(class_bytes "${c%/*}" "${c#*/}")"); done
	for c in "${!b0[@]}"; do out+=" $(( ${b1[c]:-0} - ${b0[c]:-0} ))"; done
	echo "$n$out"
}
if spod_ns iso iso '{"internetEgress": {"podDefault": "100M"}, "internetIngress": {"podDefault": "100M"}}'; then
	pc=$(sh_pod_class iso) v=${POD_VETH[iso]}
	t_expect "pod's uplink class ceil" "$(class_ceil "$UPQ" "$pc")" 100Mbit
	t_expect "internet ingress class ceil" "$(class_ceil "$DLQ" "$pc")" 100Mbit
	read -r n d_up d_in <<<"$(pings_through iso "$TG_PEER_POD_IP" "$UPQ/$pc" "$DLQ/$pc")"
	t_expect "replies from the peer" "$n" 10
	t_expect "bytes the uplink class sent for pings to the peer" "$d_up" 0
	t_expect "bytes the download class sent for the peer's replies" "$d_in" 0
	read -r n d_up d_in <<<"$(pings_through iso "$TG_INET_IP" "$UPQ/$pc" "$DLQ/$pc")"
	t_expect "replies from the internet host" "$n" 10
	# 10 echo requests / replies of 84 IP bytes + 14 Ethernet each
	[ "${d_up:-0}" -ge 980 ] || t_fail "the uplink class sent $d_up bytes for 10 pings to the internet (>= 980 expected)"
	[ "${d_in:-0}" -ge 980 ] || t_fail "the download class sent $d_in bytes for 10 replies from the internet (>= 980 expected)"
	sdel iso || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ a pod cannot loosen its shaping
sect "pod cannot loosen"
t_begin "a pod cannot loosen its shaping: tc inside the pod changes nothing on the host"
if spod_ns loose loose '{"internetEgress": {"podDefault": "50M"}}' '{"bandwidth": {"egressRate": 80000000}}'; then
	before=$(sh_tc_snapshot)
	sh_pod_tamper loose
	d=$(snap_diff "$before" "$(sh_tc_snapshot)")
	[ -z "$d" ] || { t_fail "host-side tc objects changed"; diag "$d"; }
	scheck loose || t_fail "CHECK after the pod's tc changes: rc=$TG_RC $TG_OUT"
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
t_begin "pod annotations below podDefault lower the caps (internet egress 50M, ingress 20M)"
AN_SH='{"internetEgress": {"podDefault": "100M"}, "internetIngress": {"podDefault": "100M"}}'
AN_RC='{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-egress-bandwidth": "50M", "tollgate.io/internet-ingress-bandwidth": "20M", "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\"}"}}'
if spod_ns annot annot "$AN_SH" "$AN_RC" && spod_ns plainannot annot "$AN_SH"; then
	t_expect "annotated pod: uplink class ceil" "$(class_ceil "$UPQ" "$(sh_pod_class annot)")" 50Mbit
	t_expect "annotated pod: leaf bfifo limit (50M x 20 ms = 125000b, raised to the 192 KiB floor)" "$(leaf_limit "$UPQ" "$(sh_pod_class annot)")" 192Kb
	t_expect "annotated pod: download class ceil on tollgate-inetdl" "$(class_ceil "$DLQ" "$(sh_pod_class annot)")" 20Mbit
	t_expect "annotated pod: state internetEgress" "$(sh_att_shaping annot | jq '.internetEgress')" 50000000
	t_expect "pod without annotation: uplink class ceil" "$(class_ceil "$UPQ" "$(sh_pod_class plainannot)")" 100Mbit
	t_expect "pod without annotation: download class ceil" "$(class_ceil "$DLQ" "$(sh_pod_class plainannot)")" 100Mbit
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ============================================================ DEL removes everything
sect "DEL and CHECK"
FULL_SH='{"internetEgress": {"podDefault": "100M", "namespaceDefault": "200M"}, "internetIngress": {"podDefault": "100M"}}'
FULL_RC='{"bandwidth": {"ingressRate": 50000000, "egressRate": 50000000}}'
t_begin "DEL whose teardown fails keeps the address (not handed out next to live objects); the retry releases it"
if spod_ns keep1 keep "$FULL_SH"; then
	pc=$(sh_pod_class keep1)
	# HTB refuses to delete a class that has children: a child of the pod's class blocks DEL
	ip netns exec "$TG_NODE" tc class add dev "$UPQ" parent "$pc" classid 1:7ff0 htb rate 1mbit ||
		t_fail "test setup: child class under $pc"
	sdel keep1
	[ "$TG_RC" != 0 ] || t_fail "DEL succeeded although the pod's class could not be deleted"
	state_has_ip "${POD_IP[keep1]}" || t_fail "${POD_IP[keep1]} released although its class is still on $UPQ"
	ip netns exec "$TG_NODE" tc class del dev "$UPQ" classid 1:7ff0
	sdel keep1 || t_fail "DEL retry rc=$TG_RC $TG_OUT"
	state_has_ip "${POD_IP[keep1]}" && t_fail "${POD_IP[keep1]} still allocated after the retry"
	[ -z "$(class_line "$UPQ" "$pc")" ] || t_fail "class $pc remains after the retry"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "DEL removes the pod's classes, bfifo, IFB and map entry; the namespace class stays for gc to retire"
if spod_ns gone1 gone "$FULL_SH" "$FULL_RC" && spod_ns gone2 gone "$FULL_SH" "$FULL_RC"; then
	pc1=$(sh_pod_class gone1) pc2=$(sh_pod_class gone2) nc=$(sh_ns_class gone1)
	v1=${POD_VETH[gone1]} v2=${POD_VETH[gone2]} f1=$(sh_ifb "${POD_VETH[gone1]}") f2=$(sh_ifb "${POD_VETH[gone2]}")
	t_expect "both pods share the namespace class" "$(sh_ns_class gone2)" "$nc"
	for o in "$pc1" "$pc2" "$nc"; do [ -n "$(class_line "$UPQ" "$o")" ] || t_fail "class $o missing after ADD"; done
	link_exists "$f1" && link_exists "$f2" || t_fail "IFBs missing after ADD"
	# veth and IFB share the pod's link group (its address), so DEL retires both in one request
	IFS=. read -r o1 o2 o3 o4 <<<"${POD_IP[gone1]}"
	grp=$(( (o1 << 24) | (o2 << 16) | (o3 << 8) | o4 ))
	for d in "$v1" "$f1"; do
		g=$(ip -n "$TG_NODE" -o link show "$d" 2>/dev/null | sed -nE 's/.* group ([^ ]+) .*/\1/p')
		t_expect "link group of $d" "$g" "$grp"
	done
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
	# kept: another ADD may be attaching under it; gc retires it under the store's lock
	grep -q "parent 1:1 " <<<"$(class_line "$UPQ" "$nc")" || t_fail "namespace class $nc gone or not under 1:1 after its last pod: $(class_line "$UPQ" "$nc")"
	sh_ipam gc || t_fail "tollgate-ipam gc rc=$SH_IPAM_RC: $(cat "$TG_TMP/ipam.err")"
	[ -z "$(class_line "$UPQ" "$nc")" ] || t_fail "namespace class $nc still on the uplink after gc"
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
# replayed case by case to name the culprit. The shaped pods "annot" and
# "plainannot" stay attached meanwhile.
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
for p in annot plainannot; do sdel "$p" || tap_not_ok "DEL $p" "rc=$TG_RC $TG_OUT"; done

# ============================================================ annotations only lower
sect "annotations only lower"
# A tenant writes its pod's annotations: one above the cap the config gives
# the pod is ignored (ADD succeeds, says so on stderr and in the log line),
# one below it applies. Egress: pods 10M within a 5M namespace, so the cap in
# effect is 5M; ingress: the namespace's entry 8M, not podDefault 100M. No
# other pod is attached here, so reshape touches only these two.
AB_SH='{"internetEgress": {"podDefault": "10M", "namespaces": {"capped": "5M"}}, "internetIngress": {"podDefault": "100M", "namespaces": {"capped": "8M"}}}'
AB_SH_LOW='{"internetEgress": {"podDefault": "1M", "namespaces": {"capped": "5M"}}, "internetIngress": {"podDefault": "100M", "namespaces": {"capped": "1M"}}}'
# an_rc EGRESS INGRESS: runtimeConfig with both annotations
an_rc() { jq -nc --arg e "$1" --arg i "$2" '{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-egress-bandwidth": $e, "tollgate.io/internet-ingress-bandwidth": $i}}'; }
# log_last CMD POD: the last log line of that command for pod capped/POD
log_last() { grep " cmd=$1 .* pod=capped/$2 " "$TG_TMP/tollgate.log" | tail -n 1; }
# has WHAT TEXT NEEDLE: fail unless TEXT contains NEEDLE
has() { grep -qF -- "$3" <<<"$2" || t_fail "$1 lacks '$3': ${2:0:400}"; }
AB_WARN_E="pod annotation tollgate.io/internet-egress-bandwidth 32G is above the pod's internet egress cap 5M: ignored"
AB_WARN_I="pod annotation tollgate.io/internet-ingress-bandwidth 32G is above the pod's internet ingress cap 8M: ignored"

t_begin "annotations above the caps (32G) are ignored and logged, not refused: classes at the caps; CHECK and show say the config applied"
if spod_ns above capped "$AB_SH" "$(an_rc 32G 32G)"; then
	has "ADD's stderr" "$TG_ERR" "$AB_WARN_E"
	has "ADD's stderr" "$TG_ERR" "$AB_WARN_I"
	t_expect "uplink class ceil (namespace cap 5M)" "$(class_ceil "$UPQ" "$(sh_pod_class above)")" 5Mbit
	t_expect "download class ceil on tollgate-inetdl" "$(class_ceil "$DLQ" "$(sh_pod_class above)")" 8Mbit
	t_expect "state: caps and annotations" \
		"$(sh_att_shaping above | jq -c '[.internetEgress, .internetIngress, .annotationInternetEgress, .annotationInternetIngress]')" \
		"[10000000,100000000,32000000000,32000000000]"
	l=$(log_last ADD above)
	has "ADD's log line" "$l" " inet_egress=5M(config) inet_ingress=8M(config) warning=\""
	has "ADD's log line" "$l" "$AB_WARN_E; $AB_WARN_I"
	[[ $l == *" result=ok" ]] || t_fail "ADD's log line does not end in result=ok: $l"
	scheck above || t_fail "CHECK rc=$TG_RC $TG_OUT"
	l=$(log_last CHECK above)
	has "CHECK's log line" "$l" " inet_egress=5M(config) inet_ingress=8M(config) warning=\"$AB_WARN_E"
	sh_ipam show "${POD_IP[above]}" --json || t_fail "show rc=$SH_IPAM_RC $(cat "$TG_TMP/ipam.err")"
	t_expect "show --json: sources" \
		"$(jq -c '.shaping | [.internetEgressFrom, .internetEgressAnnotation, .internetIngressFrom, .internetIngressAnnotation]' "$TG_TMP/ipam.out")" \
		'["config",32000000000,"config",32000000000]'
	sh_ipam show "${POD_IP[above]}"
	has "show" "$(cat "$TG_TMP/ipam.out")" "caps from   egress: config (annotation 32G ignored); ingress: config (annotation 32G ignored)"
else
	t_fail "ADD rc=$TG_RC $TG_OUT $TG_ERR"
fi
t_end

t_begin "annotations below the caps (2M) apply, without a warning; CHECK and show say the annotation applied"
if spod_ns below capped "$AB_SH" "$(an_rc 2M 2M)"; then
	t_expect "ADD's stderr" "$TG_ERR" ""
	t_expect "uplink class ceil" "$(class_ceil "$UPQ" "$(sh_pod_class below)")" 2Mbit
	t_expect "download class ceil on tollgate-inetdl" "$(class_ceil "$DLQ" "$(sh_pod_class below)")" 2Mbit
	t_expect "state: caps" "$(sh_att_shaping below | jq -c '[.internetEgress, .internetIngress]')" "[2000000,2000000]"
	l=$(log_last ADD below)
	has "ADD's log line" "$l" " inet_egress=2M(annotation) inet_ingress=2M(annotation) result=ok"
	scheck below || t_fail "CHECK rc=$TG_RC $TG_OUT"
	has "CHECK's log line" "$(log_last CHECK below)" " inet_egress=2M(annotation) inet_ingress=2M(annotation) result=ok"
	sh_ipam show "${POD_IP[below]}"
	has "show" "$(cat "$TG_TMP/ipam.out")" "caps from   egress: annotation; ingress: annotation"
else
	t_fail "ADD rc=$TG_RC $TG_OUT $TG_ERR"
fi
t_end

t_begin "reshape to 1M caps: the 2M annotations are now above them and ignored; CHECK with the old config names the cap that drifted and its source"
if [ -n "${POD_IP[above]:-}" ] && [ -n "${POD_IP[below]:-}" ]; then
	sconf "$AB_SH_LOW" >"$TG_TMP/low.conf"
	sh_ipam --config "$TG_TMP/low.conf" reshape || t_fail "reshape rc=$SH_IPAM_RC $(cat "$TG_TMP/ipam.err")"
	out=$(cat "$TG_TMP/ipam.out")
	has "reshape's output" "$out" "caps from egress: config (annotation 2M ignored); ingress: config (annotation 2M ignored)"
	has "reshape's output" "$out" "2 of 2 pods reshaped"
	for p in above below; do
		t_expect "$p: uplink class ceil" "$(class_ceil "$UPQ" "$(sh_pod_class "$p")")" 1Mbit
		t_expect "$p: download class ceil" "$(class_ceil "$DLQ" "$(sh_pod_class "$p")")" 1Mbit
	done
	# the runtime still sends the old config: the store and it disagree
	scheck below
	r=$(cni_error_problem 100)
	[ -z "$r" ] || t_fail "CHECK below with the old config: $r"
	has "CHECK's error" "$TG_OUT" "the pod's internet ingress cap is 100M, its config gives 2M (annotation)"
	scheck above
	has "CHECK's error" "$TG_OUT" "the pod's internet egress cap is 1M, its config gives 10M (config; the annotation 32G is above the cap 5M: ignored)"
	# with the new config CHECK passes and logs the config's caps and the warning
	POD_CONF[below]=$(sconf "$AB_SH_LOW" "$(an_rc 2M 2M)")
	scheck below || t_fail "CHECK below with the new config rc=$TG_RC $TG_OUT"
	has "CHECK's log line" "$(log_last CHECK below)" " inet_egress=1M(config) inet_ingress=1M(config) warning=\"pod annotation tollgate.io/internet-egress-bandwidth 2M is above the pod's internet egress cap 1M: ignored"
else
	t_fail "the pods of the two cases above are missing"
fi
t_end
for p in above below; do [ -n "${POD_IP[$p]:-}" ] && { sdel "$p" || tap_not_ok "DEL $p" "rc=$TG_RC $TG_OUT"; }; done

# ============================================================ nesting
sect "nesting"
# Namespace "nsa" capped at 200M (pods 1G each), namespace "nsb" at the
# namespaceDefault 150M; no node cap at first, then 300M.
NEST_SH='{"internetEgress": {"namespaceDefault": "150M", "podDefault": "1G", "namespaces": {"nsa": "200M"}}}'
NEST_SH_NODE='{"internetEgress": {"node": "300M", "namespaceDefault": "150M", "podDefault": "1G", "namespaces": {"nsa": "200M"}}}'
t_begin "nesting: pod classes under their namespace's class, both namespaces under the node class 1:1"
if spod_ns a1 nsa "$NEST_SH" && spod_ns a2 nsa "$NEST_SH" && spod_ns b1 nsb "$NEST_SH"; then
	na=$(sh_ns_class a1) nb=$(sh_ns_class b1)
	t_expect "a2 shares a1's namespace class" "$(sh_ns_class a2)" "$na"
	[ "$na" != "$nb" ] || t_fail "nsa and nsb share the class $na"
	t_expect "nsa class ceil" "$(class_ceil "$UPQ" "$na")" 200Mbit
	t_expect "nsb class ceil" "$(class_ceil "$UPQ" "$nb")" 150Mbit
	for p in a1 a2 b1; do
		pc=$(sh_pod_class "$p") nc=$(sh_ns_class "$p")
		# the pods' 1G is above their namespace's cap: a pod class never
		# gets a ceiling above its parent's
		t_expect "$p class ceil" "$(class_ceil "$UPQ" "$pc")" "$(class_ceil "$UPQ" "$nc")"
		class_line "$UPQ" "$pc" | grep -q " parent $nc " || t_fail "$p class $pc not under $nc: $(class_line "$UPQ" "$pc")"
		egress_map_has "${POD_IP[$p]}" || t_fail "${POD_IP[$p]} ($p) not in map egress_class"
	done
	for nc in "$na" "$nb"; do
		class_line "$UPQ" "$nc" | grep -q ' parent 1:1 ' || t_fail "namespace class $nc not under 1:1: $(class_line "$UPQ" "$nc")"
	done
	for p in a1 a2 b1; do sdel "$p" || t_fail "DEL $p rc=$TG_RC"; done
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "nesting: a node cap of 300M becomes the ceiling of the node class 1:1"
if spod_ns a1 nsa "$NEST_SH_NODE" && spod_ns b1 nsb "$NEST_SH_NODE"; then
	t_expect "node class 1:1 ceil" "$(class_ceil "$UPQ" 1:1)" 300Mbit
	t_expect "nsa class ceil" "$(class_ceil "$UPQ" "$(sh_ns_class a1)")" 200Mbit
	scheck a1 || t_fail "CHECK a1 rc=$TG_RC $TG_OUT"
	for p in a1 b1; do sdel "$p" || t_fail "DEL $p rc=$TG_RC"; done
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "after all DELs: no tg/ti link, no attachment, and $UPQ holds only the node class 1:1"
sh_node_clean
t_end

diag "duration: $((SECONDS - T_START)) s"
tap_done
