#!/usr/bin/env bash
# The agent's IMDS sync never blocks its loop: IMDS stalls for 10 s (every
# request that arrives in that window is answered only at its end) while
# the agent syncs every 2 s and reports to an allocator every second. During
# the stall /metrics answers every scrape promptly (each < 0.5 s), reports
# keep coming once a period (no gap over 1.6 s), and a lease the allocator
# stops renewing runs out on time (lease 4 s: lease-expired within 5.5 s);
# IMDS is asked at most once a second, the syncs the stall cost are counted
# as failures, and once IMDS answers again a sync succeeds (its timestamp
# moves on). Then IMDS answers 410 (not ready yet) twice and 200: retried
# within seconds, not after the back-off of a failing IMDS.
#
#   node ($TG_ID-node, topology from lib.sh), eth0 MAC 00:0d:3a:f8:06:ec
#     lo  127.0.0.1:$IMDS_PORT fake_imds.py, 127.0.0.1:$APORT fake_allocator.py,
#         127.0.0.1:$PORT the agent
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_agent_imds.sh
# shellcheck disable=SC2016,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
FIX=$TG_ROOT/tests/fixtures/imds
IMDS_PORT=18097
PORT=19651
APORT=19652
[ -x "$AGENT" ] || { echo "not ok - preconditions: $AGENT not found (run make)"; exit 1; }

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_NODE" link set eth0 address 00:0d:3a:f8:06:ec || tap_bail "cannot set the MAC"
ip -n "$TG_NODE" addr add 10.0.0.4/24 dev eth0 || tap_bail "cannot add 10.0.0.4"
ICTL=$TG_TMP/imds.ctl
ILOG=$TG_TMP/imds.log
CTL=$TG_TMP/alloc.ctl
RLOG=$TG_TMP/alloc.log
ALOG=$TG_TMP/agent.log
: >"$ILOG"
: >"$RLOG"
imds_ctl() { printf '%s\n' "$1" >"$ICTL.tmp" && mv -f "$ICTL.tmp" "$ICTL"; }
ctl() { printf '%s\n' "$1" >"$CTL.tmp" && mv -f "$CTL.tmp" "$CTL"; }
imds_ctl '{"mode": "normal", "statuses": [200]}'
tg_imds_start "$TG_NODE" "$IMDS_PORT" --fixture "$FIX/one_nic.json" --log "$ILOG" --control "$ICTL"
ctl '{"mode": "grant", "leaseMs": 4000, "grants": {"datasets": {"grant": 2500000, "safeShare": 500000, "nodes": 3}}}'
ip netns exec "$TG_NODE" python3 "$TG_LIB_DIR/fake_allocator.py" --port "$APORT" --log "$RLOG" \
	--control "$CTL" >/dev/null 2>&1 &
TG_PIDS+=("$!")
wait_for 5 _tg_tcp_open "$TG_NODE" "$APORT" || tap_bail "the fake allocator did not start"
t_end

CONF=$(tg_conf '.ipam = {source: "imds", imdsURL: "http://127.0.0.1:\($iport)", cooldownSeconds: 0}
	| .shaping = {internetEgress: {namespaceDefault: "1G", podDefault: "500M"}}
	| .budgets = {allocator: "http://127.0.0.1:\($aport)", reportSeconds: 1, leaseSeconds: 4, fallback: "10M"}' \
	--argjson iport "$IMDS_PORT" --argjson aport "$APORT")
mkdir -p "$TG_TMP/cm"
jq -c '{cniVersion, name, plugins: [.]}' <<<"$CONF" >"$TG_TMP/cm/tollgate.conflist"

http_ms() { # PATH -> how long one GET took, in ms (9999: no answer within 3 s)
	ip netns exec "$TG_NODE" curl -s -o /dev/null -w '%{time_total}' --max-time 3 "http://127.0.0.1:$PORT$1" |
		awk '{ t = $1 + 0; printf "%d", (t > 0 ? t * 1000 : 9999) }'
}
metric() { # NAME{LABELS} -> value (empty when absent)
	ip netns exec "$TG_NODE" curl -s --max-time 3 "http://127.0.0.1:$PORT/metrics" |
		awk -v m="$1" '$1 == m { print $2 }'
}
state_is() { # STATE: the budget of namespace datasets is in it
	ip netns exec "$TG_NODE" curl -s --max-time 3 "http://127.0.0.1:$PORT/metrics" |
		awk -v s="state=\"$1\"" '$1 ~ /^tollgate_budget_state\{/ && $1 ~ /namespace="datasets"/ && index($1, s) && $2 == 1 { f = 1 } END { exit !f }'
}
ready() { [ "$(ip netns exec "$TG_NODE" curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$PORT/readyz")" = 200 ]; }
# the largest gap between two consecutive reports logged after line $1, in ms
report_gap_max() {
	tail -n +"$(($1 + 1))" "$RLOG" | jq -r '.t' |
		awk 'NR > 1 { g = ($1 - p) * 1000; if (g > m) m = g } { p = $1 } END { printf "%d", m }'
}
# the smallest gap between two IMDS requests logged after line $1, in ms
imds_gap_min() {
	tail -n +"$(($1 + 1))" "$ILOG" |
		awk 'NR > 1 { g = ($1 - p) * 1000; if (m == "" || g < m) m = g } { p = $1 } END { printf "%d", m == "" ? 99999 : m }'
}

t_begin "the agent syncs from IMDS, declares and reports a budgeted pod's grant"
ip netns exec "$TG_NODE" "$AGENT" --config "$TG_TMP/cm/tollgate.conflist" --listen "127.0.0.1:$PORT" \
	--node-name node-a --declare-interval 5 --gc-interval 60 --sync-interval 2 \
	--page-cache-ms 0 2>>"$ALOG" &
AGENT_PID=$!
TG_PIDS+=("$AGENT_PID")
wait_for 20 ready || t_fail "not ready within 20 s: $(tail -3 "$ALOG")"
pod_add d1 datasets "$CONF" || t_fail "ADD d1: $TG_OUT $TG_ERR"
wait_for 5 state_is granted || t_fail "not granted: $(tail -3 "$ALOG")"
[ "$(metric 'tollgate_agent_syncs_total{result="ok"}')" -ge 1 ] 2>/dev/null || t_fail "no sync counted"
t_end

t_begin "IMDS stalls for 10 s: /metrics answers each scrape within 0.5 s, reports keep their period, a lease runs out on time"
sleep 1.5
ok0=$(metric 'tollgate_agent_syncs_total{result="ok"}')
err0=$(metric 'tollgate_agent_syncs_total{result="error"}')
ts0=$(metric tollgate_agent_last_sync_success_timestamp_seconds)
i0=$(wc -l <"$ILOG")
r0=$(wc -l <"$RLOG")
until=$(awk -v n="$(date +%s.%N)" 'BEGIN { printf "%.3f", n + 10 }')
imds_ctl "{\"mode\": \"stall\", \"stallUntil\": $until, \"statuses\": [200]}"
# a second in: the allocator stops renewing the lease (4 s)
sleep 1
ctl '{"mode": "status", "status": 500}'
t0=$(date +%s.%N)
expired=""
worst=0 n=0 slow=0
while awk -v u="$until" -v n="$(date +%s.%N)" 'BEGIN { exit !(n < u) }'; do
	ms=$(http_ms /metrics)
	n=$((n + 1))
	[ "$ms" -gt "$worst" ] && worst=$ms
	[ "$ms" -ge 500 ] && slow=$((slow + 1))
	if [ -z "$expired" ] && state_is lease-expired; then
		expired=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	fi
	sleep 0.2
done
gap=$(report_gap_max "$r0")
stalled=$(tail -n +"$((i0 + 1))" "$ILOG" | grep -c ' stall ')
diag "during the stall: $n scrapes of /metrics, worst $worst ms, $slow over 500 ms; widest gap between reports $gap ms;" \
	"lease-expired ${expired:-never} s after the allocator stopped (lease 4 s); $stalled IMDS requests stalled"
[ "$n" -ge 10 ] || t_fail "only $n scrapes in 10 s"
[ "$worst" -lt 500 ] || t_fail "/metrics took $worst ms ($slow of $n scrapes over 500 ms)"
[ "$gap" -le 1600 ] || t_fail "reports $gap ms apart (reportSeconds 1)"
if [ -z "$expired" ] || awk -v e="$expired" 'BEGIN { exit !(e > 5.5) }'; then
	t_fail "lease-expired ${expired:-never} s after the allocator stopped renewing (lease 4 s)"
fi
[ "$stalled" -ge 1 ] || t_fail "no IMDS request during the stall"
t_end

t_begin "after the stall: IMDS asked at most once a second, the stalled syncs counted, a sync succeeds"
synced() { [ "$(metric 'tollgate_agent_syncs_total{result="ok"}')" -gt "$ok0" ] 2>/dev/null; }
wait_for 10 synced || t_fail "no successful sync after the stall: $(tail -3 "$ALOG")"
gapi=$(imds_gap_min "$i0")
[ "$gapi" -ge 900 ] || t_fail "two IMDS requests $gapi ms apart"
[ "$(metric 'tollgate_agent_syncs_total{result="error"}')" -gt "$err0" ] 2>/dev/null ||
	t_fail "the stalled syncs are not counted as failures: $err0 -> $(metric 'tollgate_agent_syncs_total{result="error"}')"
ts1=$(metric tollgate_agent_last_sync_success_timestamp_seconds)
awk -v a="$ts0" -v b="$ts1" 'BEGIN { exit !(b > a) }' || t_fail "last sync timestamp $ts0 -> $ts1"
ready || t_fail "not ready after the stall"
t_end

t_begin "IMDS not ready yet (410, 410, then 200): retried within seconds, never twice a second"
ctl '{"mode": "grant", "leaseMs": 4000, "grants": {"datasets": {"grant": 2500000, "safeShare": 500000, "nodes": 3}}}'
ok1=$(metric 'tollgate_agent_syncs_total{result="ok"}')
i1=$(wc -l <"$ILOG")
imds_ctl '{"mode": "normal", "statuses": [410, 410, 410, 410, 200]}'
synced1() { [ "$(metric 'tollgate_agent_syncs_total{result="ok"}')" -gt "$ok1" ] 2>/dev/null; }
wait_for 20 synced1 || t_fail "no successful sync after 410s: $(tail -3 "$ALOG")"
n410=$(tail -n +"$((i1 + 1))" "$ILOG" | grep -c ' 410 ')
t_expect "410 answers" "$n410" 4
gapi=$(imds_gap_min "$i1")
[ "$gapi" -ge 900 ] || t_fail "two IMDS requests $gapi ms apart"
t_end

t_begin "SIGTERM: exit 0"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID"
t_expect "exit status" "$?" 0
t_end

tap_done
