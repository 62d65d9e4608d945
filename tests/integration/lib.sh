# shellcheck shell=bash
# Tollgate integration-test library: a simulated cluster in network namespaces.
#
# Sourced by tests/integration/test_*.sh and scripts/demo.sh. It never touches
# the real host: every object lives in network namespaces created here with
# per-run unique names ($TG_ID-*); nothing is attached to the root namespace,
# the root namespace's eth0, routes and nftables are never read or changed.
#
#   pod netns (per test)      pod netns
#   eth0 10.1.0.x/32          eth0 10.1.0.y/32
#     |  (veth, created by the plugin; host side tgXXXXXXXXXXXX)
#  +--+--------------------------+-----+
#  | node   ($TG_ID-node)              |  default via 10.0.0.254
#  |   eth0 10.0.0.1/24                |  pods: 10.1.0.0/24 (alias pool)
#  +-----------------+-----------------+
#                    | veth
#  +-----------------+-----------------+
#  | fabric ($TG_ID-fab)  "cloud router", ip_forward=1
#  |   node0 10.0.0.254/24             |  10.1.0.0/24 via 10.0.0.1
#  |   peer0 10.0.1.254/24             |  10.2.0.0/24 via 10.0.1.1
#  |   inet0 203.0.113.1/24            |
#  +-------+-------------------+-------+
#          | veth              | veth
#  +-------+---------+  +------+---------------------------+
#  | peer ($TG_ID-peer) | inet ($TG_ID-inet) "internet host"  |
#  | eth0 10.0.1.1/24 |  | eth0 203.0.113.10/24              |
#  | lo   10.2.0.5/32 |  | only route: 10.0.0.0/24 via       |
#  |  (a remote pod)  |  |   203.0.113.1 (so a pod reaches it |
#  | default via      |  |   ONLY when masqueraded to the     |
#  |   10.0.1.254     |  |   node's 10.0.0.1)                 |
#  +------------------+  +------------------------------------+
#
# The node starts with net.ipv4.ip_forward=0: enabling it is the plugin's job.
#
# Public API (see each function): topo_up/topo_down, tg_cleanup (trap),
# tg_conf, tg_exec, tg_run, pod_ns_add/pod_ns_del, pod_add/pod_del,
# tg_snapshot, tg_state, nft_set_has, pingq, TAP helpers t_begin/t_fail/t_end.

set -u

TG_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TG_ROOT=$(cd "$TG_LIB_DIR/../.." && pwd)
TOLLGATE_BIN_DIR=${TOLLGATE_BIN_DIR:-$TG_ROOT/build}
case $TOLLGATE_BIN_DIR in
/*) ;;
*) TOLLGATE_BIN_DIR=$(cd "$TOLLGATE_BIN_DIR" 2>/dev/null && pwd || echo "$PWD/$TOLLGATE_BIN_DIR") ;;
esac
TG_BIN=$TOLLGATE_BIN_DIR/tollgate
TG_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Per-run unique prefix. $$ is unique among live processes; the random part
# protects against a namespace left behind by a run that was SIGKILLed.
TG_ID=tgt$$
[ -e "/var/run/netns/$TG_ID-node" ] && TG_ID=tgt$$r$RANDOM
TG_NODE=$TG_ID-node
TG_PEER=$TG_ID-peer
TG_INET=$TG_ID-inet
TG_FABRIC=$TG_ID-fab
TG_NETNS_DIR=/var/run/netns

TG_NODE_IP=10.0.0.1
TG_PEER_POD_IP=10.2.0.5
TG_INET_IP=203.0.113.10
TG_NETNAME=tgtest

TG_TMP=""
TG_NAMESPACES=() # every netns this run created (deleted on exit)
TG_PIDS=()       # background processes this run started (killed on exit)
TG_EXTRA_ENV=()  # extra VAR=value passed to every plugin run
TG_OUT="" TG_ERR="" TG_RC=0

declare -A POD_CID=() POD_IP=() POD_NETNS=() POD_RESULT=() POD_VETH=()

# ---------------------------------------------------------------- TAP output
TAP_PASS=0 TAP_FAIL=0 T_NAME="" T_ERRS=""

tap_ok() { echo "ok - $1"; TAP_PASS=$((TAP_PASS + 1)); }
tap_not_ok() { echo "not ok - $1: $2"; TAP_FAIL=$((TAP_FAIL + 1)); }
diag() { local l; while IFS= read -r l; do echo "# $l"; done <<<"$*"; }

# An assertion group: t_begin NAME; any number of t_fail REASON; t_end.
t_begin() { T_NAME=$1; T_ERRS=""; }
t_fail() { T_ERRS="${T_ERRS:+$T_ERRS; }$*"; }
t_end() {
	if [ -z "$T_ERRS" ]; then tap_ok "$T_NAME"; else tap_not_ok "$T_NAME" "$T_ERRS"; fi
	T_NAME=""
}
# t_expect WHAT GOT WANT
t_expect() { [ "$2" = "$3" ] || t_fail "$1: expected '$3', got '$2'"; }

# Last TAP lines and exit status for a test script: its figures, then the
# end-of-file marker tests/run.sh looks for (a file that stops before it
# stopped early, whatever it printed until then).
tap_done() {
	echo "# $(basename "$0"): $TAP_PASS ok, $TAP_FAIL not ok"
	echo "# tollgate-tap: end of $(basename "$0")"
	[ "$TAP_FAIL" -eq 0 ]
}

# Fatal: report and stop (cleanup runs from the EXIT trap).
tap_bail() {
	tap_not_ok "${T_NAME:-setup}" "$*"
	[ -n "$TG_TMP" ] && [ -s "$TG_TMP/tollgate.log" ] && diag "$(tail -n 20 "$TG_TMP/tollgate.log")"
	exit 1
}

# Print plugin diagnostics as TAP comments (used after a failed assertion).
tg_diag_last() {
	diag "rc=$TG_RC stdout=$TG_OUT"
	[ -n "$TG_ERR" ] && diag "stderr: $TG_ERR"
	return 0
}

# ------------------------------------------------------------ preconditions
tg_require() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "not ok - preconditions: must run as root (network namespaces)"
		exit 1
	fi
	tg_require_tools ip nft jq ping
	if [ ! -x "$TG_BIN" ]; then
		echo "not ok - preconditions: plugin binary $TG_BIN not found (run make, or set TOLLGATE_BIN_DIR)"
		exit 1
	fi
}

# tg_require_tools TOOL...: every one is a command here, or the test ends not ok.
tg_require_tools() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || {
			echo "not ok - preconditions: '$t' not installed (make deps)"
			exit 1
		}
	done
}

# --------------------------------------------------------------- topology
_tg_sysctl() { # NETNS KEY VALUE  (writes /proc/sys of that namespace)
	ip netns exec "$1" sh -c "echo $3 > /proc/sys/${2//.//}"
}

_tg_netns_add() {
	ip netns add "$1" || return 1
	TG_NAMESPACES+=("$1")
	# No IPv6 duplicate address detection: link-local addresses would change
	# from "tentative" to valid a second later and make snapshots differ.
	_tg_sysctl "$1" net.ipv6.conf.all.accept_dad 0 2>/dev/null
	_tg_sysctl "$1" net.ipv6.conf.default.accept_dad 0 2>/dev/null
	ip -n "$1" link set lo up
}

# Build the topology drawn above. Returns non-zero if it does not work.
topo_up() {
	# dataDir and logs on tmpfs, as the store's default /run/tollgate on a node
	# (its cache is kept only there); TG_TMP_BASE=/var/tmp runs on a disk.
	TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || return 1
	chmod 755 "$TG_TMP"
	local ns
	for ns in "$TG_NODE" "$TG_PEER" "$TG_INET" "$TG_FABRIC"; do
		_tg_netns_add "$ns" || return 1
	done
	# veth pairs are created inside the fabric namespace with their peer
	# end directly in the other namespace: never in the root namespace.
	ip -n "$TG_FABRIC" link add node0 type veth peer name eth0 netns "$TG_NODE" || return 1
	ip -n "$TG_FABRIC" link add peer0 type veth peer name eth0 netns "$TG_PEER" || return 1
	ip -n "$TG_FABRIC" link add inet0 type veth peer name eth0 netns "$TG_INET" || return 1

	ip -n "$TG_FABRIC" addr add 10.0.0.254/24 dev node0
	ip -n "$TG_FABRIC" addr add 10.0.1.254/24 dev peer0
	ip -n "$TG_FABRIC" addr add 203.0.113.1/24 dev inet0
	ip -n "$TG_NODE" addr add "$TG_NODE_IP/24" dev eth0
	ip -n "$TG_PEER" addr add 10.0.1.1/24 dev eth0
	ip -n "$TG_PEER" addr add "$TG_PEER_POD_IP/32" dev lo
	ip -n "$TG_INET" addr add "$TG_INET_IP/24" dev eth0
	for ns in "$TG_NODE" "$TG_PEER" "$TG_INET"; do ip -n "$ns" link set eth0 up; done
	for ns in node0 peer0 inet0; do ip -n "$TG_FABRIC" link set "$ns" up; done

	ip -n "$TG_FABRIC" route add 10.1.0.0/24 via "$TG_NODE_IP" || return 1
	ip -n "$TG_FABRIC" route add 10.2.0.0/24 via 10.0.1.1 || return 1
	ip -n "$TG_NODE" route add default via 10.0.0.254 || return 1
	ip -n "$TG_PEER" route add default via 10.0.1.254 || return 1
	ip -n "$TG_INET" route add 10.0.0.0/24 via 203.0.113.1 || return 1

	_tg_sysctl "$TG_FABRIC" net.ipv4.ip_forward 1 || return 1
	_tg_sysctl "$TG_NODE" net.ipv4.ip_forward 0 || return 1

	# Sanity: the node reaches the peer's "pod" and the internet host.
	pingq "$TG_NODE" "$TG_PEER_POD_IP" || { echo "# topology: node cannot reach peer pod" >&2; return 1; }
	pingq "$TG_NODE" "$TG_INET_IP" || { echo "# topology: node cannot reach inet host" >&2; return 1; }
	return 0
}

# Delete everything this run created. Safe to call more than once.
topo_down() {
	local p ns
	for p in "${TG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${TG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	TG_PIDS=()
	# pods first, then node/peer/inet/fabric (deleting a netns deletes its links)
	for ((p = ${#TG_NAMESPACES[@]} - 1; p >= 0; p--)); do
		ns=${TG_NAMESPACES[p]}
		[ -e "$TG_NETNS_DIR/$ns" ] && ip netns del "$ns" 2>/dev/null
	done
	TG_NAMESPACES=()
	if [ -n "$TG_TMP" ] && [ -d "$TG_TMP" ]; then
		if [ -n "${TG_KEEP_TMP:-}" ]; then echo "# kept $TG_TMP" >&2; else rm -rf "$TG_TMP"; fi
	fi
	TG_TMP=""
}

# Install as: trap tg_cleanup EXIT; trap 'exit 130' INT; trap 'exit 143' TERM
tg_cleanup() { topo_down; }
tg_traps() {
	trap tg_cleanup EXIT
	trap 'echo "# interrupted" >&2; exit 130' INT
	trap 'echo "# terminated" >&2; exit 143' TERM
}

# ---------------------------------------------------------------- helpers
# pingq NETNS DST [1]: bounded ping, true if a reply comes back. One echo
# (1 s timeout), and when that fails a second try of two echoes; with a third
# argument "1" only the single echo (for checks that expect no reply).
pingq() {
	ip netns exec "$1" ping -n -q -c 1 -W 1 "$2" >/dev/null 2>&1 && return 0
	[ "${3:-}" = 1 ] && return 1
	ip netns exec "$1" ping -n -q -c 2 -i 0.2 -W 1 "$2" >/dev/null 2>&1
}

# wait_for SECONDS CMD...: poll CMD until it succeeds or time runs out.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		[ "$SECONDS" -ge "$deadline" ] && return 1
		sleep 0.05
	done
}

# wait_for_ms MS CMD...: wait_for with its bound in milliseconds (where a
# fixed sleep of less than a second, or not of whole seconds, stood)
wait_for_ms() {
	local end=$((${EPOCHREALTIME/[.,]/} / 1000 + $1))
	shift
	until "$@"; do
		[ $((${EPOCHREALTIME/[.,]/} / 1000)) -ge "$end" ] && return 1
		sleep 0.05
	done
}

# tg_imds_start NETNS PORT [ARGS...]: the fake IMDS (fake_imds.py ARGS) on
# 127.0.0.1:PORT in NETNS, in the background (killed on exit, as every PID of
# TG_PIDS); returns once it accepts connections, bails showing its stderr
# ($TG_TMP/imds.err) when it does not within 10 s.
tg_imds_start() {
	local ns=$1 port=$2
	shift 2
	ip netns exec "$ns" python3 "$TG_LIB_DIR/fake_imds.py" --port "$port" "$@" 2>"$TG_TMP/imds.err" &
	TG_PIDS+=($!)
	wait_for 10 _tg_tcp_open "$ns" "$port" || tap_bail "fake IMDS did not start: $(cat "$TG_TMP/imds.err")"
}
_tg_tcp_open() { ip netns exec "$1" bash -c "exec 3<>/dev/tcp/127.0.0.1/$2" 2>/dev/null; }

# A realistic 64-hex container ID for a short pod name.
cid_for() { printf '%s' "$TG_ID/$1" | sha256sum | cut -c1-64; }
netns_path() { echo "$TG_NETNS_DIR/$TG_ID-$1"; }

# k8s_args NAMESPACE POD CID: CNI_ARGS as kubelet/containerd send them.
k8s_args() {
	echo "IgnoreUnknown=1;K8S_POD_NAMESPACE=$1;K8S_POD_NAME=$2;K8S_POD_INFRA_CONTAINER_ID=$3;K8S_POD_UID=00000000-0000-4000-8000-$(printf '%s' "$3" | cut -c1-12)"
}

# tg_conf [JQ_FILTER [jq args...]]: the network config, optionally edited by a jq filter.
#   tg_conf '.mtu=1400 | .ipam.cooldownSeconds=30'
tg_conf() {
	local filter=${1:-.}
	[ $# -gt 0 ] && shift
	jq -c -n --arg dd "$TG_TMP/data" --arg lf "$TG_TMP/tollgate.log" --arg name "$TG_NETNAME" '{
		cniVersion: "1.1.0", name: $name, type: "tollgate", mtu: 1500, uplink: "eth0",
		internalCIDRs: ["10.0.0.0/8"], masquerade: true, dataDir: $dd, logFile: $lf,
		ipam: {source: "static", addresses: ["10.1.0.10-10.1.0.40", "10.1.0.64/28"],
		       exclude: ["10.1.0.11"], cooldownSeconds: 0}
	}' | jq -c "$@" "$filter"
}

# tg_exec [VAR=value ...] < stdin: run the plugin in the node namespace with
# exactly these environment variables (plus PATH and TG_EXTRA_ENV).
tg_exec() {
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "${TG_EXTRA_ENV[@]}" "$@" "$TG_BIN"
}

# exec_node ARGS...: replaces the calling (sub)shell with ARGS in the node,
# with the plugin's environment (PATH and TG_EXTRA_ENV). `( exec_node ... ) &`
# makes $! the PID of ARGS itself (the subshell execs `ip netns exec`, which
# execs env, which execs ARGS): a background function call would make $! a
# subshell whose SIGKILL leaves its child running.
exec_node() { exec ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "${TG_EXTRA_ENV[@]}" "$@"; }

# maybe_kill PID [MAX_MS]: with probability KILL_PCT (percent, the caller's),
# SIGKILL PID after 0 to MAX_MS-1 (default 80) ms; then reap it. MK_RC gets the
# exit status (137 when the kill landed first). Not in $(...): only the shell
# that started PID can wait for it.
MK_RC=0
maybe_kill() {
	local pid=$1
	if [ $((RANDOM % 100)) -lt "${KILL_PCT:-0}" ]; then
		sleep "$(printf '0.%03d' $((RANDOM % ${2:-80})))"
		kill -KILL "$pid" 2>/dev/null
	fi
	{ wait "$pid"; } 2>/dev/null # no "Killed" job notice
	# shellcheck disable=SC2034 # read by the callers
	MK_RC=$?
}

# tg_run CMD CID IFNAME NETNS [CNI_ARGS] < conf
#   sets TG_RC, TG_OUT (stdout), TG_ERR (stderr)
tg_run() {
	local cmd=$1 cid=$2 ifn=$3 netns=$4 args=${5-}
	local env=(CNI_COMMAND="$cmd" CNI_PATH="$TOLLGATE_BIN_DIR")
	[ "$cmd" = STATUS ] || [ "$cmd" = GC ] || [ "$cmd" = VERSION ] ||
		env+=(CNI_CONTAINERID="$cid" CNI_IFNAME="$ifn" CNI_NETNS="$netns" CNI_ARGS="$args")
	tg_exec "${env[@]}" >"$TG_TMP/run.out" 2>"$TG_TMP/run.err"
	TG_RC=$?
	TG_OUT=$(cat "$TG_TMP/run.out")
	TG_ERR=$(cat "$TG_TMP/run.err")
	return "$TG_RC"
}

# cni_error_problem CODE: prints why the last run (TG_RC, TG_OUT) is not a
# proper CNI error with that code: exit status 1 and stdout exactly one error
# object {cniVersion, code, msg}. Prints nothing when it is.
cni_error_problem() {
	local want=$1 r
	[ "$TG_RC" -eq 1 ] || { echo "exit status $TG_RC, expected 1 (stdout: ${TG_OUT:0:200})"; return; }
	r=$(printf '%s' "$TG_OUT" | jq -rs --argjson want "$want" '
		if length != 1 then "stdout holds \(length) JSON values, expected 1"
		elif (.[0] | type) != "object" or (.[0].cniVersion | type) != "string"
			or (.[0].code | type) != "number" or (.[0].msg | type) != "string" or (.[0].msg | length) == 0
		then "not an error object {cniVersion,code,msg}"
		elif .[0].code != $want then "code \(.[0].code), expected \($want) (msg: \(.[0].msg))"
		else "" end' 2>/dev/null) || r="stdout is not JSON"
	[ -z "$r" ] || echo "$r: ${TG_OUT:0:300}"
}

# ------------------------------------------------------------------- pods
pod_ns_add() { _tg_netns_add "$TG_ID-$1"; }
pod_ns_del() { ip netns del "$TG_ID-$1"; }

# pod_add SHORT K8S_NAMESPACE CONF [IFNAME]: create the pod netns if needed, ADD.
# Records POD_CID/POD_IP/POD_NETNS/POD_RESULT/POD_VETH[SHORT]. Returns TG_RC.
# shellcheck disable=SC2034  # the POD_* arrays are read by the test files
pod_add() {
	local short=$1 k8sns=$2 conf=$3 ifn=${4:-eth0}
	local cid path
	cid=$(cid_for "$short")
	path=$(netns_path "$short")
	[ -e "$path" ] || pod_ns_add "$short" || return 1
	POD_CID[$short]=$cid
	POD_NETNS[$short]=$path
	tg_run ADD "$cid" "$ifn" "$path" "$(k8s_args "$k8sns" "$short" "$cid")" <<<"$conf"
	if [ "$TG_RC" -eq 0 ]; then
		POD_RESULT[$short]=$TG_OUT
		POD_IP[$short]=$(jq -r '.ips[0].address // "" | split("/")[0]' <<<"$TG_OUT" 2>/dev/null)
		POD_VETH[$short]=$(jq -r '.interfaces[0].name // ""' <<<"$TG_OUT" 2>/dev/null)
	fi
	return "$TG_RC"
}

# pod_del SHORT CONF [IFNAME]: DEL (CNI_NETNS empty when the netns is gone).
pod_del() {
	local short=$1 conf=$2 ifn=${3:-eth0}
	local cid=${POD_CID[$short]:-$(cid_for "$short")} path
	path=$(netns_path "$short")
	[ -e "$path" ] || path=""
	tg_run DEL "$cid" "$ifn" "$path" "$(k8s_args default "$short" "$cid")" <<<"$conf"
}

# --------------------------------------------------------------- observing
tg_state_file() { echo "$TG_TMP/data/${1:-$TG_NETNAME}/state.json"; }

# tg_state [NETNAME]: state.json content ("{}" if absent)
tg_state() {
	local f
	f=$(tg_state_file "${1:-}")
	if [ -f "$f" ]; then cat "$f"; else echo '{}'; fi
}
# tg_store_set_boot_id NETNAME ID: the store as if written in the boot ID (a
# reboot, seen from the store: every attachment in it is now stale).
tg_store_set_boot_id() {
	local f
	f=$(tg_state_file "$1")
	jq -c --arg b "$2" '.bootId = $b' "$f" >"$f.edit" && chmod 600 "$f.edit" && mv "$f.edit" "$f"
}
state_attachments() { tg_state "${1:-}" | jq -c '[.attachments // [] | .[]]'; }
state_count() { tg_state "${1:-}" | jq '.attachments // [] | length'; }
state_has_ip() { tg_state "${2:-}" | jq -e --arg ip "$1" '(.attachments // []) | any(.ip == $ip)' >/dev/null; }

# nft_set_has SET IP: IP is an element of set SET of table inet tollgate (node).
nft_set_has() {
	ip netns exec "$TG_NODE" nft list set inet tollgate "$1" 2>/dev/null | grep -qw -- "$2"
}
node_links_tg() { ip -n "$TG_NODE" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^tg' || true; }
node_host_routes() { ip -n "$TG_NODE" -4 route show | grep -E '^[0-9.]+ dev ' || true; }

# tg_snapshot [NETNAME...]: normalised view of the node for before/after
# comparisons: links, addresses, routes, permanent/proxy neighbours, the
# nftables ruleset (counters zeroed), the sysctls Tollgate touches and the
# state files (attachments and pool; cool-down entries change legitimately;
# TG_SNAP_STATE_FILTER overrides the jq filter applied to each state file).
tg_snapshot() {
	local n filter='{pool, attachments: ((.attachments // []) | sort_by(.containerId))}'
	filter=${TG_SNAP_STATE_FILTER:-$filter}
	# one ip process instead of six (this runs after every bad-input case);
	# with no -4/-6, routes and neighbours of both families are listed
	echo "## kernel"
	ip -n "$TG_NODE" -d -batch - <<-'EOF'
		link show
		addr show
		route show table all
		rule show
		neigh show nud permanent
		neigh show proxy
	EOF
	echo "## nftables"
	# counters and the next hops traffic adds to @nexthops (each with its own expiry) are the
	# kernel's to change
	ip netns exec "$TG_NODE" nft list ruleset | sed -E 's/packets [0-9]+ bytes [0-9]+/packets N bytes N/g' |
		awk '/^\tset nexthops \{/ { inset = 1 }
			inset && /elements = \{/ { skip = 1 }
			skip { if ($0 ~ /\}/) skip = 0; next }
			inset && /^\t\}/ { inset = 0 }
			{ print }'
	echo "## state"
	for n in "${@:-$TG_NETNAME}"; do
		echo "# $n"
		tg_state "$n" | jq -S "$filter"
	done
}

# snap_diff A B: unified diff of two snapshots (empty when equal)
snap_diff() { diff -u <(printf '%s\n' "$1") <(printf '%s\n' "$2") | tail -n +3; }

# nft_set_count SET: how many elements set SET of table inet tollgate holds in
# the node (read with nft -j). A missing set or table is not "no element":
# then it prints "missing" and fails.
nft_set_count() {
	local j
	if j=$(ip netns exec "$TG_NODE" nft -j list set inet tollgate "$1" 2>/dev/null) &&
		jq -e --arg s "$1" '[.nftables[] | .set? // empty | select(.family == "inet" and .table == "tollgate" and .name == $s)]
			| if length == 1 then .[0].elem // [] | length else error("no set \($s)") end' <<<"$j" 2>/dev/null; then
		return 0
	fi
	echo missing
	return 1
}
