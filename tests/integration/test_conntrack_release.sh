#!/usr/bin/env bash
# No tenant inherits another's flows: a released address takes its conntrack
# entries with it. Clients keep sending to pod A (tenant-a) all along:
#
#   hostport  a peer node -> node:5353/udp, A's UDP hostPort (DNAT to A:5353);
#             the peer starts before A's ADD maps the port
#   masq      the internet host A once wrote to (A:4000 -> inet:7000, masqueraded
#             to the node's 10.0.0.1) keeps answering node:4000
#   control   a peer -> pod C (tenant-c):6000/udp and :6001/tcp, unrelated to A
#
# A is deleted; after the cool-down (2 s here) pod B of tenant-b, with no
# hostPort, is given A's address (the pool holds two: C's and A's). B must
# receive none of the datagrams meant for A, on either port, and tenant-b's
# ingress counters must stay at 0 bytes; C's two flows must keep their
# conntrack entries (the same ids): the flush is the address's, no broader.
#
#   pods A, B, C (node netns)   peer 10.0.1.1   inet 203.0.113.10
#   (lib.sh draws the topology)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_conntrack_release.sh
# shellcheck disable=SC1091,SC2153  # TG_OUT and the pod arrays are lib.sh's
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_require_tools python3 conntrack
tg_traps
PY=$(python3 -c 'import sys; print(sys.executable)')
UDP=$TG_LIB_DIR/udp_send.py
LISTEN_S=3 # how long B listens for A's datagrams

N() { ip netns exec "$TG_NODE" "$@"; }
# bg NETNS ARGS...: udp_send.py ARGS in NETNS, in the background; BG_PID its PID, BG_OUT its output
bg() {
	local ns=$1
	shift
	BG_OUT=$(mktemp "$TG_TMP/bg.XXXXXX")
	ip netns exec "$ns" "$PY" "$UDP" "$@" >"$BG_OUT" 2>&1 &
	BG_PID=$!
	TG_PIDS+=("$BG_PID")
}
ready() { [ -e "$1" ]; }
# counts NETNS PORT... : a counter per port for LISTEN_S seconds, their figures in order
counts() {
	local ns=$1 p pids=() outs=() r v i
	shift
	for p in "$@"; do
		r=$TG_TMP/ready.$ns.$p
		rm -f "$r"
		bg "$ns" count --port "$p" --ready "$r" --timeout "$LISTEN_S"
		pids+=("$BG_PID")
		outs+=("$BG_OUT")
		wait_for 5 ready "$r" || tap_bail "the counter on $ns:$p did not start"
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" 2>/dev/null # here: a subshell cannot wait for this shell's children
		v=$(tail -1 "${outs[$i]}")
		printf '%s ' "${v:-none}"
	done
}
# ingress_bytes NAMESPACE: bytes of the namespace's ingress counters (0 when it has none)
ingress_bytes() {
	N nft -j list counters table inet tollgate 2>/dev/null | jq --arg p "ns_$1_ingress_" \
		'[.nftables[] | .counter? // empty | select(.name | startswith($p)) | .bytes] | add // 0'
}
# ct_ids ARGS...: the ids of the node's conntrack entries `conntrack -L ARGS` lists, sorted
ct_ids() { N conntrack -L "$@" -o id 2>/dev/null | grep -o 'id=[0-9]*' | sort | tr '\n' ' '; }

t_begin "topology and pods"
topo_up || tap_bail "topology"
CONF=$(tg_conf '.cniVersion = "1.0.0" | .capabilities = {portMappings: true}
	| .ipam.addresses = ["10.1.0.20-10.1.0.21"] | .ipam.exclude = [] | .ipam.cooldownSeconds = 2')
A_CONF=$(jq -c '. + {runtimeConfig: {portMappings: [{hostPort: 5353, containerPort: 5353, protocol: "udp"}]}}' <<<"$CONF")
pod_add ctl tenant-c "$CONF" || tap_bail "ADD of C: rc=$TG_RC $TG_OUT"
# the peer sends before the port is mapped: its flow to the node must not bypass the mapping
bg "$TG_PEER" stream --dst "$TG_NODE_IP" --port 5353 --sport 40001 --interval 5 --timeout 60
wait_for 5 N conntrack -L -p udp --dport 5353 >/dev/null 2>&1
pod_add a tenant-a "$A_CONF" || tap_bail "ADD of A: rc=$TG_RC $TG_OUT"
[ "${POD_IP[a]}" != "${POD_IP[ctl]}" ] || t_fail "A and C share ${POD_IP[a]}"
t_end

# ---- every client starts, and keeps sending until the end
t_begin "A receives what its clients send (the hostPort's client began before the mapping)"
rm -f "$TG_TMP/answer.ready"
bg "$TG_INET" answer --port 7000 --interval 5 --ready "$TG_TMP/answer.ready" --timeout 60
wait_for 5 ready "$TG_TMP/answer.ready" || tap_bail "the internet host's answerer did not start"
ip netns exec "$TG_ID-a" "$PY" "$UDP" stream --dst "$TG_INET_IP" --port 7000 --sport 4000 \
	--interval 10 --timeout 0.05 >/dev/null || t_fail "A could not write to the internet host"
# control: C's UDP flow, and a TCP connection held open
bg "$TG_ID-ctl" sink --port 6000 --timeout 60
bg "$TG_PEER" stream --dst "${POD_IP[ctl]}" --port 6000 --sport 40002 --interval 20 --timeout 60
rm -f "$TG_TMP/tcp.ready"
bg "$TG_ID-ctl" sink --tcp --port 6001 --ready "$TG_TMP/tcp.ready" --timeout 60
wait_for 5 ready "$TG_TMP/tcp.ready" || tap_bail "C's TCP listener did not start"
ip netns exec "$TG_PEER" bash -c "exec 3<>/dev/tcp/${POD_IP[ctl]}/6001 && sleep 60" &
TG_PIDS+=($!)
read -r got_hp got_masq <<<"$(counts "$TG_ID-a" 5353 4000)"
[ "${got_hp:-0}" -gt 0 ] || t_fail "A received nothing on its hostPort (the case proves nothing)"
[ "${got_masq:-0}" -gt 0 ] || t_fail "A received nothing from the internet host (the case proves nothing)"
diag "A received $got_hp datagrams on its hostPort, $got_masq from the internet host in ${LISTEN_S}s"
CTL_UDP=$(ct_ids -p udp --dport 6000)
CTL_TCP=$(ct_ids -p tcp --dport 6001)
{ [ -n "$CTL_UDP" ] && [ -n "$CTL_TCP" ]; } || t_fail "no conntrack entry for C's flows: udp '$CTL_UDP' tcp '$CTL_TCP'"
t_end

t_begin "DEL of A, B of tenant-b given A's address after the cool-down"
A_IP=${POD_IP[a]}
pod_del a "$A_CONF" || t_fail "DEL of A: rc=$TG_RC $TG_OUT"
pod_ns_del a
sleep 2.5 # the cool-down, while the clients keep sending
pod_add b tenant-b "$CONF" || tap_bail "ADD of B: rc=$TG_RC $TG_OUT"
t_expect "B's address" "${POD_IP[b]}" "$A_IP"
t_end

t_begin "B receives none of A's datagrams"
before=$(ingress_bytes tenant-b)
read -r got_hp got_masq <<<"$(counts "$TG_ID-b" 5353 4000)"
t_expect "datagrams to A's hostPort that reached B" "$got_hp" 0
t_expect "datagrams of A's internet host that reached B" "$got_masq" 0
t_end

t_begin "tenant-b is billed for none of them"
after=$(ingress_bytes tenant-b)
t_expect "tenant-b's ingress bytes while B listened" "$((after - before))" 0
t_expect "tenant-b's ingress bytes since B's ADD" "$after" 0
t_end

t_begin "the flows of an unrelated pod keep their entries"
t_expect "C's UDP entry" "$(ct_ids -p udp --dport 6000)" "$CTL_UDP"
t_expect "C's TCP entry" "$(ct_ids -p tcp --dport 6001)" "$CTL_TCP"
t_end

t_begin "the node's port again: nothing of it is left DNAT'd to the address"
left=$(N conntrack -L -p udp --dport 5353 2>/dev/null | grep -c "src=$A_IP ")
t_expect "entries to :5353 answered from $A_IP" "$left" 0
t_end

pod_del b "$CONF" || true
pod_del ctl "$CONF" || true
tap_done
