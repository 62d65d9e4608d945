#!/usr/bin/env bash
# tollgate-ipam, the operator CLI: `sync` against a fake Azure IMDS (success,
# 429/410 back-off, 500, hang, cut body, malformed answers), pool growth and
# shrink with pods running, the plugin on an empty IMDS pool, and every verb
# (status, list, show, release, gc, reshape, doctor) in human and --json form
# (status: the address states adding up to the held total, and the pool's
# kubelet --max-pods);
# doctor's findings with their fixes, and `doctor --fix` (the command doctor
# prints, run as printed) repairing a table whose rules were flushed and a
# table that was deleted: rules, every pod's elements, counting again.
#
#   node ($TG_ID-node, topology from lib.sh)
#     eth0  MAC 00:0d:3a:f8:06:ec (as in tests/fixtures/imds/*.json),
#           10.0.0.1/24 + 10.0.0.4/24 (the fixtures' primary: the node's own)
#     lo    127.0.0.1:$IMDS_PORT  fake_imds.py (this netns only)
#
#   network    store under $TG_TMP/data      used by
#   tgimds     one_nic.json: 10.0.0.5-12     sync cases, pods, growth/shrink, verbs, doctor
#   tgnics     three_nics.json               uplink picked by MAC (last of three NICs)
#   tglower    mac_lowercase.json            lowercase MAC
#   tgv6       ipv6.json                     IPv6 entries ignored
#   tgfile     --from-file                   no HTTP at all
#   tgdefup    no --uplink                   uplink = interface of the default route
#   tgconf     --config conflist             imdsURL, uplink, exclude from the conflist
#   tgmac      dummy uplink, unknown MAC     no NIC with the uplink's MAC
#   tgempty    never synced                  plugin ADD on an empty pool: code 11
#   tgbroken   garbage state.json            corrupt store
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_ipam_cli.sh
# shellcheck disable=SC2016,SC2015,SC1091,SC2001  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
FIX=$TG_ROOT/tests/fixtures/imds
IMDS_PORT=18080
IMDS_URL=http://127.0.0.1:$IMDS_PORT
UPLINK_MAC=00:0d:3a:f8:06:ec
NET=tgimds
WIDTH=100

if [ ! -x "$IPAM_BIN" ]; then
	echo "not ok - preconditions: $IPAM_BIN not found (run make)"
	exit 1
fi
command -v python3 >/dev/null || { echo "not ok - preconditions: python3 not installed"; exit 1; }

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_NODE" link set eth0 address "$UPLINK_MAC" || tap_bail "cannot set the node's eth0 MAC"
ip -n "$TG_NODE" addr add 10.0.0.4/24 dev eth0 || tap_bail "cannot add 10.0.0.4 to eth0"
DATA=$TG_TMP/data
CTL=$TG_TMP/imds.ctl
ILOG=$TG_TMP/imds.log
WIDE=$TG_TMP/wide.txt
: >"$WIDE"

# ------------------------------------------------------------------ helpers
# ipam ARGS...: tollgate-ipam in the node netns on $NET (unless --network is
# given again later: the last one wins); sets IPAM_RC, IPAM_OUT, IPAM_ERR.
# Human output (no --json among the args) is checked against $WIDTH columns.
IPAM_RC=0 IPAM_OUT="" IPAM_ERR=""
ipam_net() {
	local net=$1
	shift
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "${TG_EXTRA_ENV[@]}" \
		"$IPAM_BIN" --data-dir "$DATA" --network "$net" "$@" >"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
	IPAM_RC=$?
	IPAM_OUT=$(cat "$TG_TMP/ipam.out")
	IPAM_ERR=$(cat "$TG_TMP/ipam.err")
	case " $* " in
	*" --json "*) ;;
	*) # measured as if --data-dir were the default /run/tollgate: a fix naming
		# the store must not be held against the width because of $TG_TMP's length
		awk -v w="$WIDTH" -v what="tollgate-ipam $*" -v d="$DATA" '{
			l = $0
			while ((i = index(l, d)) > 0) l = substr(l, 1, i - 1) "/run/tollgate" substr(l, i + length(d))
			if (length(l) > w) printf "%s: %d columns: %s\n", what, length(l), l
		}' "$TG_TMP/ipam.out" >>"$WIDE" ;;
	esac
	return "$IPAM_RC"
}
ipam() { ipam_net "$NET" "$@"; }
# ipam_netns_hidden ARGS: tollgate-ipam where /run/netns is an empty directory, as
# in a container that does not mount the host's; a private mount namespace of
# its own, so no other process sees the mount.
ipam_netns_hidden() {
	ip netns exec "$TG_NODE" unshare -m --propagation private sh -c \
		'mount -t tmpfs -o size=64k tollgate-hidden /run/netns && exec "$@"' sh \
		env -i PATH="$TG_PATH" "$IPAM_BIN" --data-dir "$DATA" --network "$NET" "$@" \
		>"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
	IPAM_RC=$?
	IPAM_OUT=$(cat "$TG_TMP/ipam.out")
	IPAM_ERR=$(cat "$TG_TMP/ipam.err")
}
ipam_diag() {
	diag "rc=$IPAM_RC stdout=${IPAM_OUT:0:600}"
	[ -z "$IPAM_ERR" ] || diag "stderr: ${IPAM_ERR:0:600}"
	return 0
}
# jq_ok FILTER [jq args]: the last stdout is one JSON document and FILTER holds
jq_ok() {
	local f=$1
	shift
	jq -e -s "$@" "length == 1 and (.[0] | $f)" <<<"$IPAM_OUT" >/dev/null 2>&1
}
# json_check WHAT FILTER [jq args]: t_fail unless jq_ok
json_check() {
	local what=$1
	shift
	jq_ok "$@" || { t_fail "$what: '$1' does not hold on: $(tr -d '\n\t' <<<"${IPAM_OUT:0:500}")"; }
}
# is_one_json: stdout is exactly one JSON document
is_one_json() { jq -e -s 'length == 1' <<<"$IPAM_OUT" >/dev/null 2>&1; }

state_file() { echo "$DATA/${1:-$NET}/state.json"; }
# store_fp: fingerprint of the store directory (names, modes, content)
store_fp() {
	local d=$DATA/$NET
	[ -d "$d" ] || { echo "no store dir"; return; }
	find "$d" -mindepth 1 -maxdepth 1 -printf '%f %m %s\n' | sort
	sha256sum <"$d/state.json" 2>/dev/null
}

# ---- the fake IMDS
imds_ctl() { # JSON: written atomically, read by the fake at every request
	printf '%s\n' "$1" >"$CTL.tmp" && mv -f "$CTL.tmp" "$CTL"
}
imds_serve() { # FIXTURE [extra control JSON fields]
	imds_ctl "$(jq -cn --arg f "$1" --argjson x "${2:-{\}}" '{fixture: $f, mode: "normal", statuses: [200]} + $x')"
	: >"$ILOG"
}
imds_count() { wc -l <"$ILOG" | tr -d ' '; }
# smallest gap between consecutive logged requests, in ms (99999 with < 2)
imds_min_gap_ms() {
	awk 'NR > 1 { g = ($1 - p) * 1000; if (m == "" || g < m) m = g } { p = $1 }
	     END { printf "%d\n", m == "" ? 99999 : m }' "$ILOG"
}
imds_gaps() { awk 'NR > 1 { printf "%.2fs ", $1 - p } { p = $1 }' "$ILOG"; }
imds_answers() { awk '{ printf "%s ", $2 }' "$ILOG"; }

# sync_timed [NET] ARGS...: sync against the fake; ELAPSED_MS gets the wall time
ELAPSED_MS=0
sync_timed() {
	local t0=${EPOCHREALTIME/./} t1
	ipam sync --imds-url "$IMDS_URL" --uplink eth0 "$@"
	t1=${EPOCHREALTIME/./}
	ELAPSED_MS=$(((t1 - t0) / 1000))
	return "$IPAM_RC"
}

# ---- fixtures derived from one_nic.json (written to $TG_TMP)
with_extra() { # OUT ADDR...: one_nic.json plus these secondaries
	local out=$1
	shift
	jq --args '.interface[0].ipv4.ipAddress += [$ARGS.positional[] | {privateIpAddress: ., publicIpAddress: ""}]' \
		"$@" <"$FIX/one_nic.json" >"$out"
}
without() { # IN OUT ADDR: IN minus one secondary
	jq --arg a "$3" '.interface[0].ipv4.ipAddress |= map(select(.privateIpAddress != $a))' <"$1" >"$2"
}

imds_conf() { # NAME: plugin config with ipam.source imds
	tg_conf '.name=$n | .ipam={source: "imds", imdsURL: $u, cooldownSeconds: 0}' --arg n "$1" --arg u "$IMDS_URL"
}
CONF=$(imds_conf "$NET")
pod_ip_of() { jq -r --arg c "$1" '.attachments[] | select(.containerId == $c) | .ip' "$(state_file)"; }
veth_present() { ip -n "$TG_NODE" link show "$1" >/dev/null 2>&1; }
route_present() { ip -n "$TG_NODE" -4 route show "$1/32" | grep -q .; }

# ---- start the fake IMDS inside the node netns
imds_serve "$FIX/one_nic.json"
tg_imds_start "$TG_NODE" "$IMDS_PORT" --fixture "$FIX/one_nic.json" --log "$ILOG" --control "$CTL" --hang-seconds 20
t_end

# =================================================================== sync
t_begin "sync: first sync takes every secondary address of the uplink (JSON)"
imds_serve "$FIX/one_nic.json"
if sync_timed --json; then
	json_check sync '.network == "tgimds" and .source == "imds" and .nodeIp == "10.0.0.4"
		and .subnet == "10.0.0.0/24" and .seen == 8 and .added == 8 and .pending == 0
		and .removed == 0 and .retired == 0 and .total == 8 and .attempts == 1'
	t_expect "IMDS requests" "$(imds_count)" 1
	grep -qv 'metadata=true' "$ILOG" && t_fail "a request without 'Metadata: true': $(cat "$ILOG")"
	grep -q 'api-version=2021-02-01' "$ILOG" || t_fail "no api-version=2021-02-01 in $(cat "$ILOG")"
	st=$(cat "$(state_file)")
	t_expect "state pool" "$(jq -c '.pool.addresses' <<<"$st")" '["10.0.0.5-10.0.0.12"]'
	t_expect "state source" "$(jq -r '.pool.source' <<<"$st")" imds
	t_expect "state.json mode" "$(stat -c %a "$(state_file)")" 600
	t_expect "store dir mode" "$(stat -c %a "$DATA/$NET")" 700
else
	t_fail "sync rc=$IPAM_RC"
	ipam_diag
fi
t_end

t_begin "status after the first sync (JSON and human)"
now_ms=$(($(date +%s) * 1000))
ipam status --json
t_expect "status --json rc" "$IPAM_RC" 0
json_check status '.network == "tgimds" and .source == "imds" and .total == 8 and .allocated == 0
	and .free == 8 and .cooling == 0 and .retired == 0 and .held == 8 and .pending == 0
	and .maxPodsFromPool == 8 and .nodeIp == "10.0.0.4" and .subnet == "10.0.0.0/24" and .warnings == []
	and (.lastSyncMs | type == "number" and . > $now - 120000 and . < $now + 60000)' --argjson now "$now_ms"
ipam status
t_expect "status rc" "$IPAM_RC" 0
grep -q imds <<<"$IPAM_OUT" || t_fail "human status does not name the source: $IPAM_OUT"
grep -qw 8 <<<"$IPAM_OUT" || t_fail "human status does not show 8: $IPAM_OUT"
t_expect "max-pods line" "$(grep '^max-pods' <<<"$IPAM_OUT")" \
	"max-pods   8 (pool) + hostNetwork pods (--max-pods counts those too; they need no address)"
ipam list --json
t_expect "list --json rc" "$IPAM_RC" 0
json_check "empty list" '. == []'
t_end

t_begin "sync again (human): nothing changes, output fits $WIDTH columns"
before=$(jq -c .pool.addresses "$(state_file)")
if sync_timed; then
	[ -n "$IPAM_OUT" ] || t_fail "human sync printed nothing"
	t_expect "pool" "$(jq -c '.pool.addresses' "$(state_file)")" '["10.0.0.5-10.0.0.12"]'
	[ "$before" = "$(jq -c '.pool.addresses' "$(state_file)")" ] || t_fail "pool changed"
else
	t_fail "sync rc=$IPAM_RC"
	ipam_diag
fi
t_end

# ---- back-off: answered with retries, spaced, within the budget
t_begin "sync: 429, 429, 200 is retried with back-off and succeeds"
imds_serve "$FIX/one_nic.json" '{"statuses": [429, 429, 200]}'
sync_timed --json --retry-budget 5
if [ "$IPAM_RC" = 0 ]; then
	json_check sync '.attempts == 3 and .total == 8'
else
	t_fail "rc=$IPAM_RC"
	ipam_diag
fi
t_expect "requests" "$(imds_count)" 3
t_expect "answers" "$(imds_answers)" "429 429 200 "
[ "$(imds_min_gap_ms)" -ge 900 ] || t_fail "retry storm: gaps $(imds_gaps)"
[ "$ELAPSED_MS" -le 6500 ] || t_fail "took ${ELAPSED_MS} ms with a 5 s budget"
t_end

t_begin "sync: 410, 410, 200 (IMDS not ready yet) is retried and succeeds"
imds_serve "$FIX/one_nic.json" '{"statuses": [410, 410, 200]}'
sync_timed --json --retry-budget 5
if [ "$IPAM_RC" = 0 ]; then
	json_check sync '.attempts >= 3 and .total == 8'
else
	t_fail "rc=$IPAM_RC"
	ipam_diag
fi
n=$(imds_count)
[ "$n" -ge 3 ] || t_fail "only $n requests (answers: $(imds_answers))"
[ "$(imds_min_gap_ms)" -ge 900 ] || t_fail "retry storm: gaps $(imds_gaps)"
[ "$ELAPSED_MS" -le 6500 ] || t_fail "took ${ELAPSED_MS} ms with a 5 s budget"
t_end

t_begin "sync: Retry-After is honoured"
imds_serve "$FIX/one_nic.json" '{"statuses": [429, 200], "retryAfter": 2}'
sync_timed --json --retry-budget 5
[ "$IPAM_RC" = 0 ] || { t_fail "rc=$IPAM_RC"; ipam_diag; }
t_expect "requests" "$(imds_count)" 2
[ "$(imds_min_gap_ms)" -ge 1900 ] || t_fail "Retry-After: 2 ignored: gaps $(imds_gaps)"
t_end

t_begin "sync: an absurd Retry-After ends the tries at once, never a retry storm"
imds_serve "$FIX/one_nic.json" '{"statuses": [429, 429, 429, 200], "retryAfter": 9223372036854776}'
before=$(cat "$(state_file)")
sync_timed --json --retry-budget 5
[ "$IPAM_RC" = 1 ] || { t_fail "rc=$IPAM_RC (expected 1: the server asks to wait past the budget)"; ipam_diag; }
t_expect "requests" "$(imds_count)" 1
t_expect "store" "$(cat "$(state_file)")" "$before"
[ "$ELAPSED_MS" -le 2000 ] || t_fail "took ${ELAPSED_MS} ms to give up"
t_end

# ---- failures: exit 1, clear message, store byte-identical
# sync_fails NAME BUDGET CONTROL-JSON [STDERR-REGEX]
sync_fails() {
	local name=$1 budget=$2 ctl=$3 re=${4:-}
	t_begin "sync: $name gives exit 1 within the budget, store untouched"
	imds_serve "$FIX/one_nic.json" "$ctl"
	local fp
	fp=$(store_fp)
	sync_timed --retry-budget "$budget"
	t_expect "rc" "$IPAM_RC" 1
	[ -n "$IPAM_ERR" ] || t_fail "no message on stderr"
	[ -z "$re" ] || grep -Eqi -- "$re" <<<"$IPAM_ERR" || t_fail "stderr does not match /$re/: $IPAM_ERR"
	[ "$ELAPSED_MS" -le $((budget * 1000 + 1500)) ] ||
		t_fail "took ${ELAPSED_MS} ms with a ${budget} s budget (requests: $(imds_answers))"
	[ "$(store_fp)" = "$fp" ] || { t_fail "store changed"; diag "$(diff <(echo "$fp") <(store_fp))"; }
	[ "$(imds_min_gap_ms)" -ge 900 ] || t_fail "retry storm: gaps $(imds_gaps)"
}
sync_fails "500 forever" 4 '{"statuses": [500]}' '500'
n=$(imds_count)
[ "$n" -ge 2 ] || t_fail "500 not retried ($n request)"
t_end
sync_fails "a server that never answers" 3 '{"mode": "hang"}'
[ "$(imds_count)" -ge 1 ] || t_fail "no request reached the fake"
t_end
sync_fails "a body cut short (Content-Length larger than sent)" 3 '{"mode": "cut"}'
t_end
sync_fails "403 (not retried)" 4 '{"statuses": [403, 200]}' '403'
t_expect "requests" "$(imds_count)" 1
t_end
for bad in garbage:'json' truncated:'json' missing_subnet:'subnet' empty_ipaddress:'empty|ipAddress'; do
	f=${bad%%:*} re=${bad#*:}
	sync_fails "$f.json" 3 "$(jq -cn --arg f "$FIX/$f.json" '{fixture: $f}')" "$re"
	t_end
done

t_begin "sync: no IMDS interface with the uplink's MAC: exit 1, names the MAC"
ip -n "$TG_NODE" link add upl0 address 02:00:00:00:be:ef type veth peer name upl1 ||
	t_fail "cannot add a second interface"
imds_serve "$FIX/one_nic.json"
ipam_net tgmac sync --imds-url "$IMDS_URL" --uplink upl0
t_expect "rc" "$IPAM_RC" 1
grep -qi '02000000BEEF\|02:00:00:00:be:ef' <<<"$IPAM_ERR" || t_fail "message does not name the MAC: $IPAM_ERR"
[ -e "$(state_file tgmac)" ] && t_fail "a store was written: $(cat "$(state_file tgmac)")"
ip -n "$TG_NODE" link del upl0
t_end

t_begin "sync: the uplink is matched by MAC among three NICs (not the first)"
imds_serve "$FIX/three_nics.json"
ipam_net tgnics --json sync --imds-url "$IMDS_URL" --uplink eth0
t_expect "rc" "$IPAM_RC" 0
json_check sync '.nodeIp == "10.0.0.4" and .subnet == "10.0.0.0/24" and .total == 3'
t_expect "pool" "$(jq -c '.pool.addresses' "$(state_file tgnics)")" '["10.0.0.20-10.0.0.22"]'
t_end

t_begin "sync: IMDS MAC in lowercase"
imds_serve "$FIX/mac_lowercase.json"
ipam_net tglower --json sync --imds-url "$IMDS_URL" --uplink eth0
t_expect "rc" "$IPAM_RC" 0
json_check sync '.total == 8 and .nodeIp == "10.0.0.4"'
t_end

t_begin "sync: offered addresses no pod can have stay out of the pool (other subnet, link-local, loopback)"
with_extra "$TG_TMP/odd.json" 10.9.9.9 169.254.1.1 127.0.0.5
imds_serve "$TG_TMP/odd.json"
ipam_net tgodd --json sync --imds-url "$IMDS_URL" --uplink eth0
t_expect "rc" "$IPAM_RC" 0
json_check sync '.total == 8 and .seen == 8 and .refused == 3'
grep -q "IMDS offered 3 address(es) no pod can have" <<<"$IPAM_ERR" || t_fail "no warning: $IPAM_ERR"
t_expect "pool" "$(jq -c '.pool.addresses' "$(state_file tgodd)" 2>/dev/null)" '["10.0.0.5-10.0.0.12"]'
t_end

t_begin "sync: IPv6 addresses are ignored"
imds_serve "$FIX/ipv6.json"
ipam_net tgv6 --json sync --imds-url "$IMDS_URL" --uplink eth0
t_expect "rc" "$IPAM_RC" 0
json_check sync '.total == 2 and .seen == 2'
t_expect "pool" "$(jq -c '.pool.addresses' "$(state_file tgv6)" 2>/dev/null)" '["10.0.0.5-10.0.0.6"]'
t_end

t_begin "sync --from-file: no HTTP request"
: >"$ILOG"
ipam_net tgfile --json sync --from-file "$FIX/three_nics.json" --uplink eth0
t_expect "rc" "$IPAM_RC" 0
json_check sync '.total == 3'
t_expect "IMDS requests" "$(imds_count)" 0
t_end

t_begin "sync without --uplink uses the interface of the default route"
imds_serve "$FIX/one_nic.json"
ipam_net tgdefup --json sync --imds-url "$IMDS_URL"
t_expect "rc" "$IPAM_RC" 0
json_check sync '.total == 8 and .nodeIp == "10.0.0.4"'
t_end

t_begin "--config conflist: network, dataDir, uplink, imdsURL and ipam.exclude"
# as on a node: the network name is the conflist's (the runtime hands it to the plugin)
jq -n --arg dd "$DATA" --arg u "$IMDS_URL" '{cniVersion: "1.1.0", name: "tgconf", plugins: [
	{type: "tollgate", uplink: "eth0", dataDir: $dd,
	 ipam: {source: "imds", imdsURL: $u, exclude: ["10.0.0.5", "10.0.0.12"], cooldownSeconds: 0}},
	{type: "portmap", capabilities: {portMappings: true}}]}' >"$TG_TMP/conflist.json"
imds_serve "$FIX/one_nic.json"
ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" --config "$TG_TMP/conflist.json" sync --json \
	>"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
IPAM_RC=$? IPAM_OUT=$(cat "$TG_TMP/ipam.out") IPAM_ERR=$(cat "$TG_TMP/ipam.err")
t_expect "rc" "$IPAM_RC" 0
[ "$IPAM_RC" = 0 ] || ipam_diag
json_check sync '.network == "tgconf" and .total == 6'
t_expect "IMDS requests" "$(imds_count)" 1
t_expect "pool" "$(jq -c '.pool.addresses' "$(state_file tgconf)" 2>/dev/null)" '["10.0.0.6-10.0.0.11"]'
# options after the verb, and an explicit flag wins over the conflist
ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" status --config "$TG_TMP/conflist.json" \
	--json --network tgimds >"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
IPAM_OUT=$(cat "$TG_TMP/ipam.out")
json_check "status --network wins over --config" '.network == "tgimds" and .total == 8'
t_end

# ================================================= the plugin and the pool
t_begin "plugin ADD on an empty IMDS pool: code 11, tells to run tollgate-ipam sync"
pod_add empty research "$(imds_conf tgempty)"
r=$(cni_error_problem 11)
[ -z "$r" ] || t_fail "$r"
grep -q 'tollgate-ipam sync' <<<"$(jq -r '.msg + " " + (.details // "")' <<<"$TG_OUT" 2>/dev/null)" ||
	t_fail "message does not mention 'tollgate-ipam sync': $TG_OUT"
ipam_net tgempty status --json
t_expect "status rc on an empty pool" "$IPAM_RC" 1
json_check status '.total == 0 and (.warnings | length) >= 1'
pod_ns_del empty
t_end

t_begin "8 pods take the 8 synced addresses; the 9th ADD fails with code 11"
ips=""
for i in 1 2 3 4 5 6 7 8; do
	pod_add "p$i" research "$CONF" || { t_fail "ADD p$i rc=$TG_RC $TG_OUT"; tg_diag_last; }
	ips+="${POD_IP[p$i]:-none} "
done
t_expect "addresses" "$(tr ' ' '\n' <<<"$ips" | grep . | sort -t. -k4n | tr '\n' ' ')" \
	"10.0.0.5 10.0.0.6 10.0.0.7 10.0.0.8 10.0.0.9 10.0.0.10 10.0.0.11 10.0.0.12 "
pod_add p9 research "$CONF"
r=$(cni_error_problem 11)
[ -z "$r" ] || t_fail "9th ADD: $r"
ipam status --json
t_expect "status rc (no free address)" "$IPAM_RC" 1
json_check status '.allocated == 8 and .free == 0 and (.warnings | length) >= 1'
t_end

t_begin "pool growth: a new address is usable only after the second sync"
with_extra "$TG_TMP/grown.json" 10.0.0.13
imds_serve "$TG_TMP/grown.json"
sync_timed --json
t_expect "first sync rc" "$IPAM_RC" 0
json_check "first sync" '.seen == 9 and .added == 0 and .pending == 1 and .total == 8'
ipam status --json
json_check status '.pending == 1 and .total == 8'
pod_add p9 research "$CONF"
r=$(cni_error_problem 11)
[ -z "$r" ] || t_fail "ADD after one sync: $r"
sync_timed --json
t_expect "second sync rc" "$IPAM_RC" 0
json_check "second sync" '.added == 1 and .pending == 0 and .total == 9'
pod_add p9 research "$CONF" || { t_fail "ADD after two syncs rc=$TG_RC $TG_OUT"; tg_diag_last; }
t_expect "p9 address" "${POD_IP[p9]:-}" 10.0.0.13
t_end

t_begin "pool shrink with the pod running: the pod keeps its IP, status/list/show flag it retired"
X=${POD_IP[p3]:-10.0.0.7}
without "$TG_TMP/grown.json" "$TG_TMP/shrunk.json" "$X"
imds_serve "$TG_TMP/shrunk.json"
sync_timed --json
t_expect "sync rc" "$IPAM_RC" 0
json_check sync '.removed == 1 and .retired == 1 and .total == 8'
t_expect "p3 still holds" "$(pod_ip_of "${POD_CID[p3]}")" "$X"
route_present "$X" || t_fail "host route $X/32 gone"
ip -n "$TG_ID-p3" -4 addr show dev eth0 | grep -q "inet $X/32" || t_fail "pod lost $X"
ipam status --json
t_expect "status rc (retired address)" "$IPAM_RC" 1
json_check status '.retired == 1 and .total == 8 and .allocated == 8 and .free == 0 and (.warnings | length) >= 1'
# the states add up to what the node holds; the retired address is no pod's to come
json_check status '.held == 9 and .allocated + .free + .cooling + .retired == .held and .maxPodsFromPool == 8'
ipam status
grep -qi retired <<<"$IPAM_OUT" || t_fail "human status does not mention retired: $IPAM_OUT"
t_expect "addresses line" "$(grep '^addresses' <<<"$IPAM_OUT")" \
	"addresses  9 held: 8 allocated, 0 free, 0 cooling down, 1 retired; 0 pending"
t_expect "max-pods (the retired address not counted)" "$(grep -o '^max-pods *[0-9]* (pool)' <<<"$IPAM_OUT")" \
	"max-pods   8 (pool)"
ipam list --json
json_check list '[.[] | select(.retired == true) | .ip] == [$x] and length == 9' --arg x "$X"
ipam list
grep "^$X " <<<"$IPAM_OUT" | grep -qi retired || t_fail "human list does not flag $X: $IPAM_OUT"
[ "$(grep -ci retired <<<"$IPAM_OUT")" = 1 ] || t_fail "human list flags more than $X: $IPAM_OUT"
ipam show "$X" --json
json_check show '.inPool == false and .ip == $x' --arg x "$X"
t_end

t_begin "shrink: after DEL the retired address is never handed out again"
pod_del p3 "$CONF" || { t_fail "DEL p3 rc=$TG_RC $TG_OUT"; tg_diag_last; }
ipam status --json
json_check status '.retired == 0 and .total == 8 and .allocated == 8 and .free == 0 and .held == 8
	and .maxPodsFromPool == 8'
pod_add p10 research "$CONF"
r=$(cni_error_problem 11)
[ -z "$r" ] || t_fail "ADD with the retired address as the only unused one: $r"
pod_del p10 "$CONF"
pod_del p1 "$CONF" || t_fail "DEL p1 rc=$TG_RC"
pod_add p10 research "$CONF" || { t_fail "ADD p10 rc=$TG_RC $TG_OUT"; tg_diag_last; }
t_expect "p10 gets p1's address, not $X" "${POD_IP[p10]:-}" "${POD_IP[p1]:-}"
pod_ns_del p10 2>/dev/null # becomes the gc victim below
ipam status --json
json_check status '.retired == 0'
t_end

# ========================================================= the other verbs
t_begin "list: JSON fields and human table"
ipam list --json
t_expect "rc" "$IPAM_RC" 0
json_check list 'length == 8 and all(.[]; (.ip | type == "string") and .namespace == "research"
	and (.pod | type == "string") and (.containerId | length == 64) and .ifname == "eth0"
	and (.hostVeth | test("^tg[0-9a-f]{12}$")) and (.netns | startswith("/var/run/netns/"))
	and (.created | type == "number") and (.ageSeconds | type == "number" and . >= 0)
	and (has("retired") | not))'
json_check "p2 listed" 'any(.[]; .containerId == $c and .ip == $ip and .pod == "p2")' \
	--arg c "${POD_CID[p2]}" --arg ip "${POD_IP[p2]}"
ipam list
t_expect "rc" "$IPAM_RC" 0
t_expect "human rows" "$(grep -c '^10\.0\.0\.' <<<"$IPAM_OUT")" 8
grep "^${POD_IP[p2]} " <<<"$IPAM_OUT" | grep -q "research/p2" || t_fail "no row 'IP research/p2': $IPAM_OUT"
t_end

# show_ok KEY: show finds p2 with every kernel object present
show_ok() {
	ipam show "$1" --json
	t_expect "show $1 rc" "$IPAM_RC" 0
	json_check "show $1" '.containerId == $c and .ip == $ip and .namespace == "research" and .pod == "p2"
		and .inPool == true and .kernel == {hostVeth: true, hostRoute: true, nftElement: true, netns: true}' \
		--arg c "${POD_CID[p2]}" --arg ip "${POD_IP[p2]}"
}
t_begin "show by IP, NAMESPACE/POD and container-ID prefix (JSON and human)"
show_ok "${POD_IP[p2]}"
show_ok research/p2
show_ok "${POD_CID[p2]:0:12}"
show_ok "${POD_CID[p2]}"
ipam show research/p2
t_expect "human rc" "$IPAM_RC" 0
grep -q "${POD_IP[p2]}" <<<"$IPAM_OUT" || t_fail "human show lacks the IP"
grep -q "${POD_VETH[p2]}" <<<"$IPAM_OUT" || t_fail "human show lacks the veth"
ipam show 10.0.0.99 --json
t_expect "unknown IP rc" "$IPAM_RC" 1
ipam show research/nosuch
t_expect "unknown pod rc" "$IPAM_RC" 1
t_end

t_begin "show exit 1 when a kernel object is missing (host route deleted)"
ip -n "$TG_NODE" route del "${POD_IP[p2]}/32"
ipam show research/p2 --json
t_expect "rc" "$IPAM_RC" 1
json_check show '.kernel.hostRoute == false and .kernel.hostVeth == true'
ip -n "$TG_NODE" route add "${POD_IP[p2]}/32" dev "${POD_VETH[p2]}" scope link
t_end

t_begin "release: refuses while the veth exists, --force tears it down"
V=${POD_VETH[p4]} Y=${POD_IP[p4]}
fp=$(store_fp)
ipam release "$Y"
t_expect "release without --force rc" "$IPAM_RC" 1
grep -q -- --force <<<"$IPAM_ERR" || t_fail "refusal does not mention --force: $IPAM_ERR"
[ "$(store_fp)" = "$fp" ] || t_fail "refused release changed the store"
veth_present "$V" || t_fail "refused release removed $V"
ipam release "$Y" --json
t_expect "release --json without --force rc" "$IPAM_RC" 1
ipam release "$Y" --force --json
t_expect "release --force rc" "$IPAM_RC" 0
json_check release '.ip == $ip' --arg ip "$Y"
veth_present "$V" && t_fail "$V still exists"
nft_set_has pods "$Y" && t_fail "$Y still in @pods"
state_has_ip "$Y" "$NET" && t_fail "$Y still in the store"
route_present "$Y" && t_fail "route $Y/32 remains"
ipam release "$Y" --force
t_expect "release of a released IP rc" "$IPAM_RC" 1
# human form, by container ID, after the pod's netns (and veth) is gone
pod_ns_del p5
wait_for 5 sh -c "! ip -n $TG_NODE link show ${POD_VETH[p5]} >/dev/null 2>&1" || t_fail "veth survived its netns"
ipam release "${POD_CID[p5]}"
t_expect "release by container ID rc" "$IPAM_RC" 0
grep -q "${POD_IP[p5]}" <<<"$IPAM_OUT" || t_fail "human release does not name the IP: $IPAM_OUT"
state_has_ip "${POD_IP[p5]}" "$NET" && t_fail "${POD_IP[p5]} still in the store"
if nft_set_has pods "${POD_IP[p5]}"; then
	t_fail "${POD_IP[p5]} left in @pods after its release (doctor: orphan-nft-element)"
	# keep the doctor cases below independent of this failure
	ip netns exec "$TG_NODE" nft delete element inet tollgate pods "{ ${POD_IP[p5]} }"
	ip netns exec "$TG_NODE" nft delete element inet tollgate masq "{ ${POD_IP[p5]} }" 2>/dev/null
fi
pod_del p4 "$CONF"
pod_del p5 "$CONF"
t_end

t_begin "gc and doctor where the netns directory is not mounted: nothing collected, and said why"
fp=$(store_fp)
n_att=$(state_count "$NET")
ipam_netns_hidden gc --json
t_expect "gc rc" "$IPAM_RC" 1
json_check "gc collects nothing" 'length == 0'
grep -q "/var/run/netns, which is missing or empty here" <<<"$IPAM_ERR" || t_fail "gc does not say why: $IPAM_ERR"
[ "$(store_fp)" = "$fp" ] || t_fail "gc changed the store"
t_expect "attachments" "$(state_count "$NET")" "$n_att"
ipam_netns_hidden doctor --json
jq -e '[.findings[].kind] | (index("unseen-netns") != null) and (index("stale-netns") == null)' \
	<<<"$IPAM_OUT" >/dev/null 2>&1 || t_fail "doctor: $(tr -d '\n\t' <<<"${IPAM_OUT:0:400}")"
t_end

t_begin "gc --dry-run lists the pod whose netns is gone, gc releases it"
G=${POD_IP[p10]}
fp=$(store_fp)
ipam gc --dry-run --json
t_expect "dry-run rc" "$IPAM_RC" 0
json_check "dry-run" '[.[].ip] == [$g]' --arg g "$G"
ipam gc --dry-run
t_expect "human dry-run rc" "$IPAM_RC" 0
grep -q "$G" <<<"$IPAM_OUT" || t_fail "human dry-run does not name $G: $IPAM_OUT"
[ "$(store_fp)" = "$fp" ] || t_fail "dry-run changed the store"
ipam gc --json
t_expect "gc rc" "$IPAM_RC" 0
json_check gc '[.[].ip] == [$g]' --arg g "$G"
state_has_ip "$G" "$NET" && t_fail "$G still in the store"
nft_set_has pods "$G" && t_fail "$G still in @pods"
ipam gc
t_expect "second gc rc" "$IPAM_RC" 0
grep -q "$G" <<<"$IPAM_OUT" && t_fail "second gc still names $G"
pod_del p10 "$CONF"
t_end

# shaped pods: an IFB (Kubernetes egressRate) and classes on tollgate-inet
SCONF=$(jq -c '.shaping = {internetEgress: {podDefault: "100M"}} | .capabilities = {bandwidth: true}
	| .runtimeConfig = {bandwidth: {egressRate: 30000000}}' <<<"$CONF")
inet_classes() { ip netns exec "$TG_NODE" tc class show dev tollgate-inet 2>/dev/null | grep -c '^class'; }
t_begin "release --force of a shaped pod takes its IFB and its uplink class too; gc retires its namespace's"
if pod_add sh1 shaped "$SCONF"; then
	ifb=ti${POD_VETH[sh1]#tg}
	before=$(inet_classes)
	ip -n "$TG_NODE" link show "$ifb" >/dev/null 2>&1 || t_fail "no IFB $ifb after ADD"
	ipam show "${POD_IP[sh1]}"
	grep -q "internet egress 100M (namespace -), internet ingress - (namespace -), pod - in / 30M out" <<<"$IPAM_OUT" ||
		t_fail "show's shaping line: $(grep shaping <<<"$IPAM_OUT")"
	ipam release "${POD_IP[sh1]}" --force
	t_expect "release --force rc" "$IPAM_RC" 0
	ip -n "$TG_NODE" link show "$ifb" >/dev/null 2>&1 && t_fail "IFB $ifb left behind"
	# the pod's class; its namespace's stays (an ADD may be attaching under it) ...
	t_expect "classes on tollgate-inet after release" "$(inet_classes)" $((before - 1))
	# ... until gc finds the namespace without pods and retires it
	ipam gc
	t_expect "gc rc" "$IPAM_RC" 0
	grep -q "^retired 1 tc class(es) of tollgate-inet" <<<"$IPAM_OUT" || t_fail "gc did not say it retired the namespace class: $IPAM_OUT"
	t_expect "classes on tollgate-inet after gc" "$(inet_classes)" $((before - 2))
else
	t_fail "ADD sh1 rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "gc of two shaped pods of one namespace whose netns are gone: their classes and the namespace's go"
before=$(inet_classes)
if pod_add sh2 shaped2 "$SCONF" && pod_add sh3 shaped2 "$SCONF"; then
	t_expect "classes after two ADDs" "$(inet_classes)" $((before + 3))
	pod_ns_del sh2
	pod_ns_del sh3
	ipam gc
	t_expect "gc rc" "$IPAM_RC" 0
	t_expect "classes after gc" "$(inet_classes)" "$before"
	for p in sh2 sh3; do
		ip -n "$TG_NODE" link show "ti${POD_VETH[$p]#tg}" >/dev/null 2>&1 && t_fail "IFB of $p left behind"
		state_has_ip "${POD_IP[$p]}" "$NET" && t_fail "$p still in the store"
	done
else
	t_fail "ADD rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "reshape: a new internet egress cap reaches a running pod (--dry-run changes nothing); a pod whose netns went is no failure"
inet_ceil() { ip netns exec "$TG_NODE" tc class show dev tollgate-inet classid "$1" 2>/dev/null | grep -o 'ceil [^ ]*'; }
# rs2's netns goes before the reshape (its veth with it): still in the store
# until gc, it has no classes left to change
if pod_add rs1 reshaped "$SCONF" && pod_add rs2 reshaped "$SCONF" && pod_ns_del rs2; then
	# the kernel tears a netns's devices down asynchronously
	veth_gone() { ! veth_present "$1"; }
	wait_for 5 veth_gone "${POD_VETH[rs2]}"
	att() { jq -c --arg c "${POD_CID[rs1]}" '.attachments[] | select(.containerId == $c) | .shaping' "$(state_file)"; }
	cls=$(printf '1:%x' "$(att | jq -r .podClass)")
	t_expect "ceil before" "$(inet_ceil "$cls")" "ceil 100Mbit"
	# the policy now: no pod default, a 50M cap for namespace "reshaped"; no other pod changes
	jq -c '{cniVersion, name, plugins: [.shaping = {internetEgress: {namespaces: {reshaped: "50M"}}}]}' \
		<<<"$CONF" >"$TG_TMP/reshape.conflist"
	fp=$(store_fp)
	ipam --config "$TG_TMP/reshape.conflist" --json reshape --dry-run
	t_expect "dry-run rc" "$IPAM_RC" 0
	json_check "dry-run" 'any(.[]; .ip == $ip and .changed)' --arg ip "${POD_IP[rs1]}"
	t_expect "ceil after the dry run" "$(inet_ceil "$cls")" "ceil 100Mbit"
	[ "$(store_fp)" = "$fp" ] || t_fail "dry-run changed the store"
	ipam --config "$TG_TMP/reshape.conflist" reshape
	t_expect "reshape rc" "$IPAM_RC" 0
	[ "$IPAM_RC" = 0 ] || ipam_diag
	# the pod's own egressRate (runtimeConfig, recorded at ADD) stays
	grep -q "internet egress - (namespace 50M), internet ingress - (namespace -), pod - in / 30M out" <<<"$IPAM_OUT" ||
		t_fail "reshape output: $IPAM_OUT"
	grep -q "^2 of [0-9]* pods reshaped" <<<"$IPAM_OUT" || t_fail "other pods changed: $IPAM_OUT"
	grep -q "^1 pods gone meanwhile" <<<"$IPAM_OUT" || t_fail "rs2 not reported gone: $IPAM_OUT"
	t_expect "recorded namespace cap" "$(att | jq -r .namespaceInternetEgress)" 50000000
	cls=$(printf '1:%x' "$(att | jq -r .podClass)")
	t_expect "ceil after reshape" "$(inet_ceil "$cls")" "ceil 50Mbit"
	pod_del rs1 "$SCONF" || t_fail "DEL rc=$TG_RC $TG_OUT"
	ipam gc
	t_expect "gc rc (collects rs2)" "$IPAM_RC" 0
	state_has_ip "${POD_IP[rs2]}" "$NET" && t_fail "rs2 still in the store after gc"
else
	t_fail "ADD rs1/rs2 rc=$TG_RC $TG_OUT"
fi
t_end

t_begin "reshape with an unchanged policy touches no pod: one whose classes are not all there yet (its ADD still at work) is left to its ADD"
# A pod mid-ADD has its record saved and its classes still being made; a
# reshape running then must not make or change them under the ADD. Only the
# pods whose caps a reshape changes (or an earlier one left pending) are its.
if pod_add rs3 reshaped "$SCONF"; then
	jq -c '{cniVersion, name, plugins: [.]}' <<<"$SCONF" >"$TG_TMP/same.conflist"
	# the other pods were added under other policies: this one for all first
	ipam --config "$TG_TMP/same.conflist" reshape
	t_expect "first reshape rc" "$IPAM_RC" 0
	cls=$(printf '1:%x' "$(jq -r --arg c "${POD_CID[rs3]}" '.attachments[] | select(.containerId == $c) | .shaping.podClass' "$(state_file)")")
	ip netns exec "$TG_NODE" tc class del dev tollgate-inet classid "$cls" 2>/dev/null ||
		t_fail "no uplink class $cls for rs3 to take away"
	fp=$(store_fp)
	ipam --config "$TG_TMP/same.conflist" reshape
	t_expect "reshape rc" "$IPAM_RC" 0
	grep -q "^0 of [0-9]* pods reshaped" <<<"$IPAM_OUT" || t_fail "reshape changed pods: $IPAM_OUT"
	grep -q "put right" <<<"$IPAM_OUT" && t_fail "reshape put a pod's classes right: $IPAM_OUT"
	t_expect "rs3's class after the reshape" "$(inet_ceil "$cls")" ""
	[ "$(store_fp)" = "$fp" ] || t_fail "the reshape rewrote the store"
	# the runtime's repeated ADD is what puts the pod right
	pod_add rs3 reshaped "$SCONF" || t_fail "repeated ADD rc=$TG_RC $TG_OUT"
	t_expect "rs3's class after the repeated ADD" "$(inet_ceil "$cls")" "ceil 100Mbit"
	pod_del rs3 "$SCONF" || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rs3 rc=$TG_RC $TG_OUT"
fi
t_end

# ================================================================= doctor
DOC_FIX_RUN=0
DOC_OPTS=() # options for every doctor run of doctor_finding (e.g. --config FILE)
# doctor_finding KIND OBJECT-REGEX: doctor --json reports it (rc 1) with a fix;
# runs the fix when it is a plain `ip`/`nft` command (inside the node netns)
doctor_finding() {
	local kind=$1 re=$2 fixes f
	ipam "${DOC_OPTS[@]}" doctor --json
	t_expect "doctor rc" "$IPAM_RC" 1
	json_check doctor '.ok == false and any(.findings[]; .kind == $k and (.object | test($re))
		and (.fix | type == "string" and length > 0) and (.detail | type == "string"))' \
		--arg k "$kind" --arg re "$re"
	ipam "${DOC_OPTS[@]}" doctor
	t_expect "human doctor rc" "$IPAM_RC" 1
	grep -q -- "$kind" <<<"$IPAM_OUT" || t_fail "human doctor does not name $kind: ${IPAM_OUT:0:300}"
	ipam "${DOC_OPTS[@]}" doctor --json
	fixes=$(jq -r --arg k "$kind" '.findings[] | select(.kind == $k) | .fix' <<<"$IPAM_OUT" 2>/dev/null)
	while IFS= read -r f; do
		[[ $f == *tollgate-ipam* ]] && [[ $f != *"$DATA"* ]] &&
			t_fail "fix '$f' does not name --data-dir $DATA: it would act on the default store"
		[[ $f =~ \<[a-zA-Z_-]+\> ]] && t_fail "fix '$f' is not an exact command (placeholder ${BASH_REMATCH[0]})"
	done <<<"$fixes"
	DOC_FIX_RUN=0
	fixes=$(sed 's/[[:space:]]*#.*//' <<<"$fixes" | tr ';' '\n' | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		if [[ $f =~ ^(ip|nft)\ [^\;\&\|\`\$\<\>]*$ ]] && [[ ! $f =~ (netns|\ -n\ |\ -netns) ]]; then
			ip netns exec "$TG_NODE" sh -c "$f" >/dev/null 2>"$TG_TMP/fix.err" ||
				t_fail "fix '$f' failed: $(cat "$TG_TMP/fix.err")"
			DOC_FIX_RUN=1
		else
			diag "not run (not a plain ip/nft command): $f"
		fi
	done <<<"$fixes"
}
doctor_clean() { # WHAT
	ipam doctor --json
	[ "$IPAM_RC" = 0 ] && jq_ok '.ok == true and .findings == []' ||
		t_fail "$1: doctor not clean: rc=$IPAM_RC $(tr -d '\n\t' <<<"${IPAM_OUT:0:400}")"
}

t_begin "doctor: clean store and kernel (JSON and human)"
doctor_clean "healthy node"
ipam doctor
t_expect "human rc" "$IPAM_RC" 0
t_end

t_begin "doctor: orphan-veth (a tg* veth with no attachment), with its fix"
ip -n "$TG_NODE" link add tgdeadbeef0001 type veth peer name x
doctor_finding orphan-veth tgdeadbeef0001
jq -e '[.findings[] | select(.kind == "orphan-veth") | .fix] | any(test("tgdeadbeef0001"))' <<<"$IPAM_OUT" >/dev/null ||
	t_fail "fix does not name tgdeadbeef0001"
[ "$DOC_FIX_RUN" = 1 ] || ip -n "$TG_NODE" link del tgdeadbeef0001 2>/dev/null
doctor_clean "after the fix"
t_end

t_begin "doctor: missing-route (a pod's host route deleted), with its fix"
ip -n "$TG_NODE" route del "${POD_IP[p6]}/32"
doctor_finding missing-route "${POD_IP[p6]//./\\.}"
[ "$DOC_FIX_RUN" = 1 ] || ip -n "$TG_NODE" route add "${POD_IP[p6]}/32" dev "${POD_VETH[p6]}" scope link
route_present "${POD_IP[p6]}" || t_fail "route not back"
doctor_clean "after the fix"
t_end

t_begin "doctor: missing-nft-element (set pods flushed), one per pod, with fixes"
ip netns exec "$TG_NODE" nft flush set inet tollgate pods
ipam status --json
n=$(jq '.allocated + .retired' <<<"$IPAM_OUT")
ipam doctor --json
t_expect "missing-nft-element findings" \
	"$(jq '[.findings[] | select(.kind == "missing-nft-element")] | length' <<<"$IPAM_OUT" 2>/dev/null)" "$n"
doctor_finding missing-nft-element '10\.0\.0\.'
[ "$DOC_FIX_RUN" = 1 ] || for s in p2 p6 p7 p8 p9; do
	ip netns exec "$TG_NODE" nft add element inet tollgate pods "{ ${POD_IP[$s]} }"
done
doctor_clean "after the fixes"
for s in p2 p6 p7 p8 p9; do nft_set_has pods "${POD_IP[$s]}" || t_fail "${POD_IP[$s]} not back in @pods"; done
t_end

t_begin "doctor: uplink-address (a pool address on eth0), with its fix"
U=$(jq -r '.pool.addresses[0] | split("-")[0]' "$(state_file)")
ip -n "$TG_NODE" addr add "$U/32" dev eth0
doctor_finding uplink-address "${U//./\\.}"
[ "$DOC_FIX_RUN" = 1 ] || ip -n "$TG_NODE" addr del "$U/32" dev eth0
ip -n "$TG_NODE" -4 addr show dev eth0 | grep -q "inet $U/" && t_fail "$U still on eth0"
doctor_clean "after the fix"
t_end

t_begin "doctor: orphan-nft-element (an element no attachment holds), with its fix"
ip netns exec "$TG_NODE" nft add element inet tollgate pods "{ 10.0.0.200 }"
ip netns exec "$TG_NODE" nft add element inet tollgate masq "{ 10.0.0.200 }" 2>/dev/null
doctor_finding orphan-nft-element '10\.0\.0\.200'
if [ "$DOC_FIX_RUN" != 1 ]; then
	ip netns exec "$TG_NODE" nft delete element inet tollgate pods "{ 10.0.0.200 }"
	ip netns exec "$TG_NODE" nft delete element inet tollgate masq "{ 10.0.0.200 }" 2>/dev/null
fi
doctor_clean "after the fix"
t_end

t_begin "doctor: orphan-route (a /32 via a tg* veth with no attachment), with its fix"
ip -n "$TG_NODE" route add 10.0.0.201/32 dev "${POD_VETH[p6]}" scope link
doctor_finding orphan-route '10\.0\.0\.201'
[ "$DOC_FIX_RUN" = 1 ] || ip -n "$TG_NODE" route del 10.0.0.201/32
route_present 10.0.0.201 && t_fail "route 10.0.0.201/32 still there"
doctor_clean "after the fix"
t_end

t_begin "doctor: missing-veth (a pod's host veth deleted)"
ip -n "$TG_NODE" link del "${POD_VETH[p7]}"
doctor_finding missing-veth "${POD_VETH[p7]}|${POD_IP[p7]//./\\.}"
pod_del p7 "$CONF" || t_fail "DEL p7 rc=$TG_RC"
doctor_clean "after DEL"
t_end

t_begin "doctor: stale-netns (a pod's netns gone, attachment left), gc repairs"
pod_ns_del p8
doctor_finding stale-netns "${POD_CID[p8]:0:12}|${POD_IP[p8]//./\\.}|$TG_ID-p8"
ipam gc
t_expect "gc rc" "$IPAM_RC" 0
doctor_clean "after gc"
pod_del p8 "$CONF"
t_end

t_begin "doctor: reshape-pending (a reshape stopped before a pod's classes changed), the reshape it names finishes it"
if pod_add rp1 reshaped "$SCONF"; then
	jq -c '{cniVersion, name, plugins: [.]}' <<<"$SCONF" >"$TG_TMP/rp.conflist"
	# as a reshape killed between saving the caps and changing the classes leaves it
	jq --arg c "${POD_CID[rp1]}" '(.attachments[] | select(.containerId == $c)).reshapePending = true' \
		"$(state_file)" >"$TG_TMP/rp.json" && mv "$TG_TMP/rp.json" "$(state_file)"
	doctor_finding reshape-pending "${POD_IP[rp1]//./\\.}"
	fix=$(jq -r '.findings[] | select(.kind == "reshape-pending") | .fix' <<<"$IPAM_OUT")
	[[ $fix == "tollgate-ipam --config "*" reshape" ]] || t_fail "fix: $fix"
	ipam --config "$TG_TMP/rp.conflist" reshape
	t_expect "reshape rc" "$IPAM_RC" 0
	grep -q "pods' classes put right (an earlier reshape had not finished them)" <<<"$IPAM_OUT" ||
		t_fail "reshape output: $IPAM_OUT"
	t_expect "marks left" "$(jq '[.attachments[] | select(.reshapePending)] | length' "$(state_file)")" 0
	doctor_clean "after the reshape"
	pod_del rp1 "$SCONF" || t_fail "DEL rc=$TG_RC $TG_OUT"
else
	t_fail "ADD rp1 rc=$TG_RC $TG_OUT"
fi
t_end

# nft_table_norm [NAMESPACES]: table inet tollgate as JSON, comparable across
# a rebuild: handles dropped, counter values zeroed, @nexthops without its
# elements (what traffic added, each for a minute), set/map elements and the
# objects sorted. With NAMESPACES (a JSON array), namespace counters are kept
# only for those, and so are their guard chains and next-hop limits (a table
# declared again from the store cannot know the namespaces whose pods are
# gone); with GUARDS as well, the guard chains only of those (a flushed table
# keeps the counters and chains of a namespace waiting to retire, but not its
# rules, which no pod's element leads to).
nft_table_norm() {
	ip netns exec "$TG_NODE" nft -j list table inet tollgate 2>/dev/null |
		jq -S --argjson keep "${1:-null}" --argjson guards "${2:-${1:-null}}" '
		[.nftables[] | select(has("metainfo") | not)
		 | (if .set.name? == "nexthops" then del(.set.elem) else . end)
		 | select($keep == null or ((.counter // .limit).name // "" | startswith("ns_") | not)
			or ((.counter // .limit).name as $n | any($keep[]; . as $k | $n | startswith("ns_\($k)_"))))
		 | select($guards == null or ((.chain // .rule).chain // (.chain // {}).name // "" | startswith("guard_") | not)
			or ((.chain // .rule).chain // .chain.name | ltrimstr("guard_") | ltrimstr("in_") as $n
			    | any($guards[]; . == $n)))]
		| walk(if type == "object" then del(.handle)
			| (if has("packets") and has("bytes") then .packets = 0 | .bytes = 0 else . end)
			| (if (.elem | type) == "array" then .elem |= sort else . end)
		       else . end)
		| sort'
}
store_namespaces() { tg_state "$NET" | jq -c '[.attachments[].namespace] | unique'; }
# ns_bytes COUNTER: bytes of a named counter of the node's table ("" if absent)
ns_bytes() {
	ip netns exec "$TG_NODE" nft list counter inet tollgate "$1" 2>/dev/null |
		awk '{ for (i = 1; i < NF; i++) if ($i == "bytes") print $(i + 1) }'
}
# pod_traffic FROM TO: a few pings pod -> pod, routed (and counted) by the node
pod_traffic() { ip netns exec "$TG_ID-$1" ping -n -q -c 3 -i 0.2 -W 1 "${POD_IP[$2]}" >/dev/null 2>&1; }
# counts_traffic WHEN: a namespace counter grows with p2 -> p6 traffic
CTR=ns_research_egress_internal
counts_traffic() {
	local b0 b1
	b0=$(ns_bytes "$CTR")
	pod_traffic p2 p6
	b1=$(ns_bytes "$CTR")
	[ -n "$b0" ] && [ "${b1:-0}" -gt "$b0" ] || t_fail "$CTR does not count p2 -> p6 $1 ($b0 -> $b1)"
}
DOC_CONF=$TG_TMP/doctor.conflist
jq -c '{cniVersion, name, plugins: [.]}' <<<"$CONF" >"$DOC_CONF"
# doctor_fix_repairs KIND TABLE_BEFORE [NAMESPACES [GUARDS]]: doctor --config reports
# KIND with `doctor --fix` as its fix; that command, run as printed, declares
# the table again: equal to TABLE_BEFORE (nft_table_norm [NAMESPACES]), every
# pod of the store in @pods and @masq, counting again, doctor clean after.
doctor_fix_repairs() {
	local kind=$1 before=$2 keep=${3:-} guards=${4:-} fix words d a n
	DOC_OPTS=(--config "$DOC_CONF")
	doctor_finding "$kind" 'inet tollgate|^tollgate$'
	DOC_OPTS=()
	fix=$(jq -r --arg k "$kind" '[.findings[] | select(.kind == $k) | .fix] | first // ""' <<<"$IPAM_OUT" 2>/dev/null)
	t_expect "$kind fix" "$fix" "tollgate-ipam --config $DOC_CONF --data-dir $DATA --network $NET doctor --fix"
	if [[ $fix == "tollgate-ipam "*" doctor --fix" ]]; then
		# the advertised command, as printed (tollgate-ipam being this build's)
		read -r -a words <<<"${fix#tollgate-ipam }"
		ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" "${words[@]}" >"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
		IPAM_RC=$? IPAM_OUT=$(cat "$TG_TMP/ipam.out") IPAM_ERR=$(cat "$TG_TMP/ipam.err")
		# it reports what it found before the repair (rc 1), then the repair
		t_expect "doctor --fix rc" "$IPAM_RC" 1
		n=$(state_count "$NET")
		grep -q "^fixed: table inet tollgate declared again with the store's $n pods" <<<"$IPAM_OUT" ||
			{ t_fail "doctor --fix did not say it declared the table again"; ipam_diag; }
	else
		t_fail "$kind: no doctor --fix command to run"
	fi
	d=$(snap_diff "$before" "$(nft_table_norm "${keep:-null}" "${guards:-${keep:-null}}")")
	[ -z "$d" ] || { t_fail "table inet tollgate after doctor --fix differs from before"; diag "$d"; }
	for a in $(tg_state "$NET" | jq -r '.attachments[].ip'); do
		nft_set_has pods "$a" || t_fail "$a not in @pods after doctor --fix"
		nft_set_has masq "$a" || t_fail "$a not in @masq after doctor --fix"
	done
	counts_traffic "after doctor --fix"
	doctor_clean "after doctor --fix"
}
# table_restore TEXT: puts a saved table back when doctor --fix failed, so
# that the cases after this one start from a working node
table_restore() {
	ipam doctor --json
	[ "$IPAM_RC" = 0 ] && return 0
	ip netns exec "$TG_NODE" nft delete table inet tollgate 2>/dev/null
	ip netns exec "$TG_NODE" nft -f - <<<"$1" || diag "could not restore table inet tollgate"
}

t_begin "doctor: missing-rules (the table's rules flushed), doctor --fix puts rules and counting back"
GUARDS=$(store_namespaces)
TABLE_BEFORE=$(nft_table_norm null "$GUARDS")
TABLE_TEXT=$(ip netns exec "$TG_NODE" nft list table inet tollgate)
[ -n "$TABLE_BEFORE" ] && [ "$TABLE_BEFORE" != "[]" ] || t_fail "no table inet tollgate to start from"
counts_traffic "before the flush"
ip netns exec "$TG_NODE" nft flush table inet tollgate || t_fail "nft flush table failed"
b0=$(ns_bytes "$CTR")
pod_traffic p2 p6
t_expect "$CTR after the flush, with traffic (no rules: no counting)" "$(ns_bytes "$CTR")" "$b0"
doctor_fix_repairs missing-rules "$TABLE_BEFORE" null "$GUARDS"
table_restore "$TABLE_TEXT"
t_end

t_begin "doctor --imds: pool-drift when IMDS and the pool disagree"
jq -n --arg dd "$DATA" --arg u "$IMDS_URL" '{cniVersion: "1.1.0", name: "tgimds", type: "tollgate",
	uplink: "eth0", dataDir: $dd, ipam: {source: "imds", imdsURL: $u}}' >"$TG_TMP/imds-conf.json"
imds_serve "$TG_TMP/shrunk.json"
ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" --config "$TG_TMP/imds-conf.json" --json doctor --imds \
	>"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
IPAM_RC=$? IPAM_OUT=$(cat "$TG_TMP/ipam.out") IPAM_ERR=$(cat "$TG_TMP/ipam.err")
t_expect "rc in agreement" "$IPAM_RC" 0
json_check "in agreement" '.ok == true'
imds_serve "$FIX/one_nic.json" # lists the retired address again, lacks 10.0.0.13
ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" --config "$TG_TMP/imds-conf.json" --json doctor --imds \
	>"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
IPAM_RC=$? IPAM_OUT=$(cat "$TG_TMP/ipam.out") IPAM_ERR=$(cat "$TG_TMP/ipam.err")
t_expect "rc with drift" "$IPAM_RC" 1
json_check "drift" 'any(.findings[]; .kind == "pool-drift")'
[ "$(imds_count)" -ge 1 ] || t_fail "doctor --imds made no IMDS request"
# an address that ipam.exclude keeps out of the pool is no drift
jq '.ipam.exclude = ["10.0.0.12"]' "$TG_TMP/imds-conf.json" >"$TG_TMP/imds-excl.json"
# (sync twice: a new address joins the pool on its second sighting)
for verb in sync sync "doctor --imds"; do
	# shellcheck disable=SC2086  # the verb's words
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$IPAM_BIN" --config "$TG_TMP/imds-excl.json" --json $verb \
		>"$TG_TMP/ipam.out" 2>"$TG_TMP/ipam.err"
	IPAM_RC=$? IPAM_OUT=$(cat "$TG_TMP/ipam.out") IPAM_ERR=$(cat "$TG_TMP/ipam.err")
	t_expect "$verb with ipam.exclude rc" "$IPAM_RC" 0
done
json_check "in agreement with ipam.exclude" '.ok == true'
t_end

t_begin "doctor: missing-table (the nftables table deleted), doctor --fix declares it again with every pod"
KEEP=$(store_namespaces)
TABLE_BEFORE=$(nft_table_norm "$KEEP")
TABLE_TEXT=$(ip netns exec "$TG_NODE" nft list table inet tollgate)
ip netns exec "$TG_NODE" nft delete table inet tollgate
doctor_fix_repairs missing-table "$TABLE_BEFORE" "$KEEP"
table_restore "$TABLE_TEXT"
t_end

t_begin "corrupt store: status and doctor exit 1, the file is never replaced"
mkdir -p "$DATA/tgbroken" && chmod 700 "$DATA/tgbroken"
printf '{"version":1,"pool":{"addresses":["10.0.0.5-' >"$(state_file tgbroken)"
chmod 600 "$(state_file tgbroken)"
fp=$(stat -c '%i %s %a' "$(state_file tgbroken)"; sha256sum <"$(state_file tgbroken)")
ipam_net tgbroken status --json
t_expect "status rc" "$IPAM_RC" 1
[ -n "$IPAM_ERR" ] || t_fail "status: no message"
ipam_net tgbroken doctor --json
t_expect "doctor rc" "$IPAM_RC" 1
json_check doctor 'any(.findings[]; .kind == "corrupt-store" and (.fix | length > 0))'
imds_serve "$FIX/one_nic.json"
ipam_net tgbroken sync --imds-url "$IMDS_URL" --uplink eth0
t_expect "sync rc" "$IPAM_RC" 1
[ "$(stat -c '%i %s %a' "$(state_file tgbroken)"; sha256sum <"$(state_file tgbroken)")" = "$fp" ] ||
	t_fail "corrupt store replaced or changed"
t_end

# =============================================================== usage
t_begin "VERB --help exits 0 for every verb; usage errors exit 2"
for v in status list show release gc sync doctor; do
	ipam "$v" --help
	[ "$IPAM_RC" = 0 ] && [ -n "$IPAM_OUT" ] || t_fail "$v --help: rc=$IPAM_RC, stdout ${#IPAM_OUT} bytes"
	grep -q "$v" <<<"$IPAM_OUT" || t_fail "$v --help does not name the verb"
done
ipam --help
t_expect "--help rc" "$IPAM_RC" 0
ipam frobnicate
t_expect "unknown verb rc" "$IPAM_RC" 2
[ -n "$IPAM_ERR" ] || t_fail "unknown verb: no message"
ipam
t_expect "no verb rc" "$IPAM_RC" 2
ipam status --no-such-option
t_expect "unknown option rc" "$IPAM_RC" 2
ipam show
t_expect "show without argument rc" "$IPAM_RC" 2
ipam gc --force
t_expect "gc --force rc" "$IPAM_RC" 2
ipam sync --retry-budget abc --imds-url "$IMDS_URL"
t_expect "sync --retry-budget abc rc" "$IPAM_RC" 2
ipam_net '../x' status
t_expect "--network ../x rc" "$IPAM_RC" 2
t_end

t_begin "--json prints exactly one JSON document for every verb"
for args in "status" "list" "show research/p2" "gc --dry-run" "doctor" \
	"sync --imds-url $IMDS_URL --uplink eth0"; do
	# shellcheck disable=SC2086  # the verb and its options, split on purpose
	ipam --json $args
	is_one_json || t_fail "--json $args: not one JSON document: ${IPAM_OUT:0:200}"
done
t_end

t_begin "human output fits $WIDTH columns"
if [ -s "$WIDE" ]; then
	t_fail "$(wc -l <"$WIDE") lines wider than $WIDTH columns"
	diag "$(head -n 10 "$WIDE")"
fi
t_end

for s in p2 p6 p9; do pod_del "$s" "$CONF" >/dev/null; done
tap_done
