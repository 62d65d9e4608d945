# shellcheck shell=bash
# Shared by test_shaping.sh (what shaping makes and removes: classes, CHECK,
# the runtime's spellings, annotations, which traffic goes through which class;
# runs against the sanitizer build too) and test_shaping_rates.sh (caps
# measured on the wire; not against the sanitizer build). Sourced after lib.sh.
#
# The pod helpers: sconf (the network config with a shaping block and a
# runtimeConfig), spod_ns POD NAMESPACE SHAPING [RUNTIMECONFIG] (ADD,
# remembering config and namespace), sdel POD, scheck POD (CHECK with
# prevResult), and readers of the node's tc objects and state.json.
#
# Traffic: bounded iperf3 runs between the topology's namespaces and rates
# read from the kernel's byte counters over the steady part of each run.
#
#   sh_measure "COUNTER..." "FLOW..."  runs the flows concurrently, samples
#       the counters WARMUP s after the start and WINDOW s later, and sets
#       SH_RATE[i] (Mbit/s of IP bytes, counter i), SH_RXGOOD[j] (Mbit/s of
#       TCP payload that reached the receiving namespace of flow j over the
#       same window, see sh_rx_setup), SH_GOOD[j] (iperf3 receiver goodput over the
#       whole run, Mbit/s; "err" when iperf3 failed), SH_MSS[j] (the flow's
#       MSS) and SH_RETR[j] (TCP retransmissions of the sender, whole run).
#   SH_DURING, when set, is a command run (eval) between the two samples
#   instead of sleeping SH_WINDOW (for a ping under load).
#   COUNTER  tc/DEV/CLASSID   an HTB class in the node namespace; tc counts
#                              L2 bytes and one packet per GSO segment, so IP
#                              bytes = bytes - 14 x packets
#            nft/NAME          a named counter of table inet tollgate (IP bytes)
#   FLOW     "POD SRV_NS SRV_IP PORT [R|-] [ARG...]"  iperf3 client in the
#            pod's netns ($TG_ID-POD), server started here with -1 in SRV_NS
#            bound to SRV_IP; R = reverse (server sends, i.e. traffic to the
#            pod), - = not; ARGs: more arguments of the client ("-b 100M"
#            paces the flow's sender, with R the server)
#
# Every process started here is killed by its PID (never by name) and reaped:
# sh_cleanup (EXIT trap) kills the ones still running, then tears the topology
# down.

SH_DURATION=${SH_DURATION:-4}   # iperf3 -t (house rule: at most 5)
SH_WARMUP=${SH_WARMUP:-1.3}     # seconds before the first sample (slow start, connect)
SH_WINDOW=${SH_WINDOW:-2.2}     # seconds between the two samples
SH_PIDS=()                      # unreaped background processes of ours
declare -a SH_RATE=() SH_GOOD=() SH_RETR=() SH_RXGOOD=() SH_MSS=()

sh_forget_pid() { # PID: drop from SH_PIDS once reaped
	local p keep=()
	for p in "${SH_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	SH_PIDS=("${keep[@]}")
}

sh_kill_all() {
	local p
	for p in "${SH_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${SH_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	SH_PIDS=()
}

sh_cleanup() { sh_kill_all; topo_down; }
sh_traps() {
	trap sh_cleanup EXIT
	trap 'echo "# interrupted" >&2; exit 130' INT
	trap 'echo "# terminated" >&2; exit 143' TERM
}

# sh_port_listening NS PORT
sh_port_listening() { ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; }

# sh_server NS IP PORT: one-shot iperf3 server; its PID in SH_LAST_PID (not
# printed: a command substitution would make it a grandchild nobody reaps).
# Fails if it does not listen within 3 s.
SH_LAST_PID=""
sh_server() {
	local ns=$1 ip=$2 port=$3 pid
	ip netns exec "$ns" iperf3 -s -1 -B "$ip" -p "$port" >"$TG_TMP/srv-$port.log" 2>&1 &
	pid=$!
	SH_PIDS+=("$pid")
	SH_LAST_PID=$pid
	if ! wait_for 3 sh_port_listening "$ns" "$port"; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		sh_forget_pid "$pid"
		return 1
	fi
}

# sh_sample COUNTER...: prints "BYTES" per counter (IP bytes), one a line,
# then the sample's time (midpoint of the reads, seconds).
sh_sample() {
	local t0 t1 s kind dev cls name out
	declare -A tcdump=()
	t0=$EPOCHREALTIME
	for s in "$@"; do
		[ "${s%%/*}" = tc ] || continue
		dev=${s#tc/}
		dev=${dev%%/*}
		[ -n "${tcdump[$dev]+x}" ] && continue
		tcdump[$dev]=$(ip netns exec "$TG_NODE" tc -s class show dev "$dev" 2>/dev/null |
			awk '/^class/ {id=$3} /^ Sent/ {print id, $2, $4}')
	done
	local nftdump=""
	for s in "$@"; do
		if [ "${s%%/*}" = nft ]; then
			nftdump=$(ip netns exec "$TG_NODE" nft list counters table inet tollgate 2>/dev/null |
				awk '/counter / {n=$2} /packets/ {for (i=1;i<NF;i++) if ($i=="bytes") print n, $(i+1)}')
			break
		fi
	done
	t1=$EPOCHREALTIME
	for s in "$@"; do
		kind=${s%%/*}
		if [ "$kind" = tc ]; then
			dev=${s#tc/}
			cls=${dev#*/}
			dev=${dev%%/*}
			out=$(awk -v c="$cls" '$1 == c {print $2 - 14 * $3; f=1} END {if (!f) print "NA"}' <<<"${tcdump[$dev]}")
		else
			name=${s#nft/}
			out=$(awk -v c="$name" '$1 == c {print $2; f=1} END {if (!f) print "NA"}' <<<"$nftdump")
		fi
		echo "$out"
	done
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f\n", (a + b) / 2}'
}

# The receiver's side of each flow is counted by a table of our own in the
# receiving namespace (the server's, or with R the pod's): table inet tgrx,
# counter rx_<flow index> on the input hook for the flow's data (TCP to PORT
# at the server, from PORT at the pod; iperf3's control connection adds a few
# bytes at the start and end only). A counter sees each skb once at the IP
# layer, headers once per skb even when it carries a GSO/GRO train, so the
# TCP payload that arrived is bytes - (20 IP + 20 TCP + 12 timestamps) x packets:
# what the namespace actually received, retransmissions included, without
# the jumps of an in-order byte count when a retransmission fills a hole.
sh_rx_ns() { # FLOW -> "NETNS MATCH"
	local pod sns sip port rev
	read -r pod sns sip port rev _ <<<"$1"
	if [ "${rev:-}" = R ]; then echo "$TG_ID-$pod tcp sport $port"; else echo "$sns tcp dport $port"; fi
}
# sh_rx_setup FLOW...: (re)makes table inet tgrx in each receiving namespace
sh_rx_setup() {
	local i ns match
	declare -A rules=()
	for i in $(seq 0 $(($# - 1))); do
		read -r ns match <<<"$(sh_rx_ns "${@:i+1:1}")"
		rules[$ns]+="counter rx_$i { }"$'\n'"chain input_$i { type filter hook input priority 0; $match counter name rx_$i; }"$'\n'
	done
	for ns in "${!rules[@]}"; do
		ip netns exec "$ns" nft delete table inet tgrx 2>/dev/null
		printf 'table inet tgrx {\n%s}\n' "${rules[$ns]}" | ip netns exec "$ns" nft -f - ||
			echo "# cannot count the receiver's bytes in $ns" >&2
	done
}
# sh_rx_sample FLOW...: per flow, "PAYLOAD_BYTES TIME" (the read's midpoint, s)
sh_rx_sample() {
	local i ns match t0 b
	for i in $(seq 0 $(($# - 1))); do
		read -r ns match <<<"$(sh_rx_ns "${@:i+1:1}")"
		t0=$EPOCHREALTIME
		b=$(ip netns exec "$ns" nft list counter inet tgrx "rx_$i" 2>/dev/null |
			awk '{ for (j = 1; j < NF; j++) { if ($j == "packets") p = $(j + 1); if ($j == "bytes") b = $(j + 1) } }
			     END { if (b == "") print "NA"; else printf "%.0f\n", b - 52 * p }')
		awk -v b="$b" -v a="$t0" -v c="$EPOCHREALTIME" 'BEGIN { printf "%s %.6f\n", b, (a + c) / 2 }'
	done
}

# sh_goodput_at_cap CAP_MBIT MSS: the TCP goodput (Mbit/s) of a flow held to
# exactly CAP by an HTB class. HTB charges whole Ethernet frames; a full-size
# segment of MSS payload bytes travels in MSS + 12 (TCP timestamps option)
# + 20 (TCP) + 20 (IPv4) + 14 (Ethernet) bytes, so goodput = CAP x MSS / (MSS + 66)
# (95.6% of CAP at MSS 1448, i.e. MTU 1500)
sh_goodput_at_cap() { awk -v c="$1" -v m="${2:-1448}" 'BEGIN { printf "%.2f\n", c * m / (m + 66) }'; }

# sh_measure "COUNTER ..." "FLOW" "FLOW" ...   (see the header)
sh_measure() {
	local -a ctrs flows srv=() cli=() a b
	read -r -a ctrs <<<"$1"
	shift
	flows=("$@")
	SH_RATE=() SH_GOOD=() SH_RETR=() SH_RXGOOD=() SH_MSS=()
	local -a ra rb
	local i f pod sns sip port rev more pid n=${#ctrs[@]}
	for ((i = 0; i < n; i++)); do SH_RATE[i]=NA; done # until measured
	for i in "${!flows[@]}"; do SH_GOOD[i]=err SH_RETR[i]="?" SH_RXGOOD[i]=NA SH_MSS[i]=1448; done
	for i in "${!flows[@]}"; do
		read -r pod sns sip port rev <<<"${flows[i]}"
		if ! sh_server "$sns" "$sip" "$port"; then
			echo "# iperf3 server $sns:$port did not start" >&2
			for pid in "${srv[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; sh_forget_pid "$pid"; done
			return 1
		fi
		srv+=("$SH_LAST_PID")
	done
	sh_rx_setup "${flows[@]}"
	for i in "${!flows[@]}"; do
		read -r pod sns sip port rev more <<<"${flows[i]}"
		read -r -a f <<<"${more:-}"
		[ "${rev:-}" = R ] && f+=(-R)
		ip netns exec "$TG_ID-$pod" iperf3 -c "$sip" -p "$port" -t "$SH_DURATION" --connect-timeout 2000 \
			-J "${f[@]}" >"$TG_TMP/cli-$i.json" 2>"$TG_TMP/cli-$i.err" &
		cli+=("$!")
		SH_PIDS+=("$!")
	done
	sleep "$SH_WARMUP"
	mapfile -t a < <(sh_sample "${ctrs[@]}")
	mapfile -t ra < <(sh_rx_sample "${flows[@]}")
	if [ -n "${SH_DURING:-}" ]; then
		eval "$SH_DURING" # e.g. a ping that lasts about SH_WINDOW
	else
		sleep "$SH_WINDOW"
	fi
	mapfile -t b < <(sh_sample "${ctrs[@]}")
	mapfile -t rb < <(sh_rx_sample "${flows[@]}")
	for pid in "${cli[@]}" "${srv[@]}"; do
		# iperf3 ends by itself within DURATION + a little; never wait forever
		wait_for $((SH_DURATION + 4)) sh_pid_gone "$pid" || kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		sh_forget_pid "$pid"
	done
	for ((i = 0; i < n; i++)); do
		# shellcheck disable=SC2034  # read by the test script
		SH_RATE[i]=$(awk -v x="${a[i]}" -v y="${b[i]}" -v t0="${a[n]}" -v t1="${b[n]}" \
			'BEGIN { if (x == "NA" || y == "NA") print "NA"; else printf "%.1f\n", (y - x) * 8 / (t1 - t0) / 1e6 }')
	done
	for i in "${!flows[@]}"; do
		# shellcheck disable=SC2034  # read by the test script
		SH_RXGOOD[i]=$(awk -v x="${ra[i]:-NA}" -v y="${rb[i]:-NA}" 'BEGIN {
			split(x, p, " "); split(y, q, " ")
			if (p[1] == "NA" || q[1] == "NA" || q[2] <= p[2]) print "NA"
			else printf "%.2f\n", (q[1] - p[1]) * 8 / (q[2] - p[2]) / 1e6 }')
		SH_MSS[i]=$(jq -r '.start.tcp_mss_default // 1448' "$TG_TMP/cli-$i.json" 2>/dev/null) || SH_MSS[i]=1448
		[[ ${SH_MSS[i]} =~ ^[0-9]+$ ]] && [ "${SH_MSS[i]}" -ge 500 ] || SH_MSS[i]=1448
		SH_GOOD[i]=$(jq -r 'if .error then "err" else ((.end.sum_received.bits_per_second // 0) / 1e6 * 10 | round / 10 | tostring) end' \
			"$TG_TMP/cli-$i.json" 2>/dev/null) || SH_GOOD[i]=err
		[ -n "${SH_GOOD[i]}" ] || SH_GOOD[i]=err
		# shellcheck disable=SC2034  # read by the test script
		SH_RETR[i]=$(jq -r '.end.sum_sent.retransmits // "?"' "$TG_TMP/cli-$i.json" 2>/dev/null) || SH_RETR[i]="?"
		[ "${SH_GOOD[i]}" = err ] && echo "# iperf3 flow '${flows[i]}' failed: $(jq -r '.error // empty' "$TG_TMP/cli-$i.json" 2>/dev/null) $(head -c 300 "$TG_TMP/cli-$i.err")" >&2
	done
	return 0
}

sh_pid_gone() { ! kill -0 "$1" 2>/dev/null || [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = Z ]; }

# sh_within VALUE TARGET TOLERANCE: |VALUE/TARGET - 1| <= TOLERANCE
sh_within() { awk -v v="$1" -v t="$2" -v e="$3" 'BEGIN { exit !(v != "NA" && v != "err" && (v / t - 1 <= e) && (1 - v / t <= e)) }'; }
# sh_cmp A OP B (awk numeric comparison; false when either is not a number)
sh_cmp() { awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
	if (a !~ /^-?[0-9.]+$/ || b !~ /^-?[0-9.]+$/) exit 1
	if (op == ">=") exit !(a >= b); if (op == "<=") exit !(a <= b)
	if (op == ">") exit !(a > b); if (op == "<") exit !(a < b); exit 1 }'; }

# sh_att_shaping POD: the pod's "shaping" object from state.json
sh_att_shaping() { tg_state | jq -c --arg c "${POD_CID[$1]}" '.attachments[] | select(.containerId == $c) | .shaping // {}'; }
# sh_pod_class POD / sh_ns_class POD: uplink class ids ("1:hex"), empty if none
sh_pod_class() { sh_hexcls "$(sh_att_shaping "$1" | jq -r '.podClass // 0')"; }
sh_ns_class() { sh_hexcls "$(sh_att_shaping "$1" | jq -r '.namespaceClass // 0')"; }
sh_hexcls() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" != 0 ] && printf '1:%x\n' "$1"; return 0; }
sh_ifb() { echo "ti${1#tg}"; }

# sh_tc_classes DEV: "class htb ..." lines (no stats) of a node device, leaf
# qdisc handles (kernel-chosen) masked, sorted
sh_tc_classes() {
	ip netns exec "$TG_NODE" tc class show dev "$1" 2>/dev/null | sed -E 's/ leaf [0-9a-f]+:/ leaf X:/' | sort
}

# sh_tc_snapshot: every qdisc, class and filter of every node device (one tc
# process for the classes and filters, device by device in `ip link` order;
# direct_packets_stat masked: stray ND packets move it)
sh_tc_snapshot() {
	local d
	{
		echo "qdisc show"
		for d in $(ip -n "$TG_NODE" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//'); do
			printf 'class show dev %s\nfilter show dev %s\nfilter show dev %s ingress\n' "$d" "$d" "$d"
		done
	} | ip netns exec "$TG_NODE" tc -batch - 2>&1 | sed -E 's/direct_packets_stat [0-9]+/direct_packets_stat N/'
}

# ------------------------------------------------------------ pods and classes
# shellcheck disable=SC2034  # read by the test scripts
UPQ=tollgate-inet # where the internet egress classes live (shaper.h)
# shellcheck disable=SC2034  # read by the test scripts
DLQ=tollgate-inetdl # ... and the internet ingress (download) classes
# shellcheck disable=SC2034  # the servers of FLOWs: "$PEER 5201" (internal), "$INET 5201" (internet)
PEER="$TG_PEER $TG_PEER_POD_IP" INET="$TG_INET $TG_INET_IP"
CAPS='{"bandwidth": true, "io.kubernetes.cri.pod-annotations": true}'

# sh_require: root, the plugin and the tools both shaping suites use
sh_require() {
	local t
	tg_require
	for t in iperf3 tc ss; do
		command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
	done
}

# sconf SHAPING [RUNTIMECONFIG]: the network config with this shaping block
# (JSON) and runtimeConfig (JSON, as libcni passes it)
sconf() {
	# shellcheck disable=SC2016  # jq variables
	tg_conf '.capabilities = $c | .shaping = $s | .runtimeConfig = $r' \
		--argjson c "$CAPS" --argjson s "${1:-"{}"}" --argjson r "${2:-"{}"}"
}
declare -A POD_CONF=() POD_NS=()
# spod POD NAMESPACE SHAPING [RUNTIMECONFIG]: ADD, remembering the config
spod() {
	POD_CONF[$1]=$(sconf "${3:-"{}"}" "${4:-"{}"}")
	pod_add "$1" "$2" "${POD_CONF[$1]}"
}
# spod_ns: spod, remembering the namespace too (for sdel and scheck)
spod_ns() { POD_NS[$1]=$2; spod "$@"; }
# sdel POD: DEL with the pod's own config and namespace
sdel() { tg_run DEL "${POD_CID[$1]}" eth0 "${POD_NETNS[$1]:-}" "$(k8s_args "${POD_NS[$1]:-default}" "$1" "${POD_CID[$1]}")" <<<"${POD_CONF[$1]}"; }
# scheck POD: CHECK with prevResult, as a conflist sends it
scheck() {
	local c
	c=$(jq -c --argjson p "${POD_RESULT[$1]}" '.prevResult = $p' <<<"${POD_CONF[$1]}")
	tg_run CHECK "${POD_CID[$1]}" eth0 "${POD_NETNS[$1]}" "$(k8s_args "${POD_NS[$1]}" "$1" "${POD_CID[$1]}")" <<<"$c"
}
class_line() { ip netns exec "$TG_NODE" tc class show dev "$1" classid "$2" 2>/dev/null; }
class_ceil() { class_line "$1" "$2" | sed -nE 's/.* ceil ([0-9.]+[KMG]?bit).*/\1/p'; }
# class_bytes DEV CLASSID: bytes the class has sent ("" when it does not exist)
class_bytes() {
	ip netns exec "$TG_NODE" tc -s class show dev "$1" classid "$2" 2>/dev/null | awk '/^ Sent/ {print $2; exit}'
}
leaf_limit() { ip netns exec "$TG_NODE" tc qdisc show dev "$1" parent "$2" 2>/dev/null | sed -nE 's/^qdisc bfifo .* limit ([0-9]+[KMG]?b).*/\1/p'; }
link_exists() { ip -n "$TG_NODE" link show "$1" >/dev/null 2>&1; }
egress_map_has() { ip netns exec "$TG_NODE" nft list map inet tollgate egress_class 2>/dev/null | grep -qw -- "$1"; }
# sect NAME: elapsed time, for the log (T_START set by the test)
sect() { diag "[$((SECONDS - ${T_START:-0})) s] $*"; }

# sh_pod_tamper POD: inside the pod, what a tenant with CAP_NET_ADMIN in its
# own netns could try: delete the root qdisc of its eth0, put an unlimited HTB
# there, delete an ingress qdisc (none of it may change the host side)
sh_pod_tamper() {
	local pns=$TG_ID-$1 out
	out=$(ip netns exec "$pns" tc qdisc del dev eth0 root 2>&1)
	diag "in the pod: tc qdisc del dev eth0 root -> rc $? ${out:+($out)}"
	out=$(ip netns exec "$pns" tc qdisc add dev eth0 root handle 1: htb default 1 2>&1 &&
		ip netns exec "$pns" tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit 2>&1)
	diag "in the pod: tc qdisc add dev eth0 root handle 1: htb + class 1:1 rate 10gbit -> rc $? ${out:+($out)}"
	ip netns exec "$pns" tc qdisc del dev eth0 ingress >/dev/null 2>&1
	return 0
}

# sh_node_clean: after every pod is gone (call between t_begin and t_end): no
# tg/ti link, no attachment, no element in map egress_class, and the internet
# IFB holds only what is node-wide: its HTB root and the node class 1:1 (no
# namespace class 1:<ns>, no pod class 1:<pod>, no leaf qdisc of either).
# The IFB must exist: a suite that shaped internet egress made it.
# sh_ipam ARGS...: tollgate-ipam in the node netns on this run's store; SH_IPAM_RC,
# output in $TG_TMP/ipam.out and ipam.err
sh_ipam() {
	ip netns exec "$TG_NODE" "$TOLLGATE_BIN_DIR/tollgate-ipam" --data-dir "$TG_TMP/data" \
		--network "$TG_NETNAME" "$@" >"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
	SH_IPAM_RC=$?
	return "$SH_IPAM_RC"
}

sh_node_clean() {
	local cls q
	t_expect "tg/ti links" "$(ip -n "$TG_NODE" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^t[gi]' | tr '\n' ' ')" ""
	t_expect "attachments" "$(state_count)" 0
	t_expect "elements of map egress_class" \
		"$(ip netns exec "$TG_NODE" nft -j list map inet tollgate egress_class 2>/dev/null | jq -c '[.nftables[] | select(.map) | .map.elem // [] | .[]]')" "[]"
	if ! link_exists "$UPQ"; then
		t_fail "no $UPQ on the node: nothing to check the classes of"
		return
	fi
	cls=$(ip netns exec "$TG_NODE" tc class show dev "$UPQ" 2>/dev/null)
	grep -q '^class htb 1:1 root ' <<<"$cls" || t_fail "$UPQ has no node class 1:1: $(tr '\n' ' ' <<<"$cls")"
	# Namespace classes outlive their last pod, under 1:1, until gc retires them.
	t_expect "classes on $UPQ neither 1:1 nor an empty namespace class under it" \
		"$(grep -v '^class htb 1:1 root ' <<<"$cls" | grep -Ev '^class htb 1:[0-7][0-9a-f]{0,3} parent 1:1 ' | tr '\n' ' ')" ""
	sh_ipam gc || t_fail "tollgate-ipam gc rc=$SH_IPAM_RC: $(cat "$TG_TMP/ipam.err")"
	cls=$(ip netns exec "$TG_NODE" tc class show dev "$UPQ" 2>/dev/null)
	t_expect "classes on $UPQ other than the node class 1:1" "$(grep -v '^class htb 1:1 root ' <<<"$cls" | tr '\n' ' ')" ""
	q=$(ip netns exec "$TG_NODE" tc qdisc show dev "$UPQ" 2>/dev/null)
	t_expect "qdiscs on $UPQ other than its HTB root" "$(grep -v '^qdisc htb 1: root ' <<<"$q" | tr '\n' ' ')" ""
}

# ping_stats FILE: "n min avg median max" of the replies' RTTs (ms)
ping_stats() {
	sed -nE 's/.* time=([0-9.]+) ms.*/\1/p' "$1" | sort -n | awk '
		{ v[NR] = $1; s += $1 }
		END { if (NR == 0) { print "0 NA NA NA NA"; exit }
		      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      printf "%d %.2f %.2f %.2f %.2f\n", NR, v[1], s / NR, m, v[NR] }'
}

# sh_start: what every shaping suite does first: tools present, traps set,
# the topology drawn in its header built (as one test).
sh_start() {
	sh_require
	sh_traps
	T_START=$SECONDS
	t_begin topology
	topo_up || tap_bail "could not build the namespace topology"
	t_end
}
