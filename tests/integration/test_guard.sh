#!/usr/bin/env bash
# internetGuard.connections: a namespace's pods on one node hold at most
# their limit of concurrent connections to internet destinations and open at
# most newPerSecond new ones; what goes over is refused at its first packet
# (a TCP reset) and counted per namespace and reason, in nftables and on
# /metrics. A pod of namespace crawl opens 30,000 connections at once to the
# internet host: exactly 20,000 are held (counted at the host and in the
# namespace's gauge on /metrics), the other
# 10,000 refused, each once; the held ones keep moving data; crawl's
# connections to an internal peer and another namespace's to the internet
# go through meanwhile; once crawl's close, crawl connects again. A rate of
# 50 a second lets a burst of 50 and then 50 a second through.
#
#   pod crawl-a (ns crawl)   pod other-a (ns other: no concurrent limit)
#      |  node 10.0.0.1: the plugin's table; tollgate-agent --metrics-only
#   fabric -- peer 10.2.0.5 (internal: echo on 8080)
#          \- inet 203.0.113.10 (echo on 8080)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_guard.sh
# shellcheck disable=SC1091,SC2016  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_require_tools curl python3
tg_traps
EXP_BIN=$TOLLGATE_BIN_DIR/tollgate-agent
PY=$(python3 -c 'import sys; print(sys.executable)')
FLOOD=$TG_LIB_DIR/conn_flood.py
TOOL=$TG_LIB_DIR/exporter_tool.py
EXP_PORT=9617
LIMIT=20000 TRIES=30000 RATE=50

N() { ip netns exec "$TG_NODE" "$@"; }
# packets of a counter of table inet tollgate ("-" when absent)
ctr() {
	local j
	j=$(N nft -j list counter inet tollgate "$1" 2>/dev/null) || { echo -; return; }
	jq -r '[.nftables[] | .counter // empty][0].packets // "-"' <<<"$j"
}
metric() {
	N curl -s --max-time 3 -o "$TG_TMP/m.prom" "http://127.0.0.1:$EXP_PORT/metrics" || { echo "no page"; return; }
	"$PY" "$TOOL" parse --tsv "$TG_TMP/m.prom" | awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "absent" : v) }'
}
connkey() { printf 'tollgate_namespace_internet_connections{namespace="%s"}' "$1"; }
refusedkey() { printf 'tollgate_namespace_connections_refused_total{namespace="%s",reason="%s"}' "$1" "$2"; }
# established connections to port 8080 at the internet host
held_at_inet() { ip netns exec "$TG_INET" ss -Htn state established '( sport = :8080 )' | wc -l; }
# flood POD HOST COUNT [ARGS...]: one JSON line (see conn_flood.py)
flood() {
	local pod=$1 host=$2 count=$3
	shift 3
	ip netns exec "$TG_ID-$pod" timeout 120 "$PY" "$FLOOD" open "$host" 8080 "$count" "$@"
}
jget() { jq -r "$1" <<<"$2"; }

t_begin "topology, echo servers at the internet host and the peer, the exporter"
topo_up || t_fail "topology"
ip netns exec "$TG_PEER" ip addr add 10.2.0.5/32 dev lo 2>/dev/null
(exec ip netns exec "$TG_INET" "$PY" "$FLOOD" serve 8080) &
TG_PIDS+=("$!")
(exec ip netns exec "$TG_PEER" "$PY" "$FLOOD" serve 8080) &
TG_PIDS+=("$!")
ip netns exec "$TG_NODE" "$EXP_BIN" --metrics-only --listen "127.0.0.1:$EXP_PORT" --data-dir "$TG_TMP/data" \
	--network "$TG_NETNAME" --page-cache-ms 0 >"$TG_TMP/exporter.out" 2>"$TG_TMP/exporter.log" &
TG_PIDS+=("$!")
wait_for 5 sh -c "[ \"\$(ip netns exec $TG_NODE curl -s --max-time 1 http://127.0.0.1:$EXP_PORT/healthz)\" = ok ]" ||
	t_fail "exporter: no 'ok' on /healthz within 5 s: $(tail -n 3 "$TG_TMP/exporter.log")"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the topology"

CONF=$(tg_conf '.internetGuard = {connections: {namespaceDefault: $l, namespaces: {other: 0}}}' --argjson l "$LIMIT")
t_begin "ADD a pod in crawl and one in other: each namespace gets its guard chain, each pod its element"
pod_add crawl-a crawl "$CONF" || { t_fail "ADD crawl-a: rc=$TG_RC $TG_OUT"; tg_diag_last; }
pod_add other-a other "$CONF" || { t_fail "ADD other-a: rc=$TG_RC $TG_OUT"; tg_diag_last; }
for ns in crawl other; do
	N nft list chain inet tollgate "guard_$ns" >/dev/null 2>&1 || t_fail "no chain guard_$ns"
done
N nft list chain inet tollgate guard_crawl | grep -q "ct count over $LIMIT" || t_fail "guard_crawl holds no 'ct count over $LIMIT'"
N nft list chain inet tollgate guard_other | grep -q "refused_concurrent" && t_fail "guard_other counts connections (its limit is 0: none)"
elems=$(N nft -j list map inet tollgate guard_ns | jq -c '[.nftables[] | .map? // empty | .elem // [] | .[] | [.[0], .[1].jump.target]]')
t_expect "guard_ns elements" "$elems" "[[\"${POD_IP[crawl-a]:-}\",\"guard_crawl\"],[\"${POD_IP[other-a]:-}\",\"guard_other\"]]"
for ns in crawl other; do
	for why in concurrent rate; do
		t_expect "/metrics $ns $why before any traffic" "$(metric "$(refusedkey "$ns" "$why")")" 0
	done
done
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the pods"
# a pod has ports for more than 28k connections to one ip:port
for p in crawl-a other-a; do _tg_sysctl "$TG_ID-$p" net.ipv4.ip_local_port_range "1024 65535"; done

t_begin "crawl opens $TRIES at once: exactly $LIMIT held, the rest refused once each; the held ones move data"
# exec: the coprocess is the flood's own process tree, which the cleanup ends
coproc HOLD { exec ip netns exec "$TG_ID-crawl-a" timeout 120 "$PY" "$FLOOD" open "$TG_INET_IP" 8080 "$TRIES" \
	--probe 200 --hold 100 --timeout 60; }
HOLD_IN=${HOLD[1]} HOLD_OUT=${HOLD[0]} HOLDER=$HOLD_PID
TG_PIDS+=("$HOLDER")
read -r -t 110 res <&"$HOLD_OUT" || res="{}"
diag "crawl: $res"
t_expect "connected" "$(jget .connected "$res")" "$LIMIT"
t_expect "refused (ECONNREFUSED)" "$(jget .refused "$res")" $((TRIES - LIMIT))
t_expect "timed out" "$(jget .timeout "$res")" 0
t_expect "echoed of 200 held" "$(jget .echoed "$res")" 200
t_expect "held at the internet host" "$(held_at_inet)" "$LIMIT"
t_expect "ns_crawl_refused_concurrent" "$(ctr ns_crawl_refused_concurrent)" $((TRIES - LIMIT))
t_expect "/metrics crawl concurrent" "$(metric "$(refusedkey crawl concurrent)")" $((TRIES - LIMIT))
t_expect "ns_crawl_refused_rate" "$(ctr ns_crawl_refused_rate)" 0
t_expect "/metrics crawl's internet connections" "$(metric "$(connkey crawl)")" "$LIMIT"
t_expect "/metrics other's internet connections" "$(metric "$(connkey other)")" 0
t_end

t_begin "while crawl is at its limit: crawl reaches the internal peer, other reaches the internet host"
res=$(flood crawl-a "$TG_PEER_POD_IP" 500 --probe 10)
t_expect "crawl to the peer: connected" "$(jget .connected "$res")" 500
t_expect "crawl to the peer: echoed" "$(jget .echoed "$res")" 10
res=$(flood crawl-a "$TG_INET_IP" 10)
t_expect "crawl to the internet: connected (still at its limit)" "$(jget .connected "$res")" 0
res=$(flood other-a "$TG_INET_IP" 2000 --probe 10)
t_expect "other to the internet: connected" "$(jget .connected "$res")" 2000
t_expect "other to the internet: echoed" "$(jget .echoed "$res")" 10
t_expect "ns_other_refused_concurrent" "$(ctr ns_other_refused_concurrent)" 0
t_end

t_begin "while crawl is at its limit: 200 SYN|FIN segments on new 4-tuples are dropped and counted, none reaches the internet host"
# what the internet host sees of them, before anything of its own
ip netns exec "$TG_INET" nft -f - <<-'EOF' || t_fail "observer at the internet host"
	table inet tgobs {
		chain pre {
			type filter hook prerouting priority -500; policy accept;
			tcp flags & (syn | fin) == syn | fin counter
		}
	}
EOF
inet_seen() {
	ip netns exec "$TG_INET" nft -j list chain inet tgobs pre |
		jq '[.nftables[] | .rule? // empty | .expr[] | .counter? // empty | .packets][0] // -1'
}
before=$(ctr ns_crawl_invalid_dropped)
ip netns exec "$TG_ID-crawl-a" timeout 20 "$PY" "$TG_LIB_DIR/spoof_send.py" tcp --src "${POD_IP[crawl-a]:-}" \
	--dst "$TG_INET_IP" --port 8080 --flags SF --count 200 >/dev/null || t_fail "sender failed"
sleep 0.3
t_expect "SYN|FIN segments that reached the internet host" "$(inet_seen)" 0
after=$(ctr ns_crawl_invalid_dropped)
if [ "$before" != - ] && [ "$after" != - ]; then
	t_expect "ns_crawl_invalid_dropped grew by" "$((after - before))" 200
	t_expect "/metrics crawl's invalid packets" \
		"$(metric 'tollgate_namespace_invalid_dropped_packets_total{namespace="crawl"}')" "$after"
else
	t_fail "counter ns_crawl_invalid_dropped missing ($before, $after)"
fi
t_end

t_begin "control: plain SYNs from a pod on new 4-tuples reach the internet host (the observer sees what passes)"
if ! ip netns exec "$TG_INET" nft flush chain inet tgobs pre ||
	! ip netns exec "$TG_INET" nft add rule inet tgobs pre 'tcp flags & (syn | ack) == syn counter'; then
	t_fail "observer"
fi
res=$(flood other-a "$TG_INET_IP" 3)
t_expect "other to the internet: connected" "$(jget .connected "$res")" 3
t_expect "SYNs that reached the internet host" "$(inet_seen)" 3
ip netns exec "$TG_INET" nft delete table inet tgobs || t_fail "observer"
t_end

t_begin "crawl closes its connections: it connects to the internet again"
exec {HOLD_IN}>&- # its stdin closed: the flood closes what it holds and ends
wait "$HOLDER" 2>/dev/null
ok=0
for _ in $(seq 1 50); do
	res=$(flood crawl-a "$TG_INET_IP" 100)
	[ "$(jget .connected "$res")" = 100 ] && { ok=1; break; }
	sleep 0.2
done
[ "$ok" = 1 ] || t_fail "crawl still refused after closing its connections: $res"
crawl_closed() { [ "$(metric "$(connkey crawl)")" = 0 ]; }
wait_for 10 crawl_closed || t_fail "/metrics crawl's internet connections: $(metric "$(connkey crawl)"), expected 0 once closed"
t_end

CONF=$(tg_conf '.internetGuard = {connections: {newPerSecond: $r}}' --argjson r "$RATE")
t_begin "newPerSecond $RATE: namespace burst opens 400 at once, about a burst of $RATE gets through, the rest refused as rate"
pod_add burst-a burst "$CONF" || { t_fail "ADD burst-a: rc=$TG_RC $TG_OUT"; tg_diag_last; }
N nft list chain inet tollgate guard_burst | grep -q "limit rate over $RATE/second" || t_fail "guard_burst holds no rate limit"
res=$(flood burst-a "$TG_INET_IP" 400)
diag "burst: $res"
c=$(jget .connected "$res") s=$(jget .seconds "$res")
# the burst, plus what the rate refilled while the SYNs went out
max=$(awk -v r="$RATE" -v s="$s" 'BEGIN { printf "%d", r + r * s + 1 }')
{ [ "$c" -ge "$RATE" ] && [ "$c" -le "$max" ]; } || t_fail "connected $c: expected $RATE to $max"
t_expect "refused + connected" $(($(jget .refused "$res") + c)) 400
t_expect "ns_burst_refused_rate" "$(ctr ns_burst_refused_rate)" "$(jget .refused "$res")"
t_expect "/metrics burst rate" "$(metric "$(refusedkey burst rate)")" "$(jget .refused "$res")"
t_end

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
APORT=19637
ALOG=$TG_TMP/agent.log
CL=$TG_TMP/10-tollgate.conflist
CONF2=$(tg_conf '.internetGuard = {connections: {namespaceDefault: 500, namespaces: {other: 0}}} | .accounting = {retainSeconds: 2}')
jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF2" >"$CL"
rules_of() { N nft -a list chain inet tollgate "guard_$1" 2>/dev/null | grep -c 'comment "tollgate:'; }
handles_of() { N nft -a list chain inet tollgate "guard_$1" 2>/dev/null | grep -o 'handle [0-9]*' | tr '\n' ' '; }
crawl_at_500() { N nft list chain inet tollgate guard_crawl 2>/dev/null | grep -q "ct count over 500"; }
elem_back() { N nft -j list map inet tollgate guard_ns | jq -e --arg ip "$1" '[.nftables[] | .map? // empty | .elem // [] | .[] | select(.[0] == $ip)] | length == 1' >/dev/null; }
# other has no limits of its own: the ceiling, the internal and local returns, the return
other_back() { [ "$(rules_of other)" = 4 ]; }
agent_ready() { [ "$(N curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$APORT/readyz")" = 200 ]; }
t_begin "the agent's config (crawl at 500) rewrites crawl's guard chain, not other's; a flushed chain and a deleted element come back"
other_before=$(handles_of other)
# exec: $! is the agent itself, which the cleanup ends
(exec ip netns exec "$TG_NODE" "$AGENT" --config "$CL" --data-dir "$TG_TMP/data" --listen "127.0.0.1:$APORT" \
	--declare-interval 1 --gc-interval 1 --sync-interval 60 2>>"$ALOG") &
TG_PIDS+=("$!")
wait_for 10 agent_ready || t_fail "agent not ready: $(tail -3 "$ALOG")"
wait_for 5 crawl_at_500 || t_fail "guard_crawl not rewritten for 500: $(N nft list chain inet tollgate guard_crawl)"
t_expect "guard_other's rules (same limits: not rewritten)" "$(handles_of other)" "$other_before"
N nft flush chain inet tollgate guard_other || t_fail "cannot flush guard_other"
wait_for 5 other_back || t_fail "guard_other's rule not back: $(N nft list chain inet tollgate guard_other)"
N nft delete element inet tollgate guard_ns "{ ${POD_IP[crawl-a]} }" || t_fail "cannot delete crawl-a's element"
wait_for 5 elem_back "${POD_IP[crawl-a]}" || t_fail "crawl-a's element of @guard_ns not back"
res=$(flood crawl-a "$TG_INET_IP" 600)
t_expect "crawl at 500: connected of 600" "$(jget .connected "$res")" 500
t_end

t_begin "DEL every pod: no element of @guard_ns is left; retired namespaces take their chains and counters along"
for p in crawl-a other-a burst-a; do pod_del "$p" "$CONF2" || t_fail "DEL $p: rc=$TG_RC $TG_OUT"; done
t_expect "guard_ns elements" "$(N nft -j list map inet tollgate guard_ns | jq '[.nftables[] | .map? // empty | .elem // [] | .[]] | length')" 0
crawl_gone() { ! N nft list chain inet tollgate guard_crawl >/dev/null 2>&1; }
wait_for 15 crawl_gone || t_fail "guard_crawl still there after retainSeconds: $(tail -3 "$ALOG")"
t_expect "ns_crawl_refused_concurrent after retiring" "$(ctr ns_crawl_refused_concurrent)" -
t_end

tap_done
