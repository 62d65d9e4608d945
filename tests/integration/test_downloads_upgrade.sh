#!/usr/bin/env bash
# A node upgraded with running pods: their downloads move from the class 1:2
# on each pod's own veth (the layout before tollgate-inetdl) to the node's
# download tree, and are shaped at every moment of the move. Measured where
# the outside world feels it: the bytes the internet host sends, counted in
# its own namespace per 1 s window, while a download runs through the
# node agent's start-up (which reshapes every pod).
#   - before: the pod as an older version left it (record without the
#     download tree, an HTB root with 1:2 on its veth, no element of
#     @ingress_class, no tollgate-inetdl) is shaped at its cap: the control
#     that the old layout holds
#   - during the agent's start-up: no 1 s window above the cap + 25 %
#   - after: tollgate-inetdl holds the pod's class, its veth steers to it,
#     1:2 is gone, the record says so, CHECK passes
#   - the control that the windows would show a gap: with the veth's
#     steering taken away for a moment, a window goes far above the cap
#
#   pod "mv" (namespace "mv") -- veth tg* -- node -- fabric -- inet 203.0.113.10
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_downloads_upgrade.sh
# shellcheck disable=SC2016,SC1091,SC2034  # jq filters with $vars; SH_* read by shaping_lib.sh
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/shaping_lib.sh"
sh_start

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
ALOG=$TG_TMP/agent.log
PORT=19641
CAP=20 # Mbit/s
SH='{"internetIngress": {"podDefault": "20M"}}'
STATE=$(tg_state_file)
INET=$TG_ID-inet

att() { jq -c --arg ip "${POD_IP[$1]}" '.attachments[] | select(.ip == $ip)' "$STATE"; }
# the internet host counts what it sends to the pod (TCP from port 5301, iperf3 -R's data)
sent_setup() {
	ip netns exec "$INET" nft delete table inet tgtx 2>/dev/null
	ip netns exec "$INET" nft -f - <<-'EOF'
		table inet tgtx {
			counter tx { }
			chain out { type filter hook output priority 0; tcp sport 5301 counter name tx; }
		}
	EOF
}
sent_bytes() { ip netns exec "$INET" nft list counter inet tgtx tx | awk '{for (i = 1; i < NF; i++) if ($i == "bytes") print $(i + 1)}'; }
# windows SECONDS OUT: samples the sender's bytes every second for SECONDS,
# writes "START RATE" per window to OUT (seconds since the first sample,
# Mbit/s over the window's own measured length: the reads take time too)
windows() {
	local end b0 b1 t0 t1 start
	: >"$2"
	b0=$(sent_bytes) t0=$EPOCHREALTIME start=$t0
	end=$(awk -v s="$start" -v d="$1" 'BEGIN { printf "%.6f", s + d }')
	while awk -v n="$EPOCHREALTIME" -v e="$end" 'BEGIN { exit !(n < e) }'; do
		sleep 1
		b1=$(sent_bytes) t1=$EPOCHREALTIME
		awk -v a="$b0" -v b="$b1" -v s="$t0" -v e="$t1" -v z="$start" \
			'BEGIN { printf "%.2f %.2f\n", s - z, (b - a) * 8 / (e - s) / 1e6 }' >>"$2"
		b0=$b1 t0=$t1
	done
}
# download SECONDS: iperf3 -R from the internet host to the pod, in the background
download() {
	ip netns exec "$INET" iperf3 -s -1 -B "$TG_INET_IP" -p 5301 >"$TG_TMP/srv.log" 2>&1 &
	SRV=$!
	SH_PIDS+=("$SRV")
	wait_for 3 sh_port_listening "$INET" 5301 || echo "# iperf3 server did not start" >&2
	ip netns exec "$TG_ID-mv" iperf3 -c "$TG_INET_IP" -p 5301 -R -t "$1" --connect-timeout 2000 >"$TG_TMP/cli.log" 2>&1 &
	CLI=$!
	SH_PIDS+=("$CLI")
}
download_end() {
	wait "$CLI" 2>/dev/null
	wait "$SRV" 2>/dev/null
	sh_forget_pid "$CLI"
	sh_forget_pid "$SRV"
}
# the windows from FROM s to TO s (after slow start, before the download's
# end): their max and mean
stats() {
	awk -v f="$2" -v t="$3" '$1 >= f && $1 < t { if ($2 > m) m = $2; s += $2; n++ }
		END { printf "%.1f %.1f\n", m, n ? s / n : 0 }' "$1"
}
# the windows as text
wins() { awk '{ printf "%s ", $2 }' "$1"; }
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# ------------------------------------------------------------ an older node
t_begin "a pod as an older version attached it: downloads capped by 1:2 on its veth"
OLD_OK=0
if spod_ns mv mv "$SH"; then
	v=${POD_VETH[mv]} ip=${POD_IP[mv]}
	N() { ip netns exec "$TG_NODE" "$@"; }
	# the record as it was written then, the kernel as it was made then
	jq -c --arg ip "$ip" '(.attachments[] | select(.ip == $ip) | .shaping) |=
		del(.internetIngressMark, .namespaceClass, .podClass)' "$STATE" >"$STATE.old" &&
		chmod 600 "$STATE.old" && mv "$STATE.old" "$STATE"
	N nft delete element inet tollgate ingress_class "{ $ip }" &&
		N tc qdisc del dev "$v" clsact &&
		N ip link del tollgate-inetdl &&
		N tc qdisc add dev "$v" root handle 1: htb default 0 &&
		N tc class add dev "$v" parent 1: classid 1:1 htb rate 32gbit ceil 32gbit &&
		N tc class add dev "$v" parent 1:1 classid 1:2 htb rate 200kbit ceil "${CAP}mbit" burst 10000 cburst 10000 &&
		N tc qdisc add dev "$v" parent 1:2 bfifo limit 196608 && OLD_OK=1
	[ "$OLD_OK" = 1 ] || t_fail "could not make the older layout"
	sent_setup
	download 4
	windows 4 "$TG_TMP/old.win"
	download_end
	read -r mx mean <<<"$(stats "$TG_TMP/old.win" 1 3)"
	diag "older layout: windows at the sender, max $mx, mean $mean Mbit/s (cap $CAP)"
	above "$mean" $((CAP * 8 / 10)) || t_fail "mean $mean Mbit/s: the download did not run near its cap"
	above "$mx" $((CAP * 125 / 100)) && t_fail "a window of $mx Mbit/s: the older layout did not hold the cap"
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

# ----------------------------------------------------------- the upgrade
t_begin "the node agent's start-up moves the pod to tollgate-inetdl: no 1 s window above the cap + 25 % meanwhile"
if [ "$OLD_OK" = 1 ]; then
	jq -c '{cniVersion, name, plugins: [.]}' <<<"${POD_CONF[mv]}" >"$TG_TMP/conflist"
	download 6
	windows 6 "$TG_TMP/mv.win" &
	WIN=$!
	SH_PIDS+=("$WIN")
	sleep 2
	ip netns exec "$TG_NODE" "$AGENT" --config "$TG_TMP/conflist" --listen "127.0.0.1:$PORT" --once 2>>"$ALOG" ||
		t_fail "agent --once: $(tail -3 "$ALOG")"
	wait "$WIN"
	sh_forget_pid "$WIN"
	download_end
	read -r mx mean <<<"$(stats "$TG_TMP/mv.win" 1 5)"
	diag "during the move: windows at the sender, max $mx, mean $mean Mbit/s: $(wins "$TG_TMP/mv.win")"
	above "$mx" $((CAP * 125 / 100)) && t_fail "a window of $mx Mbit/s during the move (cap $CAP)"
	above "$mean" $((CAP * 8 / 10)) || t_fail "mean $mean Mbit/s: the download did not run near its cap"
	t_expect "class 1:2 on the veth" "$(class_ceil "$v" 1:2)" ""
	t_expect "the pod's download class on tollgate-inetdl" "$(class_ceil "$DLQ" "$(sh_pod_class mv)")" "${CAP}Mbit"
	ip netns exec "$TG_NODE" tc filter show dev "$v" egress | grep -q "mirred (Egress Redirect to device tollgate-inetdl)" ||
		t_fail "the veth does not steer to tollgate-inetdl: $(ip netns exec "$TG_NODE" tc filter show dev "$v" egress)"
	t_expect "the record's steering mark" "$(att mv | jq -r '.shaping.internetIngressMark')" 65536
	scheck mv || t_fail "CHECK rc=$TG_RC $TG_OUT"
else
	t_fail "no older pod to move"
fi
t_end

# --------------------------------------------------------------- control
t_begin "control: a moment without the veth's steering shows in the windows"
if [ "$OLD_OK" = 1 ]; then
	download 4
	windows 4 "$TG_TMP/gap.win" &
	WIN=$!
	SH_PIDS+=("$WIN")
	sleep 2
	ip netns exec "$TG_NODE" tc filter del dev "$v" egress pref 1 || t_fail "cannot take the steering away"
	sleep 0.4
	ip netns exec "$TG_NODE" tc qdisc del dev "$v" clsact
	wait "$WIN"
	sh_forget_pid "$WIN"
	download_end
	read -r mx mean <<<"$(stats "$TG_TMP/gap.win" 1 3.6)"
	diag "with a gap: max $mx, mean $mean Mbit/s: $(wins "$TG_TMP/gap.win")"
	above "$mx" $((CAP * 15 / 10)) || t_fail "the gap did not show: max window $mx Mbit/s (cap $CAP)"
	sdel mv || t_fail "DEL rc=$TG_RC $TG_OUT"
fi
t_end
tap_done
