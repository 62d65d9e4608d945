#!/usr/bin/env bash
# Chaos: the SIGKILL storm of tests/integration/test_crash.sh with everything
# on. Internet shaping (node, namespace and pod caps on the uplink's IFB
# tollgate-inet, internet ingress caps on the host veths; a third of the pods
# with runtimeConfig bandwidth, their egress through a pod IFB each, a third
# with annotations), per-pod accounting, pods in several Kubernetes
# namespaces (one with its own caps), a 2 s namespace retention, and a
# tollgate-agent in the node declaring every second, collecting every
# second, retiring namespaces, and itself SIGKILLed and restarted at random.
# Round after round, pods are ADDed, CHECKed, DELeted (every DEL retried
# until it succeeds, as a runtime does), vanish (their netns deleted under
# them, for the collectors), or are forgotten by the runtime (its GC no
# longer lists them), while the plugin's GC, `tollgate-ipam gc` and
# `tollgate-ipam reshape` run beside them, and every process started here
# may be SIGKILLed at any moment.
#
#   during the run:  a sampler reads the store and the pods' eth0 addresses
#                    every ~0.3 s: no address held twice, ever
#   after a round:   the store is valid, every survivor is intact (store,
#                    pod address, host route, @pods) and CHECK passes; once
#                    the agent has collected, the node holds exactly the
#                    survivors' attachments, veths, IFBs, routes, neighbours,
#                    classes, set and map elements and pod counters
#   at the end:      DEL of every pod, `tollgate-ipam gc`, the agent's
#                    retention: the node is exactly as before the first pod
#                    (links, addresses, routes, neighbours, rules, the whole
#                    nftables ruleset with its sets, maps and counters, every
#                    qdisc, class and filter of every node device, the store)
#
# Env: CHAOS_ROUNDS (default 3), CHAOS_PODS pods per round (default 24),
#      CHAOS_KILL_PCT chance that a process is SIGKILLed (default 35),
#      CHAOS_AGENT_KILLS agent SIGKILLs per round (default 2),
#      CHAOS_NAMESPACES Kubernetes namespaces the pods are spread over (default
#      4; with more, namespaces empty and are retired while pods come and go),
#      CHAOS_FLUSH=1: twice a round someone deletes table inet tollgate or
#      the root qdisc of tollgate-inet (with every class) in the middle of it
#      all; the agent puts them back (an ADD or a CHECK meanwhile may fail
#      with a CNI error, a DEL may not), and every check after the round and
#      at the end stays as strict.
# Figures (operations, kills, leaks per kind, duration) are printed as TAP comments.
#
#   node ($TG_ID-node, topology of tests/integration/lib.sh): eth0 uplink,
#     tollgate-inet (internet egress), ti* (one IFB per pod: ingress cap),
#     the agent on 127.0.0.1:$PORT
#
# Only PIDs started by this script are ever killed.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/chaos/chaos_kill.sh
# shellcheck disable=SC2016,SC2015,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/../integration/lib.sh"
. "$TG_LIB_DIR/shaping_lib.sh"
tg_require
command -v tc >/dev/null || { echo "not ok - preconditions: tc not installed (make deps)"; exit 1; }

IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
ROUNDS=${CHAOS_ROUNDS:-3}
PODS=${CHAOS_PODS:-24}
# shellcheck disable=SC2034 # read by maybe_kill (lib.sh)
KILL_PCT=${CHAOS_KILL_PCT:-35}
AGENT_KILLS=${CHAOS_AGENT_KILLS:-2}
FLUSH=${CHAOS_FLUSH:-0}
PORT=$((19700 + $$ % 200))
K8S_NAMESPACES=(alpha beta datasets gamma)
for ((i = ${#K8S_NAMESPACES[@]}; i < ${CHAOS_NAMESPACES:-4}; i++)); do K8S_NAMESPACES+=("team$i"); done
for b in "$IPAM_BIN" "$AGENT"; do
	[ -x "$b" ] || { echo "not ok - preconditions: $b not found (run make)"; exit 1; }
done

AGENT_PID=""
SAMPLER_PID=""
chaos_cleanup() {
	local p
	[ -n "$TG_TMP" ] && while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$TG_TMP/agent.pids" 2>/dev/null
	[ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null
	topo_down
}
trap chaos_cleanup EXIT
trap 'echo "# interrupted" >&2; exit 130' INT
trap 'echo "# terminated" >&2; exit 143' TERM
T0=$SECONDS

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
RES=$TG_TMP/res
mkdir -p "$RES"
t_end

SHAPING='{"internetEgress": {"node": "900M", "namespaceDefault": "300M", "podDefault": "100M",
	"namespaces": {"datasets": "500M"}}, "internetIngress": {"podDefault": "80M", "namespaces": {"datasets": "200M"}}}'
CONF=$(tg_conf '.capabilities = $c | .shaping = $s | .accounting = {enabled: true, perPod: true, retainSeconds: 2}
	| .ipam.addresses = ["10.1.0.10-10.1.0.250"] | .ipam.exclude = []' \
	--argjson c "$CAPS" --argjson s "$SHAPING")
CONFLIST=$TG_TMP/10-tollgate.conflist
jq '{cniVersion: "1.0.0", name: .name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$CONFLIST"
DATA=$TG_TMP/data
STATE=$DATA/$TG_NETNAME/state.json

# exec_node and maybe_kill (KILL_PCT): tests/integration/lib.sh
ipam() { ip netns exec "$TG_NODE" "$IPAM_BIN" --data-dir "$DATA" --network "$TG_NETNAME" "$@"; }

# agent_start: the agent in the node, declaring and collecting every second
agent_start() {
	(exec_node "$AGENT" --config "$CONFLIST" --listen "127.0.0.1:$PORT" --declare-interval 1 \
		--gc-interval 1 --sync-interval 60 --page-cache-ms 0) 2>>"$TG_TMP/agent.log" &
	AGENT_PID=$!
	echo "$AGENT_PID" >>"$TG_TMP/agent.pids"
}
# agent_kill: SIGKILL the agent and wait until it is gone (a restart must
# find its port free; the first agent of a round's chaos is not the child of
# the shell that kills it)
agent_kill() {
	[ -n "$AGENT_PID" ] || return 0
	kill -KILL "$AGENT_PID" 2>/dev/null
	wait_for 5 sh_pid_gone "$AGENT_PID"
	{ wait "$AGENT_PID"; } 2>/dev/null
	AGENT_PID=""
}

# pod_ns POD: the pod's Kubernetes namespace (fixed per pod name)
pod_k8s_ns() { local h; h=$(cksum <<<"$1"); echo "${K8S_NAMESPACES[${h%% *} % ${#K8S_NAMESPACES[@]}]}"; }

# pod_conf_write POD N: the pod's config in $RES/POD.conf: a third of the pods
# with runtimeConfig bandwidth (ingress on the host veth, egress through a pod
# IFB), a third with annotations lowering their internet caps
pod_conf_write() {
	local rc='{}'
	case $(($2 % 3)) in
	1) rc='{"bandwidth": {"ingressRate": 50000000, "ingressBurst": 4294967295, "egressRate": 40000000, "egressBurst": 4294967295}}' ;;
	2) rc='{"io.kubernetes.cri.pod-annotations": {"tollgate.io/internet-egress-bandwidth": "50M", "tollgate.io/internet-ingress-bandwidth": "20M"}}' ;;
	esac
	jq -c --argjson r "$rc" '.runtimeConfig = $r' <<<"$CONF" >"$RES/$1.conf"
}

# plugin_bg CMD POD OUT [CONF]: the plugin for POD in the background ($! is its PID)
plugin_bg() {
	local cmd=$1 pod=$2 out=$3 conf=${4:-$(cat "$RES/$2.conf" 2>/dev/null || echo "$CONF")} cid netns
	cid=$(cid_for "$pod")
	netns=$(netns_path "$pod")
	[ -e "$netns" ] || netns=""
	(exec_node CNI_COMMAND="$cmd" CNI_PATH="$TOLLGATE_BIN_DIR" CNI_CONTAINERID="$cid" CNI_IFNAME=eth0 \
		CNI_NETNS="$netns" CNI_ARGS="$(k8s_args "$(pod_k8s_ns "$pod")" "$pod" "$cid")" "$TG_BIN") \
		<<<"$conf" >"$out" 2>&1 &
}

# check_conf POD: the config with the pod's ADD result as prevResult
check_conf() { jq -c --slurpfile p "$RES/$1.add" '.prevResult = $p[0]' "$RES/$1.conf"; }

# del_until_done POD: DEL as a runtime does it: retried until it succeeds
# (each try but the last maybe killed). One line per try in $RES/POD.
del_until_done() {
	local pod=$1 try rc
	for try in 1 2 3 4; do
		plugin_bg DEL "$pod" "$RES/$pod.del"
		if [ "$try" -lt 4 ]; then maybe_kill $!; rc=$MK_RC; else wait $!; rc=$?; fi
		echo "DEL $rc" >>"$RES/$pod"
		[ "$rc" = 137 ] || return 0
	done
}

# worker POD [OLD]: one pod's life. ADD (maybe killed; a killed ADD is retried
# once half of the time, as a runtime does, and DELeted otherwise), CHECK
# after a successful ADD, then a DEL, or the pod stays, or its netns vanishes
# under it (left to the collectors: no DEL ever comes), or the runtime forgets
# it (no DEL either; the plugin's GC no longer lists it as valid, its netns
# stays). With OLD, a survivor
# of the round before is DELeted in the middle of it. Every DEL is retried
# until it succeeds. $RES/POD gets one line per operation: "OP rc".
worker() {
	local pod=$1 old=${2:-} rc fate
	sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
	plugin_bg ADD "$pod" "$RES/$pod.add"
	maybe_kill $!; rc=$MK_RC
	echo "ADD $rc" >>"$RES/$pod"
	if [ "$rc" = 137 ] && [ $((RANDOM % 2)) = 0 ]; then
		plugin_bg ADD "$pod" "$RES/$pod.add"
		maybe_kill $!; rc=$MK_RC
		echo "ADD $rc" >>"$RES/$pod"
	fi
	if [ "$rc" = 0 ]; then
		plugin_bg CHECK "$pod" "$RES/$pod.check" "$(check_conf "$pod")"
		wait $!
		echo "CHECK $?" >>"$RES/$pod"
	fi
	[ -n "$old" ] && del_until_done "$old"
	fate=$((RANDOM % 5))
	if [ "$rc" != 0 ] || [ "$fate" -le 1 ]; then
		del_until_done "$pod"
	elif [ "$fate" = 2 ]; then
		ip netns del "$TG_ID-$pod" 2>/dev/null
		echo "VANISH 0" >>"$RES/$pod"
	elif [ "$fate" = 3 ]; then
		echo "$pod" >>"$RES/abandoned"
		echo "ABANDON 0" >>"$RES/$pod"
	fi
}

# gc_conf FILE: the config of the plugin's GC, every pod of the run listed as
# valid but those the runtime forgot ($RES/abandoned)
gc_conf() {
	local valid
	valid=$(for p in "${ALL_PODS[@]}"; do grep -qx "$p" "$RES/abandoned" 2>/dev/null || { cid_for "$p"; echo; }; done |
		grep . | jq -R '{containerID: ., ifname: "eth0"}' | jq -sc .)
	jq -c --argjson v "$valid" '.["cni.dev/valid-attachments"] = $v' <<<"$CONF" >"$1"
}

# noise: the plugin's GC (only the pods the runtime forgot may go, and the
# vanished ones: nothing else), `tollgate-ipam gc` and `tollgate-ipam
# reshape`, each maybe killed
noise() {
	local i rc
	for i in 1 2 3 4 5 6; do
		gc_conf "$RES/gc.conf"
		(exec_node CNI_COMMAND=GC CNI_PATH="$TOLLGATE_BIN_DIR" "$TG_BIN") <"$RES/gc.conf" >>"$RES/noise.out" 2>&1 &
		maybe_kill $! 20; echo "plugin-GC $MK_RC" >>"$RES/noise"
		(exec_node "$IPAM_BIN" --data-dir "$DATA" --network "$TG_NETNAME" gc) >>"$RES/noise.out" 2>&1 &
		maybe_kill $! 20; rc=$MK_RC
		echo "ipam-gc $rc" >>"$RES/noise"
		(exec_node "$IPAM_BIN" --data-dir "$DATA" --network "$TG_NETNAME" --config "$TG_TMP/conf.json" reshape) \
			>>"$RES/noise.out" 2>&1 &
		maybe_kill $! 20; rc=$MK_RC
		echo "reshape $rc" >>"$RES/noise"
		if [ "$FLUSH" = 1 ] && [ "$i" = 3 ]; then
			ip netns exec "$TG_NODE" nft delete table inet tollgate && echo "flush 0" >>"$RES/flush"
		elif [ "$FLUSH" = 1 ] && [ "$i" = 5 ]; then
			ip netns exec "$TG_NODE" tc qdisc del dev "$UPQ" root && echo "flush 0" >>"$RES/flush"
		fi
		sleep 0.$((RANDOM % 4))
	done
}

# agent_chaos SECONDS: the agent SIGKILLed AGENT_KILLS times within about
# SECONDS, restarted each time
agent_chaos() {
	local k
	[ -n "$AGENT_PID" ] || agent_start
	for ((k = 0; k < AGENT_KILLS; k++)); do
		# half of the kills in its start-up work (the first declaration, the pool)
		if [ $((RANDOM % 2)) = 0 ]; then
			sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
		else
			sleep "$((RANDOM % ($1 / AGENT_KILLS + 1))).$((RANDOM % 10))"
		fi
		agent_kill
		echo kill >>"$RES/agent"
		agent_start
	done
	echo "$AGENT_PID" >"$RES/agent.pid"
	wait "$AGENT_PID" 2>/dev/null # the agent's parent must stay to reap it
}

# store_dups < STATE: addresses and attachments held twice (empty: none)
store_dups() {
	jq -r '([.attachments[].ip] | group_by(.) | map(select(length > 1) | .[0])) +
		([.attachments[] | .containerId + "/" + .ifname] | group_by(.) | map(select(length > 1) | .[0]))
		| join(" ")'
}
# kernel_dups: addresses on the eth0 of two pods (pods named in $RES/live,
# which set_live replaces whole: read at once, each name once)
kernel_dups() {
	local p pods
	pods=$(sort -u "$RES/live" 2>/dev/null)
	for p in $pods; do
		ip -n "$TG_ID-$p" -4 -o addr show dev eth0 2>/dev/null | awk -v p="$p" '{print $4, p}'
	done | awk '{n[$1]++; w[$1] = w[$1] " " $2} END {for (a in n) if (n[a] > 1) printf "%s on%s; ", a, w[a]}'
}

# set_live POD...: the pods the sampler looks at: these and the forgotten ones
# (a new file renamed over the old: the sampler never reads half of one)
set_live() {
	{ cat "$RES/abandoned" 2>/dev/null; printf '%s\n' "$@"; } >"$RES/live.new" && mv -f "$RES/live.new" "$RES/live"
}

# sampler: until killed, every ~0.3 s: no address twice in the store, no
# attachment twice, no address on two pods' eth0 (pods of LIVE_FILE)
sampler() {
	local n=0 st d
	while :; do
		n=$((n + 1))
		if st=$(cat "$STATE" 2>/dev/null) && [ -n "$st" ]; then
			d=$(store_dups <<<"$st" 2>&1) || d="unreadable store: ${st:0:100}"
			[ -z "$d" ] || echo "store sample $n: $d" >>"$RES/dups"
		fi
		if [ $((n % 3)) = 0 ]; then
			d=$(kernel_dups)
			[ -z "$d" ] || echo "kernel sample $n: $d" >>"$RES/dups"
		fi
		echo "$n" >"$RES/samples"
		sleep 0.3
	done
}

# leak_counts: one line "kind=count ..." of what is on the node beyond the baseline
node_nft_json() { ip netns exec "$TG_NODE" nft -j list table inet tollgate 2>/dev/null; }
leak_counts() {
	local nj cls_inet cls_up
	nj=$(node_nft_json)
	cls_inet=$(ip netns exec "$TG_NODE" tc class show dev "$UPQ" 2>/dev/null | grep -vc '^class htb 1:1 root ')
	cls_up=$(($(ip netns exec "$TG_NODE" tc class show dev eth0 2>/dev/null | wc -l) - BASE_UPLINK_CLASSES))
	printf 'attachments=%s allocated=%s host_veths=%s ifbs=%s routes=%s neighbours=%s classes_inet=%s classes_uplink=%s elements=%s pod_counters=%s ns_counters=%s\n' \
		"$(jq '.attachments // [] | length' "$STATE" 2>/dev/null || echo '?')" \
		"$(ipam --json status 2>/dev/null | jq '.allocated' 2>/dev/null || echo '?')" \
		"$(ip -n "$TG_NODE" -o link show | awk -F': ' '{print $2}' | grep -c '^tg')" \
		"$(ip -n "$TG_NODE" -o link show | awk -F': ' '{print $2}' | grep -c '^ti')" \
		"$(ip -n "$TG_NODE" -4 route show | grep -cE '^[0-9.]+ dev ')" \
		"$(ip -n "$TG_NODE" neigh show nud permanent | grep -c . ; true)" \
		"$cls_inet" "$cls_up" \
		"$(($(jq '[.nftables[] | (.set // .map // empty) | select(.name != "nexthops") | .elem // [] | length] | add // 0' <<<"$nj") - BASE_ELEMENTS))" \
		"$(jq '[.nftables[] | select(.counter) | .counter.name | select(startswith("pod_"))] | length' <<<"$nj")" \
		"$(jq '[.nftables[] | select(.counter) | .counter.name | select(startswith("ns_"))] | length' <<<"$nj")"
}
node_snapshot() { tg_snapshot; echo "## tc"; sh_tc_snapshot | sed -E 's/ leaf [0-9a-f]+:/ leaf X:/'; }

# ================================================================ baseline
t_begin "baseline: the agent declares the node (--once)"
printf '%s\n' "$CONF" >"$TG_TMP/conf.json"
ip netns exec "$TG_NODE" "$AGENT" --once --config "$CONFLIST" --listen "127.0.0.1:$PORT" \
	2>>"$TG_TMP/agent.log" || t_fail "agent --once failed: $(tail -n 5 "$TG_TMP/agent.log")"
link_exists "$UPQ" || t_fail "no $UPQ after the declaration"
BASE=$(node_snapshot)
BASE_ELEMENTS=$(node_nft_json | jq '[.nftables[] | (.set // .map // empty) | select(.name != "nexthops") | .elem // [] | length] | add // 0')
BASE_UPLINK_CLASSES=$(ip netns exec "$TG_NODE" tc class show dev eth0 2>/dev/null | wc -l)
diag "baseline: $BASE_ELEMENTS set/map elements, $BASE_UPLINK_CLASSES classes on eth0, $(leak_counts)"
t_end

# how many set and map elements one pod of this config has (its veth, its
# address in each set and map): what the rounds expect per survivor
t_begin "a probe pod: its elements counted, and gone with its DEL"
pod_add probe alpha "$CONF" || t_fail "ADD rc=$TG_RC $TG_OUT"
POD_ELEMENTS=$(leak_counts | sed -nE 's/.* elements=([0-9]+).*/\1/p')
[ "${POD_ELEMENTS:-0}" -gt 0 ] || t_fail "the probe pod has no elements: $(leak_counts)"
pod_del probe "$CONF" || t_fail "DEL rc=$TG_RC $TG_OUT"
pod_ns_del probe
t_expect "elements after DEL" "$(leak_counts | sed -nE 's/.* elements=([0-9]+).*/\1/p')" 0
diag "a pod has $POD_ELEMENTS set/map elements"
t_end

t_begin "the duplicate detectors find a planted duplicate, in a store and on two pods' eth0"
t_expect "store_dups on a planted duplicate" "$(store_dups <<<'{"attachments": [{"ip": "10.1.0.9", "containerId": "a", "ifname": "eth0"},
	{"ip": "10.1.0.9", "containerId": "b", "ifname": "eth0"}]}')" "10.1.0.9"
pod_ns_add dupa && pod_ns_add dupb && set_live dupa dupb || tap_bail "cannot create the detector's netns"
ip -n "$TG_ID-dupa" link add eth0 type veth peer name eth0 netns "$TG_ID-dupb"
for p in dupa dupb; do ip -n "$TG_ID-$p" addr add 10.1.0.9/32 dev eth0; done
t_expect "kernel_dups on a planted duplicate" "$(kernel_dups)" "10.1.0.9/32 on dupa dupb; "
pod_ns_del dupa; pod_ns_del dupb
: >"$RES/live"
t_end

# ================================================================ the rounds
ALL_PODS=()
SURVIVORS=()
DUPS_SEEN=0 NOISE_OPS=0 NOISE_KILLS=0
: >"$RES/live"
sampler &
SAMPLER_PID=$!
for r in $(seq 1 "$ROUNDS"); do
	t_begin "round $r: $PODS pods ADD/CHECK/DEL/vanish, ${#SURVIVORS[@]} older DELeted, GC, gc, reshape, $AGENT_KILLS agent kills"
	NEW=()
	for i in $(seq 1 "$PODS"); do
		p=r${r}p$i
		pod_ns_add "$p" || tap_bail "cannot create pod netns $p"
		pod_conf_write "$p" "$i"
		NEW+=("$p")
		ALL_PODS+=("$p")
	done
	set_live "${NEW[@]}" "${SURVIVORS[@]}"
	t1=$SECONDS
	WORKERS=()
	for i in "${!NEW[@]}"; do
		worker "${NEW[i]}" "${SURVIVORS[i]:-}" &
		WORKERS+=($!)
	done
	# survivors beyond the number of new pods are DELeted by the last worker
	for ((i = ${#NEW[@]}; i < ${#SURVIVORS[@]}; i++)); do
		del_until_done "${SURVIVORS[i]}" &
		WORKERS+=($!)
	done
	noise &
	WORKERS+=($!)
	agent_chaos 8 &
	CHAOS_PID=$!
	for p in "${WORKERS[@]}"; do wait "$p"; done
	# the runtime's GC once more, not killed: the pods it forgot go
	gc_conf "$RES/gc.conf"
	(exec_node CNI_COMMAND=GC CNI_PATH="$TOLLGATE_BIN_DIR" "$TG_BIN") <"$RES/gc.conf" >"$RES/gc.out" 2>&1 ||
		t_fail "the plugin's GC after the round: $(head -c 300 "$RES/gc.out")"
	# the agent started last by agent_chaos: its PID, to kill it here
	wait_for 15 test -s "$RES/agent.pid" || t_fail "the agent chaos did not finish"
	AGENT_PID=$(cat "$RES/agent.pid")
	rm -f "$RES/agent.pid"
	diag "round $r took $((SECONDS - t1)) s"
	# every failure that was not a kill must be a proper CNI error... and there
	# should be none: nothing here is invalid
	for p in "${NEW[@]}" "${SURVIVORS[@]}"; do
		while read -r op rc; do
			[ "$rc" = 0 ] || [ "$rc" = 137 ] || {
				# with the table or the classes gone under it, an ADD or a
				# CHECK may fail (a proper CNI error); a DEL never
				[ "$FLUSH" = 1 ] && [ "$op" != DEL ] && [ "$rc" = 1 ] &&
					jq -e '.code and .msg' "$RES/$p.${op,,}" >/dev/null 2>&1 && continue
				t_fail "$p $op exited $rc: $(head -c 300 "$RES/$p.${op,,}")"
			}
		done <"$RES/$p"
	done
	grep -v ' 0$' "$RES/noise" | grep -v ' 137$' >"$RES/noise.bad"
	[ -s "$RES/noise.bad" ] && t_fail "noise failed: $(tr '\n' ' ' <"$RES/noise.bad") $(tail -c 300 "$RES/noise.out")"
	NOISE_OPS=$((NOISE_OPS + $(wc -l <"$RES/noise")))
	NOISE_KILLS=$((NOISE_KILLS + $(grep -c ' 137$' "$RES/noise")))
	: >"$RES/noise"
	t_end

	t_begin "round $r: no address was held twice at any sample"
	if [ -s "$RES/dups" ]; then
		DUPS_SEEN=$((DUPS_SEEN + $(wc -l <"$RES/dups")))
		t_fail "$(head -n 5 "$RES/dups" | tr '\n' ' ')"
		: >"$RES/dups"
	fi
	t_end

	# the store and the survivors, with the agent still running (and declaring)
	t_begin "round $r: the store is valid and every survivor is intact, CHECK passing"
	[ "$FLUSH" = 1 ] && sleep 2 # the agent's next declaration puts back what was flushed
	ST=$(cat "$STATE")
	jq -e '.version and (.attachments | type == "array")' <<<"$ST" >/dev/null 2>&1 || t_fail "invalid store: ${ST:0:300}"
	SURVIVORS=()
	for p in "${NEW[@]}"; do
		last=$(grep -v '^CHECK' "$RES/$p" | tail -n 1)
		[ "$last" = "ADD 0" ] || continue
		SURVIVORS+=("$p")
		cid=$(cid_for "$p")
		ipr=$(jq -r '.ips[0].address | split("/")[0]' "$RES/$p.add")
		got=$(jq -r --arg c "$cid" '.attachments[] | select(.containerId == $c) | .ip' <<<"$ST")
		[ "$got" = "$ipr" ] || t_fail "$p: ADD gave $ipr, the store has '$got'"
		ip -n "$TG_ID-$p" -4 addr show dev eth0 2>/dev/null | grep -q "inet $ipr/32" || t_fail "$p: the pod has no $ipr"
		ip -n "$TG_NODE" -4 route show "$ipr/32" | grep -q . || t_fail "$p: no host route $ipr/32"
		nft_set_has pods "$ipr" || t_fail "$p: $ipr not in @pods"
		plugin_bg CHECK "$p" "$RES/$p.check" "$(check_conf "$p")"
		wait $! || t_fail "$p: CHECK: $(head -c 300 "$RES/$p.check")"
	done
	for p in "${NEW[@]}"; do
		[ "$(grep -v '^CHECK' "$RES/$p" | tail -n 1)" = "DEL 0" ] || continue
		jq -e --arg c "$(cid_for "$p")" 'any(.attachments[]; .containerId == $c)' <<<"$ST" >/dev/null &&
			t_fail "$p: in the store after a successful DEL"
	done
	set_live "${SURVIVORS[@]}"
	[ -n "${CHAOS_DEBUG:-}" ] && diag "$(ip -n "$TG_NODE" -o link show | cut -c1-60)" "$(jq -c ".attachments[] | .shaping" "$STATE")"
	diag "round $r: ${#SURVIVORS[@]} survivors; $(jq '.attachments | length' <<<"$ST") attachments; $(leak_counts)"
	t_end

	# every DEL was retried until it succeeded: once the agent has collected
	# the vanished pods and retired the classes no pod uses, the node holds
	# the survivors' objects and nothing else
	t_begin "round $r: once the agent collected, the node holds exactly the ${#SURVIVORS[@]} survivors' objects"
	n_s=${#SURVIVORS[@]}
	n_ifb=0
	n_ns=$(for p in "${SURVIVORS[@]}"; do pod_k8s_ns "$p"; done | sort -u | grep -c .)
	for p in "${SURVIVORS[@]}"; do jq -e '.runtimeConfig.bandwidth.egressRate' "$RES/$p.conf" >/dev/null && n_ifb=$((n_ifb + 1)); done
	WANT="attachments=$n_s allocated=$n_s host_veths=$n_s ifbs=$n_ifb routes=$n_s neighbours=$n_s classes_inet=$((n_s + n_ns)) classes_uplink=0 elements=$((POD_ELEMENTS * n_s)) pod_counters=$((4 * n_s))"
	collected() { GOT=$(leak_counts | sed -E 's/ ns_counters=.*//'); [ "$GOT" = "$WANT" ]; }
	wait_for 15 collected || t_fail "expected $WANT, got $GOT (15 s after the round)"
	t_end
done
kill "$SAMPLER_PID" 2>/dev/null
wait "$SAMPLER_PID" 2>/dev/null
SAMPLER_PID=""
SAMPLES=$(cat "$RES/samples" 2>/dev/null || echo 0)
# what the sampler found after the last round's check
t_begin "no address was held twice at any sample after the last round"
if [ -s "$RES/dups" ]; then
	DUPS_SEEN=$((DUPS_SEEN + $(wc -l <"$RES/dups")))
	t_fail "$(head -n 5 "$RES/dups" | tr '\n' ' ')"
fi
t_end
agent_kill
wait "$CHAOS_PID" 2>/dev/null

t_begin "a new ADD works at once after the chaos"
t1=${EPOCHREALTIME/./}
printf '%s\n' "$CONF" >"$RES/fresh.conf"
pod_add fresh alpha "$CONF" || { t_fail "ADD rc=$TG_RC $TG_OUT"; tg_diag_last; }
ms=$(((${EPOCHREALTIME/./} - t1) / 1000))
[ "$ms" -lt 3000 ] || t_fail "ADD took $ms ms"
ALL_PODS+=(fresh)
t_end

# ================================================================ the end
t_begin "DEL of every pod, tollgate-ipam gc: no attachment, veth, IFB, route, neighbour, pod class or element left"
for p in "${ALL_PODS[@]}"; do
	plugin_bg DEL "$p" "$RES/final.del"
	wait $! || t_fail "DEL $p: $(head -c 300 "$RES/final.del")"
done
for p in "${ALL_PODS[@]}"; do [ -e "$(netns_path "$p")" ] && pod_ns_del "$p"; done
ipam gc >"$TG_TMP/gc.out" 2>&1 || t_fail "tollgate-ipam gc: $(cat "$TG_TMP/gc.out")"
LEAKS=$(leak_counts)
diag "after DEL + gc: $LEAKS"
for kv in $LEAKS; do
	case ${kv%%=*} in
	ns_counters) ;; # retired by the agent's retention, below
	*) [ "${kv#*=}" = 0 ] || t_fail "$kv" ;;
	esac
done
t_end

t_begin "after the agent's retention: the node is exactly as before the first pod"
agent_start
retired() { [ "$(node_nft_json | jq '[.nftables[] | select(.counter) | .counter.name | select(startswith("ns_"))] | length')" = 0 ]; }
wait_for 20 retired || t_fail "namespace counters still there 20 s after their last pod"
agent_kill
LEAKS=$(leak_counts)
diag "after retention: $LEAKS"
d=$(snap_diff "$BASE" "$(node_snapshot)")
[ -z "$d" ] || t_fail "the node differs from the baseline: $(head -n 40 <<<"$d")"
ipam --json doctor >"$TG_TMP/doctor.out" 2>&1
jq -e '.ok == true' "$TG_TMP/doctor.out" >/dev/null 2>&1 || t_fail "doctor: $(tr -d '\n\t ' <"$TG_TMP/doctor.out" | head -c 400)"
t_end

# ================================================================ figures
ops=$(cat "$RES"/r* 2>/dev/null | grep -cE '^(ADD|DEL|CHECK) ')
kills=$(cat "$RES"/r* 2>/dev/null | grep -c ' 137$')
agent_kills=$(wc -l <"$RES/agent" 2>/dev/null || echo 0)
vanished=$(cat "$RES"/r* 2>/dev/null | grep -c '^VANISH')
abandoned=$(cat "$RES"/r* 2>/dev/null | grep -c '^ABANDON')
t_begin "the agent, killed or not, logged no error"
agent_errors=$(grep -c 'level=error' "$TG_TMP/agent.log")
[ "$agent_errors" = 0 ] || t_fail "$agent_errors errors, first: $(grep 'level=error' "$TG_TMP/agent.log" | head -n 3)"
t_end
diag "chaos: $ROUNDS rounds x $PODS pods in ${#K8S_NAMESPACES[@]} namespaces, $ops pod operations ($kills SIGKILLed), $NOISE_OPS GC/gc/reshape runs ($NOISE_KILLS SIGKILLed), $vanished pods vanished, $abandoned forgotten by the runtime, $agent_kills agent SIGKILLs, $(grep -c . "$RES/flush" 2>/dev/null || echo 0) flushes, $SAMPLES samples, $DUPS_SEEN duplicates, leaks: $LEAKS, $((SECONDS - T0)) s"
tap_done
