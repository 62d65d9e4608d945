#!/usr/bin/env bash
# tollgate-agent, the node daemon, in a throwaway node namespace with a fake
# IMDS: nothing is installed and /readyz says 503 while the pool is empty
# (IMDS asked at most once a second while it fails); then it syncs, declares,
# installs the plugin and the conflist (cmp) and turns ready; pods ADDed
# through the installed plugin, counted and timed (the ADD histogram's
# _count the ADDs run, its _sum within the time they took); a flushed table
# and a deleted IFB repaired within a period and counted by object; the
# node's sysctls declared (accept_source_route, 1 in a new namespace, pinned
# to 0 on conf.all and conf.default; set to 1 again, lowered within a period
# and counted); a
# ConfigMap swap through ..data (as kubelet does it) reaching running pods'
# classes and the installed conflist; a pod whose netns is gone collected;
# kill -9 and restart leaving pods and store intact; the agent dropping
# every capability but CAP_NET_ADMIN and setting no_new_privs itself;
# SIGTERM exits 0 within a second; --once and the daemon started under a
# bounding set of CAP_NET_ADMIN alone with no_new_privs (as
# allowPrivilegeEscalation: false starts it).
#
#   node ($TG_ID-node, topology from lib.sh), eth0 MAC 00:0d:3a:f8:06:ec
#     lo  127.0.0.1:$IMDS_PORT fake_imds.py, 127.0.0.1:$PORT the agent
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_agent.sh
# shellcheck disable=SC2016,SC1091  # jq filters with $vars
# shellcheck disable=SC2119,SC2120  # agent_start's extra agent options are optional
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
FIX=$TG_ROOT/tests/fixtures/imds
IMDS_PORT=18083
PORT=19617
NET=tgagent

if [ ! -x "$AGENT" ]; then
	echo "not ok - preconditions: $AGENT not found (run make)"
	exit 1
fi

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_NODE" link set eth0 address 00:0d:3a:f8:06:ec || tap_bail "cannot set the MAC"
ip -n "$TG_NODE" addr add 10.0.0.4/24 dev eth0 || tap_bail "cannot add 10.0.0.4"
# the pinned sysctls off their value (a new namespace's conf.default is 1 already)
_tg_sysctl "$TG_NODE" net.ipv4.conf.all.accept_source_route 1 || tap_bail "cannot set accept_source_route"
CTL=$TG_TMP/imds.ctl
ILOG=$TG_TMP/imds.log
CM=$TG_TMP/configmap # what kubelet mounts: ..data -> ..<stamp>, FILE -> ..data/FILE
NETD=$TG_TMP/net.d
CNIBIN=$TG_TMP/cnibin
ALOG=$TG_TMP/agent.log
mkdir -p "$CM" "$NETD" "$CNIBIN"
imds_ctl() { printf '%s\n' "$1" >"$CTL.tmp" && mv -f "$CTL.tmp" "$CTL"; }
imds_ctl '{"mode": "normal", "statuses": [500]}'
: >"$ILOG"
tg_imds_start "$TG_NODE" "$IMDS_PORT" --fixture "$FIX/one_nic.json" --log "$ILOG" --control "$CTL"
t_end

# conflist POD_DEFAULT: the ConfigMap's conflist, internet egress capped per pod
conflist() {
	jq -n --arg dd "$TG_TMP/data" --arg lf "$TG_TMP/tollgate.log" --arg u "http://127.0.0.1:$IMDS_PORT" \
		--arg net "$NET" --arg pd "$1" --argjson rt "${RETAIN:-3}" '{
		cniVersion: "1.0.0", name: $net, plugins: [{
			type: "tollgate", mtu: 1500, uplink: "eth0", internalCIDRs: ["10.0.0.0/8"],
			masquerade: true, dataDir: $dd, logFile: $lf,
			ipam: {source: "imds", imdsURL: $u, cooldownSeconds: 0},
			accounting: {retainSeconds: $rt},
			shaping: {internetEgress: {podDefault: $pd}}}]}'
}
# configmap_swap STAMP POD_DEFAULT: a new version, swapped in as kubelet does
# (RETAIN: its accounting.retainSeconds, default 3)
configmap_swap() {
	mkdir -p "$CM/..$1"
	conflist "$2" >"$CM/..$1/10-tollgate.conflist"
	ln -sfn "..$1" "$CM/..data_tmp"
	mv -T "$CM/..data_tmp" "$CM/..data"
	[ -L "$CM/10-tollgate.conflist" ] || ln -s ..data/10-tollgate.conflist "$CM/10-tollgate.conflist"
}
configmap_swap v1 20M

AGENT_PID=""
agent_start() { # [extra args]
	ip netns exec "$TG_NODE" "$AGENT" --config "$CM/10-tollgate.conflist" \
		--listen "127.0.0.1:$PORT" --cni-conf-dir "$NETD" --cni-bin-dir "$CNIBIN" \
		--plugin "$TOLLGATE_BIN_DIR/tollgate" --declare-interval 2 --gc-interval 2 \
		--sync-interval 30 --page-cache-ms 0 "$@" 2>>"$ALOG" &
	AGENT_PID=$!
	TG_PIDS+=("$AGENT_PID")
}
http_get() { ip netns exec "$TG_NODE" curl -s -o "$TG_TMP/http.out" -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT$1"; }
ready() { [ "$(http_get /readyz)" = 200 ]; }
metric() { # NAME{LABELS} -> value (empty when absent)
	http_get /metrics >/dev/null
	awk -v m="$1" '$1 == m { print $2 }' "$TG_TMP/http.out"
}
node_nft() { ip netns exec "$TG_NODE" nft "$@"; }
table_has_pod() { node_nft list set inet tollgate pods 2>/dev/null | grep -qw "$1"; }
# the plugin entry as a runtime hands it to the plugin: name and cniVersion added
plugin_conf() { jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$NETD/10-tollgate.conflist"; }
pod_class_ceil() { # IP -> the ceil of the pod's class on tollgate-inet
	local minor
	minor=$(jq -r --arg ip "$1" '.attachments[] | select(.ip == $ip) | .shaping.podClass' \
		"$TG_TMP/data/$NET/state.json")
	tc -n "$TG_NODE" class show dev tollgate-inet classid "1:$(printf '%x' "$minor")" 2>/dev/null |
		grep -o 'ceil [0-9A-Za-z]*' | head -1
}

t_begin "while IMDS fails: not ready, nothing installed, IMDS asked at most once a second"
agent_start
sleep 4
t_expect "readyz" "$(http_get /readyz)" 503
t_expect "healthz" "$(http_get /healthz)" 200
t_expect "installed" "$(find "$NETD" "$CNIBIN" -mindepth 1 | tr '\n' ' ')" ""
n=$(wc -l <"$ILOG")
{ [ "$n" -ge 2 ] && [ "$n" -le 5 ]; } || t_fail "IMDS requests in 4 s: $n (expected 2-5)"
gap=$(awk 'NR > 1 { g = ($1 - p) * 1000; if (m == "" || g < m) m = g } { p = $1 } END { printf "%d", m == "" ? 99999 : m }' "$ILOG")
[ "$gap" -ge 900 ] || t_fail "two IMDS requests $gap ms apart"
[ "$(metric 'tollgate_agent_syncs_total{result="error"}')" -ge 2 ] 2>/dev/null ||
	t_fail "sync errors not counted: $(metric 'tollgate_agent_syncs_total{result="error"}')"
t_end

t_begin "IMDS answers: synced, declared, installed, ready"
imds_ctl "$(jq -cn --arg f "$FIX/one_nic.json" '{fixture: $f, mode: "normal", statuses: [200]}')"
wait_for 20 ready || t_fail "not ready within 20 s: $(tail -5 "$ALOG")"
cmp -s "$NETD/10-tollgate.conflist" "$CM/10-tollgate.conflist" || t_fail "conflist not installed as given"
cmp -s "$CNIBIN/tollgate" "$TOLLGATE_BIN_DIR/tollgate" || t_fail "plugin binary not installed"
[ -x "$CNIBIN/tollgate" ] || t_fail "installed plugin not executable"
node_nft list table inet tollgate >/dev/null 2>&1 || t_fail "table inet tollgate not declared"
ip -n "$TG_NODE" link show tollgate-inet >/dev/null 2>&1 || t_fail "tollgate-inet not declared"
t_expect "ready metric" "$(metric tollgate_agent_ready)" 1
t_expect "pool" "$(jq '.pool.addresses | length' "$TG_TMP/data/$NET/state.json")" 1
[ -z "$(find "$NETD" -mindepth 1 -maxdepth 1 -name '.*')" ] || t_fail "a temp file left in $NETD: $(ls -a "$NETD")"
t_end

node_sysctl() { ip netns exec "$TG_NODE" sysctl -n "$1"; }
t_begin "the node's sysctls declared: ip_forward raised, accept_source_route pinned to 0"
t_expect "ip_forward" "$(node_sysctl net.ipv4.ip_forward)" 1
t_expect "conf.all.accept_source_route" "$(node_sysctl net.ipv4.conf.all.accept_source_route)" 0
t_expect "conf.default.accept_source_route" "$(node_sysctl net.ipv4.conf.default.accept_source_route)" 0
# an interface made after the declaration takes conf.default's 0
ip -n "$TG_NODE" link add tgsrr0 type veth peer name tgsrr1 || t_fail "cannot add a veth pair"
t_expect "a new link's accept_source_route" "$(node_sysctl net.ipv4.conf.tgsrr0.accept_source_route)" 0
ip -n "$TG_NODE" link del tgsrr0
t_end

t_begin "pods through the installed plugin"
# shellcheck disable=SC2034  # read by lib.sh's tg_exec
TG_BIN=$CNIBIN/tollgate
CONF=$(plugin_conf)
# how long the ADDs took as the runtime sees them (the netns made too): the plugin's own sum is less
ADD_NS=0
timed_add() { # pod_add's arguments; its time added to ADD_NS
	local t0 rc
	t0=$(date +%s%N)
	pod_add "$@"
	rc=$?
	ADD_NS=$((ADD_NS + $(date +%s%N) - t0))
	return "$rc"
}
timed_add a1 team-a "$CONF" || t_fail "ADD a1 rc=$TG_RC $TG_OUT"
timed_add a2 team-b "$CONF" || t_fail "ADD a2 rc=$TG_RC $TG_OUT"
# (the pool is the uplink's subnet, 10.0.0.x: the fabric does not route it to the node, the
# internet host's answers come back masqueraded)
pingq "$TG_ID-a1" "$TG_INET_IP" || t_fail "a1 cannot reach the internet host"
t_expect "a1 class" "$(pod_class_ceil "${POD_IP[a1]}")" "ceil 20Mbit"
t_expect "ADDs counted" "$(metric 'tollgate_cni_operations_total{command="ADD",code="0"}')" 2
t_end

# within: the histogram's ADD sum is above 0 and at most what the ADDs took outside
add_sum_within() {
	awk -v s="$(metric 'tollgate_cni_operation_duration_seconds_sum{command="ADD"}')" -v ns="$ADD_NS" \
		'BEGIN { exit !(s != "" && s > 0 && s <= ns / 1e9) }'
}
t_begin "the ADDs' durations: _count is the ADDs run, _sum within the time they took"
t_expect "_count" "$(metric 'tollgate_cni_operation_duration_seconds_count{command="ADD"}')" 2
t_expect "+Inf bucket" "$(metric 'tollgate_cni_operation_duration_seconds_bucket{command="ADD",le="+Inf"}')" 2
add_sum_within || t_fail "_sum $(metric 'tollgate_cni_operation_duration_seconds_sum{command="ADD"}') s, the ADDs took $ADD_NS ns"
# control: a command not run has no series
t_expect "DEL's _count before any DEL" "$(metric 'tollgate_cni_operation_duration_seconds_count{command="DEL"}')" ""
t_end

t_begin "the pool runs out: the ADD's code 11 is counted and the agent syncs at once"
for i in 1 2 3 4 5 6; do timed_add "f$i" team-a "$CONF" || t_fail "ADD f$i rc=$TG_RC"; done
n_before=$(wc -l <"$ILOG")
timed_add f7 team-a "$CONF"
r=$(cni_error_problem 11)
[ -z "$r" ] || t_fail "ADD on a full pool: $r"
asked() { [ "$(wc -l <"$ILOG")" -gt "$n_before" ]; }
wait_for 3 asked || t_fail "no sync within 3 s of the pool running out (sync interval 30 s)"
t_expect "code 11 counted" "$(metric 'tollgate_cni_operations_total{command="ADD",code="11"}')" 1
for i in 1 2 3 4 5 6; do pod_del "f$i" "$CONF" || t_fail "DEL f$i rc=$TG_RC"; done
pod_ns_del f7
t_expect "DELs counted" "$(metric 'tollgate_cni_operations_total{command="DEL",code="0"}')" 6
# every ADD is timed, the refused one too; DEL has its own
t_expect "ADD _count" "$(metric 'tollgate_cni_operation_duration_seconds_count{command="ADD"}')" 9
add_sum_within || t_fail "ADD _sum $(metric 'tollgate_cni_operation_duration_seconds_sum{command="ADD"}') s, the ADDs took $ADD_NS ns"
t_expect "DEL _count" "$(metric 'tollgate_cni_operation_duration_seconds_count{command="DEL"}')" 6
t_end

t_begin "a flushed table and a deleted IFB come back within a period, counted by object"
node_nft delete table inet tollgate
ip -n "$TG_NODE" link del tollgate-inet
repaired() {
	table_has_pod "${POD_IP[a1]}" && table_has_pod "${POD_IP[a2]}" &&
		ip -n "$TG_NODE" link show tollgate-inet >/dev/null 2>&1 &&
		[ "$(pod_class_ceil "${POD_IP[a1]}")" = "ceil 20Mbit" ]
}
wait_for 8 repaired || t_fail "not repaired within 8 s: $(tail -3 "$ALOG")"
[ "$(metric 'tollgate_agent_repairs_total{object="nft_table"}')" -ge 1 ] 2>/dev/null ||
	t_fail "table repair not counted"
[ "$(metric 'tollgate_agent_repairs_total{object="tc_ifb"}')" -ge 1 ] 2>/dev/null ||
	t_fail "IFB repair not counted"
pingq "$TG_ID-a1" "$TG_INET_IP" || t_fail "a1 cannot reach the internet host after the repair"
t_end

t_begin "accept_source_route set to 1 again: lowered within a period, counted"
before=$(metric 'tollgate_agent_repairs_total{object="sysctl"}')
_tg_sysctl "$TG_NODE" net.ipv4.conf.all.accept_source_route 1
_tg_sysctl "$TG_NODE" net.ipv4.conf.default.accept_source_route 1
lowered() {
	[ "$(node_sysctl net.ipv4.conf.all.accept_source_route)" = 0 ] &&
		[ "$(node_sysctl net.ipv4.conf.default.accept_source_route)" = 0 ]
}
wait_for 8 lowered || t_fail "not lowered within 8 s: $(node_sysctl net.ipv4.conf.all.accept_source_route)"
after=$(metric 'tollgate_agent_repairs_total{object="sysctl"}')
[ "$((after - ${before:-0}))" -ge 2 ] 2>/dev/null || t_fail "sysctl repairs: $before -> $after (expected +2)"
t_end

t_begin "a ConfigMap swapped through ..data reaches running pods and the installed conflist"
configmap_swap v2 5M
reshaped() { [ "$(pod_class_ceil "${POD_IP[a1]}")" = "ceil 5Mbit" ] && [ "$(pod_class_ceil "${POD_IP[a2]}")" = "ceil 5Mbit" ]; }
wait_for 8 reshaped || t_fail "pods not reshaped: a1 $(pod_class_ceil "${POD_IP[a1]}"): $(tail -3 "$ALOG")"
wait_for 5 cmp -s "$NETD/10-tollgate.conflist" "$CM/..v2/10-tollgate.conflist" ||
	t_fail "new conflist not installed"
[ "$(metric tollgate_agent_reshaped_pods_total)" -ge 2 ] 2>/dev/null || t_fail "reshape not counted"
t_expect "reloads" "$(metric 'tollgate_agent_config_reloads_total{result="ok"}')" 1
t_end

t_begin "an invalid config keeps the one in force"
configmap_swap v3 not-a-rate
sleep 1
[ "$(metric 'tollgate_agent_config_reloads_total{result="error"}')" -ge 1 ] 2>/dev/null ||
	t_fail "invalid config not counted"
t_expect "a1 class" "$(pod_class_ceil "${POD_IP[a1]}")" "ceil 5Mbit"
cmp -s "$NETD/10-tollgate.conflist" "$CM/..v2/10-tollgate.conflist" || t_fail "an invalid conflist was installed"
configmap_swap v4 5M
t_end

t_begin "a namespace without pods keeps its counters and series through a table made anew"
reloads=$(metric 'tollgate_agent_config_reloads_total{result="ok"}')
RETAIN=600 configmap_swap v5 5M
reloaded() { [ "$(metric 'tollgate_agent_config_reloads_total{result="ok"}')" -gt "$reloads" ]; }
wait_for 5 reloaded || t_fail "retainSeconds 600 not loaded"
nc='tollgate_namespace_bytes_total{namespace="team-c",direction="egress",traffic="internet"}'
pod_add c1 team-c "$CONF" || t_fail "ADD c1 rc=$TG_RC $TG_OUT"
pingq "$TG_ID-c1" "$TG_INET_IP" || t_fail "c1 cannot reach the internet host"
# a collection sees team-c counted (with its pod), then its last pod goes
runs=$(metric tollgate_agent_gc_runs_total)
collected() { [ "$(metric tollgate_agent_gc_runs_total)" -gt "$runs" ]; }
wait_for 6 collected || t_fail "no collection ran"
pod_del c1 "$CONF" || t_fail "DEL c1 rc=$TG_RC"
before=$(metric "$nc")
[ "${before:-0}" -gt 0 ] 2>/dev/null || t_fail "team-c counted nothing: '$before'"
node_nft delete table inet tollgate || t_fail "could not delete the table"
# the declaration makes the table anew (pods' namespaces only), the collection team-c's counters
back() { [ -n "$(metric "$nc")" ] && [ "$(metric tollgate_agent_namespaces_kept_total)" -ge 1 ]; } 2>/dev/null
wait_for 10 back || t_fail "team-c's series did not come back: '$(metric "$nc")'"
after=$(metric "$nc")
[ "${after:-0}" -ge "${before:-1}" ] 2>/dev/null || t_fail "team-c went backwards: $before -> $after"
node_nft list counter inet tollgate ns_team-c_egress_internet >/dev/null 2>&1 ||
	t_fail "team-c's counter not in the table"
configmap_swap v6 5M # retainSeconds 3 again
t_end

t_begin "a pod whose netns is gone is collected"
pod_ns_del a2
gone() { ! jq -e --arg c "${POD_CID[a2]}" '.attachments | any(.containerId == $c)' "$TG_TMP/data/$NET/state.json" >/dev/null; }
wait_for 8 gone || t_fail "a2 not collected"
table_has_pod "${POD_IP[a2]}" && t_fail "a2's element is left"
[ "$(metric tollgate_agent_gc_collected_total)" -ge 1 ] 2>/dev/null || t_fail "collection not counted"
t_end

t_begin "a namespace without pods for retainSeconds (3 s here) is retired, its series with it"
nb='tollgate_namespace_bytes_total{namespace="team-b",direction="egress",traffic="internal"}'
na='tollgate_namespace_bytes_total{namespace="team-a",direction="egress",traffic="internal"}'
ns_counters() { node_nft list counters table inet tollgate 2>/dev/null | grep -c "counter ns_$1_"; }
[ "$(ns_counters team-b)" -gt 0 ] || t_fail "team-b had no counters to retire"
retired() { [ "$(ns_counters team-b)" = 0 ]; }
wait_for 12 retired || t_fail "team-b's counters still there: $(ns_counters team-b)"
t_expect "team-b series" "$(metric "$nb")" ""
[ -n "$(metric "$na")" ] || t_fail "team-a (a pod left) lost its series"
[ "$(ns_counters team-a)" -gt 0 ] || t_fail "team-a (a pod left) lost its counters"
[ "$(metric tollgate_agent_namespaces_retired_total)" -ge 1 ] 2>/dev/null || t_fail "retirement not counted"
pod_add b1 team-b "$CONF" || t_fail "ADD b1 in a retired namespace rc=$TG_RC $TG_OUT"
[ "$(ns_counters team-b)" -gt 0 ] || t_fail "team-b's counters not made anew by its next pod"
pod_del b1 "$CONF" || t_fail "DEL b1 rc=$TG_RC"
t_end

t_begin "kill -9 in the middle of a sync and restart: pods and store intact"
sum=$(jq -S -c '.attachments' "$TG_TMP/data/$NET/state.json" | sha256sum)
# IMDS answers nothing; the plugin's pool-exhausted signal starts a sync, which hangs in its request
imds_ctl "$(jq -cn --arg f "$FIX/one_nic.json" '{fixture: $f, mode: "hang"}')"
n_before=$(wc -l <"$ILOG")
touch "$TG_TMP/data/$NET/pool-exhausted"
hanging() { [ "$(wc -l <"$ILOG")" -gt "$n_before" ] && tail -1 "$ILOG" | grep -q ' hang '; }
wait_for 5 hanging || t_fail "no sync started: $(tail -2 "$ILOG")"
{
	kill -9 "$AGENT_PID"
	wait "$AGENT_PID"
} 2>/dev/null
imds_ctl "$(jq -cn --arg f "$FIX/one_nic.json" '{fixture: $f, mode: "normal", statuses: [200]}')"
agent_start
wait_for 10 ready || t_fail "not ready again: $(tail -3 "$ALOG")"
t_expect "attachments" "$(jq -S -c '.attachments' "$TG_TMP/data/$NET/state.json" | sha256sum)" "$sum"
pingq "$TG_ID-a1" "$TG_INET_IP" || t_fail "a1 cannot reach the internet host after the restart"
t_end

t_begin "the agent keeps CAP_NET_ADMIN alone and sets no_new_privs itself"
# started here as plain root, without setpriv: whatever holds is the agent's doing
st=$(cat "/proc/$AGENT_PID/status" 2>/dev/null)
t_expect "NoNewPrivs" "$(awk '$1 == "NoNewPrivs:" { print $2 }' <<<"$st")" 1
t_expect "CapEff" "$(awk '$1 == "CapEff:" { print $2 }' <<<"$st")" 0000000000001000
t_expect "CapPrm" "$(awk '$1 == "CapPrm:" { print $2 }' <<<"$st")" 0000000000001000
t_end

t_begin "SIGTERM: exit 0 within a second"
kill -TERM "$AGENT_PID"
t0=$SECONDS
for _ in $(seq 1 20); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$AGENT_PID" 2>/dev/null && t_fail "still running after 1 s"
wait "$AGENT_PID"
t_expect "exit status" "$?" 0
[ $((SECONDS - t0)) -le 2 ] || t_fail "took $((SECONDS - t0)) s"
t_end

# confined NAME ARGS...: the agent as a runtime starts it with `drop: [ALL],
# add: [NET_ADMIN]` and allowPrivilegeEscalation: false, i.e. started already
# under that bounding set and with no_new_privs (replaces the calling shell)
confined() {
	exec ip netns exec "$TG_NODE" setpriv --no-new-privs --bounding-set -all,+net_admin --inh-caps -all \
		"$AGENT" --config "$CM/10-tollgate.conflist" --cni-conf-dir "$NETD" \
		--cni-bin-dir "$CNIBIN" --plugin "$TOLLGATE_BIN_DIR/tollgate" "$@"
}
t_begin "--once and the daemon under a bounding set of CAP_NET_ADMIN alone, with no_new_privs"
(confined --once) >/dev/null 2>"$TG_TMP/once.err"
t_expect "--once exit status" "$?" 0
grep -q "once: ready" "$TG_TMP/once.err" || t_fail "--once: $(tail -3 "$TG_TMP/once.err")"
# the daemon, started the same way: $! is the agent itself (every step execs)
(confined --listen "127.0.0.1:$PORT" --declare-interval 2 --gc-interval 2 --sync-interval 30) \
	>/dev/null 2>"$TG_TMP/confined.err" &
CPID=$!
TG_PIDS+=("$CPID")
wait_for 10 ready || t_fail "the confined agent is not ready: $(tail -3 "$TG_TMP/confined.err")"
t_expect "confined PID's program" "$(cat "/proc/$CPID/comm" 2>/dev/null)" tollgate-agent
st=$(cat "/proc/$CPID/status" 2>/dev/null)
t_expect "NoNewPrivs" "$(awk '$1 == "NoNewPrivs:" { print $2 }' <<<"$st")" 1
t_expect "CapBnd" "$(awk '$1 == "CapBnd:" { print $2 }' <<<"$st")" 0000000000001000
t_expect "CapEff" "$(awk '$1 == "CapEff:" { print $2 }' <<<"$st")" 0000000000001000
kill -TERM "$CPID" 2>/dev/null
wait "$CPID"
t_expect "confined agent's exit status on SIGTERM" "$?" 0
t_end

t_begin "DEL of the last pod"
pod_del a1 "$CONF" || t_fail "DEL a1 rc=$TG_RC $TG_OUT"
t_end

t_begin "a log record's values are quoted logfmt: quotes in an error stay inside its value"
jq '.plugins[0].dataDir = "rel\"ative"' "$CM/10-tollgate.conflist" >"$TG_TMP/quoted.conflist"
ip netns exec "$TG_NODE" "$AGENT" --config "$TG_TMP/quoted.conflist" --once >/dev/null 2>"$TG_TMP/quoted.err"
t_expect "exit status" "$?" 1
line=$(grep 'msg="cannot load the config"' "$TG_TMP/quoted.err")
# one record, every value after msg a bare word or a quoted string whose
# quotes and backslashes are escaped
[[ $line =~ level=error\ msg=\"cannot\ load\ the\ config\"\ path=\"[^\"]*\"\ err=\"(([^\"\\]|\\.)*)\"$ ]] ||
	t_fail "not one logfmt record: $line"
t_expect "err value" "${BASH_REMATCH[1]:-}" 'dataDir \"rel\"ative\" must be an absolute path'
t_end

tap_done
