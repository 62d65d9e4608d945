#!/usr/bin/env bash
# Policy always lands: a config's caps reach every running pod and stay.
#   - an ADD made with an older config never puts its namespace's class back
#     to that config's ceil (the class is shared; the reshape owns its rate)
#   - the agent reshapes at start-up: a config changed while it was down
#     reaches running pods, and a reshape a kill left pending is finished
#   - the agent holds every pod's classes to its caps on its declaration
#     timer: a class changed or deleted by hand is put back and counted
#     (tollgate_agent_repairs_total{object="tc_pod_classes"})
#   - a pod that an ADD with the old conflist made after the agent reloaded
#     (the runtime had not seen the new one yet) ends up with the new caps
#   - installation: the conflist installed is the bytes that were validated
#     (a file swapped to invalid bytes before the install is not what lands),
#     temp files a kill left in the CNI directories are removed
#
#   pods p1, p2, p3 in namespace "team", one netns each
#     eth0 10.1.0.x/32 -- veth tg* --
#   node ($TG_ID-node): tollgate-inet, node 1G > namespace "team" > pod;
#     127.0.0.1:$PORT the agent; eth0 MAC 00:0d:3a:f8:06:ec and
#     127.0.0.1:$IMDS_PORT fake_imds.py for the installation's case
#   (the rest of the topology as drawn in lib.sh; not used here)
#
# Policies: A (namespace 500M, pod 100M, ingress 200M) and B (300M, 50M, 80M).
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_policy.sh
# shellcheck disable=SC2016,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
PORT=19627
IMDS_PORT=18093
for b in "$AGENT" "$IPAM_BIN"; do
	[ -x "$b" ] || { echo "not ok - preconditions: $b not found (run make)"; exit 1; }
done

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
t_end

CONF_A=$(tg_conf '.shaping={internetEgress: {node: "1G", namespaceDefault: "500M", podDefault: "100M"},
	internetIngress: {podDefault: "200M"}}')
CONF_B=$(jq -c '.shaping.internetEgress.namespaceDefault = "300M" | .shaping.internetEgress.podDefault = "50M"
	| .shaping.internetIngress.podDefault = "80M"' <<<"$CONF_A")
CM=$TG_TMP/cm
NETD=$TG_TMP/net.d
CNIBIN=$TG_TMP/cnibin
ALOG=$TG_TMP/agent.log
mkdir -p "$CM" "$NETD" "$CNIBIN"
conflist() { jq -c '{cniVersion, name, plugins: [.]}' <<<"$1"; }
conflist "$CONF_A" >"$TG_TMP/a.conflist"
conflist "$CONF_B" >"$TG_TMP/b.conflist"
STATE=$(tg_state_file)

IPAM() { ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" "$@"; }
# ceil_of DEV CLASSID -> "100Mbit" (empty when the class is missing)
ceil_of() {
	tc -n "$TG_NODE" class show dev "$1" classid "$2" 2>/dev/null |
		awk '{for (i = 1; i < NF; i++) if ($i == "ceil") {print $(i + 1); exit}}'
}
att() { jq -c --arg ip "${POD_IP[$1]}" '.attachments[] | select(.ip == $ip)' "$STATE"; }
minor() { printf '1:%x' "$(att "$1" | jq -r ".shaping.$2")"; }
pod_egress() { ceil_of tollgate-inet "$(minor "$1" podClass)"; }  # pod -> internet
pod_ingress() { ceil_of tollgate-inetdl "$(minor "$1" podClass)"; } # internet -> pod
ns_egress() { ceil_of tollgate-inet "$(minor "$1" namespaceClass)"; }      # the pod's namespace
caps() { echo "$(pod_egress "$1") $(pod_ingress "$1") $(ns_egress "$1")"; }
CAPS_A="100Mbit 200Mbit 500Mbit"
CAPS_B="50Mbit 80Mbit 300Mbit"

AGENT_PID=""
agent_start() { # CONFLIST [extra args]
	ip netns exec "$TG_NODE" "$AGENT" --config "$1" --listen "127.0.0.1:$PORT" \
		--declare-interval 1 --gc-interval 60 --sync-interval 300 --page-cache-ms 0 \
		"${@:2}" 2>>"$ALOG" &
	AGENT_PID=$!
	TG_PIDS+=("$AGENT_PID")
}
agent_stop() {
	[ -n "$AGENT_PID" ] || return 0
	kill -TERM "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
	AGENT_PID=""
}
agent_once() { # CONFLIST
	ip netns exec "$TG_NODE" "$AGENT" --config "$1" --listen "127.0.0.1:$PORT" --once 2>>"$ALOG"
}
http_get() { ip netns exec "$TG_NODE" curl -s -o "$TG_TMP/http.out" -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT$1"; }
ready() { [ "$(http_get /readyz)" = 200 ]; }
metric() { # NAME{LABELS} -> value (empty when absent)
	http_get /metrics >/dev/null
	awk -v m="$1" '$1 == m { print $2 }' "$TG_TMP/http.out"
}
REPAIRS='tollgate_agent_repairs_total{object="tc_pod_classes"}'

# ------------------------------------------------- the namespace's class
t_begin "an ADD with an older config leaves its namespace's class as the reshape set it"
pod_add p1 team "$CONF_A" || { t_fail "p1 ADD rc=$TG_RC"; tg_diag_last; }
t_expect "p1 under A" "$(caps p1)" "$CAPS_A"
IPAM --config "$TG_TMP/b.conflist" reshape >/dev/null 2>"$TG_TMP/rs.err" || t_fail "reshape to B: $(cat "$TG_TMP/rs.err")"
t_expect "p1 reshaped to B" "$(caps p1)" "$CAPS_B"
pod_add p2 team "$CONF_A" || { t_fail "p2 ADD rc=$TG_RC"; tg_diag_last; }
# the control: p2's own classes are A's (its ADD had A), so the ADD did run with A
t_expect "p2's own classes (its ADD's config, A)" "$(pod_egress p2) $(pod_ingress p2)" "100Mbit 200Mbit"
t_expect "namespace team's class after p2's ADD with A" "$(ns_egress p2)" 300Mbit
t_end

# -------------------------------------------------------------- start-up
t_begin "agent start-up: a config changed while it was down reaches running pods"
# p2 was recorded with A; B is the config now
t_expect "p2 before" "$(pod_egress p2) $(pod_ingress p2)" "100Mbit 200Mbit"
agent_once "$TG_TMP/b.conflist" || t_fail "--once: $(tail -3 "$ALOG")"
t_expect "p2 after the agent's start-up" "$(caps p2)" "$CAPS_B"
t_expect "p1 after the agent's start-up" "$(caps p1)" "$CAPS_B"
t_expect "p2's record" "$(att p2 | jq -c '[.shaping.internetEgress, .shaping.internetIngress]')" "[50000000,80000000]"
t_end

t_begin "agent start-up: a reshape a kill left pending is finished"
# What a reshape to A killed after saving leaves: A's caps recorded, marked
# pending, the classes still at B's.
jq -c --arg ip "${POD_IP[p1]}" '(.attachments[] | select(.ip == $ip)) |=
	(.shaping.internetEgress = 100000000 | .shaping.internetIngress = 200000000
	 | .shaping.namespaceInternetEgress = 500000000 | .reshapePending = true)' "$STATE" >"$STATE.edit" &&
	chmod 600 "$STATE.edit" && mv "$STATE.edit" "$STATE"
t_expect "p1 pending" "$(att p1 | jq -c '.reshapePending')" true
t_expect "p1's classes before" "$(caps p1)" "$CAPS_B"
agent_once "$TG_TMP/a.conflist" || t_fail "--once: $(tail -3 "$ALOG")"
t_expect "p1's classes after the agent's start-up" "$(caps p1)" "$CAPS_A"
t_expect "p1 pending after" "$(att p1 | jq -c '.reshapePending // false')" false
t_end

# ------------------------------------------------------------- reconcile
t_begin "the agent puts a pod's drifted classes back on its declaration timer, and counts them"
agent_start "$TG_TMP/a.conflist"
wait_for 10 ready || t_fail "not ready: $(tail -3 "$ALOG")"
sleep 2 # two declarations on pods that are right: no repair (the control)
t_expect "repairs while nothing drifted" "$(metric "$REPAIRS")" 0
t_expect "p1 before" "$(caps p1)" "$CAPS_A"
tc -n "$TG_NODE" class change dev tollgate-inet classid "$(minor p1 podClass)" parent "$(minor p1 namespaceClass)" \
	htb rate 1Mbit ceil 7Mbit || t_fail "cannot change p1's class"
tc -n "$TG_NODE" class change dev tollgate-inetdl classid "$(minor p2 podClass)" parent "$(minor p2 namespaceClass)" \
	htb rate 1Mbit ceil 3Mbit || t_fail "cannot change p2's download class"
tc -n "$TG_NODE" class change dev tollgate-inet classid "$(minor p1 namespaceClass)" parent 1:1 \
	htb rate 1Mbit ceil 9Mbit || t_fail "cannot change the namespace's class"
# (read back now, the changes may already be undone: the agent's timer runs
# every second; the repairs counted below, 0 until now, show they were seen)
back() { [ "$(caps p1)" = "$CAPS_A" ] && [ "$(caps p2)" = "$CAPS_A" ]; }
wait_for 10 back || t_fail "not put back: p1 $(caps p1), p2 $(caps p2): $(tail -3 "$ALOG")"
n=$(metric "$REPAIRS")
[ "${n:-0}" -ge 2 ] 2>/dev/null || t_fail "repairs counted: '$n', expected at least 2"
t_end

# ------------------------------------------------------------------ race
t_begin "a pod an ADD made with the old conflist after the agent reloaded gets the new caps"
cp "$TG_TMP/a.conflist" "$TG_TMP/live.conflist"
agent_stop
agent_start "$TG_TMP/live.conflist"
wait_for 10 ready || t_fail "not ready: $(tail -3 "$ALOG")"
reloads() { metric 'tollgate_agent_config_reloads_total{result="ok"}'; }
r0=$(reloads)
cp "$TG_TMP/b.conflist" "$TG_TMP/live.conflist.tmp" && mv "$TG_TMP/live.conflist.tmp" "$TG_TMP/live.conflist"
reloaded() { [ "$(reloads)" -gt "$r0" ] 2>/dev/null && [ "$(caps p1)" = "$CAPS_B" ]; }
wait_for 10 reloaded || t_fail "B not applied: p1 $(caps p1): $(tail -3 "$ALOG")"
# the runtime has not seen the new conflist yet: p3's ADD has A
pod_add p3 team "$CONF_A" || { t_fail "p3 ADD rc=$TG_RC"; tg_diag_last; }
t_expect "namespace team's class right after p3's ADD with A" "$(ns_egress p3)" 300Mbit
new_caps() { [ "$(caps p3)" = "$CAPS_B" ]; }
wait_for 10 new_caps || t_fail "p3 kept the old caps: $(caps p3): $(tail -3 "$ALOG")"
t_expect "p3's record" "$(att p3 | jq -c '[.shaping.internetEgress, .shaping.internetIngress, .reshapePending // false]')" \
	"[50000000,80000000,false]"
agent_stop
for p in p1 p2 p3; do pod_del "$p" "$CONF_B" || t_fail "DEL $p rc=$TG_RC"; done
t_end

# ---------------------------------------------------------- installation
t_begin "installation: the validated bytes, and no temp file a kill left"
ip -n "$TG_NODE" link set eth0 address 00:0d:3a:f8:06:ec || t_fail "cannot set the MAC"
ip -n "$TG_NODE" addr add 10.0.0.4/24 dev eth0 2>/dev/null
CTL=$TG_TMP/imds.ctl
imds_ctl() { printf '%s\n' "$1" >"$CTL.tmp" && mv -f "$CTL.tmp" "$CTL"; }
imds_ctl '{"mode": "normal", "statuses": [500]}'
tg_imds_start "$TG_NODE" "$IMDS_PORT" --fixture "$TG_ROOT/tests/fixtures/imds/one_nic.json" \
	--log "$TG_TMP/imds.log" --control "$CTL"
conflist "$(jq -c --arg u "http://127.0.0.1:$IMDS_PORT" '.name = "tgpolicyi" | .ipam = {source: "imds", imdsURL: $u}' \
	<<<"$CONF_A")" >"$CM/valid.conflist"
cp "$CM/valid.conflist" "$CM/10-tollgate.conflist"
# what a SIGKILL between mkostemp and rename leaves, and files that are not ours (controls)
: >"$CNIBIN/.tollgate.Ab3dE9"
: >"$NETD/.10-tollgate.conflist.x7Yz0Q"
: >"$CNIBIN/.tollgate.keep"
: >"$CNIBIN/.other.Ab3dE9"
: >"$NETD/.10-tollgate.conflist.notours"
ip netns exec "$TG_NODE" "$AGENT" --config "$CM/10-tollgate.conflist" --listen "127.0.0.1:$PORT" \
	--cni-conf-dir "$NETD" --cni-bin-dir "$CNIBIN" --plugin "$TOLLGATE_BIN_DIR/tollgate" \
	--declare-interval 1 --sync-interval 300 --page-cache-ms 0 2>>"$ALOG" &
AGENT_PID=$!
TG_PIDS+=("$AGENT_PID")
healthy() { [ "$(http_get /healthz)" = 200 ]; }
wait_for 10 healthy || t_fail "the agent did not start: $(tail -3 "$ALOG")"
t_expect "installed while IMDS fails" "$(find "$NETD" "$CNIBIN" -mindepth 1 -name '[!.]*' | tr '\n' ' ')" ""
# the ConfigMap's file now holds bytes that do not validate: the config in force stays
printf '{"cniVersion": "1.0.0", "name": "tgpolicyi", "plugins": [{"type": "tollgate", "mtu": "big"}]}\n' \
	>"$CM/10-tollgate.conflist"
errs() { [ "$(metric 'tollgate_agent_config_reloads_total{result="error"}')" -ge 1 ] 2>/dev/null; }
wait_for 10 errs || t_fail "the invalid config was not refused: $(tail -3 "$ALOG")"
imds_ctl "$(jq -cn --arg f "$TG_ROOT/tests/fixtures/imds/one_nic.json" '{fixture: $f, mode: "normal", statuses: [200]}')"
wait_for 20 ready || t_fail "not ready: $(tail -3 "$ALOG")"
cmp -s "$NETD/10-tollgate.conflist" "$CM/valid.conflist" ||
	t_fail "the installed conflist is not the validated one: $(head -c 200 "$NETD/10-tollgate.conflist")"
cmp -s "$CNIBIN/tollgate" "$TOLLGATE_BIN_DIR/tollgate" || t_fail "the plugin is not installed"
t_expect "temp files left by a kill" "$(find "$CNIBIN" "$NETD" -mindepth 1 -regextype posix-extended \
	-regex '.*/\.(tollgate|10-tollgate\.conflist)\.[A-Za-z0-9]{6}' | wc -l)" 0
for f in "$CNIBIN/.tollgate.keep" "$CNIBIN/.other.Ab3dE9" "$NETD/.10-tollgate.conflist.notours"; do
	[ -e "$f" ] || t_fail "$f is not the agent's and went"
done
agent_stop
t_end

tap_done
