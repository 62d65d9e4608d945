#!/usr/bin/env bash
# Per-pod nftables elements have an owner after the ADD: the agent's
# declaration puts a pod's element back from the store when it went missing,
# takes out an element no pod of the store holds, and counts both as
# repairs (tollgate_agent_repairs_total{object="nft_pod_elements"}).
# Control: declarations over right elements repair none of them.
#
#   pods e1, e2 -- node ($TG_ID-node, topology from lib.sh): tollgate-agent,
#   /metrics on 127.0.0.1:$PORT
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_agent_elements.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
t_end

CONF=$(tg_conf)
CL=$TG_TMP/10-tollgate.conflist
jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$CL"
STRAY=10.1.0.99

PORT=19627
METRIC='tollgate_agent_repairs_total{object="nft_pod_elements"}'
ALOG=$TG_TMP/agent.log
http_get() { ip netns exec "$TG_NODE" curl -s -o "$TG_TMP/http.out" -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT$1"; }
ready() { [ "$(http_get /readyz)" = 200 ]; }
repaired() { http_get /metrics >/dev/null; awk -v m="$METRIC" '$1 == m { print $2 }' "$TG_TMP/http.out"; }
in_pods() { nft_set_has pods "$1"; }
not_in_pods() { ! nft_set_has pods "$1"; }
repaired_is() { [ "$(repaired)" = "$1" ]; }

t_begin "setup: two pods, the agent declaring every second"
pod_add e1 research "$CONF" || t_fail "ADD e1 rc=$TG_RC $TG_OUT"
pod_add e2 research "$CONF" || t_fail "ADD e2 rc=$TG_RC $TG_OUT"
ip netns exec "$TG_NODE" "$AGENT" --config "$CL" --data-dir "$TG_TMP/data" \
	--listen "127.0.0.1:$PORT" --declare-interval 1 --gc-interval 60 --sync-interval 60 2>>"$ALOG" &
AGENT_PID=$!
TG_PIDS+=("$AGENT_PID")
wait_for 10 ready || t_fail "agent not ready: $(tail -3 "$ALOG")"
t_end

t_begin "control: declarations over right elements repair none"
sleep 2.5 # two declarations (a count that must stay 0 has no state to poll for)
t_expect "pod-element repairs" "$(repaired)" 0
in_pods "${POD_IP[e1]}" || t_fail "${POD_IP[e1]} not in @pods"
t_end

t_begin "a pod's element deleted by hand is back after the declaration, and counted"
ip netns exec "$TG_NODE" nft delete element inet tollgate pods "{ ${POD_IP[e1]} }" ||
	t_fail "cannot delete the element"
wait_for 5 in_pods "${POD_IP[e1]}" || t_fail "${POD_IP[e1]} not back in @pods: $(tail -3 "$ALOG")"
wait_for 5 repaired_is 1 || t_fail "pod-element repairs: $(repaired), expected 1"
in_pods "${POD_IP[e2]}" || t_fail "${POD_IP[e2]} left @pods"
t_end

t_begin "a stray element added by hand is removed, and counted"
ip netns exec "$TG_NODE" nft add element inet tollgate pods "{ $STRAY }" ||
	t_fail "cannot add the element"
wait_for 5 not_in_pods "$STRAY" || t_fail "$STRAY still in @pods"
wait_for 5 repaired_is 2 || t_fail "pod-element repairs: $(repaired), expected 2"
in_pods "${POD_IP[e1]}" || t_fail "${POD_IP[e1]} left @pods"
t_end

t_begin "DEL: the pods go, their elements too"
kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null
pod_del e1 "$CONF" || t_fail "DEL e1 rc=$TG_RC"
pod_del e2 "$CONF" || t_fail "DEL e2 rc=$TG_RC"
t_expect "@pods" "$(nft_set_count pods)" 0
t_end

tap_done
