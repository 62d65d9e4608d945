#!/usr/bin/env bash
# Anti-spoofing: a pod sends only as itself. A tenant with CAP_NET_RAW forges
# IPv4 sources (another pod's address, the node's, addresses outside the pool
# and outside the cluster) towards the peer and the internet host, and sends
# IPv6 (global and link-local sources) towards a peer the node routes IPv6 to.
# Nothing of it leaves the node, no namespace but the sender's is charged,
# and the sender's spoofed-packet counter grows by exactly what was sent, in
# nftables and on the exporter's /metrics. A send with its own address is
# counted to its own namespace as before. A link named like a pod's that no
# attachment holds is dropped too, counted to the node. DEL takes the pod's
# anti-spoofing elements; its namespace keeps its counters.
#
#   pod mallory (ns mallory)   pod victim (ns victim)   stray (no attachment)
#   eth0 10.1.0.x/32           eth0 10.1.0.y/32         eth0 10.1.0.200/32
#      | tg… (plugin)             | tg… (plugin)           | tg0000000000aa (by hand)
#   node 10.0.0.1  fd00:a::1/64, IPv6 forwarding on; tollgate-agent --metrics-only on 127.0.0.1
#      |
#   fabric 10.0.0.254  fd00:a::fe/64          observer: UDP to port 7777, by family
#      |-- peer 10.0.1.1 (+ remote pod 10.2.0.5)  observer
#      \-- inet 203.0.113.10                      observer
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_antispoof.sh
# shellcheck disable=SC2016,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
for t in curl python3; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
EXP_BIN=$TOLLGATE_BIN_DIR/tollgate-agent
[ -x "$EXP_BIN" ] || { echo "not ok - preconditions: $EXP_BIN not found (run make)"; exit 1; }
PY=$(python3 -c 'import sys; print(sys.executable)')
SEND=$TG_LIB_DIR/spoof_send.py
TOOL=$TG_LIB_DIR/exporter_tool.py
PORT=7777
EXP_PORT=9617
SIZE=100          # UDP payload: an IPv4 packet is SIZE + 28 bytes, an IPv6 one SIZE + 48
N4=25             # forged IPv4 datagrams per (source, destination)
HOST_MAC=ee:ee:ee:ee:ee:ee
STRAY_IP=10.1.0.200
STRAY_LINK=tg0000000000aa

N() { ip netns exec "$TG_NODE" "$@"; }

# ctr NAME: "packets bytes" of a counter of table inet tollgate ("- -" when absent)
ctr() {
	N nft -j list counter inet tollgate "$1" 2>/dev/null |
		jq -r '[.nftables[] | .counter // empty][0] // {} | "\(.packets // "-") \(.bytes // "-")"'
}
# counters: "name packets bytes" for every counter of the table, sorted
counters() {
	N nft -j list counters table inet tollgate 2>/dev/null |
		jq -r '.nftables[] | .counter? // empty | "\(.name) \(.packets) \(.bytes)"' | sort
}
# moved BEFORE AFTER EXPECT: every counter whose change differs from EXPECT
# ("name packets bytes" lines; a counter not listed must not move)
moved() {
	awk -v B="$1" -v A="$2" -v E="$3" '
	function load(s, m,   n, i, f, l) {
		n = split(s, l, "\n")
		for (i = 1; i <= n; i++) if (split(l[i], f, " ") == 3) m[f[1]] = f[2] " " f[3]
	}
	BEGIN {
		load(B, b); load(A, a); load(E, e)
		for (k in a) {
			split(a[k], x, " "); split((k in b) ? b[k] : "0 0", y, " ")
			d = (x[1] - y[1]) " " (x[2] - y[2])
			w = (k in e) ? e[k] : "0 0"
			if (d != w) printf "%s moved by %s, expected %s\n", k, d, w
		}
		for (k in e) if (!(k in a)) printf "%s does not exist\n", k
	}'
}
# settle: a snapshot taken once two reads 100 ms apart agree
settle() {
	local x y i
	x=$(counters)
	for ((i = 0; i < 30; i++)); do
		sleep 0.1
		y=$(counters)
		[ "$x" = "$y" ] && break
		x=$y
	done
	printf '%s\n' "$y"
}
# observe NS [drop]: a counter per family of UDP to $PORT arriving in NS
# (fabric, peer, inet); at the ends dropped, so that no ICMP error comes back
observe() {
	ip netns exec "$1" nft -f - <<-EOF
		table inet tgobs {
			counter v4 { }
			counter v6 { }
			chain pre {
				type filter hook prerouting priority -500; policy accept;
				meta nfproto ipv4 udp dport $PORT counter name "v4" ${2:-}
				meta nfproto ipv6 udp dport $PORT counter name "v6" ${2:-}
			}
		}
	EOF
}
# seen: "fabric/v4 fabric/v6 peer/v4 peer/v6 inet/v4 inet/v6" packet counts
seen() {
	local ns f out=""
	for ns in "$TG_FABRIC" "$TG_PEER" "$TG_INET"; do
		for f in v4 v6; do
			out+="$(ip netns exec "$ns" nft -j list counter inet tgobs "$f" 2>/dev/null |
				jq -r '[.nftables[] | .counter // empty][0].packets // "-"') "
		done
	done
	echo "${out% }"
}
seen_delta() { # BEFORE AFTER -> "fabric/v4 +n ..." for every observer that moved
	paste -d' ' <(tr ' ' '\n' <<<"$1") <(tr ' ' '\n' <<<"$2") |
		awk 'BEGIN { split("fabric/v4 fabric/v6 peer/v4 peer/v6 inet/v4 inet/v6", n, " ") }
		     { if ($2 != $1) printf "%s +%s ", n[NR], $2 - $1 }'
}
# metric KEY: the value of one sample on /metrics ("absent" when missing)
metric() {
	N curl -s --max-time 3 -o "$TG_TMP/m.prom" "http://127.0.0.1:$EXP_PORT/metrics" || { echo "no page"; return; }
	"$PY" "$TOOL" parse --tsv "$TG_TMP/m.prom" | awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "absent" : v) }'
}
spoofkey() { printf 'tollgate_spoofed_packets_total{family="%s",namespace="%s"}' "$2" "$1"; }
send4() { # POD SRC DST COUNT
	ip netns exec "$TG_ID-$1" timeout 20 "$PY" "$SEND" ipv4 --src "$2" --dst "$3" --port "$PORT" \
		--count "$4" --size "$SIZE" >/dev/null
}
send6() { # POD SRC DST COUNT
	ip netns exec "$TG_ID-$1" timeout 20 "$PY" "$SEND" ipv6 --ifname eth0 --dst-mac "$HOST_MAC" \
		--src "$2" --dst "$3" --port "$PORT" --count "$4" --size "$SIZE" >/dev/null
}

# ---------------------------------------------------------------- setup
t_begin "topology, IPv6 between node and fabric, observers, exporter"
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_NODE" addr add fd00:a::1/64 dev eth0 nodad || t_fail "node IPv6 address"
ip -n "$TG_FABRIC" addr add fd00:a::fe/64 dev node0 nodad || t_fail "fabric IPv6 address"
_tg_sysctl "$TG_NODE" net.ipv6.conf.all.forwarding 1 || t_fail "node IPv6 forwarding"
observe "$TG_FABRIC" || t_fail "observer in the fabric"
for ns in "$TG_PEER" "$TG_INET"; do observe "$ns" drop || t_fail "observer in $ns"; done
ip netns exec "$TG_NODE" "$EXP_BIN" --metrics-only --listen "127.0.0.1:$EXP_PORT" --data-dir "$TG_TMP/data" \
	--network "$TG_NETNAME" --page-cache-ms 0 >"$TG_TMP/exporter.out" 2>"$TG_TMP/exporter.log" &
TG_PIDS+=("$!")
wait_for 5 sh -c "[ \"\$(ip netns exec $TG_NODE curl -s --max-time 1 http://127.0.0.1:$EXP_PORT/healthz)\" = ok ]" ||
	t_fail "exporter: no 'ok' on /healthz within 5 s: $(tail -n 3 "$TG_TMP/exporter.log")"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the topology"

CONF=$(tg_conf)
t_begin "ADD mallory and victim; both reach the peer and the internet host"
pod_add mallory mallory "$CONF" || { t_fail "ADD mallory: rc=$TG_RC $TG_OUT"; tg_diag_last; }
pod_add victim victim "$CONF" || { t_fail "ADD victim: rc=$TG_RC $TG_OUT"; tg_diag_last; }
for p in mallory victim; do
	pingq "$TG_ID-$p" "$TG_PEER_POD_IP" || t_fail "$p cannot reach the peer"
	pingq "$TG_ID-$p" "$TG_INET_IP" || t_fail "$p cannot reach the internet host"
done
t_end
M=${POD_IP[mallory]:-} V=${POD_IP[victim]:-}
if [ -z "$M" ] || [ -z "$V" ]; then tap_bail "cannot continue without the pods"; fi

t_begin "pods have no IPv6 address on eth0 and send no IPv6 of their own (nothing counted as spoofed)"
for p in mallory victim; do
	a=$(ip -n "$TG_ID-$p" -6 -o addr show dev eth0 2>/dev/null)
	[ -z "$a" ] || t_fail "$p has IPv6 addresses on eth0: $a"
done
sleep 1 # what a pod's kernel would send by itself (MLD, DAD, router solicitation) comes within a second
for p in mallory victim; do
	for f in ipv4 ipv6; do
		t_expect "ns_${p}_spoofed_$f" "$(ctr "ns_${p}_spoofed_$f")" "0 0"
	done
done
t_end

# ---------------------------------------------------------------- forged IPv4
t_begin "forged IPv4 (victim's, node's, outside-pool and outside-cluster sources) to peer and internet: nothing leaves the node, only mallory's spoofed counter moves, by exactly what was sent"
before=$(settle)
o1=$(seen)
sent=0
for src in "$V" "$TG_NODE_IP" 10.1.0.250 198.51.100.7; do
	for dst in "$TG_PEER_POD_IP" "$TG_INET_IP"; do
		send4 mallory "$src" "$dst" "$N4" || t_fail "sending from $src to $dst failed"
		sent=$((sent + N4))
	done
done
after=$(settle)
o2=$(seen)
p=$(moved "$before" "$after" "ns_mallory_spoofed_ipv4 $sent $((sent * (SIZE + 28)))")
[ -z "$p" ] || t_fail "$(tr '\n' ';' <<<"$p")"
t_expect "left the node (observers that moved)" "$(seen_delta "$o1" "$o2")" ""
t_expect "/metrics mallory ipv4" "$(metric "$(spoofkey mallory ipv4)")" "$(ctr ns_mallory_spoofed_ipv4 | cut -d' ' -f1)"
t_expect "/metrics mallory ipv4 (sent)" "$(metric "$(spoofkey mallory ipv4)")" "$sent"
t_expect "/metrics victim ipv4" "$(metric "$(spoofkey victim ipv4)")" 0
for c in egress_internal egress_internet; do
	t_expect "/metrics victim bytes $c" \
		"$(metric "tollgate_namespace_bytes_total{direction=\"${c%_*}\",namespace=\"victim\",traffic=\"${c#*_}\"}")" \
		"$(ctr "ns_victim_$c" | cut -d' ' -f2)"
done
t_end

t_begin "control: mallory's own address through the same raw socket is forwarded and counted to mallory"
before=$(settle)
o1=$(seen)
send4 mallory "$M" "$TG_PEER_POD_IP" "$N4" || t_fail "send to the peer failed"
send4 mallory "$M" "$TG_INET_IP" "$N4" || t_fail "send to the internet host failed"
after=$(settle)
o2=$(seen)
b=$((N4 * (SIZE + 28)))
p=$(moved "$before" "$after" "$(printf '%s\n' "ns_mallory_egress_internal $N4 $b" "ns_mallory_egress_internet $N4 $b")")
[ -z "$p" ] || t_fail "$(tr '\n' ';' <<<"$p")"
t_expect "observers" "$(seen_delta "$o1" "$o2")" "fabric/v4 +$((2 * N4)) peer/v4 +$N4 inet/v4 +$N4 "
t_end

# ---------------------------------------------------------------- IPv6
t_begin "IPv6 from a pod towards a peer the node routes to (global and link-local sources): nothing forwarded, counted to mallory"
# the path exists: the node itself reaches the fabric over IPv6
o1=$(seen)
N "$PY" -c "import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); [s.sendto(b'n', ('fd00:a::fe', $PORT)) for _ in range(3)]" ||
	t_fail "the node cannot send IPv6 to the fabric"
wait_for 2 sh -c "[ \"\$(ip netns exec $TG_FABRIC nft -j list counter inet tgobs v6 | jq '.nftables[1].counter.packets')\" -ge \$(( $(cut -d' ' -f2 <<<"$o1") + 3 )) ]" ||
	t_fail "the fabric did not see the node's own IPv6: the test would prove nothing"
before=$(settle)
o1=$(seen)
send6 mallory fd00:9::66 fd00:a::fe 20 || t_fail "global-source send failed"
send6 mallory fe80::66 ff02::2 10 || t_fail "link-local send failed"
after=$(settle)
o2=$(seen)
p=$(moved "$before" "$after" "ns_mallory_spoofed_ipv6 30 $((30 * (SIZE + 48)))")
[ -z "$p" ] || t_fail "$(tr '\n' ';' <<<"$p")"
t_expect "left the node" "$(seen_delta "$o1" "$o2")" ""
t_expect "/metrics mallory ipv6" "$(metric "$(spoofkey mallory ipv6)")" 30
t_end

# ---------------------------------------------------------------- no attachment
t_begin "a link named like a pod's that no attachment holds: dropped, counted to the node (no namespace label)"
pod_ns_add stray || t_fail "stray netns"
ip -n "$TG_NODE" link add "$STRAY_LINK" type veth peer name eth0 netns "$TG_ID-stray" || t_fail "stray veth"
ip -n "$TG_NODE" link set "$STRAY_LINK" address "$HOST_MAC" up
ip -n "$TG_NODE" route add "$STRAY_IP/32" dev "$STRAY_LINK"
ip -n "$TG_ID-stray" addr add "$STRAY_IP/32" dev eth0
# as the plugin does: no IPv6 link-local address, whose MLD and DAD would be counted too
ip -n "$TG_ID-stray" link set eth0 addrgenmode none up
ip -n "$TG_ID-stray" neigh add 169.254.1.1 lladdr "$HOST_MAC" dev eth0 nud permanent
ip -n "$TG_ID-stray" route add 169.254.1.1/32 dev eth0 scope link
ip -n "$TG_ID-stray" route add default via 169.254.1.1 dev eth0
before=$(settle)
o1=$(seen)
send4 stray "$STRAY_IP" "$TG_PEER_POD_IP" 7 || t_fail "stray send failed"
after=$(settle)
o2=$(seen)
p=$(moved "$before" "$after" "node_spoofed_ipv4 7 $((7 * (SIZE + 28)))")
[ -z "$p" ] || t_fail "$(tr '\n' ';' <<<"$p")"
t_expect "left the node" "$(seen_delta "$o1" "$o2")" ""
t_expect "/metrics node ipv4" "$(metric 'tollgate_spoofed_packets_total{family="ipv4"}')" 7
t_end

# ---------------------------------------------------------------- DEL
t_begin "DEL mallory: its link leaves set pod_src and the spoofed maps; namespace mallory keeps its counters"
veth=${POD_VETH[mallory]}
before=$(settle)
pod_del mallory "$CONF" || t_fail "DEL mallory: rc=$TG_RC $TG_OUT"
n=$(N nft -j list table inet tollgate | jq --arg v "$veth" '[.nftables[] | (.set? // .map? // empty) | .elem? // [] | .. | strings | select(. == $v)] | length')
t_expect "elements naming $veth" "$n" 0
t_expect "ns_mallory_spoofed_ipv4" "$(ctr ns_mallory_spoofed_ipv4)" "$(awk '$1 == "ns_mallory_spoofed_ipv4" { print $2, $3 }' <<<"$before")"
t_expect "/metrics mallory ipv4 after DEL" "$(metric "$(spoofkey mallory ipv4)")" "$sent"
pingq "$TG_ID-victim" "$TG_PEER_POD_IP" || t_fail "victim cannot reach the peer any more"
t_end

tap_done
