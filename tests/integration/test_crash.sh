#!/usr/bin/env bash
# Crash safety of the store: 30 pods ADD and DEL concurrently with the
# plugin's GC, `tollgate-ipam gc` and `tollgate-ipam sync`, while processes
# started here are SIGKILLed at random moments. Afterwards the store is valid
# JSON, no address is held twice, every pod whose ADD succeeded (and got no
# DEL) is there, a new ADD works at once (a lock holder killed with SIGKILL
# blocks nobody), and DEL of everything + gc leave nothing. Then a simulated
# reboot (the store's bootId made an earlier boot's) makes the old attachments stale.
#
#   node ($TG_ID-node): eth0 MAC 00:0d:3a:f8:06:ec, fake IMDS on 127.0.0.1:$IMDS_PORT
#   tgcrash   IMDS pool 10.0.0.10-10.0.0.49 (40)   the storm
#   tgboot    static 10.1.0.230-10.1.0.231 (2)     the reboot
#
# Only PIDs started by this script are ever killed (each worker kills its own $!).
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_crash.sh
# shellcheck disable=SC2016,SC2015,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
IMDS_PORT=18081
IMDS_URL=http://127.0.0.1:$IMDS_PORT
NET=tgcrash
PODS=30
# shellcheck disable=SC2034 # read by maybe_kill (lib.sh)
KILL_PCT=${TG_CRASH_KILL_PCT:-35} # chance that a process gets SIGKILLed

if [ ! -x "$IPAM_BIN" ]; then
	echo "not ok - preconditions: $IPAM_BIN not found (run make)"
	exit 1
fi
command -v python3 >/dev/null || { echo "not ok - preconditions: python3 not installed"; exit 1; }

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_NODE" link set eth0 address 00:0d:3a:f8:06:ec || tap_bail "cannot set the MAC"
DATA=$TG_TMP/data
RES=$TG_TMP/res
mkdir -p "$RES"
# primary 10.0.0.4 + 40 secondaries, in the shape of tests/fixtures/imds/one_nic.json
jq -n '{interface: [{ipv4: {ipAddress: ([{privateIpAddress: "10.0.0.4", publicIpAddress: ""}]
	+ [range(10; 50) | {privateIpAddress: "10.0.0.\(.)", publicIpAddress: ""}]),
	subnet: [{address: "10.0.0.0", prefix: "24"}]}, ipv6: {ipAddress: []}, macAddress: "000D3AF806EC"}]}' \
	>"$TG_TMP/pool40.json"
tg_imds_start "$TG_NODE" "$IMDS_PORT" --fixture "$TG_TMP/pool40.json" --log "$TG_TMP/imds.log"
t_end

CONF=$(tg_conf '.name=$n | .ipam={source: "imds", imdsURL: $u, cooldownSeconds: 0}' --arg n "$NET" --arg u "$IMDS_URL")

# ipam_cmd ARGS...: tollgate-ipam on $NET in the node (stdout+stderr to $TG_TMP/ipam.*)
ipam_cmd() {
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "${TG_EXTRA_ENV[@]}" "$IPAM_BIN" \
		--data-dir "$DATA" --network "${IPAM_NET:-$NET}" "$@"
}
ipam() {
	ipam_cmd "$@" >"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
	IPAM_RC=$?
	IPAM_OUT=$(cat "$TG_TMP/ipam.out")
	return "$IPAM_RC"
}

# exec_node and maybe_kill (KILL_PCT): tests/integration/lib.sh
# plugin_bg CMD SHORT OUT: start the plugin for pod SHORT in the background ($! is its PID)
plugin_bg() {
	local cmd=$1 short=$2 out=$3 cid netns
	cid=$(cid_for "$short")
	netns=$(netns_path "$short")
	(exec_node CNI_COMMAND="$cmd" CNI_PATH="$TOLLGATE_BIN_DIR" CNI_CONTAINERID="$cid" CNI_IFNAME=eth0 \
		CNI_NETNS="$netns" CNI_ARGS="$(k8s_args crash "$short" "$cid")" "$TG_BIN") <<<"$CONF" >"$out" 2>&1 &
}

# one pod's life: ADD (maybe killed), then usually DEL (maybe killed).
# $RES/SHORT gets one line per operation: "ADD rc" / "DEL rc".
worker() {
	local short=$1 rc
	sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
	plugin_bg ADD "$short" "$RES/$short.add"
	maybe_kill $!; rc=$MK_RC
	echo "ADD $rc" >>"$RES/$short"
	# a third of the pods stay (no DEL): they must survive everything else
	if [ $((RANDOM % 3)) -ne 0 ]; then
		plugin_bg DEL "$short" "$RES/$short.del"
		maybe_kill $!; rc=$MK_RC
		echo "DEL $rc" >>"$RES/$short"
	fi
}

# background noise: plugin GC (every pod listed as valid: nothing of ours may go),
# tollgate-ipam gc (every netns exists: nothing may go) and sync (same pool).
noise() {
	local i valid rc
	valid=$(for i in $(seq 1 "$PODS"); do cid_for "c$i"; echo; done | grep . |
		jq -R '{containerID: ., ifname: "eth0"}' | jq -sc .)
	for i in 1 2 3 4 5 6; do
		tg_conf '.name=$n | .ipam={source: "imds", imdsURL: $u, cooldownSeconds: 0} | .["cni.dev/valid-attachments"]=$v' \
			--arg n "$NET" --arg u "$IMDS_URL" --argjson v "$valid" >"$TG_TMP/gc.conf"
		(exec_node CNI_COMMAND=GC CNI_PATH="$TOLLGATE_BIN_DIR" "$TG_BIN") <"$TG_TMP/gc.conf" >"$RES/noise.gc.$i" 2>&1 &
		maybe_kill $!; rc=$MK_RC
		echo "plugin-GC $rc" >>"$RES/noise"
		(exec_node "$IPAM_BIN" --data-dir "$DATA" --network "$NET" gc) >"$RES/noise.ipamgc.$i" 2>&1 &
		maybe_kill $!; rc=$MK_RC
		echo "ipam-gc $rc" >>"$RES/noise"
		(exec_node "$IPAM_BIN" --data-dir "$DATA" --network "$NET" sync --imds-url "$IMDS_URL" \
			--uplink eth0 --retry-budget 3) >"$RES/noise.sync.$i" 2>&1 &
		maybe_kill $!; rc=$MK_RC
		echo "sync $rc" >>"$RES/noise"
		sleep 0.1
	done
}

# ================================================================ the storm
t_begin "initial sync"
ipam --json sync --imds-url "$IMDS_URL" --uplink eth0 ||
	tap_bail "sync rc=$IPAM_RC $IPAM_OUT $(cat "$TG_TMP/ipam.err")"
t_expect "pool" "$(jq -r .total <<<"$IPAM_OUT")" 40
t_end

t_begin "storm: $PODS ADD/DEL pairs, GC and syncs, random SIGKILLs"
for i in $(seq 1 "$PODS"); do pod_ns_add "c$i" || tap_bail "cannot create pod netns c$i"; done
t0=$SECONDS
WORKERS=()
for i in $(seq 1 "$PODS"); do
	worker "c$i" &
	WORKERS+=($!)
done
noise &
WORKERS+=($!)
for p in "${WORKERS[@]}"; do wait "$p"; done
kills=$(cat "$RES"/c* "$RES/noise" | grep -c ' 137$')
adds_ok=$(cat "$RES"/c* | grep -c '^ADD 0$')
diag "storm took $((SECONDS - t0)) s: $kills processes killed, $adds_ok ADDs succeeded"
[ "$kills" -gt 0 ] || t_fail "no process was killed (the test proves nothing)"
[ "$adds_ok" -gt 0 ] || t_fail "no ADD succeeded"
# every failure that was not a kill must be a proper CNI error
for i in $(seq 1 "$PODS"); do
	while read -r op rc; do
		[ "$rc" = 0 ] || [ "$rc" = 137 ] || {
			t_fail "c$i $op exited $rc: $(head -c 300 "$RES/c$i.${op,,}")"
		}
	done <"$RES/c$i"
done
t_end

ST=$(tg_state "$NET")
t_begin "after the storm: state.json is valid JSON, beside it only the store's own files"
jq -e '.version == 1 and (.attachments | type == "array") and (.pool | type == "object")' \
	"$(tg_state_file "$NET")" >/dev/null 2>&1 || t_fail "invalid: $(head -c 300 "$(tg_state_file "$NET")")"
t_expect "mode" "$(stat -c %a "$(tg_state_file "$NET")")" 600
# only the files the store keeps (docs/configuration.md, "The store"), and at most the one
# temp file of a save killed before its rename (state.json.tmp, which the
# next save replaces: checked after the DELs below); anything else fails
store_leftovers() {
	find "$DATA/$NET" -mindepth 1 -maxdepth 1 ! -name state.json ! -name lock \
		! -name state.cache ! -name cni-ops ! -name pool-exhausted "$@" -printf '%f '
}
leftovers=$(store_leftovers ! -name state.json.tmp)
[ -z "$leftovers" ] || t_fail "files other than the store's own in $DATA/$NET: $leftovers"
t_end

t_begin "after the storm: no address is held by two attachments"
dups=$(jq -r '[.attachments[].ip] | group_by(.) | map(select(length > 1) | .[0]) | join(" ")' <<<"$ST")
[ -z "$dups" ] || t_fail "held twice: $dups"
dups=$(jq -r '[.attachments[] | .containerId + "/" + .ifname] | group_by(.) | map(select(length > 1) | .[0]) | join(" ")' <<<"$ST")
[ -z "$dups" ] || t_fail "attachment recorded twice: $dups"
# the IPs that successful ADDs handed to pods that are still alive are distinct
alive_ips=""
for i in $(seq 1 "$PODS"); do
	[ "$(tail -n 1 "$RES/c$i")" = "ADD 0" ] || continue
	alive_ips+="$(jq -r '.ips[0].address' "$RES/c$i.add") "
done
dups=$(tr ' ' '\n' <<<"$alive_ips" | grep . | sort | uniq -d | tr '\n' ' ')
[ -z "$dups" ] || t_fail "two live pods were given $dups"
jq -e 'all(.attachments[]; .ip | test("^10\\.0\\.0\\.([1-4][0-9])$"))' <<<"$ST" >/dev/null ||
	t_fail "an address outside the pool: $(jq -c '[.attachments[].ip]' <<<"$ST")"
t_end

t_begin "after the storm: every pod with a successful ADD and no DEL is there, intact"
n_alive=0
for i in $(seq 1 "$PODS"); do
	cid=$(cid_for "c$i")
	last=$(tail -n 1 "$RES/c$i")
	present=$(jq -r --arg c "$cid" '[.attachments[] | select(.containerId == $c)] | length' <<<"$ST")
	case $last in
	"ADD 0")
		n_alive=$((n_alive + 1))
		ipr=$(jq -r '.ips[0].address | split("/")[0]' "$RES/c$i.add")
		got=$(jq -r --arg c "$cid" '.attachments[] | select(.containerId == $c) | .ip' <<<"$ST")
		[ "$present" = 1 ] && [ "$got" = "$ipr" ] || t_fail "c$i: ADD gave $ipr, store has '${got}'"
		ip -n "$TG_ID-c$i" -4 addr show dev eth0 2>/dev/null | grep -q "inet $ipr/32" ||
			t_fail "c$i: pod has no $ipr"
		ip -n "$TG_NODE" -4 route show "$ipr/32" | grep -q . || t_fail "c$i: no host route $ipr/32"
		nft_set_has pods "$ipr" || t_fail "c$i: $ipr not in @pods"
		;;
	"DEL 0")
		[ "$present" = 0 ] || t_fail "c$i: still in the store after a successful DEL"
		;;
	esac
done
diag "$n_alive pods alive after the storm; $(jq '.attachments | length' <<<"$ST") attachments in the store"
t_end

t_begin "a new ADD works at once after the storm"
pod_ns_add fresh
t1=${EPOCHREALTIME/./}
pod_add fresh crash "$CONF" || { t_fail "ADD rc=$TG_RC $TG_OUT"; tg_diag_last; }
ms=$(((${EPOCHREALTIME/./} - t1) / 1000))
[ "$ms" -lt 3000 ] || t_fail "ADD took $ms ms"
ipam status --json
jq -e '.total == 40' <<<"$IPAM_OUT" >/dev/null || t_fail "status: $IPAM_OUT"
t_end

t_begin "a lock holder killed with SIGKILL does not block the next ADD or sync"
LOCK=$DATA/$NET/lock
[ -e "$LOCK" ] || t_fail "no lock file $LOCK"
python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)' "$LOCK" >"$TG_TMP/holder.out" &
HOLDER=$!
TG_PIDS+=("$HOLDER")
wait_for 5 grep -q locked "$TG_TMP/holder.out" || t_fail "the holder did not get the lock"
pod_ns_add held
plugin_bg ADD held "$TG_TMP/held.out"
ADDP=$!
sleep 0.5 # the ADD must be waiting for the lock, not done
if kill -0 "$ADDP" 2>/dev/null; then
	kill -KILL "$HOLDER"
	{ wait "$HOLDER"; } 2>/dev/null
	t1=$SECONDS
	wait "$ADDP"
	rc=$?
	t_expect "ADD after the holder died" "$rc" 0
	[ $((SECONDS - t1)) -le 3 ] || t_fail "ADD took $((SECONDS - t1)) s after the holder died"
else
	wait "$ADDP"
	t_fail "ADD finished (rc=$?) while another process held $LOCK exclusively: no flock on it?"
	kill -KILL "$HOLDER" 2>/dev/null
	{ wait "$HOLDER"; } 2>/dev/null
fi
timeout 10 ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" --data-dir "$DATA" --network "$NET" \
	sync --imds-url "$IMDS_URL" --uplink eth0 >/dev/null 2>"$TG_TMP/sync.err" ||
	t_fail "sync after the holder died: $(cat "$TG_TMP/sync.err")"
t_end

t_begin "DEL of everything, then tollgate-ipam gc: nothing is left"
for s in $(seq 1 "$PODS" | sed 's/^/c/') fresh held; do
	pod_del "$s" "$CONF" || t_fail "DEL $s rc=$TG_RC $TG_OUT"
done
t_expect "attachments" "$(state_count "$NET")" 0
t_expect "files beside the store's own" "$(store_leftovers)" ""
t_expect "tg links" "$(node_links_tg | tr '\n' ' ')" ""
t_expect "/32 routes" "$(node_host_routes | tr '\n' ' ')" ""
for set in pods masq; do
	el=$(ip netns exec "$TG_NODE" nft -j list set inet tollgate "$set" 2>/dev/null |
		jq -c '[.nftables[] | select(.set) | .set.elem // [] | .[]]' 2>/dev/null)
	[ "${el:-[]}" = "[]" ] || t_fail "set $set still holds $el"
done
for i in $(seq 1 "$PODS"); do pod_ns_del "c$i"; done
pod_ns_del fresh
pod_ns_del held
ipam gc
t_expect "gc rc" "$IPAM_RC" 0
t_expect "attachments after gc" "$(state_count "$NET")" 0
ipam --json doctor
jq -e '.ok == true' <<<"$IPAM_OUT" >/dev/null 2>&1 || t_fail "doctor: $(tr -d '\n\t ' <<<"$IPAM_OUT" | head -c 400)"
printf '%s\n' "$CONF" >"$TG_TMP/conf.json"
ipam --config "$TG_TMP/conf.json" --json status # knows cooldownSeconds 0 from the config
jq -e '.allocated == 0 and .free == 40 and .retired == 0' <<<"$IPAM_OUT" >/dev/null 2>&1 ||
	t_fail "status: $(tr -d '\n\t ' <<<"$IPAM_OUT")"
t_end

# ============================================================ simulated reboot
BOOT=$(tg_conf '.name="tgboot" | .ipam.addresses=["10.1.0.230-10.1.0.231"] | .ipam.exclude=[]')
BOOT_ID=$(cat /proc/sys/kernel/random/boot_id)
IPAM_NET=tgboot

t_begin "reboot: before it, two pods fill the pool of two"
pod_add b1 crash "$BOOT" || t_fail "ADD b1 rc=$TG_RC $TG_OUT"
pod_add b2 crash "$BOOT" || t_fail "ADD b2 rc=$TG_RC $TG_OUT"
ipam --json status
jq -e '.allocated == 2 and .free == 0' <<<"$IPAM_OUT" >/dev/null 2>&1 || t_fail "status: $IPAM_OUT"
t_expect "bootId" "$(tg_state tgboot | jq -r .bootId)" "$BOOT_ID"
t_end

# The "reboot": kernel objects die (pod netns with their veths and routes, the
# nft table); the store survives, written in what is now an earlier boot.
pod_ns_del b1
pod_ns_del b2
ip netns exec "$TG_NODE" nft delete table inet tollgate
tg_store_set_boot_id tgboot 11111111-1111-4111-8111-111111111111

t_begin "reboot: status warns that the store is from an earlier boot"
ipam --json status
t_expect "rc" "$IPAM_RC" 1
jq -e 'any(.warnings[]; test("boot"))' <<<"$IPAM_OUT" >/dev/null 2>&1 || t_fail "no boot warning: $IPAM_OUT"
t_end

t_begin "reboot: status counts the old attachments as stale (free)"
ipam --json status
jq -e '.allocated == 0 and .free == 2' <<<"$IPAM_OUT" >/dev/null 2>&1 ||
	t_fail "old attachments still counted: $(jq -c '{total, allocated, free}' <<<"$IPAM_OUT" 2>/dev/null)"
t_end

t_begin "reboot: the next ADD drops the stale attachments and both addresses are free"
pod_add b3 crash "$BOOT" || { t_fail "ADD b3 rc=$TG_RC $TG_OUT"; tg_diag_last; }
st=$(tg_state tgboot)
t_expect "attachments" "$(jq -c '[.attachments[].pod]' <<<"$st")" '["b3"]'
t_expect "bootId" "$(jq -r .bootId <<<"$st")" "$BOOT_ID"
pod_add b4 crash "$BOOT" || t_fail "ADD b4 rc=$TG_RC $TG_OUT (stale address not freed)"
ipam --json status
t_expect "status rc" "$IPAM_RC" 1 # no free address: a warning
jq -e '.allocated == 2 and (any(.warnings[]; test("boot")) | not)' <<<"$IPAM_OUT" >/dev/null 2>&1 ||
	t_fail "status: $IPAM_OUT"
pod_del b3 "$BOOT" || t_fail "DEL b3 rc=$TG_RC"
pod_del b4 "$BOOT" || t_fail "DEL b4 rc=$TG_RC"
t_expect "attachments at the end" "$(state_count tgboot)" 0
t_end

tap_done
