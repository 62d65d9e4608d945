#!/usr/bin/env bash
# The plugin and tollgate-ipam under valgrind (memcheck): every command of a
# shaped pod's life and the CLI verbs that change the node, each run must
# exit as it would without valgrind and valgrind must report no error and
# no leak (definite, indirect or possible). The paths covered: ADD on an
# undeclared node (the node-wide declaration), ADD on a declared node (the
# probe), CHECK, ADD after the HTB root was deleted (the repair that
# restores every pod's classes), DEL of a pod with its own IFB (the link
# group), DEL of a pod without a record, tollgate-ipam status, list, show,
# gc (class retirement), doctor --fix.
#
# Runs against the plain build only (valgrind and ASan do not mix).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

tg_require
command -v valgrind >/dev/null || tap_bail "valgrind is not installed (make deps)"
tg_traps
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
t_end

IPAM_BIN=$TOLLGATE_BIN_DIR/tollgate-ipam
CONF=$(tg_conf '.shaping={internetEgress:{podDefault:"100M",namespaceDefault:"200M",node:"1G"},internetIngress:{podDefault:"100M"}}
	| .capabilities={bandwidth:true}
	| .runtimeConfig={bandwidth:{ingressRate:100000000,ingressBurst:1000000,egressRate:100000000,egressBurst:1000000}}')
echo "$CONF" >"$TG_TMP/conf.json"
LEAKS=definite,indirect,possible
VG=(valgrind -q --leak-check=full "--show-leak-kinds=$LEAKS" "--errors-for-leak-kinds=$LEAKS"
	--error-exitcode=99)

# vg_check NAME RC WANT: valgrind's own exit code 99 means errors or leaks
vg_check() {
	local name=$1 rc=$2 want=$3 report
	# the netns ioctls are unknown to valgrind: a warning, not an error
	report=$(grep '^==' "$TG_TMP/vg.err" | grep -v -e 'unhandled ioctl' -e 'spurious value errors' -e 'README_MISSING_SYSCALL')
	t_begin "valgrind: $name"
	[ "$rc" = 99 ] && t_fail "valgrind reported errors or leaks"
	[ "$rc" = 99 ] || t_expect "exit status" "$rc" "$want"
	[ -z "$report" ] || { t_fail "valgrind output"; diag "$(head -n 40 <<<"$report")"; }
	t_end
}

# vg_cni NAME CMD POD [WANT]: one plugin command under valgrind
vg_cni() {
	local name=$1 cmd=$2 pod=$3 want=${4:-0} cid path rc
	cid=$(cid_for "$pod")
	path=$(netns_path "$pod")
	[ -e "$path" ] || path=""
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" CNI_COMMAND="$cmd" CNI_CONTAINERID="$cid" \
		CNI_IFNAME=eth0 CNI_NETNS="$path" CNI_PATH=/opt/cni/bin \
		CNI_ARGS="$(k8s_args team "$pod" "$cid")" "${VG[@]}" "$TG_BIN" <<<"$CONF" \
		>"$TG_TMP/vg.out" 2>"$TG_TMP/vg.err"
	rc=$?
	vg_check "$name" "$rc" "$want"
	[ "$rc" = "$want" ] || diag "stdout: $(head -c 300 "$TG_TMP/vg.out")"
}

# vg_ipam NAME ARGS...: one tollgate-ipam verb under valgrind (exit 0 expected)
vg_ipam() {
	local name=$1 rc
	shift
	ip netns exec "$TG_NODE" "${VG[@]}" "$IPAM_BIN" --data-dir "$TG_TMP/data" \
		--network "$TG_NETNAME" "$@" >"$TG_TMP/vg.out" 2>"$TG_TMP/vg.err"
	rc=$?
	vg_check "$name" "$rc" 0
	[ "$rc" = 0 ] || diag "stdout: $(head -c 300 "$TG_TMP/vg.out")"
}

if ! pod_ns_add v1 || ! pod_ns_add v2; then tap_bail "cannot create the pods' namespaces"; fi
vg_cni "ADD on an undeclared node (declares node-wide state)" ADD v1
vg_cni "ADD on a declared node (probe only)" ADD v2
vg_cni "CHECK" CHECK v2
ip netns exec "$TG_NODE" tc qdisc del dev tollgate-inet root
vg_cni "ADD after the HTB root was deleted (restores every pod's classes)" ADD v1
vg_cni "CHECK of the other pod after the repair" CHECK v2
vg_ipam "tollgate-ipam status" status
vg_ipam "tollgate-ipam list" list
vg_ipam "tollgate-ipam show" show "$(cid_for v1)"
vg_cni "DEL of a pod with its own IFB" DEL v2
vg_ipam "tollgate-ipam gc (retires nothing in use)" gc
ip netns exec "$TG_NODE" nft flush chain inet tollgate postrouting
vg_ipam "tollgate-ipam doctor --fix (declares again)" --config "$TG_TMP/conf.json" doctor --fix
vg_cni "DEL" DEL v1
vg_cni "DEL again (no record left)" DEL v1
vg_ipam "tollgate-ipam gc (retires the namespace class)" gc

t_begin "nothing left after the valgrind runs"
t_expect "attachments" "$(state_count "$TG_NETNAME")" 0
t_expect "tg/ti links" "$(ip -n "$TG_NODE" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^t[gi]' | tr '\n' ' ')" ""
t_expect "classes on tollgate-inet" "$(ip netns exec "$TG_NODE" tc class show dev tollgate-inet | awk '{print $3}' | tr '\n' ' ')" "1:1 "
t_end

tap_done
