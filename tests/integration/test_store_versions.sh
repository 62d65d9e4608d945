#!/usr/bin/env bash
# The store's format versions on a node: each earlier shape of state.json
# (tests/fixtures/store/, written by the release that wrote it) put in place
# of a node's store, as an upgrade finds it. Read-only commands leave it as
# it is; ADD of a new pod and DEL of one of the file's pods (which has no
# kernel objects: DEL succeeds and releases its address) work, and the store
# is then in the current format with every recorded pod kept. A later
# version's store (99) is refused by ADD (CNI code 5, naming 99 and this
# build's version), left byte for byte as it is, while DEL exits 0;
# `tollgate-ipam status` and `doctor` say what is wrong.
#
#   network   pool (the fixtures')        store
#   tgv1..5   10.77.0.10-19               tests/fixtures/store/v1-*.json
#   tgvnew    10.77.0.10-19               v1-313ff53.json with "version": 99
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_store_versions.sh
# shellcheck disable=SC2016,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
t_end

FIXDIR=$TG_ROOT/tests/fixtures/store
IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
FIX_BOOT=5b0c1f9e-2d47-4a8b-9c31-7e6f0a2d4b58
BOOT_NOW=$(cat /proc/sys/kernel/random/boot_id)
FIX_CIDS=(4f1c2a7be0d94c3f8a1b5e6d7c8f9a01 9a8b7c6d5e4f40312a1b0c9d8e7f6a52 c0ffee00d15ea5e0b1e55ed0ddba1103)

# fixture_conf NET SOURCE: the config the fixture's node ran with.
fixture_conf() {
	if [ "$2" = imds ]; then
		tg_conf '.name=$n | .ipam={source: "imds", imdsURL: "http://127.0.0.1:1/", cooldownSeconds: 30}' --arg n "$1"
	else
		tg_conf '.name=$n | .ipam={source: "static", addresses: ["10.77.0.10-10.77.0.19"], cooldownSeconds: 30}' --arg n "$1"
	fi
}
# put_fixture FILE NET [SED]: the fixture as NET's store, written in this boot
# (the bootId swapped in place: the file keeps its shape byte for byte).
put_fixture() {
	local d=$TG_TMP/data/$2
	mkdir -p "$d" && chmod 700 "$TG_TMP/data" "$d" &&
		sed -e "s/$FIX_BOOT/$BOOT_NOW/" ${3:+-e "$3"} "$FIXDIR/$1" >"$d/state.json" &&
		chmod 600 "$d/state.json"
}
ipam_cli() { ip netns exec "$TG_NODE" "$IPAM_BIN" --data-dir "$TG_TMP/data" "$@"; }
# The current layout: the head on one line ending in the attachments' opening,
# one attachment per line, "]}" last.
current_layout_problem() {
	local f=$1 n
	n=$(jq '.attachments | length' "$f")
	[ "$(jq .version "$f")" = 1 ] || { echo "version $(jq .version "$f")"; return; }
	[ "$(wc -l <"$f")" -eq $((n + 2)) ] || { echo "$(wc -l <"$f") lines for $n attachments"; return; }
	head -n 1 "$f" | grep -q '"attachments":\[$' || { echo "first line is not the head"; return; }
	[ "$(tail -n 1 "$f")" = "]}" ] || { echo "last line is not ]}"; return; }
	jq -e '.pool | has("pending")' "$f" >/dev/null || echo "pool.pending missing"
}
# A fixture's pod, by its containerID: no netns, no veth, only its record.
fixture_pod_del() { # CID CONF
	tg_run DEL "$1" eth0 "" "$(k8s_args team-a fixture "$1")" <<<"$2"
}

i=0
for f in v1-32e4650.json v1-2de77bb.json v1-22bbd21.json v1-58c0033.json v1-313ff53.json; do
	i=$((i + 1))
	net=tgv$i
	src=$(jq -r .pool.source "$FIXDIR/$f")
	conf=$(fixture_conf "$net" "$src")
	sf=$(tg_state_file "$net")
	t_begin "$f: read-only commands leave it as it is"
	put_fixture "$f" "$net" || t_fail "cannot put the fixture in place"
	sum=$(md5sum <"$sf")
	ipam_cli --network "$net" status >"$TG_TMP/cli.out" 2>&1 || t_fail "status rc=$?: $(cat "$TG_TMP/cli.out")"
	grep -q "3 allocated" "$TG_TMP/cli.out" || t_fail "status: $(cat "$TG_TMP/cli.out")"
	ipam_cli --network "$net" list >"$TG_TMP/cli.out" 2>&1 || t_fail "list rc=$?"
	t_expect "pods listed" "$(grep -c ' team-[ab]/' "$TG_TMP/cli.out")" 3
	t_expect "store bytes after reads" "$(md5sum <"$sf")" "$sum"
	t_end

	t_begin "$f: ADD of a new pod, DEL of one of its pods; the store is then current"
	before=$(jq -S '.attachments' "$sf")
	if pod_add "n$i" team-c "$conf"; then
		ip=${POD_IP[n$i]}
		case $ip in 10.77.0.1[0-2]) t_fail "ADD handed out $ip, held by a fixture pod" ;; esac
		p=$(current_layout_problem "$sf")
		[ -z "$p" ] || t_fail "after ADD the store is not in the current format: $p"
		t_expect "fixture pods kept as they were" "$(jq -S '[.attachments[] | select(.pod != "n'$i'")]' "$sf")" "$before"
		if [ "$src" = imds ]; then
			t_expect "imds pool kept" "$(jq -c '.pool | [.source, .pending, .nodeIp, .subnet, .lastSyncMs]' "$sf")" \
				"$(jq -c '.pool | [.source, .pending, .nodeIp, .subnet, .lastSyncMs]' "$FIXDIR/$f")"
		fi
		fixture_pod_del "${FIX_CIDS[0]}" "$conf"
		t_expect "DEL of ${FIX_CIDS[0]:0:12} rc" "$TG_RC" 0
		[ "$TG_RC" = 0 ] || diag "$TG_OUT $TG_ERR"
		t_expect "its record" "$(jq --arg c "${FIX_CIDS[0]}" '[.attachments[] | select(.containerId == $c)] | length' "$sf")" 0
		jq -e '.cooling | any(.ip == "10.77.0.10")' "$sf" >/dev/null || t_fail "10.77.0.10 is not cooling down after DEL"
		t_expect "attachments left" "$(jq '.attachments | length' "$sf")" 3
		p=$(current_layout_problem "$sf")
		[ -z "$p" ] || t_fail "after DEL the store is not in the current format: $p"
		ipam_cli --network "$net" status >/dev/null 2>&1 || t_fail "status of the migrated store rc=$?"
		pod_del "n$i" "$conf" || t_fail "DEL of the new pod rc=$TG_RC $TG_OUT"
		t_expect "tg links" "$(node_links_tg | tr '\n' ' ')" ""
		t_expect "/32 routes" "$(node_host_routes | tr '\n' ' ')" ""
	else
		t_fail "ADD on $f rc=$TG_RC $TG_OUT"
	fi
	t_end
done

# ------------------------------------------------------------ a later version
NEW=tgvnew
conf=$(fixture_conf $NEW static)
sf=$(tg_state_file $NEW)
put_fixture v1-313ff53.json $NEW 's/^{"version":1,/{"version":99,/' || t_fail "cannot put the store in place"
sum=$(md5sum <"$sf")

t_begin "a version 99 store: ADD refused (exit 1, code 5, naming 99 and this build's 1), file untouched"
grep -q '^{"version":99,' "$sf" || t_fail "the store is not version 99"
pod_add z1 team-c "$conf"
r=$(cni_error_problem 5)
[ -z "$r" ] || t_fail "$r"
msg=$(jq -r '.msg + " " + (.details // "")' <<<"$TG_OUT" 2>/dev/null)
grep -q "format version 99" <<<"$msg" || t_fail "the error does not name version 99: $msg"
grep -q "format version 1, the latest this build" <<<"$msg" || t_fail "the error does not name this build's version: $msg"
grep -qi "corrupt" <<<"$msg" && t_fail "a later version's store called corrupt: $msg"
t_expect "store bytes" "$(md5sum <"$sf")" "$sum"
t_expect "tg links" "$(node_links_tg | tr '\n' ' ')" ""
t_end

t_begin "a version 99 store: DEL of one of its pods exits 0, file untouched"
fixture_pod_del "${FIX_CIDS[1]}" "$conf"
t_expect "DEL rc" "$TG_RC" 0
grep -q "format version 99" <<<"$TG_ERR" || t_fail "DEL did not say why: $TG_ERR"
t_expect "stdout" "$TG_OUT" ""
t_expect "store bytes" "$(md5sum <"$sf")" "$sum"
t_end

t_begin "a version 99 store: status and doctor say what is wrong"
ipam_cli --network $NEW status >"$TG_TMP/cli.out" 2>&1
rc=$?
[ $rc -ne 0 ] || t_fail "status exited 0 on a store it cannot read"
grep -q "format version 99, newer than format version 1" "$TG_TMP/cli.out" || t_fail "status: $(cat "$TG_TMP/cli.out")"
ipam_cli --network $NEW --json doctor >"$TG_TMP/cli.out" 2>/dev/null
t_expect "doctor findings" "$(jq -c '[.findings[] | select(.object | endswith("state.json")) | .kind]' "$TG_TMP/cli.out")" '["newer-store"]'
jq -r '.findings[] | select(.kind == "newer-store") | .fix' "$TG_TMP/cli.out" | grep -q "release that wrote it" ||
	t_fail "doctor's fix: $(cat "$TG_TMP/cli.out")"
jq -r '.findings[].fix' "$TG_TMP/cli.out" | grep -q "mv $sf" && t_fail "doctor tells to move a later release's store aside"
t_expect "store bytes" "$(md5sum <"$sf")" "$sum"
t_end

tap_done
