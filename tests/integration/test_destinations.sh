#!/usr/bin/env bash
# internetGuard.destinations: a namespace's internet bytes by outside prefix
# and direction, in bounded kernel state (a set per namespace and direction),
# exported as its top prefixes plus "other", which always sum to the
# namespace's internet bytes.
# - known volumes to 8 prefixes: the top 5 on /metrics and in
#   `tollgate-ipam top` are the 5 largest, each to the byte; other is the
#   rest; the same from the internet host towards the pod (ingress);
# - scrapes while traffic flows: every page sums exactly, no series goes down;
# - 100,000 distinct destinations (prefixLength 32, 1,024 tracked): the set
#   stays at its size, every datagram still goes out, the 5 heavy
#   destinations are the top to the byte, the sum is exact, the agent's
#   memory barely moves;
# - DEL and retiring the namespace take its sets along.
#
#   pod crawl-a (ns crawl), pod flood-a (ns flood)
#      |  node 10.0.0.1: the plugin's table; tollgate-agent
#   fabric -- inet 203.0.113.10, and every address of 198.18.0.0/15 (UDP sink)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_destinations.sh
# shellcheck disable=SC1091,SC2016  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_require_tools curl python3
tg_traps
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
IPAM=$TOLLGATE_BIN_DIR/tollgate-ipam
PY=$(python3 -c 'import sys; print(sys.executable)')
SEND=$TG_LIB_DIR/dst_send.py
UDP=$TG_LIB_DIR/udp_send.py
TOOL=$TG_LIB_DIR/exporter_tool.py
APORT=19647
ALOG=$TG_TMP/agent.log
CL=$TG_TMP/10-tollgate.conflist
SIZE=972 # + 28 bytes of IP and UDP header: 1,000 bytes a datagram

N() { ip netns exec "$TG_NODE" "$@"; }
page() { N curl -s --max-time 5 -o "$1" "http://127.0.0.1:$APORT/metrics" && "$PY" "$TOOL" parse "$1" >"$1.json"; }
# dst_of FILE.json NS DIR DESTINATION: one destination series ("absent")
dst_of() {
	jq -r --arg k "tollgate_namespace_destination_bytes_total{destination=\"$4\",direction=\"$3\",namespace=\"$2\"}" \
		'.[$k] // "absent"' "$1"
}
# dst_sum FILE.json NS DIR: the namespace's destination series added up
dst_sum() {
	jq -r --arg ns "$2" --arg dir "$3" '[to_entries[] | select(.key | startswith("tollgate_namespace_destination_bytes_total{"))
		| select(.key | contains("direction=\"" + $dir + "\"") and contains("namespace=\"" + $ns + "\"")) | .value] | add // 0' "$1"
}
# dst_top FILE.json NS DIR: the top prefixes, sorted, comma-separated
dst_top() {
	jq -r --arg ns "$2" --arg dir "$3" '[to_entries[] | select(.key | startswith("tollgate_namespace_destination_bytes_total{"))
		| select(.key | contains("direction=\"" + $dir + "\"") and contains("namespace=\"" + $ns + "\""))
		| .key | capture("destination=\"(?<d>[^\"]*)\"").d | select(. != "other")] | sort | join(",")' "$1"
}
ns_bytes() {
	jq -r --arg k "tollgate_namespace_bytes_total{direction=\"$3\",namespace=\"$2\",traffic=\"internet\"}" '.[$k] // "absent"' "$1"
}
elements() { N nft -j list set inet tollgate "$1" | jq '[.nftables[] | .set? // empty | .elem // [] | .[]] | length'; }
agent_ready() { [ "$(N curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$APORT/readyz")" = 200 ]; }
rx_packets() { ip -n "$TG_INET" -s -j link show eth0 | jq '.[0].stats64.rx.packets'; }

t_begin "topology (198.18.0.0/15 answered by the internet host), sinks, the agent"
topo_up || t_fail "topology"
ip -n "$TG_FABRIC" route add 198.18.0.0/15 via "$TG_INET_IP" || t_fail "fabric route"
ip -n "$TG_INET" route add local 198.18.0.0/15 dev lo || t_fail "inet anycast route"
ip -n "$TG_INET" route add 10.1.0.0/24 via 203.0.113.1 || t_fail "inet route to the pods"
(exec ip netns exec "$TG_INET" "$PY" "$UDP" sink --port 9000 --ready "$TG_TMP/sink.inet" --timeout 300 >/dev/null) &
TG_PIDS+=("$!")
wait_for 5 test -s "$TG_TMP/sink.inet" || t_fail "the internet host's sink did not start"
# Under ASan freed memory sits in its quarantine (256 MB by default) and RSS
# says nothing of the agent's own growth: there the quarantine is kept small
# and counted in the bound.
RSS_GROWTH_KB=8192
AGENT_ENV=()
if ldd "$AGENT" 2>/dev/null | grep -q libasan; then
	RSS_GROWTH_KB=$((8192 + 8192))
	AGENT_ENV=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4")
fi
CONF=$(tg_conf '.internetGuard = {destinations: {top: 5, prefixLength: 24, tracked: 64}} | .accounting = {retainSeconds: 2}')
jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$CL"
(exec ip netns exec "$TG_NODE" "${AGENT_ENV[@]}" "$AGENT" --config "$CL" --data-dir "$TG_TMP/data" --listen "127.0.0.1:$APORT" \
	--page-cache-ms 0 --declare-interval 1 --gc-interval 1 --sync-interval 60 2>>"$ALOG") &
TG_PIDS+=("$!")
AGENT_PID=$!
wait_for 10 agent_ready || t_fail "agent not ready: $(tail -3 "$ALOG")"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the topology"

t_begin "ADD a pod of crawl: its namespace gets its two sets, of the size asked, with its prefix length"
pod_add crawl-a crawl "$CONF" || { t_fail "ADD crawl-a: rc=$TG_RC $TG_OUT"; tg_diag_last; }
for d in egress ingress; do
	set_text=$(N nft list set inet tollgate "dst_crawl_$d" 2>&1)
	grep -q "size 64" <<<"$set_text" || t_fail "dst_crawl_$d: no 'size 64': $set_text"
	grep -q 'comment "tollgate: prefixLength 24 top 5"' <<<"$set_text" || t_fail "dst_crawl_$d: no comment: $set_text"
	t_expect "dst_crawl_$d elements before any traffic" "$(elements "dst_crawl_$d")" 0
done
(exec ip netns exec "$TG_ID-crawl-a" "$PY" "$UDP" sink --port 9000 --ready "$TG_TMP/sink.pod" --timeout 300 >/dev/null) &
TG_PIDS+=("$!")
wait_for 5 test -s "$TG_TMP/sink.pod" || t_fail "the pod's sink did not start"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the pods"

# prefix 198.18.P.0/24 gets P x 30 datagrams of 1,000 bytes, P = 1..8
dsts="" counts=""
for p in 1 2 3 4 5 6 7 8; do dsts="$dsts${dsts:+,}198.18.$p.7" counts="$counts${counts:+,}$((p * 30))"; done
t_begin "8 prefixes of known volumes: the top 5 are the 5 largest, to the byte; other is the rest; the sum is exact"
sent=$(ip netns exec "$TG_ID-crawl-a" "$PY" "$SEND" send --dst "$dsts" --count "$counts" --size "$SIZE")
t_expect "datagrams sent" "$sent" $((36 * 30))
page "$TG_TMP/p1.prom" || t_fail "no page"
t_expect "top 5 of crawl's egress" "$(dst_top "$TG_TMP/p1.prom.json" crawl egress)" \
	"198.18.4.0/24,198.18.5.0/24,198.18.6.0/24,198.18.7.0/24,198.18.8.0/24"
for p in 4 5 6 7 8; do
	t_expect "198.18.$p.0/24 egress" "$(dst_of "$TG_TMP/p1.prom.json" crawl egress "198.18.$p.0/24")" $((p * 30 * 1000))
done
t_expect "other egress (prefixes 1 to 3)" "$(dst_of "$TG_TMP/p1.prom.json" crawl egress other)" $(((1 + 2 + 3) * 30 * 1000))
t_expect "sum of crawl's egress series = its internet bytes" "$(dst_sum "$TG_TMP/p1.prom.json" crawl egress)" \
	"$(ns_bytes "$TG_TMP/p1.prom.json" crawl egress)"
t_expect "crawl's internet egress bytes" "$(ns_bytes "$TG_TMP/p1.prom.json" crawl egress)" $((36 * 30 * 1000))
# tollgate-ipam top shows the same numbers
top=$(N "$IPAM" --json top crawl --agent "http://127.0.0.1:$APORT")
t_expect "top: 198.18.8.0/24 first" "$(jq -r '[.[] | select(.direction == "egress")][0].destinations[0] | "\(.destination)=\(.bytes)"' <<<"$top")" \
	"198.18.8.0/24=240000"
t_expect "top: other" "$(jq -r '[.[] | select(.direction == "egress")][0].other' <<<"$top")" 180000
text=$(N "$IPAM" top crawl --agent "http://127.0.0.1:$APORT")
grep -Eq '^crawl +egress +198\.18\.8\.0/24 +240000 +22\.2%$' <<<"$text" || t_fail "top's table: $text"
t_end

t_begin "ingress: what the internet host sends the pod counts to its source prefixes"
ingress_before=$(ns_bytes "$TG_TMP/p1.prom.json" crawl ingress)
ip netns exec "$TG_INET" "$PY" "$SEND" send --src 198.18.9.1 --dst "${POD_IP[crawl-a]}" --count 90 --size "$SIZE" >/dev/null
ip netns exec "$TG_INET" "$PY" "$SEND" send --src 198.19.10.1 --dst "${POD_IP[crawl-a]}" --count 40 --size "$SIZE" >/dev/null
page "$TG_TMP/p2.prom" || t_fail "no page"
t_expect "198.18.9.0/24 ingress" "$(dst_of "$TG_TMP/p2.prom.json" crawl ingress 198.18.9.0/24)" 90000
t_expect "198.19.10.0/24 ingress" "$(dst_of "$TG_TMP/p2.prom.json" crawl ingress 198.19.10.0/24)" 40000
t_expect "crawl's internet ingress bytes grew by" $(($(ns_bytes "$TG_TMP/p2.prom.json" crawl ingress) - ingress_before)) 130000
t_expect "sum of crawl's ingress series = its internet bytes" "$(dst_sum "$TG_TMP/p2.prom.json" crawl ingress)" \
	"$(ns_bytes "$TG_TMP/p2.prom.json" crawl ingress)"
t_end

t_begin "scrapes while traffic flows: every page sums exactly, no series goes down"
(exec ip netns exec "$TG_ID-crawl-a" "$PY" "$SEND" send --dst "$dsts" --count 1000 --size "$SIZE" --rate 3000 >/dev/null) &
SENDER=$!
TG_PIDS+=("$SENDER")
pages=0 prev=""
while kill -0 "$SENDER" 2>/dev/null && [ "$pages" -lt 200 ]; do
	page "$TG_TMP/pf.prom" || { t_fail "no page under traffic"; break; }
	pages=$((pages + 1))
	s=$(dst_sum "$TG_TMP/pf.prom.json" crawl egress) n=$(ns_bytes "$TG_TMP/pf.prom.json" crawl egress)
	[ "$s" = "$n" ] || { t_fail "page $pages: series sum to $s, crawl's internet egress is $n"; break; }
	if [ -n "$prev" ]; then
		down=$(jq -r -n --slurpfile a "$prev" --slurpfile b "$TG_TMP/pf.prom.json" '[$a[0] | to_entries[]
			| select(.key | startswith("tollgate_namespace_destination_bytes_total{")) as $e
			| select(($b[0][$e.key] // $e.value) < $e.value) | $e.key] | join(" ")')
		[ -z "$down" ] || { t_fail "page $pages: went down: $down"; break; }
	fi
	cp "$TG_TMP/pf.prom.json" "$TG_TMP/prev.json"
	prev=$TG_TMP/prev.json
done
wait "$SENDER" 2>/dev/null
diag "$pages pages while 8,000 datagrams went out"
[ "$pages" -ge 5 ] || t_fail "only $pages pages while the traffic flowed: nothing was checked under traffic"
page "$TG_TMP/p3.prom" || t_fail "no page"
t_expect "after the traffic: sum = internet bytes" "$(dst_sum "$TG_TMP/p3.prom.json" crawl egress)" \
	"$(ns_bytes "$TG_TMP/p3.prom.json" crawl egress)"
t_expect "after the traffic: 198.18.8.0/24 (240,000 + 1,000,000)" \
	"$(dst_of "$TG_TMP/p3.prom.json" crawl egress 198.18.8.0/24)" 1240000
t_end

HEAVY="198.18.200.1,198.18.201.1,198.18.202.1,198.18.203.1,198.18.204.1"
# 100,000 flows of one namespace are more than its default share of the conntrack table
# (a quarter): the ceiling is raised for this phase, which measures the ledger
CONF=$(tg_conf '.internetGuard = {destinations: {top: 5, prefixLength: 32, tracked: 1024}} | .accounting = {retainSeconds: 2} | .nodeAccess = {namespaceConnections: 200000}')
t_begin "the agent's config (prefixLength 32, 1,024 tracked) makes crawl's sets anew; its book starts again"
jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$CL.tmp" && mv "$CL.tmp" "$CL"
crawl_remade() { N nft list set inet tollgate dst_crawl_egress 2>/dev/null | grep -q 'prefixLength 32 top 5'; }
wait_for 10 crawl_remade || t_fail "dst_crawl_egress not made anew: $(N nft list set inet tollgate dst_crawl_egress 2>&1 | head -8)"
N nft list set inet tollgate dst_crawl_ingress | grep -q "size 1024" || t_fail "dst_crawl_ingress: no 'size 1024'"
page "$TG_TMP/p4.prom" || t_fail "no page"
t_expect "crawl's top after the change" "$(dst_top "$TG_TMP/p4.prom.json" crawl egress)" ""
t_expect "crawl's sum after the change (all other)" "$(dst_of "$TG_TMP/p4.prom.json" crawl egress other)" \
	"$(ns_bytes "$TG_TMP/p4.prom.json" crawl egress)"
t_end

t_begin "100,000 destinations from one pod: the set stays at 1,024, every datagram goes out, the 5 heavy ones are the top to the byte"
pod_add flood-a flood "$CONF" || { t_fail "ADD flood-a: rc=$TG_RC $TG_OUT"; tg_diag_last; }
N nft list set inet tollgate dst_flood_egress | grep -q "size 1024" || t_fail "dst_flood_egress: no 'size 1024'"
rss_before=$(awk '/^VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
ip netns exec "$TG_ID-flood-a" "$PY" "$SEND" send --dst "$HEAVY" --count 200 --size "$SIZE" >/dev/null
rx0=$(rx_packets)
sprayed=$(ip netns exec "$TG_ID-flood-a" "$PY" "$SEND" spray --first 198.18.0.1 --count 100000 --size 72 --skip "$HEAVY" --timeout 120)
rx1=$(rx_packets)
t_expect "sprayed" "$sprayed" 100000
[ $((rx1 - rx0)) -ge 100000 ] || t_fail "the internet host got $((rx1 - rx0)) packets of 100,000: the full set dropped traffic"
t_expect "dst_flood_egress elements (full, never more)" "$(elements dst_flood_egress)" 1024
ip netns exec "$TG_ID-flood-a" "$PY" "$SEND" send --dst "$HEAVY" --count 200 --size "$SIZE" >/dev/null
page "$TG_TMP/p5.prom" || t_fail "no page"
t_expect "flood's top 5" "$(dst_top "$TG_TMP/p5.prom.json" flood egress)" \
	"198.18.200.1/32,198.18.201.1/32,198.18.202.1/32,198.18.203.1/32,198.18.204.1/32"
for h in ${HEAVY//,/ }; do
	t_expect "$h egress" "$(dst_of "$TG_TMP/p5.prom.json" flood egress "$h/32")" 400000
done
t_expect "other: the 100,000 of 100 bytes" "$(dst_of "$TG_TMP/p5.prom.json" flood egress other)" 10000000
t_expect "sum of flood's egress series = its internet bytes" "$(dst_sum "$TG_TMP/p5.prom.json" flood egress)" \
	"$(ns_bytes "$TG_TMP/p5.prom.json" flood egress)"
# the periodic take runs between scrapes too: give it one
sleep 11
rss_after=$(awk '/^VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
diag "agent RSS: ${rss_before} kB before, ${rss_after} kB after 100,000 destinations"
[ $((rss_after - rss_before)) -le "$RSS_GROWTH_KB" ] || t_fail "the agent grew by $((rss_after - rss_before)) kB"
t_end

t_begin "DEL every pod: retiring the namespaces takes their sets and chains along"
for p in crawl-a flood-a; do pod_del "$p" "$CONF" || t_fail "DEL $p: rc=$TG_RC $TG_OUT"; done
sets_gone() { ! N nft list set inet tollgate dst_crawl_egress >/dev/null 2>&1 && ! N nft list set inet tollgate dst_flood_ingress >/dev/null 2>&1; }
wait_for 15 sets_gone || t_fail "sets still there after retainSeconds: $(N nft list sets inet tollgate | grep -c 'set dst_')"
N nft list chain inet tollgate guard_in_crawl >/dev/null 2>&1 && t_fail "guard_in_crawl still there"
page "$TG_TMP/p6.prom" || t_fail "no page"
t_expect "crawl's destination series after retiring" "$(dst_of "$TG_TMP/p6.prom.json" crawl egress other)" absent
t_end

tap_done
