#!/usr/bin/env bash
# Bad input: every malformed environment or configuration is refused with
# exit status 1, exactly one CNI error object on stdout ({cniVersion, code,
# msg}) carrying the contract's code, and the node left untouched (a healthy
# pod stays healthy, the target pod netns stays empty).
#
#   pod "good" (healthy, attached)   pod "bad" (empty netns, target of ADDs)
#              \                       /
#               node 10.0.0.1 -- fabric -- peer / inet  (topology in lib.sh)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_badinput.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091  # jq filters with $vars; associative arrays
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
t_begin topology
topo_up || tap_bail "could not build the namespace topology"

CONF=$(tg_conf)
t_begin "setup: one healthy pod"
pod_add good research "$CONF" || { tg_diag_last; tap_bail "ADD of the healthy pod failed: rc=$TG_RC $TG_OUT"; }
pod_ns_add bad || tap_bail "netns"
t_end
GOOD_CID=${POD_CID[good]}
GOOD_NS=${POD_NETNS[good]}
BAD_CID=$(cid_for bad)
BAD_NS=$(netns_path bad)
ARGS=$(k8s_args research bad "$BAD_CID")
: >"$TG_TMP/regular-file"

BASELINE=$(tg_snapshot)
bad_links() { ip -n "$TG_ID-bad" -o link show | grep -vc ': lo:'; }

# c JQ_FILTER [jq args]: CONF edited
c() { tg_conf "$@"; }

# bad NAME CODE STDIN [MOD...]
#   STDIN: the config text, or @FILE to read it from a file
#   MOD:   VAR=value sets a variable, -VAR removes it (base: a valid ADD of pod "bad")
NCASES=0 NVALIDATE=0
IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
AGENT_BIN=$TOLLGATE_BIN_DIR/tollgate-agent
bad() {
	local name=$1 code=$2 input=$3
	shift 3
	local -A env=([CNI_COMMAND]=ADD [CNI_CONTAINERID]="$BAD_CID" [CNI_NETNS]="$BAD_NS"
		[CNI_IFNAME]=eth0 [CNI_PATH]="$TOLLGATE_BIN_DIR" [CNI_ARGS]="$ARGS")
	local m k list=()
	for m in "$@"; do
		if [[ $m == -* ]]; then unset "env[${m#-}]"; else env[${m%%=*}]=${m#*=}; fi
	done
	for k in "${!env[@]}"; do list+=("$k=${env[$k]}"); done
	NCASES=$((NCASES + 1))
	t_begin "bad input: $name -> code $code"
	if [[ $input == @* ]]; then
		tg_exec "${list[@]}" <"${input#@}" >"$TG_TMP/run.out" 2>"$TG_TMP/run.err"
	else
		printf '%s' "$input" | tg_exec "${list[@]}" >"$TG_TMP/run.out" 2>"$TG_TMP/run.err"
	fi
	TG_RC=$?
	TG_OUT=$(cat "$TG_TMP/run.out")
	# shellcheck disable=SC2034  # set as lib.sh's tg_run sets it
	TG_ERR=$(cat "$TG_TMP/run.err")
	local r
	r=$(cni_error_problem "$code")
	[ -z "$r" ] || t_fail "$r"
	# the config alone, judged offline: where validate refuses it, it says what the plugin said
	if [[ $input == @* ]]; then cp "${input#@}" "$TG_TMP/case.conf"; else printf '%s' "$input" >"$TG_TMP/case.conf"; fi
	local size
	size=$(wc -c <"$TG_TMP/case.conf")
	# (an empty or over-large stdin is the plugin's reading, not a config: a file says so its own way)
	if [ "$size" = 0 ] || [ "$size" -gt 1048576 ] ||
		ip netns exec "$TG_NODE" "$IPAM_BIN" --json validate "$TG_TMP/case.conf" >"$TG_TMP/validate.out" 2>&1; then :; else
		NVALIDATE=$((NVALIDATE + 1))
		t_expect "validate's code" "$(jq -r .code "$TG_TMP/validate.out" 2>/dev/null)" "$(jq -r .code <<<"$TG_OUT" 2>/dev/null)"
		local vmsg pmsg
		vmsg=$(jq -r .msg "$TG_TMP/validate.out" 2>/dev/null) pmsg=$(jq -r .msg <<<"$TG_OUT" 2>/dev/null)
		if [ "$code" = 6 ]; then
			# not JSON at all: the file is named where the plugin says "the network
			# configuration"; the place it stops at is the same
			[[ $pmsg != *" at byte "* ]] || [ "${vmsg##* at byte }" = "${pmsg##* at byte }" ] ||
				t_fail "validate: '$vmsg', the plugin: '$pmsg'"
		else
			t_expect "validate's message" "$vmsg" "$pmsg"
		fi
	fi
	if [ "$TG_RC" = 0 ] && [ "${env[CNI_COMMAND]:-}" = ADD ]; then
		# accepted by mistake: undo it so that later cases start clean
		tg_exec "${list[@]/CNI_COMMAND=ADD/CNI_COMMAND=DEL}" <<<"$CONF" >/dev/null 2>&1
	fi
	local now d
	now=$(tg_snapshot)
	d=$(snap_diff "$BASELINE" "$now")
	if [ -n "$d" ]; then
		t_fail "node changed"
		diag "$d"
		BASELINE=$now # report each change once
	fi
	[ "$(bad_links)" = 0 ] || {
		t_fail "pod netns 'bad' got interfaces"
		ip -n "$TG_ID-bad" link del eth0 2>/dev/null
	}
	t_end
}

# ---------------------------------------------------------------- environment
bad "missing CNI_COMMAND" 4 "$CONF" -CNI_COMMAND
bad "unknown CNI_COMMAND" 4 "$CONF" CNI_COMMAND=FROB
bad "empty CNI_COMMAND" 4 "$CONF" CNI_COMMAND=
bad "missing CNI_CONTAINERID" 4 "$CONF" -CNI_CONTAINERID
bad "empty CNI_CONTAINERID" 4 "$CONF" CNI_CONTAINERID=
bad "CNI_CONTAINERID with /" 4 "$CONF" CNI_CONTAINERID=abc/def
bad "CNI_CONTAINERID starting with .." 4 "$CONF" CNI_CONTAINERID=..abc
bad "CNI_CONTAINERID starting with -" 4 "$CONF" CNI_CONTAINERID=-abc
bad "missing CNI_IFNAME" 4 "$CONF" -CNI_IFNAME
bad "empty CNI_IFNAME" 4 "$CONF" CNI_IFNAME=
bad "CNI_IFNAME of 16 characters" 4 "$CONF" CNI_IFNAME=abcdefghijklmnop
bad "CNI_IFNAME with /" 4 "$CONF" CNI_IFNAME=eth/0
bad "CNI_IFNAME with :" 4 "$CONF" CNI_IFNAME=eth0:1
bad "CNI_IFNAME with a space" 4 "$CONF" "CNI_IFNAME=eth 0"
bad "CNI_IFNAME ." 4 "$CONF" CNI_IFNAME=.
bad "CNI_IFNAME .." 4 "$CONF" CNI_IFNAME=..
bad "missing CNI_NETNS on ADD" 4 "$CONF" -CNI_NETNS
bad "CNI_NETNS that does not exist" 4 "$CONF" CNI_NETNS="$TG_NETNS_DIR/$TG_ID-nonexistent"
bad "CNI_NETNS that is a regular file" 4 "$CONF" CNI_NETNS="$TG_TMP/regular-file"
bad "missing CNI_PATH" 4 "$CONF" -CNI_PATH
bad "malformed CNI_ARGS (no =)" 4 "$CONF" "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE"
bad "malformed CNI_ARGS (empty key)" 4 "$CONF" "CNI_ARGS=IgnoreUnknown=1;=research"
bad "DEL without CNI_CONTAINERID" 4 "$CONF" CNI_COMMAND=DEL -CNI_CONTAINERID
bad "DEL without CNI_IFNAME" 4 "$CONF" CNI_COMMAND=DEL CNI_CONTAINERID="$GOOD_CID" -CNI_IFNAME
bad "DEL without CNI_PATH" 4 "$CONF" CNI_COMMAND=DEL CNI_CONTAINERID="$GOOD_CID" -CNI_PATH

# ---------------------------------------------------------------- stdin
head -c 1100000 /dev/zero | tr '\0' x >"$TG_TMP/pad"
jq -c --rawfile pad "$TG_TMP/pad" '.padding=$pad' <<<"$CONF" >"$TG_TMP/big.json"
bad "malformed JSON" 6 '{"cniVersion": "1.1.0", "name": '
bad "JSON array instead of object" 6 '[]'
bad "JSON string instead of object" 6 '"tollgate"'
bad "empty stdin" 6 ''
bad "trailing garbage after the config" 6 "$CONF xyz"
bad "two JSON documents" 6 "$CONF $CONF"
bad "stdin larger than 1 MiB" 6 "@$TG_TMP/big.json"
bad "STATUS with empty stdin" 6 '' CNI_COMMAND=STATUS
bad "CHECK with undecodable prevResult" 6 "$(c '.prevResult=42')" CNI_COMMAND=CHECK CNI_CONTAINERID="$GOOD_CID" CNI_NETNS="$GOOD_NS"

# ---------------------------------------------------------------- config
bad "unsupported cniVersion 9.9.9" 1 "$(c '.cniVersion="9.9.9"')"
bad "unsupported cniVersion 0.2.0" 1 "$(c '.cniVersion="0.2.0"')"
bad "CHECK with cniVersion 0.3.1" 1 "$(c '.cniVersion="0.3.1"')" CNI_COMMAND=CHECK CNI_CONTAINERID="$GOOD_CID" CNI_NETNS="$GOOD_NS"
bad "STATUS with cniVersion 1.0.0" 1 "$(c '.cniVersion="1.0.0"')" CNI_COMMAND=STATUS -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
bad "GC with cniVersion 0.4.0 (would drop the healthy pod)" 1 \
	"$(c '.cniVersion="0.4.0" | .["cni.dev/valid-attachments"]=[]')" CNI_COMMAND=GC -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
bad "missing name" 7 "$(c 'del(.name)')"
bad "empty name" 7 "$(c '.name=""')"
bad "name with /" 7 "$(c '.name="a/b"')"
bad "name ..(path escape)" 7 "$(c '.name=".."')"
bad "name is a number" 7 "$(c '.name=42')"
bad "type is a number" 7 "$(c '.type=5')"
bad "type is an object" 7 "$(c '.type={}')"
bad "mtu is a string" 7 "$(c '.mtu="1500"')"
bad "mtu 0" 7 "$(c '.mtu=0')"
bad "mtu 67" 7 "$(c '.mtu=67')"
bad "mtu 70000" 7 "$(c '.mtu=70000')"
bad "mtu written twice (json-c would keep the last)" 7 "$(jq -c . <<<"$CONF" | sed 's/^{/{"mtu":1500,"mtu":9000,/')"
bad "masquerade is a string" 7 "$(c '.masquerade="yes"')"
bad "internalCIDRs is a string" 7 "$(c '.internalCIDRs="10.0.0.0/8"')"
bad "internalCIDRs holds a number" 7 "$(c '.internalCIDRs=[10]')"
bad "internalCIDRs invalid prefix" 7 "$(c '.internalCIDRs=["10.0.0.0/40"]')"
bad "dataDir is a number" 7 "$(c '.dataDir=1')"
bad "ipam is a string" 7 "$(c '.ipam="static"')"
bad "ipam.addresses is a number" 7 "$(c '.ipam.addresses=10')"
bad "ipam.addresses invalid CIDR /33" 7 "$(c '.ipam.addresses=["10.1.0.0/33"]')"
bad "ipam.addresses reversed range" 7 "$(c '.ipam.addresses=["10.1.0.40-10.1.0.10"]')"
bad "ipam.addresses open range" 7 "$(c '.ipam.addresses=["10.1.0.10-"]')"
bad "ipam.addresses invalid IP" 7 "$(c '.ipam.addresses=["10.1.0.256"]')"
bad "ipam.exclude invalid IP" 7 "$(c '.ipam.exclude=["not-an-ip"]')"
bad "ipam.cooldownSeconds is a string" 7 "$(c '.ipam.cooldownSeconds="30"')"
bad "ipam.cooldownSeconds -1" 7 "$(c '.ipam.cooldownSeconds=-1')"
bad "ipam.cooldownSeconds 86401 (docs/configuration.md: 0..86400)" 7 "$(c '.ipam.cooldownSeconds=86401')"
bad "internalCIDRs overlapping (docs/configuration.md: non-overlapping)" 7 "$(c '.internalCIDRs=["10.0.0.0/8","10.1.0.0/16"]')"
bad "dataDir relative (docs/configuration.md: absolute path)" 7 "$(c '.dataDir="data"')"
bad "unknown ipam.source" 7 "$(c '.ipam.source="dhcp"')"
bad "static source without addresses" 7 "$(c 'del(.ipam.addresses)')"
# the node's own uplink address in the pool: a pod given it would take the node's traffic
NODE_ADDR=$(ip -n "$TG_NODE" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1 | head -1)
bad "ipam.addresses holding the node's own address ($NODE_ADDR)" 7 \
	"$(c '.ipam.addresses += [$a]' --arg a "$NODE_ADDR")"
t_begin "the refusal names the node's address and its device"
grep -q "ipam.addresses holds $NODE_ADDR, an address of this node (eth0)" <<<"$TG_OUT" ||
	t_fail "message: $TG_OUT"
t_end
bad "uplink that does not exist (MTU taken from it)" 7 "$(c '.uplink="nosuch0" | del(.mtu)')"
# an MTU given and nothing shaped: the uplink is still looked up, on every ADD
bad "uplink that does not exist (MTU given, no shaping)" 7 "$(c '.uplink="nosuch0" | .mtu=1500')"
t_begin "the refusal names the missing uplink"
grep -q 'uplink \\"nosuch0\\" does not exist on this node' <<<"$TG_OUT" || t_fail "message: $TG_OUT"
t_end
bad "internet shaping through an uplink that does not exist" 7 \
	"$(c '.uplink="nosuch0" | .mtu=1500 | .shaping={internetEgress: {podDefault: "100M"}}')"
bad "internet shaping through an uplink that does not exist (MTU taken from it)" 7 \
	"$(c '.uplink="nosuch0" | del(.mtu) | .shaping={internetEgress: {podDefault: "100M"}}')"

t_begin "a logFile that is a FIFO nobody reads does not hold up ADD and DEL (nothing logged)"
mkfifo "$TG_TMP/fifo.log"
FIFO_CONF=$(tg_conf '.logFile=$f' --arg f "$TG_TMP/fifo.log")
pod_ns_add fifo
FIFO_CID=$(cid_for fifo)
for cmd in ADD DEL; do
	# bounded: a plugin that blocks on the FIFO is killed after 5 s (exit 124)
	timeout 5 ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" CNI_COMMAND=$cmd \
		CNI_CONTAINERID="$FIFO_CID" CNI_IFNAME=eth0 CNI_NETNS="$(netns_path fifo)" \
		CNI_PATH=/opt/cni/bin CNI_ARGS="$(k8s_args research fifo "$FIFO_CID")" "$TG_BIN" \
		<<<"$FIFO_CONF" >"$TG_TMP/fifo.out" 2>&1
	rc=$?
	t_expect "$cmd exit status" "$rc" 0
done
t_end

t_begin "the healthy pod survived every bad input"
pod_check_conf=$(tg_conf '.prevResult=$p' --argjson p "${POD_RESULT[good]}")
tg_run CHECK "$GOOD_CID" eth0 "$GOOD_NS" "$(k8s_args research good "$GOOD_CID")" <<<"$pod_check_conf"
[ "$TG_RC" = 0 ] || { t_fail "CHECK rc=$TG_RC $TG_OUT"; tg_diag_last; }
pingq "$TG_ID-good" "$TG_PEER_POD_IP" || t_fail "good -> peer pod fails"
t_expect "attachments" "$(state_count)" 1
t_end
diag "$NCASES bad-input cases"

t_begin "tollgate-ipam validate and tollgate-agent --check: the plugin's verdict on a config, offline"
diag "validate refused $NVALIDATE of the $NCASES bad inputs with the plugin's code and message (the rest are bad environments, not configs)"
[ "$NVALIDATE" -ge 20 ] || t_fail "only $NVALIDATE cases compared"
jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$TG_TMP/good.conflist"
out=$(ip netns exec "$TG_NODE" "$IPAM_BIN" validate "$TG_TMP/good.conflist"); rc=$?
t_expect "validate of the good conflist" "$rc:$out" "0:$TG_TMP/good.conflist: accepted (network $TG_NETNAME, cniVersion 1.1.0)"
out2=$(ip netns exec "$TG_NODE" "$AGENT_BIN" --check --config "$TG_TMP/good.conflist"); rc=$?
t_expect "the agent's --check" "$rc:$out2" "0:$out"
jq '.plugins[0].mtu = "big"' "$TG_TMP/good.conflist" >"$TG_TMP/bad.conflist"
out=$(ip netns exec "$TG_NODE" "$IPAM_BIN" validate "$TG_TMP/bad.conflist"); rc=$?
t_expect "validate of a bad conflist" "$rc:$out" "1:$TG_TMP/bad.conflist: refused (CNI error 7): mtu must be an integer, not a string"
out2=$(ip netns exec "$TG_NODE" "$AGENT_BIN" --check --config "$TG_TMP/bad.conflist"); rc=$?
t_expect "the agent's --check" "$rc:$out2" "1:$out"
# a key twice in the file: refused naming it, where json-c alone would keep the last
sed 's/"plugins":\[{/"plugins":[{"mtu":9000,/' "$TG_TMP/good.conflist" >"$TG_TMP/twice.conflist"
out=$(ip netns exec "$TG_NODE" "$IPAM_BIN" validate "$TG_TMP/twice.conflist"); rc=$?
case "$rc:$out" in
"1:$TG_TMP/twice.conflist: refused (CNI error 7): plugins[0].mtu is written twice at byte "*) ;;
*) t_fail "validate of a conflist with a key twice: $rc:$out" ;;
esac
t_end

tap_done
