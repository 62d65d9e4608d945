# shellcheck shell=bash
# A real 3-member etcd cluster (Debian's etcd-server 3.4, /usr/bin/etcd) for
# integration tests, each member in a network namespace of its own, joined
# to a router namespace the caller made. Sourced after lib.sh.
#
#   member 1 ($TG_ID-e1)    member 2 ($TG_ID-e2)    member 3 ($TG_ID-e3)
#   eth0 P.11/16            eth0 P.12/16            eth0 P.13/16
#   default via P.254       default via P.254       default via P.254
#   etcd :2379 (P.11 and 127.0.0.1), peers :2380 (P.11) ...
#     | veth                  | veth                  | veth
#  +--+-------------------------+-----------------------+--------------+
#  | FABRIC_NS (the caller's, ip_forward=1): etcd1..etcd3, each with    |
#  |   P.254/32, proxy ARP, and a route P.1N/32 dev etcdN;              |
#  |   table ip tg_etcd_cut drops what goes to or from a cut member     |
#  +--------------------------------------------------------------------+
#   (P = SUBNET_PREFIX, e.g. 10.0.0: the members share a /16 with whatever
#   else the caller attaches there; proxy ARP on the fabric makes every
#   address of the /16 reachable through it, as in tests/bench/budgets_traffic.sh)
#
# API (call these in the test's main shell, never in $(...) or a pipeline:
# the members are its children, started with a parent-death signal, and
# etcd_stop reaps them):
#   fabric_attach FABRIC NS DEV IP PREFIX
#                           another namespace on the fabric as the members are
#                           (eth0 IP/16, default via PREFIX.254)
#   etcd_require            preconditions (etcd, curl, jq, nft, setpriv), or the test ends not ok
#   etcd_up FABRIC_NS SUBNET_PREFIX
#                           makes the 3 namespaces, starts the 3 members, waits
#                           (ETCD_UP_WAIT, 20 s) until all 3 answer /health true;
#                           sets ETCD_URLS ("http://P.11:2379,..."; exported),
#                           ETCD_IPS ("P.11 P.12 P.13"; exported), ETCD_PID[1..3],
#                           ETCD_IP[1..3], ETCD_NS[1..3], ETCD_ID[1..3] (raft
#                           member ids, decimal strings). Status 1 (why on stderr) if not.
#   etcd_stop I             SIGKILL member I, reap it; its data dir stays
#   etcd_down               etcd_stop of every member (the cleanup does it too)
#   etcd_start I            restart member I on its data dir (--initial-cluster-state
#                           existing); does not wait: a member serves clients only
#                           once it is back in a cluster with a quorum
#   etcd_wait_healthy [N [SECONDS]]  until at least N (3) members answer
#                           /health true, at most SECONDS (ETCD_UP_WAIT)
#   etcd_healthy_count      prints how many members answer /health true (a
#                           stopped or cut member is not asked: it counts as not)
#   etcd_leader             prints the index of the raft leader (the one at least
#                           2 members name), or nothing and status 1
#   etcd_cut I / etcd_heal I  partition member I from everything (the fabric drops
#                           its packets, both ways) / undo it
#   etcd_put KEY VALUE      put through the JSON gateway on the first member that
#                           answers; status not 0 if none did (see etcd_post)
#   etcd_get KEY            prints KEY's value ("" when absent); status 1 if no
#                           member answered
#   etcd_post PATH JSON     the raw JSON gateway: POST JSON to PATH (e.g.
#                           /v3/kv/txn) on the first member that handles it and
#                           print its answer: status 0 (an answer), 2 (etcd's
#                           error {"error","message","code"}, e.g. code 5 for a
#                           lease not found), 1 (no member could);
#                           etcd_b64 STRING encodes keys and values for it
#
# The gateway (etcd 3.4): POST http://IP:2379/v3/<service>/<method>, e.g.
# /v3/kv/range, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive (one POST,
# one renewal, the answer wrapped in {"result":...}), /v3/lease/revoke,
# /v3/maintenance/status (/v3beta/ too; no /v3alpha/ in 3.4). Keys and
# values are base64; 64-bit integers are JSON strings ("revision":"5");
# fields with their zero value are left out (no "kvs" when nothing matched,
# no "succeeded" when a txn's compare failed, no "leader" while there is
# none, no "TTL" when a keepalive names a lease that is gone). /health
# answers {"health":"true"}, a string.
#
# Processes are recorded in TG_PIDS (the EXIT trap of lib.sh ends them by
# PID); namespaces in TG_NAMESPACES; data dirs ($TG_TMP/etcdN.data) and logs
# ($TG_TMP/etcdN.log, appended to across restarts) under $TG_TMP. Members run
# with an empty environment (only PATH): etcd reads ETCD_* variables as flags.
# Sourcing this file wraps topo_down (which every cleanup calls) so that it
# runs etcd_down first: members SIGTERMed all at once make the leader try to
# hand its leadership over to a member that is going away, for etcd's
# request timeout (7 s) per test.

TG_ETCD_BIN=${TG_ETCD_BIN:-/usr/bin/etcd}
ETCD_UP_WAIT=${ETCD_UP_WAIT:-20}          # s: etcd_up's (and etcd_wait_healthy's) bound
ETCD_CURL_TIMEOUT=${ETCD_CURL_TIMEOUT:-2} # s (may be fractional): one /health or status query
ETCD_KV_TIMEOUT=${ETCD_KV_TIMEOUT:-3}     # s (may be fractional): one request of etcd_post, per member
ETCD_FABRIC="" ETCD_PREFIX="" ETCD_TOKEN="" ETCD_CLUSTER=""
ETCD_URLS="" ETCD_IPS=""
declare -a ETCD_PID=() ETCD_IP=() ETCD_NS=() ETCD_ID=() ETCD_CUT=()
ETCD_CUT_TABLE=tg_etcd_cut
# more etcd flags for every start, e.g. ETCD_EXTRA_ARGS=(--pre-vote=true):
# without pre-vote (3.4's default) a member rejoining after a cut has bumped
# its term in vain elections and forces a new one (raft term +5 after a 4 s
# cut, the cluster briefly unhealthy) even though the leader had a quorum
[ "${ETCD_EXTRA_ARGS+set}" = set ] || ETCD_EXTRA_ARGS=()

etcd_require() { tg_require_tools "$TG_ETCD_BIN" curl jq nft setpriv base64 timeout; }

# _etcd_forget_pid PID: drop a reaped PID from TG_PIDS (the cleanup kills
# what is left there: once reaped, the number may be someone else's)
_etcd_forget_pid() {
	local p keep=()
	for p in "${TG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	TG_PIDS=("${keep[@]}")
}

# _etcd_in NS CMD...: a client command in namespace NS (curl's --max-time
# bounds it; timeout only guards against a curl that would not stop)
_etcd_in() {
	local ns=$1
	shift
	timeout -k 1 30 ip netns exec "$ns" "$@"
}

# fabric_attach FABRIC NS DEV IP PREFIX: a new namespace NS on the fabric,
# eth0 IP/16 there and DEV on the fabric's side (PREFIX.254/32, proxy ARP, a
# /32 route to IP): what the members use, and what a test attaches beside
# them (allocators, clients)
fabric_attach() {
	local fab=$1 ns=$2 dev=$3 ip=$4 gw=$5.254
	_tg_netns_add "$ns" || return 1
	# created in the fabric with the peer end directly in NS: never in the root namespace
	ip -n "$fab" link add "$dev" type veth peer name eth0 netns "$ns" || return 1
	# proxy ARP: NS reaches everything else of the /16 through the fabric,
	# which answers for the addresses it routes elsewhere
	_tg_sysctl "$fab" "net.ipv4.conf.$dev.proxy_arp" 1 &&
		_tg_sysctl "$fab" "net.ipv4.neigh.$dev.proxy_delay" 0 || return 1
	ip -n "$fab" addr add "$gw/32" dev "$dev" || return 1
	ip -n "$fab" link set "$dev" up || return 1
	ip -n "$fab" route add "$ip/32" dev "$dev" || return 1
	ip -n "$ns" addr add "$ip/16" dev eth0 || return 1
	ip -n "$ns" link set eth0 up || return 1
	ip -n "$ns" link set lo up || return 1
	ip -n "$ns" route add default via "$gw"
}

# _etcd_link I: member I's namespace, eth0 P.1I/16 on the fabric's etcdI
_etcd_link() { fabric_attach "$ETCD_FABRIC" "${ETCD_NS[$1]}" "etcd$1" "${ETCD_IP[$1]}" "$ETCD_PREFIX"; }

# _etcd_run I STATE: start member I with --initial-cluster-state STATE
# (new or existing); records its PID. Its PID is $! itself: ip netns exec,
# env and setpriv each exec the next; setpriv --pdeathsig ends it should
# this shell die without its traps.
_etcd_run() {
	local i=$1 ip=${ETCD_IP[$1]}
	ip netns exec "${ETCD_NS[i]}" env -i PATH="$TG_PATH" setpriv --pdeathsig TERM "$TG_ETCD_BIN" \
		--name "e$i" --data-dir "$TG_TMP/etcd$i.data" \
		--listen-client-urls "http://$ip:2379,http://127.0.0.1:2379" \
		--advertise-client-urls "http://$ip:2379" \
		--listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
		--initial-cluster "$ETCD_CLUSTER" --initial-cluster-token "$ETCD_TOKEN" \
		--initial-cluster-state "$2" \
		--heartbeat-interval 100 --election-timeout 1000 \
		--enable-v2=false --logger zap --log-outputs stderr "${ETCD_EXTRA_ARGS[@]}" \
		>>"$TG_TMP/etcd$i.log" 2>&1 </dev/null &
	ETCD_PID[i]=$!
	TG_PIDS+=("$!")
}

# _etcd_live I: member I runs and is not cut off (the others are not asked:
# a cut member would only answer with a timeout)
_etcd_live() { [ -n "${ETCD_PID[$1]:-}" ] && [ -z "${ETCD_CUT[$1]:-}" ]; }

# _etcd_query NAME PATH [JSON]: one curl from the fabric asking the live
# members in parallel (GET, or POST JSON); member i's answer lands in
# $TG_TMP/etcd.NAME.i, absent or empty when it gave none within
# ETCD_CURL_TIMEOUT s (a member just restarted serves nothing until it is
# back in a quorum). NAME holds the caller's $BASHPID: callers in other
# subshells may query at the same time. (-s alone still shows curl 7.88's
# parallel progress meter.)
_etcd_query() {
	local name=$1 path=$2 i args=()
	for i in 1 2 3; do
		rm -f "$TG_TMP/etcd.$name.$i"
		_etcd_live "$i" && args+=(-o "$TG_TMP/etcd.$name.$i" "http://${ETCD_IP[i]}:2379$path")
	done
	[ ${#args[@]} -gt 0 ] || return 0
	[ $# -ge 3 ] && args=(-H 'Content-Type: application/json' --data-binary "$3" "${args[@]}")
	_etcd_in "$ETCD_FABRIC" curl -s -Z --no-progress-meter --max-time "$ETCD_CURL_TIMEOUT" "${args[@]}"
	return 0
}

etcd_healthy_count() {
	local i n=0 f q=health$BASHPID
	_etcd_query "$q" /health
	for i in 1 2 3; do
		f=$TG_TMP/etcd.$q.$i
		# 3.4 writes {"health":"true"} (a string); later versions a boolean
		[ -s "$f" ] && jq -e '.health == "true" or .health == true' "$f" >/dev/null 2>&1 && n=$((n + 1))
		rm -f "$f"
	done
	echo "$n"
}

_etcd_healthy_ge() { [ "$(etcd_healthy_count)" -ge "$1" ]; }
etcd_wait_healthy() { wait_for "${2:-$ETCD_UP_WAIT}" _etcd_healthy_ge "${1:-3}"; }

etcd_up() {
	local fab=$1 prefix=$2 i q t0=$SECONDS
	# the fabric must be one of this run's namespaces: never the root one
	case $fab in "$TG_ID"-*) ;; *) echo "etcd_up: $fab is not a namespace of this run ($TG_ID-*)" >&2; return 1 ;; esac
	[ -e "$TG_NETNS_DIR/$fab" ] || { echo "etcd_up: no namespace $fab" >&2; return 1; }
	[ "$(ip netns exec "$fab" cat /proc/sys/net/ipv4/ip_forward)" = 1 ] ||
		{ echo "etcd_up: $fab does not forward (net.ipv4.ip_forward=0)" >&2; return 1; }
	[ -x "$TG_ETCD_BIN" ] || { echo "etcd_up: $TG_ETCD_BIN missing (apt-get install etcd-server etcd-client)" >&2; return 1; }
	if [ -z "$TG_TMP" ]; then # as topo_up: on tmpfs, removed by topo_down
		TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || return 1
		chmod 755 "$TG_TMP"
	fi
	ETCD_FABRIC=$fab ETCD_PREFIX=$prefix
	ETCD_TOKEN=$TG_ID-etcd-$RANDOM$RANDOM
	ETCD_CLUSTER="" ETCD_URLS="" ETCD_IPS=""
	for i in 1 2 3; do
		ETCD_NS[i]=$TG_ID-e$i
		ETCD_IP[i]=$prefix.$((10 + i))
		ETCD_CUT[i]=""
		ETCD_CLUSTER+="${ETCD_CLUSTER:+,}e$i=http://${ETCD_IP[i]}:2380"
		ETCD_URLS+="${ETCD_URLS:+,}http://${ETCD_IP[i]}:2379"
		ETCD_IPS+="${ETCD_IPS:+ }${ETCD_IP[i]}"
		_etcd_link "$i" || { echo "etcd_up: cannot attach member $i (${ETCD_NS[i]}, ${ETCD_IP[i]}) to $fab" >&2; return 1; }
	done
	export ETCD_URLS ETCD_IPS
	# etcd_cut adds a member's address to the set; an own table, so that a
	# drop here holds whatever the caller's tables accept
	ip netns exec "$fab" nft -f - <<-EOF || { echo "etcd_up: cannot make table ip $ETCD_CUT_TABLE in $fab" >&2; return 1; }
		table ip $ETCD_CUT_TABLE {
			set cut { type ipv4_addr; }
			chain forward { type filter hook forward priority -10; policy accept; ip saddr @cut drop; ip daddr @cut drop; }
			chain input { type filter hook input priority -10; policy accept; ip saddr @cut drop; }
			chain output { type filter hook output priority -10; policy accept; ip daddr @cut drop; }
		}
	EOF
	for i in 1 2 3; do _etcd_run "$i" new; done
	if ! etcd_wait_healthy 3 "$ETCD_UP_WAIT"; then
		echo "etcd_up: the cluster is not healthy after $((SECONDS - t0)) s ($(etcd_healthy_count) of 3 members):" >&2
		for i in 1 2 3; do # each member's last complaint (zap: one JSON object a line)
			kill -0 "${ETCD_PID[i]}" 2>/dev/null || echo "  member $i exited" >&2
			{ grep -E '"level":"(error|fatal|panic)"' "$TG_TMP/etcd$i.log" || tail -n 1 "$TG_TMP/etcd$i.log"; } |
				tail -n 1 | cut -c1-300 | sed "s/^/  etcd$i: /" >&2
		done
		echo "  (logs: $TG_TMP/etcd[123].log)" >&2
		return 1
	fi
	# raft member ids (stable across restarts: they are in the data dirs)
	q=status$BASHPID
	_etcd_query "$q" /v3/maintenance/status '{}'
	for i in 1 2 3; do
		ETCD_ID[i]=$(jq -r '.header.member_id // empty' "$TG_TMP/etcd.$q.$i" 2>/dev/null)
		rm -f "$TG_TMP/etcd.$q.$i"
		[ -n "${ETCD_ID[i]}" ] || { echo "etcd_up: member $i does not tell its member id" >&2; return 1; }
	done
}

etcd_stop() {
	local i=$1 pid=${ETCD_PID[$1]:-}
	[ -n "$pid" ] || return 0
	kill -KILL "$pid" 2>/dev/null
	{ wait "$pid"; } 2>/dev/null # reaped (no "Killed" job notice)
	_etcd_forget_pid "$pid"
	ETCD_PID[i]=""
}

etcd_down() {
	local i
	for i in 1 2 3; do etcd_stop "$i"; done
}

etcd_start() {
	local i=$1
	[ -z "${ETCD_PID[i]:-}" ] || { echo "etcd_start: member $i runs (PID ${ETCD_PID[i]})" >&2; return 1; }
	_etcd_run "$i" existing
	# a member that cannot start at all (a bad data dir, a port taken) exits
	# at once: say so here rather than as an unhealthy cluster later
	sleep 0.2
	kill -0 "${ETCD_PID[i]}" 2>/dev/null && return 0
	{ wait "${ETCD_PID[i]}"; } 2>/dev/null
	_etcd_forget_pid "${ETCD_PID[i]}"
	ETCD_PID[i]=""
	echo "etcd_start: member $i exited: $(tail -n 2 "$TG_TMP/etcd$i.log" | cut -c1-300)" >&2
	return 1
}

etcd_leader() {
	local i lead q=status$BASHPID
	local -A votes=()
	_etcd_query "$q" /v3/maintenance/status '{}'
	for i in 1 2 3; do
		# ids are uint64: compared as the strings the gateway writes
		lead=$(jq -r '.leader // empty' "$TG_TMP/etcd.$q.$i" 2>/dev/null)
		rm -f "$TG_TMP/etcd.$q.$i"
		[ -n "$lead" ] && [ "$lead" != 0 ] && votes[$lead]=$((${votes[$lead]:-0} + 1))
	done
	# a quorum's word: a leader cut off may believe it leads for a while
	for i in 1 2 3; do
		[ "${votes[${ETCD_ID[i]:-none}]:-0}" -ge 2 ] && { echo "$i"; return 0; }
	done
	return 1
}

etcd_cut() {
	ip netns exec "$ETCD_FABRIC" nft add element ip "$ETCD_CUT_TABLE" cut "{ ${ETCD_IP[$1]} }" || return 1
	ETCD_CUT[$1]=1
}
etcd_heal() {
	[ -n "${ETCD_CUT[$1]:-}" ] || return 0
	ip netns exec "$ETCD_FABRIC" nft delete element ip "$ETCD_CUT_TABLE" cut "{ ${ETCD_IP[$1]} }" || return 1
	ETCD_CUT[$1]=""
}

etcd_b64() { printf '%s' "$1" | base64 -w0; }

# etcd_post PATH JSON: members that run and are not cut, in order, until one
# handles the request: an answer (with a "header") or an error of etcd's
# other than "unavailable" (gRPC codes 14, 4, 1: no leader, request timed
# out, ...), which another member would give as well. Each try is bounded by
# ETCD_KV_TIMEOUT s: without a quorum, a write or a (linearizable) read
# hangs on the member until etcd's own request timeout (7 s here), and may
# still take effect later, as any write whose answer was not seen.
etcd_post() {
	local i out
	for i in 1 2 3; do
		_etcd_live "$i" || continue
		out=$(_etcd_in "$ETCD_FABRIC" curl -s --max-time "$ETCD_KV_TIMEOUT" \
			-H 'Content-Type: application/json' --data-binary "$2" "http://${ETCD_IP[i]}:2379$1") || continue
		# (a keepalive's answer is a stream's first message: {"result":{"header"...}})
		case $(jq -r 'if has("header") or (.result | type == "object" and has("header")) then "ok"
			elif (.code | type) == "number" and ([.code] | inside([14, 4, 1]) | not) then "error"
			else "retry" end' 2>/dev/null <<<"$out") in
		ok) printf '%s\n' "$out"; return 0 ;;
		error) printf '%s\n' "$out"; return 2 ;;
		esac
	done
	return 1
}

etcd_put() {
	etcd_post /v3/kv/put "$(jq -cn --arg k "$(etcd_b64 "$1")" --arg v "$(etcd_b64 "$2")" '{key: $k, value: $v}')" >/dev/null
}

etcd_get() {
	local out
	out=$(etcd_post /v3/kv/range "$(jq -cn --arg k "$(etcd_b64 "$1")" '{key: $k}')") || return 1
	jq -r '.kvs[0].value // ""' <<<"$out" | base64 -d
}

# topo_down, as lib.sh defines it, runs after etcd_down (see the header);
# wrapped once however often this file is sourced
if ! declare -F _etcd_topo_down >/dev/null; then
	eval "_etcd_topo_down() $(declare -f topo_down | tail -n +2)"
	topo_down() { etcd_down; _etcd_topo_down "$@"; }
fi
