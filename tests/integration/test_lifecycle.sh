#!/usr/bin/env bash
# Lifecycle: DEL leaves the node exactly as before the ADD; DEL is idempotent
# and survives a vanished netns; CHECK detects drift; STATUS; exhausted pool;
# GC; address cool-down; stale attachments after a (simulated) reboot.
#
#   pods (one netns each) -- veth tg* --  node 10.0.0.1 -- fabric -- peer / inet
#   (topology drawn in lib.sh; every network below lives in the same node)
#
#   network   pool                         used by
#   tgtest    10.1.0.10-40, 10.1.0.64/28   DEL/CHECK sections
#   tgroll    10.1.0.240 (1, 30 s)         rollback of a failed ADD
#   tgsmall   10.1.0.200-201 (2)           STATUS / exhausted pool
#   tggc      10.1.0.210-212 (3)           GC
#   tgcool    10.1.0.220-221 (2, 30 s)     cool-down   (tgcool0: 222-223, 0 s)
#   tgboot    10.1.0.230-231 (2)           reboot (the store's bootId made an earlier boot's)
#   tgbroken  10.1.0.250-251 (2)           DEL with a store it cannot read
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_lifecycle.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091  # jq filters with $vars; associative arrays
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
t_begin topology
topo_up || tap_bail "could not build the namespace topology"

CONF=$(tg_conf)
ALLNETS=(tgtest tgroll tgsmall tggc tgcool tgcool0 tgboot)
snap() { tg_snapshot "${ALLNETS[@]}"; }
# for comparisons across sections: a network's pool is recorded in its store
# at first use, so only the attachments are compared there.
snap0() { TG_SNAP_STATE_FILTER='(.attachments // []) | sort_by(.containerId)' tg_snapshot "${ALLNETS[@]}"; }
# kernel-only part of a snapshot (drops the nftables and state sections)
kernel_part() { sed "/^## nftables/,\$d" <<<"$1"; }
net_conf() { # NAME ADDRESS-RANGE [extra jq]
	tg_conf ".name=\$n | .ipam.addresses=[\$a] | .ipam.exclude=[] ${3:+| $3}" --arg n "$1" --arg a "$2"
}
veth_gone() { ! ip -n "$TG_NODE" link show "$1" >/dev/null 2>&1; }
check_conf() { tg_conf '.prevResult=$p' --argjson p "$1"; }
pod_check() { # SHORT [CONF]
	local s=$1 c=${2:-$(check_conf "${POD_RESULT[$1]}")}
	tg_run CHECK "${POD_CID[$s]}" eth0 "${POD_NETNS[$s]}" "$(k8s_args research "$s" "${POD_CID[$s]}")" <<<"$c"
}

S_PRISTINE=$(snap)

# ------------------------------------------------------------ DEL == undo ADD
t_begin "warm-up ADD+DEL (creates the nft table and the store)"
pod_add w research "$CONF" || { t_fail "ADD rc=$TG_RC $TG_OUT"; tg_diag_last; }
pod_del w "$CONF" || { t_fail "DEL rc=$TG_RC $TG_OUT"; tg_diag_last; }
d=$(snap_diff "$(kernel_part "$S_PRISTINE")" "$(kernel_part "$(snap)")")
[ -z "$d" ] || { t_fail "links/routes/neighbours differ from the pristine node"; diag "$d"; }
t_end

S0=$(snap0)
t_begin "DEL removes every veth, route, nft element and store entry"
if pod_add p research "$CONF"; then
	P=${POD_IP[p]} VP=${POD_VETH[p]}
	[ "$(snap0)" != "$S0" ] || t_fail "ADD changed nothing?"
	pod_del p "$CONF" || { t_fail "DEL rc=$TG_RC $TG_OUT"; tg_diag_last; }
	[ -z "$TG_OUT" ] || t_fail "DEL printed '$TG_OUT'"
	veth_gone "$VP" || t_fail "$VP remains"
	ip -n "$TG_NODE" route show "$P/32" | grep -q . && t_fail "route $P/32 remains"
	nft_set_has pods "$P" && t_fail "$P remains in @pods"
	state_has_ip "$P" && t_fail "$P remains in state"
	d=$(snap_diff "$S0" "$(snap0)")
	[ -z "$d" ] || { t_fail "snapshot after DEL differs from before ADD"; diag "$d"; }
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
	tg_diag_last
fi
t_end

t_begin "DEL of an unknown container succeeds and changes nothing"
tg_run DEL "$(cid_for nosuch)" eth0 "" "$(k8s_args research nosuch "$(cid_for nosuch)")" <<<"$CONF"
[ "$TG_RC" = 0 ] || { t_fail "rc=$TG_RC $TG_OUT"; tg_diag_last; }
tg_run DEL "$(cid_for nosuch)" eth0 "" "" <<<"$(net_conf tgnever 10.1.0.250)"
[ "$TG_RC" = 0 ] || t_fail "on a never-used network: rc=$TG_RC $TG_OUT"
d=$(snap_diff "$S0" "$(snap0)")
[ -z "$d" ] || { t_fail "node changed"; diag "$d"; }
t_end

t_begin "second DEL of the same container succeeds"
pod_del p "$CONF"
[ "$TG_RC" = 0 ] || { t_fail "rc=$TG_RC $TG_OUT"; tg_diag_last; }
d=$(snap_diff "$S0" "$(snap0)")
[ -z "$d" ] || { t_fail "node changed"; diag "$d"; }
t_end

t_begin "DEL with empty CNI_NETNS after the pod netns is gone releases the IP"
if pod_add q research "$CONF"; then
	Q=${POD_IP[q]} VQ=${POD_VETH[q]}
	pod_ns_del q
	wait_for 5 veth_gone "$VQ" || t_fail "veth $VQ survived its netns"
	tg_run DEL "${POD_CID[q]}" eth0 "" "$(k8s_args research q "${POD_CID[q]}")" <<<"$CONF"
	[ "$TG_RC" = 0 ] || { t_fail "DEL rc=$TG_RC $TG_OUT"; tg_diag_last; }
	state_has_ip "$Q" && t_fail "$Q still allocated"
	nft_set_has pods "$Q" && t_fail "$Q remains in @pods"
	d=$(snap_diff "$S0" "$(snap0)")
	[ -z "$d" ] || { t_fail "node differs from before ADD"; diag "$d"; }
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
	tg_diag_last
fi
t_end

t_begin "ADD refused (pod already has an eth0): nothing changes, the store file not even rewritten"
# one-address pool with a 30 s cool-down: a leaked or cooling address shows at once
ROLL=$(net_conf tgroll 10.1.0.240 '.ipam.cooldownSeconds=30')
pod_ns_add busy
ip -n "$TG_ID-busy" link add eth0 type veth peer name busypeer
before=$(snap0)
# the file's identity and bytes ("absent" when this network has none yet)
store_id() { local f; f=$(tg_state_file tgroll); if [ -f "$f" ]; then stat -c '%i %Y.%y' "$f"; md5sum <"$f"; else echo absent; fi; }
store_before=$(store_id)
pod_add busy research "$ROLL"
if [ "$TG_RC" = 0 ]; then
	t_fail "ADD succeeded although eth0 exists in the pod"
	pod_del busy "$ROLL"
else
	# an interface in the way is an I/O failure of the plumbing: code 5, exit 1
	r=$(cni_error_problem 5)
	[ -z "$r" ] || t_fail "$r"
	d=$(snap_diff "$before" "$(snap0)")
	[ -z "$d" ] || { t_fail "node not restored"; diag "$d"; }
	t_expect "store file (inode, mtime, bytes)" "$(store_id)" "$store_before"
	st=$(tg_state tgroll)
	jq -e '(.attachments // []) == [] and ((.cooling // []) | length) == 0' <<<"$st" >/dev/null ||
		t_fail "store not as it was: $(jq -c '{attachments, cooling}' <<<"$st")"
	t_expect "pod links" "$(ip -n "$TG_ID-busy" -o link show | grep -v ': lo:' | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')" "busypeer eth0 "
	ip -n "$TG_ID-busy" link del eth0
	pod_add busy research "$ROLL" || t_fail "retry after removing the obstacle: rc=$TG_RC $TG_OUT"
	t_expect "retry got the only address" "${POD_IP[busy]:-}" 10.1.0.240
	pod_del busy "$ROLL"
fi
t_end

# ------------------------------------------------------------ CHECK
t_begin "CHECK of an unknown container: code 3"
pod_ns_add nosuch
tg_run CHECK "$(cid_for nosuch)" eth0 "$(netns_path nosuch)" "" <<<"$CONF"
r=$(cni_error_problem 3)
[ -z "$r" ] || t_fail "$r"
t_end

# drift cases: NAME, command that breaks the pod (gets IP, VETH, NS as $1 $2 $3)
drift_route() { ip -n "$TG_NODE" route del "$1/32"; }
drift_addr() { ip -n "$3" addr del "$1/32" dev eth0; }
drift_nft() { ip netns exec "$TG_NODE" nft delete element inet tollgate pods "{ $1 }"; }
drift_veth() { ip -n "$TG_NODE" link del "$2"; }
for drift in route addr nft veth; do
	t_begin "CHECK: ok when healthy, code 100 after removing the $drift"
	s=c$drift
	if pod_add "$s" research "$CONF"; then
		pod_check "$s"
		[ "$TG_RC" = 0 ] || { t_fail "healthy CHECK rc=$TG_RC $TG_OUT"; tg_diag_last; }
		[ -z "$TG_OUT" ] || t_fail "healthy CHECK printed '$TG_OUT'"
		if "drift_$drift" "${POD_IP[$s]}" "${POD_VETH[$s]}" "$TG_ID-$s"; then
			pod_check "$s"
			r=$(cni_error_problem 100)
			[ -z "$r" ] || t_fail "after removing the $drift: $r"
		else
			t_fail "could not remove the $drift (test setup)"
		fi
		pod_del "$s" "$CONF"
		[ "$TG_RC" = 0 ] || { t_fail "DEL of the drifted pod rc=$TG_RC $TG_OUT"; tg_diag_last; }
		d=$(snap_diff "$S0" "$(snap0)")
		[ -z "$d" ] || { t_fail "node not clean after DEL"; diag "$d"; }
	else
		t_fail "ADD rc=$TG_RC $TG_OUT"
		tg_diag_last
	fi
	t_end
done

# ------------------------------------------------------------ STATUS, exhausted pool
SMALL=$(net_conf tgsmall 10.1.0.200-10.1.0.201)
t_begin "STATUS ready on a fresh network"
tg_run STATUS "" "" "" <<<"$SMALL"
[ "$TG_RC" = 0 ] || { t_fail "rc=$TG_RC $TG_OUT"; tg_diag_last; }
tg_run STATUS "" "" "" <<<"$CONF"
[ "$TG_RC" = 0 ] || { t_fail "tgtest: rc=$TG_RC $TG_OUT"; tg_diag_last; }
t_end

t_begin "STATUS: code 50 when dataDir is not writable"
: >"$TG_TMP/not-a-dir"
tg_run STATUS "" "" "" <<<"$(tg_conf '.dataDir=$d' --arg d "$TG_TMP/not-a-dir/data")"
r=$(cni_error_problem 50)
[ -z "$r" ] || t_fail "$r"
t_end

t_begin "STATUS: code 50 when the pool was never synced (IMDS source, no store yet)"
tg_run STATUS "" "" "" <<<"$(tg_conf '.name="tgnosync" | .ipam = {source: "imds", imdsURL: "http://127.0.0.1:9"}')"
r=$(cni_error_problem 50)
[ -z "$r" ] || t_fail "$r"
t_end

# A full pool is not "not ready": containerd 2.x makes a STATUS error a
# NotReady node, and a NotReady node gets its pods evicted.
t_begin "STATUS: ready (0) when the pool is exhausted (2 addresses, 2 pods)"
pod_add s1 research "$SMALL" || t_fail "ADD s1 rc=$TG_RC $TG_OUT"
pod_add s2 research "$SMALL" || t_fail "ADD s2 rc=$TG_RC $TG_OUT"
tg_run STATUS "" "" "" <<<"$SMALL"
[ "$TG_RC" = 0 ] && [ -z "$TG_OUT" ] || t_fail "STATUS on a full pool: rc=$TG_RC $TG_OUT"
t_end

t_begin "ADD on an exhausted pool: code 11, node and store unchanged"
before=$(snap)
cp "$(tg_state_file tgsmall)" "$TG_TMP/small.before" 2>/dev/null
pod_add s3 research "$SMALL"
r=$(cni_error_problem 11)
[ -z "$r" ] || t_fail "$r"
d=$(snap_diff "$before" "$(snap)")
[ -z "$d" ] || { t_fail "node changed"; diag "$d"; }
cmp -s "$TG_TMP/small.before" "$(tg_state_file tgsmall)" || t_fail "state.json changed"
t_expect "links in the refused pod's netns" "$(ip -n "$TG_ID-s3" -o link show | grep -vc ': lo:')" 0
pod_del s1 "$SMALL" || t_fail "DEL s1 rc=$TG_RC"
pod_del s2 "$SMALL" || t_fail "DEL s2 rc=$TG_RC"
tg_run STATUS "" "" "" <<<"$SMALL"
[ "$TG_RC" = 0 ] || t_fail "STATUS after DELs rc=$TG_RC $TG_OUT"
t_end

# ------------------------------------------------------------ GC
GCC=$(net_conf tggc 10.1.0.210-10.1.0.212)
gc_conf() { # CID...
	local ids
	ids=$(printf '%s\n' "$@" | jq -R . | jq -s -c '[.[] | {containerID: ., ifname: "eth0"}]')
	jq -c '.["cni.dev/valid-attachments"] = $v' --argjson v "$ids" <<<"$GCC"
}
t_begin "GC without cni.dev/valid-attachments collects nothing (no list is not 'nothing is valid')"
for s in g1 g2; do pod_add "$s" research "$GCC" || t_fail "ADD $s rc=$TG_RC $TG_OUT"; done
if [ -z "$T_ERRS" ]; then
	before=$(snap)
	tg_run GC "" "" "" <<<"$GCC"
	[ "$TG_RC" = 0 ] || t_fail "GC without a list rc=$TG_RC $TG_OUT"
	grep -q "nothing collected" <<<"$TG_ERR" || t_fail "GC did not say it collected nothing: $TG_ERR"
	d=$(snap_diff "$before" "$(snap)")
	[ -z "$d" ] || { t_fail "GC without a list changed the node"; diag "$d"; }
	for s in g1 g2; do
		state_has_ip "${POD_IP[$s]}" tggc || t_fail "$s lost its attachment"
		pingq "$TG_ID-$s" "$TG_PEER_POD_IP" || t_fail "$s no longer works"
	done
fi
for s in g1 g2; do pod_del "$s" "$GCC" || t_fail "DEL $s rc=$TG_RC"; done
t_end

t_begin "GC releases every attachment not in cni.dev/valid-attachments"
for s in g1 g2 g3; do pod_add "$s" research "$GCC" || t_fail "ADD $s rc=$TG_RC $TG_OUT"; done
if [ -z "$T_ERRS" ]; then
	tg_run GC "" "" "" <<<"$(gc_conf "${POD_CID[g1]}")"
	[ "$TG_RC" = 0 ] || { t_fail "GC rc=$TG_RC $TG_OUT"; tg_diag_last; }
	for s in g2 g3; do
		veth_gone "${POD_VETH[$s]}" || t_fail "$s: veth ${POD_VETH[$s]} remains"
		ip -n "$TG_NODE" route show "${POD_IP[$s]}/32" | grep -q . && t_fail "$s: route remains"
		nft_set_has pods "${POD_IP[$s]}" && t_fail "$s: ${POD_IP[$s]} remains in @pods"
		state_has_ip "${POD_IP[$s]}" tggc && t_fail "$s: ${POD_IP[$s]} still allocated"
		ip -n "$TG_ID-$s" link show eth0 >/dev/null 2>&1 && t_fail "$s: eth0 remains in the pod"
	done
	state_has_ip "${POD_IP[g1]}" tggc || t_fail "g1 lost its attachment"
	veth_gone "${POD_VETH[g1]}" && t_fail "g1 lost its veth"
	pingq "$TG_ID-g1" "$TG_PEER_POD_IP" || t_fail "g1 no longer works"
	pod_add g4 research "$GCC" || t_fail "ADD g4 after GC rc=$TG_RC $TG_OUT (address not freed?)"
	pod_add g5 research "$GCC" || t_fail "ADD g5 after GC rc=$TG_RC $TG_OUT (address not freed?)"
	before=$(snap)
	tg_run GC "" "" "" <<<"$(gc_conf "${POD_CID[g1]}" "${POD_CID[g4]}" "${POD_CID[g5]}")"
	[ "$TG_RC" = 0 ] || t_fail "second GC rc=$TG_RC $TG_OUT"
	d=$(snap_diff "$before" "$(snap)")
	[ -z "$d" ] || { t_fail "GC with every attachment valid changed the node"; diag "$d"; }
fi
for s in g1 g2 g3 g4 g5; do pod_del "$s" "$GCC" || t_fail "DEL $s rc=$TG_RC"; done
d=$(snap_diff "$S0" "$(snap0)")
[ -z "$d" ] || { t_fail "node not clean after DELs"; diag "$d"; }
t_end

# ------------------------------------------------------------ cool-down
t_begin "cool-down: a released address is not handed out again right away"
COOL=$(net_conf tgcool 10.1.0.220-10.1.0.221 '.ipam.cooldownSeconds=30')
if pod_add k1 research "$COOL"; then
	X=${POD_IP[k1]}
	pod_del k1 "$COOL" || t_fail "DEL k1 rc=$TG_RC"
	tg_state tgcool | jq -e --arg ip "$X" 'any(.cooling[]?; .ip==$ip and (.releasedMs|type)=="number")' >/dev/null ||
		t_fail "$X not in state.cooling"
	pod_add k2 research "$COOL" || t_fail "ADD k2 rc=$TG_RC $TG_OUT"
	[ "${POD_IP[k2]:-}" != "$X" ] || t_fail "k2 got the cooling address $X"
	pod_add k3 research "$COOL"
	r=$(cni_error_problem 11)
	[ -z "$r" ] || t_fail "third ADD while $X cools: $r (got ${POD_IP[k3]:-no IP})"
	pod_del k2 "$COOL"
	pod_del k3 "$COOL"
else
	t_fail "ADD k1 rc=$TG_RC $TG_OUT"
fi
t_end

# A wall-clock step after a release (NTP stepping a clock that ran an hour
# fast or slow): seen from the store, its releasedMs now lies an hour ahead
# of or behind the clock. The cool-down runs on the boot clock and rests the
# full 30 s either way. Control: with its boot-clock time 31 s back, the
# address is free.
STEP=$(net_conf tgstep 10.1.0.224-10.1.0.224 '.ipam.cooldownSeconds=30')
step_store() { # JQ filter on the store's cooling entries
	local f
	f=$(tg_state_file tgstep)
	{ jq -c "$1" "$f" >"$f.edit" && chmod 600 "$f.edit" && mv "$f.edit" "$f"; } ||
		t_fail "cannot edit the store with $1"
}
for how in back:3600000 forward:-3600000 boot-clock-control:0; do
	if [ "${how%%:*}" = boot-clock-control ]; then
		t_begin "cool-down over on the boot clock (control): the address is free"
	else
		t_begin "cool-down across a wall-clock step ${how%%:*}: the address still rests"
	fi
	if pod_add w1 research "$STEP"; then
		pod_del w1 "$STEP" || t_fail "DEL w1 rc=$TG_RC"
		if [ "${how%%:*}" = boot-clock-control ]; then
			step_store '.cooling |= map(.releasedBootMs -= 31000)'
			pod_add w2 research "$STEP" || t_fail "ADD after the rest rc=$TG_RC $TG_OUT"
		else
			step_store ".cooling |= map(.releasedMs += ${how#*:})"
			pod_add w2 research "$STEP"
			r=$(cni_error_problem 11)
			[ -z "$r" ] || t_fail "ADD while the only address rests: $r (got ${POD_IP[w2]:-no IP})"
		fi
		pod_del w2 "$STEP"
		step_store '.cooling = []'
	else
		t_fail "ADD w1 rc=$TG_RC $TG_OUT"
	fi
	t_end
done

t_begin "cool-down 0: a released address comes back at once"
COOL0=$(net_conf tgcool0 10.1.0.222-10.1.0.223)
pod_add j1 research "$COOL0" || t_fail "ADD j1 rc=$TG_RC $TG_OUT"
pod_del j1 "$COOL0" || t_fail "DEL j1 rc=$TG_RC"
pod_add j2 research "$COOL0" || t_fail "ADD j2 rc=$TG_RC $TG_OUT"
pod_add j3 research "$COOL0" || t_fail "ADD j3 rc=$TG_RC $TG_OUT (released address not reusable)"
pod_del j2 "$COOL0"
pod_del j3 "$COOL0"
d=$(snap_diff "$S0" "$(snap0)")
[ -z "$d" ] || { t_fail "node not clean after DELs"; diag "$d"; }
t_end

# ------------------------------------------------------------ reboot
t_begin "reboot: a new boot id makes old attachments stale and frees them"
BOOT=$(net_conf tgboot 10.1.0.230-10.1.0.231)
BOOT_ID=$(cat /proc/sys/kernel/random/boot_id)
if pod_add r1 research "$BOOT"; then
	X=${POD_IP[r1]}
	t_expect "bootId" "$(tg_state tgboot | jq -r .bootId)" "$BOOT_ID"
	# The "reboot": every kernel object dies (the pod netns with its veth and
	# route, the nft table), the store survives, written in what is now an
	# earlier boot.
	pod_ns_del r1
	wait_for 5 veth_gone "${POD_VETH[r1]}" || t_fail "veth survived its netns"
	ip netns exec "$TG_NODE" nft delete table inet tollgate
	tg_store_set_boot_id tgboot 11111111-1111-4111-8111-111111111111
	pod_add r2 research "$BOOT" || { t_fail "ADD r2 after reboot rc=$TG_RC $TG_OUT"; tg_diag_last; }
	st=$(tg_state tgboot)
	jq -e --arg c "${POD_CID[r1]}" '.attachments | any(.containerId==$c) | not' <<<"$st" >/dev/null ||
		t_fail "stale attachment r1 still in state"
	t_expect "bootId" "$(jq -r .bootId <<<"$st")" "$BOOT_ID"
	pod_add r3 research "$BOOT" || t_fail "ADD r3 rc=$TG_RC $TG_OUT (stale address $X not freed)"
	pod_add r4 research "$BOOT"
	r=$(cni_error_problem 11)
	[ -z "$r" ] || t_fail "pool of 2 should now be full: $r"
	pingq "$TG_ID-r2" "${POD_IP[r3]:-0.0.0.0}" || t_fail "r2 -> r3 fails"
	pingq "$TG_ID-r3" "$TG_INET_IP" || t_fail "r3 -> inet fails (nft table not recreated?)"
	pod_del r2 "$BOOT" || t_fail "DEL r2 rc=$TG_RC"
	pod_del r3 "$BOOT" || t_fail "DEL r3 rc=$TG_RC"
	pod_del r4 "$BOOT"
	t_expect "tg links" "$(node_links_tg | tr '\n' ' ')" ""
	t_expect "/32 routes" "$(node_host_routes | tr '\n' ' ')" ""
	t_expect "attachments" "$(state_count tgboot)" 0
else
	t_fail "ADD r1 rc=$TG_RC $TG_OUT"
fi
t_end

# ------------------------------------------------------------ unreadable store
# DEL never keeps a pod from going on Tollgate's own trouble: with a store it
# cannot read (truncated, or written by a newer version) it removes what the
# container's names and prevResult find, exits 0, says why, and leaves the
# store as it is (ADD still refuses it).
BROKEN=$(net_conf tgbroken 10.1.0.250-10.1.0.251)
del_prev() { jq -c '.prevResult=$p' --argjson p "${POD_RESULT[$1]}" <<<"$BROKEN"; }
for how in truncated newer; do
	t_begin "DEL with a $how store still tears the pod down (exit 0, says why, store left as it is)"
	p=bk$how
	if pod_add "$p" research "$BROKEN"; then
		f=$(tg_state_file tgbroken)
		if [ $how = truncated ]; then
			head -c 40 "$f" >"$f.cut" && mv "$f.cut" "$f"
		else
			jq -c '.version = 999' "$f" >"$f.new" && mv "$f.new" "$f"
		fi
		sum=$(md5sum <"$f")
		pod_del "$p" "$(del_prev "$p")"
		t_expect "DEL rc" "$TG_RC" 0
		grep -q "without the store" <<<"$TG_ERR" || t_fail "DEL did not say why: $TG_ERR"
		veth_gone "${POD_VETH[$p]}" || t_fail "veth ${POD_VETH[$p]} remains"
		ip -n "$TG_NODE" route show "${POD_IP[$p]}/32" | grep -q . && t_fail "host route remains"
		nft_set_has pods "${POD_IP[$p]}" && t_fail "${POD_IP[$p]} remains in @pods"
		t_expect "store file bytes" "$(md5sum <"$f")" "$sum"
		pod_add "${p}2" research "$BROKEN"
		# refused as a proper error (code 5, exit 1), not a crash
		r=$(cni_error_problem 5)
		[ -z "$r" ] || t_fail "ADD on the $how store: $r"
		[ $how = newer ] && ! grep -q "999" <<<"$TG_OUT" && t_fail "ADD's error names no version: $TG_OUT"
		rm -f "$f"
	else
		t_fail "ADD rc=$TG_RC $TG_OUT"
	fi
	t_end
done

# ------------------------------------------------------------ unusable store directory
# The same when the store cannot even be opened: its directory writable by
# others, its path blocked by a file (mkdir fails), its lock file not a file.
# DEL removes the veth, the pod's IFB and the elements prevResult names,
# exits 0 and says why; once the directory is usable again the record is
# still there and a DEL releases it.
for how in mode mkdir lock; do
	t_begin "DEL with a store directory that cannot be opened ($how) still tears the pod down"
	p=bd$how
	dd=$TG_TMP/dd-$how
	BADDIR=$(net_conf tgbaddir 10.1.0.252-10.1.0.252 | jq -c --arg dd "$dd" \
		'.dataDir=$dd | .runtimeConfig={bandwidth: {egressRate: 80000000}}')
	if pod_add "$p" research "$BADDIR"; then
		ifb=ti${POD_VETH[$p]#tg}
		ip -n "$TG_NODE" link show "$ifb" >/dev/null 2>&1 || t_fail "control: no IFB $ifb after ADD"
		nft_set_has pods "${POD_IP[$p]}" || t_fail "control: ${POD_IP[$p]} not in @pods after ADD"
		case $how in
		mode) chmod 0777 "$dd/tgbaddir" ;;
		mkdir) mv "$dd" "$dd.away" && : >"$dd" ;;
		lock) rm -f "$dd/tgbaddir/lock" && mkdir "$dd/tgbaddir/lock" ;;
		esac
		pod_del "$p" "$(jq -c '.prevResult=$p' --argjson p "${POD_RESULT[$p]}" <<<"$BADDIR")"
		t_expect "DEL rc" "$TG_RC" 0
		t_expect "DEL stdout" "$TG_OUT" ""
		grep -q "without the store" <<<"$TG_ERR" || t_fail "DEL did not say why: $TG_ERR"
		veth_gone "${POD_VETH[$p]}" || t_fail "veth ${POD_VETH[$p]} remains"
		veth_gone "$ifb" || t_fail "IFB $ifb remains"
		ip -n "$TG_NODE" route show "${POD_IP[$p]}/32" | grep -q . && t_fail "host route remains"
		nft_set_has pods "${POD_IP[$p]}" && t_fail "${POD_IP[$p]} remains in @pods"
		case $how in
		mode) chmod 0700 "$dd/tgbaddir" ;;
		mkdir) rm -f "$dd" && mv "$dd.away" "$dd" ;;
		lock) rmdir "$dd/tgbaddir/lock" ;;
		esac
		f=$TG_TMP/dd-$how/tgbaddir/state.json
		t_expect "record kept while the store was unusable" "$(jq '.attachments | length' "$f")" 1
		pod_del "$p" "$BADDIR"
		t_expect "DEL once the store is back: rc" "$TG_RC" 0
		t_expect "record released" "$(jq '.attachments | length' "$f")" 0
	else
		t_fail "ADD rc=$TG_RC $TG_OUT"
	fi
	t_end
done

tap_done
