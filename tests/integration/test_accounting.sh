#!/usr/bin/env bash
# Accounting: per-namespace (and per-pod) counters of table inet tollgate,
# checked to the byte with exactly known UDP traffic; TCP; internetMark;
# config errors; self-healing after `nft flush ruleset`; coexistence with a
# kube-proxy-like iptables-nft ruleset and another nft table; no element left
# behind by DEL and GC.
#
#   pods a (research), b (ml-datasets), n (no K8S args: namespace "")
#      | veth tg*
#   node 10.0.0.1 --- fabric --- peer 10.0.1.1 (+ remote pod 10.2.0.5)
#                            \-- inet 203.0.113.10 (reaches pods only through
#                                the node's masquerade)
#
# Counters count IP bytes: a UDP datagram of S payload bytes is S+8+20 bytes.
# Every flow goes to a receiver that discards (tests/integration/udp_send.py
# sink) so no ICMP port-unreachable comes back; IPv6 and ARP are not counted.
# Each check takes a "before" snapshot of every counter of the table once the
# counters are quiet, sends, then polls until the counters match the
# expectation (or 3 s pass) and requires every other counter to be unchanged.
#
# Three topologies (main, self-healing, coexistence), each built from scratch.
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_accounting.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091,SC2153  # jq filters with $vars; associative arrays
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
command -v python3 >/dev/null 2>&1 || { echo "not ok - preconditions: python3 not installed"; exit 1; }
PY=$(python3 -c 'import sys; print(sys.executable)') # skip the pyenv shim on every run
HELPER=$TG_LIB_DIR/udp_send.py
IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
SINK_PORT=5001 # UDP discard receivers everywhere
TCP_PORT=5002  # TCP discard receiver on the internet host
HOST_PORT=5003 # UDP discard receiver on the internet host, for the node's own traffic
CLASSES="egress_internal egress_internet ingress_internal ingress_internet"

# ---------------------------------------------------------------- helpers
# ipb COUNT PAYLOAD: IP bytes of COUNT UDP datagrams of PAYLOAD bytes
ipb() { echo $(($1 * ($2 + 28))); }

# py NETNS ARGS...: the traffic helper inside NETNS, bounded in time
py() {
	local ns=$1
	shift
	ip netns exec "$ns" timeout 30 "$PY" "$HELPER" "$@"
}

READY_N=0
# start_bg NETNS MODE ARGS...: start the helper in the background (its PID
# goes to TG_PIDS, killed by the cleanup trap) and wait until it is bound.
# Sets BG_PID and BG_OUT (its stdout file).
start_bg() {
	local ns=$1 mode=$2 ready
	shift 2
	READY_N=$((READY_N + 1))
	ready=$TG_TMP/ready.$READY_N
	BG_OUT=$TG_TMP/bg.$READY_N.out
	# ip netns exec execs the command: $! is the helper's own PID
	ip netns exec "$ns" "$PY" "$HELPER" "$mode" --ready "$ready" "$@" >"$BG_OUT" 2>&1 &
	BG_PID=$!
	TG_PIDS+=("$BG_PID")
	wait_for 5 test -e "$ready"
}

# forget_pid PID: a background helper that has exited and was waited for is
# no longer ours to kill (its PID may be reused)
forget_pid() {
	local i
	for i in "${!TG_PIDS[@]}"; do
		[ "${TG_PIDS[i]}" = "$1" ] && unset 'TG_PIDS[i]'
	done
	TG_PIDS=("${TG_PIDS[@]}")
}

# start_sinks: discard receivers in every namespace that receives test traffic
start_sinks() {
	local ns
	for ns in "$TG_PEER" "$TG_INET" "$TG_NODE" "$@"; do
		start_bg "$ns" sink --port "$SINK_PORT" --timeout 150 || return 1
	done
	start_bg "$TG_INET" sink --port "$HOST_PORT" --timeout 150 || return 1
	start_bg "$TG_INET" sink --tcp --port "$TCP_PORT" --timeout 150 || return 1
}

# udp_send NETNS DST COUNT SIZE [PORT]: send COUNT datagrams of SIZE bytes
udp_send() {
	py "$1" send --dst "$2" --port "${5:-$SINK_PORT}" --count "$3" --size "$4" >/dev/null
}

# counters: "name packets bytes" for every counter of table inet tollgate, sorted
counters() {
	ip netns exec "$TG_NODE" nft -j list counters table inet tollgate 2>/dev/null |
		jq -r '.nftables[] | .counter? // empty | "\(.name) \(.packets) \(.bytes)"' | sort
}

# counters_quiet: a counter snapshot taken when two reads 100 ms apart agree
counters_quiet() {
	local a b i
	a=$(counters)
	for ((i = 0; i < 30; i++)); do
		sleep 0.1
		b=$(counters)
		[ "$a" = "$b" ] && break
		a=$b
	done
	printf '%s\n' "$b"
}

# delta_problems BEFORE AFTER EXPECT: EXPECT holds "name packets bytes" lines
# (deltas; "-" skips a value); every counter not named must not move, no
# counter may appear or vanish. Prints one line per problem.
delta_problems() {
	awk -v B="$1" -v A="$2" -v E="$3" '
	function load(s, p, b, names,   n, i, f, lines) {
		n = split(s, lines, "\n")
		for (i = 1; i <= n; i++) {
			if (split(lines[i], f, " ") < 3) continue
			p[f[1]] = f[2]; b[f[1]] = f[3]; names[f[1]] = 1
		}
	}
	BEGIN {
		load(B, bp, bb, all); load(A, ap, ab, all); load(E, ep, eb, all)
		for (n in all) {
			if (!(n in ap) && !(n in bp)) { print n " does not exist"; continue }
			if (!(n in ap)) { print n " vanished"; continue }
			if (!(n in bp)) { print n " appeared"; continue }
			dp = ap[n] - bp[n]; db = ab[n] - bb[n]
			wp = (n in ep) ? ep[n] : 0; wb = (n in eb) ? eb[n] : 0
			if ((wp != "-" && dp != wp) || (wb != "-" && db != wb))
				printf "%s moved +%d pkts +%d bytes, expected +%s pkts +%s bytes\n", n, dp, db, wp, wb
		}
	}' | sort
}

# delta BEFORE AFTER NAME FIELD(2=packets,3=bytes)
delta() {
	local b a
	b=$(awk -v n="$3" -v f="$4" '$1 == n { print $f }' <<<"$1")
	a=$(awk -v n="$3" -v f="$4" '$1 == n { print $f }' <<<"$2")
	echo $((${a:-0} - ${b:-0}))
}

# expect_deltas BEFORE "name packets bytes"...: poll until the counters moved
# exactly as expected (3 s at most); sets AFTER; t_fail on every problem.
expect_deltas() {
	local before=$1 exp p deadline=$((SECONDS + 3))
	shift
	exp=$(printf '%s\n' "$@")
	while :; do
		AFTER=$(counters)
		p=$(delta_problems "$before" "$AFTER" "$exp")
		[ -z "$p" ] && return 0
		[ "$SECONDS" -ge "$deadline" ] && break
		sleep 0.05
	done
	t_fail "$(tr '\n' ';' <<<"$p" | sed 's/;$//; s/;/; /g')"
	return 1
}

# flow_case NAME SRC_NS DST COUNT SIZE "expected counter name"...:
# one TAP case: exactly COUNT datagrams, each expected counter moves by
# COUNT packets and COUNT*(SIZE+28) bytes, nothing else moves.
flow_case() {
	local name=$1 src=$2 dst=$3 count=$4 size=$5 before e exps=()
	shift 5
	t_begin "$name"
	for e in "$@"; do exps+=("$e $count $(ipb "$count" "$size")"); done
	before=$(counters_quiet)
	udp_send "$src" "$dst" "$count" "$size" || t_fail "sender failed"
	expect_deltas "$before" "${exps[@]}"
	t_end
}

# nft_elems_with IP: how many elements of any set/map of table inet tollgate mention IP
nft_elems_with() {
	ip netns exec "$TG_NODE" nft -j list table inet tollgate 2>/dev/null |
		jq --arg ip "$1" '[.nftables[] | (.set? // .map? // empty) | .elem? // [] | .. | strings | select(. == $ip)] | length'
}

# map_value MAP KEY: the counter name map MAP gives for KEY, an IP or a link ("" if none)
map_value() {
	ip netns exec "$TG_NODE" nft -j list map inet tollgate "$1" 2>/dev/null |
		jq -r --arg ip "$2" '.nftables[] | .map? // empty | .elem? // [] | .[] | select(.[0] == $ip) | .[1]'
}

# ns_counters_exist NAMESPACE: t_fail for each missing ns_<NAMESPACE>_<class>
ns_counters_exist() {
	local c all
	all=$(counters)
	for c in $CLASSES; do
		grep -q "^ns_$1_$c " <<<"$all" || t_fail "counter ns_$1_$c missing"
	done
}

doctor() { ip netns exec "$TG_NODE" "$IPAM_BIN" --data-dir "$TG_TMP/data" --network "$TG_NETNAME" --json doctor; }

# =================================================================== main topology
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
CONF=$(tg_conf '.accounting = {enabled: true, perPod: false}')

t_begin "ADD pods in two k8s namespaces and one without K8S args"
pod_add a research "$CONF" || { t_fail "ADD a: rc=$TG_RC $TG_OUT"; tg_diag_last; }
pod_add b ml-datasets "$CONF" || { t_fail "ADD b: rc=$TG_RC $TG_OUT"; tg_diag_last; }
pod_ns_add n
POD_CID["n"]=$(cid_for n)
if tg_run ADD "${POD_CID["n"]}" eth0 "$(netns_path n)" "" <<<"$CONF"; then
	POD_IP["n"]=$(jq -r '.ips[0].address | split("/")[0]' <<<"$TG_OUT")
	POD_VETH["n"]=$(jq -r '.interfaces[0].name' <<<"$TG_OUT")
else
	t_fail "ADD n (empty CNI_ARGS): rc=$TG_RC $TG_OUT"
	tg_diag_last
fi
t_end
[ -n "${POD_IP[a]:-}" ] && [ -n "${POD_IP[b]:-}" ] && [ -n "${POD_IP[n]:-}" ] || tap_bail "cannot continue without the pods"
A=${POD_IP[a]} B=${POD_IP[b]}

t_begin "counters: ns_<namespace>_<class> and ns_<namespace>_spoofed_<family> per namespace, ns__* for no namespace, host_<class>, node_spoofed_<family>, no pod_ counters"
ns_counters_exist research
ns_counters_exist ml-datasets
ns_counters_exist ""
all=$(counters)
for c in $CLASSES; do
	grep -q "^host_$c " <<<"$all" || t_fail "counter host_$c missing"
done
for f in ipv4 ipv6; do
	grep -q "^node_spoofed_$f " <<<"$all" || t_fail "counter node_spoofed_$f missing"
done
grep -q '^pod_' <<<"$all" && t_fail "pod_ counters without perPod: $(grep '^pod_' <<<"$all" | tr '\n' ' ')"
for p in a:research b:ml-datasets n:; do
	s=${p%%:*} ns=${p#*:}
	for c in $CLASSES; do
		t_expect "map ns_${c}[$s]" "$(map_value "ns_$c" "${POD_IP[$s]}")" "ns_${ns}_$c"
	done
	for f in ipv4 ipv6; do
		t_expect "map spoofed_${f}[$s's link]" "$(map_value "spoofed_$f" "${POD_VETH[$s]}")" "ns_${ns}_spoofed_$f"
	done
done
# 3 namespaces x (4 classes + 2 families + 4 nodeAccess drops + the ceiling's refusals) + 4 host + 2 node
t_expect "counter count" "$(wc -l <<<"$all")" 39
[ -z "$T_ERRS" ] || diag "$all"
t_end

t_begin "discard receivers"
start_sinks "$TG_ID-a" "$TG_ID-b" "$TG_ID-n" || t_fail "a receiver did not start"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot count without receivers"

# ---------------------------------------------------------------- exact UDP
flow_case "pod -> peer-node pod (internal): 7 x 300 B -> ns_research_egress_internal" \
	"$TG_ID-a" "$TG_PEER_POD_IP" 7 300 ns_research_egress_internal
flow_case "pod without namespace -> peer pod: 4 x 100 B -> ns__egress_internal" \
	"$TG_ID-n" "$TG_PEER_POD_IP" 4 100 ns__egress_internal
flow_case "pod -> pod on the node: 13 x 200 B -> sender's egress_internal and receiver's ingress_internal" \
	"$TG_ID-a" "$B" 13 200 ns_research_egress_internal ns_ml-datasets_ingress_internal
flow_case "peer-node pod -> pod: 6 x 250 B -> ns_research_ingress_internal" \
	"$TG_PEER" "$A" 6 250 ns_research_ingress_internal
flow_case "pod -> internet host (masqueraded): 9 x 1000 B -> ns_ml-datasets_egress_internet" \
	"$TG_ID-b" "$TG_INET_IP" 9 1000 ns_ml-datasets_egress_internet
flow_case "pod -> internet host, 1472 B payload (full 1500 B packets) -> ns__egress_internet" \
	"$TG_ID-n" "$TG_INET_IP" 3 1472 ns__egress_internet

t_begin "internet host replies through NAT: 11 x 500 B out, 5 x 700 B back -> egress_internet and ingress_internet"
before=$(counters_quiet)
if start_bg "$TG_INET" reply --port 6001 --recv 11 --count 5 --size 700 --timeout 10; then
	rpid=$BG_PID rout=$BG_OUT
	got=$(py "$TG_ID-b" send --dst "$TG_INET_IP" --port 6001 --count 11 --size 500 --expect 5 --timeout 5) ||
		t_fail "pod received $got of 5 replies"
	wait "$rpid" || t_fail "reply server: $(cat "$rout")"
	forget_pid "$rpid"
	peer=$(cat "$rout")
	[[ $peer == "$TG_NODE_IP:"* ]] || t_fail "internet host saw the pod as '$peer', expected $TG_NODE_IP:<port> (masquerade)"
	expect_deltas "$before" "ns_ml-datasets_egress_internet 11 $(ipb 11 500)" "ns_ml-datasets_ingress_internet 5 $(ipb 5 700)"
else
	t_fail "reply server did not start"
fi
t_end

flow_case "node -> internet host: 3 x 150 B -> host_egress_internet only" \
	"$TG_NODE" "$TG_INET_IP" 3 150 host_egress_internet
flow_case "internet host -> node: 2 x 90 B -> host_ingress_internet only" \
	"$TG_INET" "$TG_NODE_IP" 2 90 host_ingress_internet
flow_case "peer node -> node: 4 x 64 B -> host_ingress_internal only" \
	"$TG_PEER" "$TG_NODE_IP" 4 64 host_ingress_internal
flow_case "pod -> node: 5 x 120 B -> pod's egress_internal (input hook) and host_ingress_internal" \
	"$TG_ID-a" "$TG_NODE_IP" 5 120 ns_research_egress_internal host_ingress_internal
flow_case "node -> pod: 3 x 60 B -> pod's ingress_internal (output hook) and host_egress_internal" \
	"$TG_NODE" "$B" 3 60 ns_ml-datasets_ingress_internal host_egress_internal

t_begin "node loopback traffic is not counted"
before=$(counters_quiet)
udp_send "$TG_NODE" 127.0.0.1 5 100 || t_fail "sender failed"
udp_send "$TG_NODE" "$TG_NODE_IP" 5 100 || t_fail "sender failed" # local address: routed over lo
expect_deltas "$before"
t_end

# ---------------------------------------------------------------- TCP
t_begin "TCP 5 MiB pod -> internet: egress_internet >= payload and <= payload*1.1, ingress_internet > 0 (ACKs)"
P=$((5 * 1024 * 1024))
before=$(counters_quiet)
py "$TG_ID-b" tcp-send --dst "$TG_INET_IP" --port "$TCP_PORT" --bytes "$P" --timeout 20 >/dev/null || t_fail "TCP transfer failed"
after=$(counters_quiet)
p=$(delta_problems "$before" "$after" "$(printf '%s\n' 'ns_ml-datasets_egress_internet - -' 'ns_ml-datasets_ingress_internet - -')")
[ -z "$p" ] || t_fail "other counters moved: $(tr '\n' ' ' <<<"$p")"
eb=$(delta "$before" "$after" ns_ml-datasets_egress_internet 3)
ep=$(delta "$before" "$after" ns_ml-datasets_egress_internet 2)
ip_=$(delta "$before" "$after" ns_ml-datasets_ingress_internet 2)
ib=$(delta "$before" "$after" ns_ml-datasets_ingress_internet 3)
[ "$eb" -ge "$P" ] && [ "$eb" -le $((P * 11 / 10)) ] || t_fail "egress_internet +$eb bytes, expected $P..$((P * 11 / 10))"
[ "$ep" -gt 0 ] || t_fail "egress_internet packets +$ep"
[ "$ip_" -gt 0 ] && [ "$ib" -ge $((ip_ * 40)) ] || t_fail "ingress_internet +$ip_ pkts +$ib bytes (ACKs of >= 40 B expected)"
diag "TCP $P B payload: egress_internet +$ep pkts +$eb B, ingress_internet +$ip_ pkts +$ib B"
t_end

# ---------------------------------------------------------------- internetMark
# Our own observation table in the node: a prerouting chain before Tollgate's
# (-300) puts bit 0x1 on pod a's packets, a postrouting chain after NAT (300)
# counts what marks leave the node.
t_begin "internetMark 0x10000: internet-bound pod and node packets carry it, internal ones do not, other bits survive"
ip netns exec "$TG_NODE" nft -f - <<EOF || t_fail "could not load the observation table"
table ip obs {
	counter inet_total { }
	counter inet_marked { }
	counter inet_keep { }
	counter int_total { }
	counter int_marked { }
	counter host_total { }
	counter host_marked { }
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		ip saddr $A meta mark set meta mark | 0x1
	}
	chain post {
		type filter hook postrouting priority 300; policy accept;
		ip daddr $TG_INET_IP udp dport $SINK_PORT counter name inet_total
		ip daddr $TG_INET_IP udp dport $SINK_PORT meta mark & 0x10000 == 0x10000 counter name inet_marked
		ip daddr $TG_INET_IP udp dport $SINK_PORT meta mark 0x10001 counter name inet_keep
		ip daddr $TG_PEER_POD_IP udp dport $SINK_PORT counter name int_total
		ip daddr $TG_PEER_POD_IP udp dport $SINK_PORT meta mark & 0x10000 == 0x10000 counter name int_marked
		ip daddr $TG_INET_IP udp dport $HOST_PORT counter name host_total
		ip daddr $TG_INET_IP udp dport $HOST_PORT meta mark & 0x10000 == 0x10000 counter name host_marked
	}
}
EOF
obs() { ip netns exec "$TG_NODE" nft -j list counter ip obs "$1" 2>/dev/null | jq -r '.nftables[] | .counter? // empty | .packets'; }
udp_send "$TG_ID-a" "$TG_INET_IP" 4 100 || t_fail "a -> inet failed"
udp_send "$TG_ID-b" "$TG_INET_IP" 3 100 || t_fail "b -> inet failed"
udp_send "$TG_ID-a" "$TG_PEER_POD_IP" 5 100 || t_fail "a -> peer failed"
udp_send "$TG_NODE" "$TG_INET_IP" 2 100 "$HOST_PORT" || t_fail "node -> inet failed"
wait_for 3 test "$(obs inet_total)/$(obs int_total)/$(obs host_total)" = 7/5/2 || true
t_expect "internet-bound pod packets seen" "$(obs inet_total)" 7
t_expect "internet-bound pod packets with 0x10000" "$(obs inet_marked)" 7
t_expect "pod a's internet packets with mark exactly 0x10001 (bit 0x1 kept)" "$(obs inet_keep)" 4
t_expect "internal pod packets seen" "$(obs int_total)" 5
t_expect "internal pod packets with 0x10000" "$(obs int_marked)" 0
t_expect "node's internet packets seen" "$(obs host_total)" 2
t_expect "node's internet packets with 0x10000" "$(obs host_marked)" 2
t_end

t_begin "internetMark as an integer (131072 = 0x20000) replaces the bit with the next ADD"
MCONF=$(tg_conf '.accounting = {enabled: true, perPod: false, internetMark: 131072}')
if pod_add m research "$MCONF"; then
	ip netns exec "$TG_NODE" nft -f - >/dev/null <<EOF || t_fail "could not change the observation table"
flush chain ip obs post
reset counters table ip obs
table ip obs {
	chain post {
		ip daddr $TG_INET_IP udp dport $SINK_PORT counter name inet_total
		ip daddr $TG_INET_IP udp dport $SINK_PORT meta mark 0x20001 counter name inet_keep
		ip daddr $TG_INET_IP udp dport $SINK_PORT meta mark & 0x10000 == 0x10000 counter name inet_marked
	}
}
EOF
	udp_send "$TG_ID-a" "$TG_INET_IP" 3 100 || t_fail "a -> inet failed"
	wait_for 3 test "$(obs inet_total)" = 3 || true
	t_expect "internet-bound packets" "$(obs inet_total)" 3
	t_expect "with mark exactly 0x20001" "$(obs inet_keep)" 3
	t_expect "with the old bit 0x10000" "$(obs inet_marked)" 0
	pod_del m "$MCONF" || t_fail "DEL m rc=$TG_RC $TG_OUT"
	pod_add a research "$CONF" || t_fail "re-ADD a with the default mark rc=$TG_RC $TG_OUT" # back to 0x10000
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
	tg_diag_last
fi
t_end
ip netns exec "$TG_NODE" nft delete table ip obs

# ---------------------------------------------------------------- perPod
t_begin "perPod: pod_<hostVeth>_<class> counters move with the namespace counters"
PCONF=$(tg_conf '.accounting = {enabled: true, perPod: true}')
if pod_add p perpod "$PCONF"; then
	P_IP=${POD_IP[p]} PV=${POD_VETH[p]}
	start_bg "$TG_ID-p" sink --port "$SINK_PORT" --timeout 120 || t_fail "sink in p"
	ns_counters_exist perpod
	all=$(counters)
	for c in $CLASSES; do
		grep -q "^pod_${PV}_$c " <<<"$all" || t_fail "counter pod_${PV}_$c missing"
		t_expect "map pod_${c}[p]" "$(map_value "pod_$c" "$P_IP")" "pod_${PV}_$c"
	done
	before=$(counters_quiet)
	udp_send "$TG_ID-p" "$TG_PEER_POD_IP" 6 400 || t_fail "p -> peer failed"
	udp_send "$TG_PEER" "$P_IP" 2 333 || t_fail "peer -> p failed"
	udp_send "$TG_ID-p" "$TG_INET_IP" 3 800 || t_fail "p -> inet failed"
	udp_send "$TG_ID-a" "$P_IP" 4 50 || t_fail "a -> p failed"
	expect_deltas "$before" \
		"ns_perpod_egress_internal 6 $(ipb 6 400)" "pod_${PV}_egress_internal 6 $(ipb 6 400)" \
		"ns_perpod_ingress_internal 6 $(($(ipb 2 333) + $(ipb 4 50)))" "pod_${PV}_ingress_internal 6 $(($(ipb 2 333) + $(ipb 4 50)))" \
		"ns_perpod_egress_internet 3 $(ipb 3 800)" "pod_${PV}_egress_internet 3 $(ipb 3 800)" \
		"ns_research_egress_internal 4 $(ipb 4 50)"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
	tg_diag_last
	PV=""
fi
t_end

t_begin "perPod: after DEL the pod counters are gone, the namespace keeps its bytes"
if [ -n "$PV" ]; then
	before=$(counters_quiet)
	pod_del p "$PCONF" || t_fail "DEL rc=$TG_RC $TG_OUT"
	after=$(counters)
	grep "^pod_${PV}_" <<<"$after" && t_fail "pod counters left: $(grep "^pod_${PV}_" <<<"$after" | tr '\n' ' ')"
	t_expect "elements with $P_IP" "$(nft_elems_with "$P_IP")" 0
	p=$(delta_problems "$(grep -v "^pod_${PV}_" <<<"$before")" "$after" "")
	[ -z "$p" ] || t_fail "$(tr '\n' ' ' <<<"$p")"
	# a new pod of the same namespace adds to the same counters (perPod again,
	# so that GC below has pod counters to remove)
	if pod_add p2 perpod "$PCONF"; then
		start_bg "$TG_ID-p2" sink --port "$SINK_PORT" --timeout 120 || t_fail "sink in p2"
		before=$(counters_quiet)
		t_expect "ns_perpod_egress_internal after re-creation" "$(grep '^ns_perpod_egress_internal ' <<<"$before")" \
			"$(grep '^ns_perpod_egress_internal ' <<<"$after")"
		udp_send "$TG_ID-p2" "$TG_PEER_POD_IP" 2 10 || t_fail "p2 -> peer failed"
		expect_deltas "$before" "ns_perpod_egress_internal 2 $(ipb 2 10)" "pod_${POD_VETH[p2]}_egress_internal 2 $(ipb 2 10)"
	else
		t_fail "ADD p2 rc=$TG_RC $TG_OUT"
	fi
else
	t_fail "no perPod pod"
fi
t_end

# ---------------------------------------------------------------- bad config
# ADD of a new pod with each invalid config: error 7, the node unchanged.
bad_case() {
	local what=$1 filter=$2 s1 s2 d p
	t_begin "bad config ($what): error 7, node unchanged"
	s1=$(tg_snapshot)
	pod_add bad research "$(tg_conf "$filter")"
	p=$(cni_error_problem 7)
	[ -z "$p" ] || t_fail "$p"
	s2=$(tg_snapshot)
	d=$(snap_diff "$s1" "$s2")
	[ -z "$d" ] || { t_fail "node changed"; diag "$d"; }
	[ "$TG_RC" = 0 ] && pod_del bad "$CONF"
	t_end
}
bad_case "internalCIDRs invalid CIDR 10.0.0.0/33" '.internalCIDRs = ["10.0.0.0/33"]'
bad_case "internalCIDRs not a CIDR" '.internalCIDRs = ["junk"]'
bad_case "internalCIDRs overlapping" '.internalCIDRs = ["10.0.0.0/8", "10.1.0.0/16"]'
bad_case "internalCIDRs empty" '.internalCIDRs = []'
for m in '"0"' '0' '"0x4000"' '"0x8000"' '"0x14000"' '"junk"'; do
	bad_case "internetMark $m" ".accounting = {enabled: true, internetMark: $m}"
done

# ---------------------------------------------------------------- GC, DEL
t_begin "GC and DEL leave no element with the pod's IP in any set or map (nor pod counters)"
before=$(counters | grep -v '^pod_')
gconf=$(tg_conf '.accounting = {enabled: true, perPod: false} | .["cni.dev/valid-attachments"] = [{containerID: $c, ifname: "eth0"}]' \
	--arg c "${POD_CID[a]}")
tg_run GC "" "" "" <<<"$gconf" || { t_fail "GC rc=$TG_RC $TG_OUT"; tg_diag_last; }
for s in b n p2; do
	ip=${POD_IP[$s]:-}
	[ -n "$ip" ] || continue
	state_has_ip "$ip" && t_fail "GC kept $s ($ip) in the store"
	t_expect "elements with $s's $ip after GC" "$(nft_elems_with "$ip")" 0
	t_expect "elements with $s's link after GC" "$(nft_elems_with "${POD_VETH[$s]}")" 0
done
t_expect "elements with a's $A after GC (pods, masq, pod_src, 4 ns maps, 4 drop maps, nexthop_limit, guard_ns, guard_in)" \
	"$(nft_elems_with "$A")" 14
t_expect "elements with a's link after GC (pod_src, 2 spoofed maps)" "$(nft_elems_with "${POD_VETH[a]}")" 3
pod_del a "$CONF" || t_fail "DEL a rc=$TG_RC $TG_OUT"
t_expect "elements with a's $A after DEL" "$(nft_elems_with "$A")" 0
t_expect "elements with a's link after DEL" "$(nft_elems_with "${POD_VETH[a]}")" 0
after=$(counters)
t_expect "pod counters left after GC (p2 was perPod)" "$(grep '^pod_' <<<"$after" | cut -d' ' -f1 | tr '\n' ' ')" ""
p=$(delta_problems "$before" "$after" "")
[ -z "$p" ] || t_fail "counters after GC/DEL: $(tr '\n' ' ' <<<"$p")"
[ -z "$T_ERRS" ] || diag "$(ip netns exec "$TG_NODE" nft list table inet tollgate)"
t_end

# =================================================================== self-healing
t_begin "self-healing topology"
topo_down
topo_up || tap_bail "could not rebuild the topology"
CONF=$(tg_conf '.accounting = {enabled: true, perPod: false}')
pod_add x heal "$CONF" || t_fail "ADD x rc=$TG_RC $TG_OUT"
pod_add y heal2 "$CONF" || t_fail "ADD y rc=$TG_RC $TG_OUT"
start_sinks "$TG_ID-x" || t_fail "a receiver did not start"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue"
X=${POD_IP[x]} Y=${POD_IP[y]}
flow_case "before the flush: 3 x 100 B x -> peer counted" "$TG_ID-x" "$TG_PEER_POD_IP" 3 100 ns_heal_egress_internal

t_begin "nft flush ruleset (node): doctor reports missing-table"
ip netns exec "$TG_NODE" nft flush ruleset
ip netns exec "$TG_NODE" nft list table inet tollgate >/dev/null 2>&1 && t_fail "table still there after the flush"
out=$(doctor 2>&1)
rc=$?
t_expect "doctor exit status" "$rc" 1
jq -e 'any(.findings[]; .kind == "missing-table")' <<<"$out" >/dev/null 2>&1 || t_fail "no missing-table finding: $out"
t_end

t_begin "the next ADD rebuilds the table with every pod (old ones included)"
if pod_add z heal "$CONF"; then
	Z=${POD_IP[z]}
	for ip in "$X" "$Y" "$Z"; do
		nft_set_has pods "$ip" || t_fail "$ip not in @pods"
		nft_set_has masq "$ip" || t_fail "$ip not in @masq"
	done
	for c in $CLASSES; do
		t_expect "map ns_${c}[x]" "$(map_value "ns_$c" "$X")" "ns_heal_$c"
		t_expect "map ns_${c}[y]" "$(map_value "ns_$c" "$Y")" "ns_heal2_$c"
		t_expect "map ns_${c}[z]" "$(map_value "ns_$c" "$Z")" "ns_heal_$c"
	done
	ns_counters_exist heal
	ns_counters_exist heal2
	out=$(doctor 2>&1) || t_fail "doctor after the rebuild: $out"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
	tg_diag_last
fi
[ -z "$T_ERRS" ] || diag "$(ip netns exec "$TG_NODE" nft list table inet tollgate 2>&1)"
t_end

flow_case "after the rebuild: old pod x counted again (internal, 5 x 200 B)" \
	"$TG_ID-x" "$TG_PEER_POD_IP" 5 200 ns_heal_egress_internal
flow_case "after the rebuild: old pod y masqueraded and counted (internet, 4 x 300 B)" \
	"$TG_ID-y" "$TG_INET_IP" 4 300 ns_heal2_egress_internet

t_begin "nft flush table inet tollgate (rules gone): the next ADD restores counting and masquerade of old pods"
ip netns exec "$TG_NODE" nft flush table inet tollgate
n=$(ip netns exec "$TG_NODE" nft -j list table inet tollgate 2>/dev/null | jq '[.nftables[] | select(.rule)] | length')
t_expect "rules left after the flush" "$n" 0
pingq "$TG_ID-y" "$TG_INET_IP" 1 && t_fail "y reaches inet although the masquerade rule was flushed"
pod_add w heal "$CONF" || { t_fail "ADD w rc=$TG_RC $TG_OUT"; tg_diag_last; }
t_end
flow_case "after the rules came back: old pod x counted (internal, 2 x 40 B)" \
	"$TG_ID-x" "$TG_PEER_POD_IP" 2 40 ns_heal_egress_internal
flow_case "after the rules came back: old pod y masqueraded and counted (internet, 2 x 50 B)" \
	"$TG_ID-y" "$TG_INET_IP" 2 50 ns_heal2_egress_internet

# =================================================================== coexistence
t_begin "coexistence topology with kube-proxy-like iptables-nft rules and another nft table"
topo_down
topo_up || tap_bail "could not rebuild the topology"
CONF=$(tg_conf '.accounting = {enabled: true, perPod: false}')
ipt() { ip netns exec "$TG_NODE" iptables -w 5 "$@"; }
{
	ipt -t nat -N KUBE-SERVICES &&
		ipt -t nat -N KUBE-MARK-MASQ &&
		ipt -t nat -N KUBE-POSTROUTING &&
		ipt -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES &&
		ipt -t nat -A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES &&
		ipt -t nat -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING &&
		ipt -t nat -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000 &&
		ipt -t nat -A KUBE-SERVICES -d 10.96.0.10/32 -p udp --dport 53 -j KUBE-MARK-MASQ &&
		ipt -t nat -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN &&
		ipt -t nat -A KUBE-POSTROUTING -j MARK --xor-mark 0x4000 &&
		ipt -t nat -A KUBE-POSTROUTING -j MASQUERADE &&
		ipt -t filter -N KUBE-FORWARD &&
		ipt -t filter -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD &&
		ipt -t filter -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP &&
		ipt -t filter -A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT &&
		ip netns exec "$TG_NODE" nft -f - <<-'EOF'
			table inet other {
				chain c {
					type filter hook forward priority 0; policy accept;
					counter
				}
			}
		EOF
} 2>"$TG_TMP/coexist.err" || t_fail "could not load the foreign rules: $(cat "$TG_TMP/coexist.err")"
# foreign state, counters zeroed, without iptables-save's timestamped comments
foreign() {
	ip netns exec "$TG_NODE" iptables-save | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[N:N]/'
	ip netns exec "$TG_NODE" nft list tables 2>/dev/null | grep -vx -e 'table inet tollgate' -e 'table arp tollgate' | while read -r _ fam name; do
		ip netns exec "$TG_NODE" nft list table "$fam" "$name" 2>/dev/null | sed -E 's/packets [0-9]+ bytes [0-9]+/packets N bytes N/'
	done
}
other_pkts() { ip netns exec "$TG_NODE" nft -j list table inet other 2>/dev/null | jq '[.nftables[] | .rule? // empty | .expr[] | .counter? // empty | .packets] | add // 0'; }
F1=$(foreign)
grep -q KUBE-MARK-MASQ <<<"$F1" && grep -q 'table inet other' <<<"$F1" || t_fail "foreign rules not visible: $F1"
t_end

t_begin "coexistence: ADD pods, exact counters, DEL, foreign rules and tables byte-identical"
pod_add a co "$CONF" || t_fail "ADD a rc=$TG_RC $TG_OUT"
pod_add b co2 "$CONF" || t_fail "ADD b rc=$TG_RC $TG_OUT"
if [ -z "$T_ERRS" ]; then
	start_sinks "$TG_ID-b" || t_fail "a receiver did not start"
	o1=$(other_pkts)
	before=$(counters_quiet)
	udp_send "$TG_ID-a" "$TG_PEER_POD_IP" 5 111 || t_fail "a -> peer failed"
	udp_send "$TG_ID-a" "$TG_INET_IP" 4 222 || t_fail "a -> inet failed"
	udp_send "$TG_ID-a" "${POD_IP[b]}" 3 333 || t_fail "a -> b failed"
	expect_deltas "$before" "ns_co_egress_internal 8 $(($(ipb 5 111) + $(ipb 3 333)))" \
		"ns_co_egress_internet 4 $(ipb 4 222)" "ns_co2_ingress_internal 3 $(ipb 3 333)"
	o2=$(other_pkts)
	[ "$((o2 - o1))" -ge 12 ] || t_fail "table inet other's forward counter moved by $((o2 - o1)), expected >= 12"
	pod_del b "$CONF" || t_fail "DEL b rc=$TG_RC $TG_OUT"
	t_expect "elements with b's IP" "$(nft_elems_with "${POD_IP[b]}")" 0
	pod_add c co2 "$CONF" || t_fail "ADD c rc=$TG_RC $TG_OUT"
	pingq "$TG_ID-c" "$TG_INET_IP" || t_fail "c -> inet fails"
fi
F2=$(foreign)
d=$(snap_diff "$F1" "$F2")
[ -z "$d" ] || { t_fail "foreign rules or tables changed"; diag "$d"; }
t_end

tap_done
