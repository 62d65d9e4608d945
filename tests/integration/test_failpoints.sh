#!/usr/bin/env bash
# Failpoints (lib/failpoint.h): every failure is clean. Each named point
# before or after a kernel or store step is armed in turn
# (TOLLGATE_FAILPOINT=NAME) and the step fails there:
#   ADD      an error object (code 5, naming the point), exit 1, and the node
#            byte-identical to before: links, addresses, routes, neighbours
#            (node and pod netns), nftables, tc (qdiscs, classes, filters of
#            every device), the store file's bytes
#   DEL, GC (the plugin's), tollgate-ipam gc
#            a rerun without the point finishes the job: the node is as if
#            the pod had never existed
#   node declaration (the plugin's first ADD on a node whose node-wide
#            state is gone), reshape, sync
#            an unarmed rerun converges to the state a clean run declares
# The points come from the binaries (TOLLGATE_FAILPOINT=list), never from a
# list here; every point must be reached by at least one scenario.
# nft.open.before stands for a kernel that loses nf_tables: that open fails,
# and every later one of the process fails as on a kernel without it
# (EPROTONOSUPPORT); a failed ADD must still undo its store record.
#
#   pods k (keeper) and v (victim), namespace "fp", one netns each
#     eth0 10.1.0.x/32 -- veth tg* (+ IFB ti*: egress limit) --
#   node 10.0.0.1: table inet tollgate (perPod counters), tollgate-inet
#     (internet egress caps of node, namespace and pod), uplink eth0's steering
#   (the rest of the topology as drawn in lib.sh; not used here)
#
# Which build: only a failpoint build (FAILPOINTS=1; the sanitizer build
# build-san/ sets it) holds the points. Run against a build without them
# (TOLLGATE_BIN_DIR=build, the production build), this file checks that the
# production binaries hold no failpoint code or name (strings) and ignore
# TOLLGATE_FAILPOINT (an ADD and DEL with a point armed succeed and leave the
# node as usual), then walks the points with the sibling build-san (built by
# `make test`); without one that is a failure, not a skip. When tests/run.sh
# runs build-san too (TG_RUN_BUILDS), the walk is left to that run. Against
# build-san it walks the points only.
#
# What the comparisons normalise, and why:
#   nftables counters' packet and byte values and HTB's direct_packets_stat
#     (traffic may hit them);
#   handles the kernel picks itself (bfifo leaf queues, tc actions' index):
#     a queue or action made again gets the next free one;
#   the order of tc's qdisc and class dumps (sorted): the kernel lists them
#     in its hash tables' order, which a class that came and went reshuffles;
#   DEL, GC: the store's cool-down list (a released address rests there,
#     stamped with its release time, by design) and the allocator's cursor
#     lastIp (it moves on with each address handed out, by design);
#   declaration: u32 handles (the kernel numbers a filter made anew), and
#     every line sorted: a link brought up again has its routes listed last;
#   sync: the pool's lastSyncMs (when the pool was synced).
#
# Arming a point by hand: TOLLGATE_FAILPOINT=add.veth.after (or NAME@N for
# the Nth time it is reached) in the plugin's or tollgate-ipam's environment;
# TOLLGATE_FAILPOINT=list build-san/tollgate lists them.
#
# Standalone: TOLLGATE_BIN_DIR=build-san bash tests/integration/test_failpoints.sh
# FP_JOBS=N: the scenarios walked by N workers at once (default 3; 1: one
# after the other, in the file's own process).
# shellcheck disable=SC2016,SC1091  # jq filters with $vars
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

has_failpoints() { [ -n "$(TOLLGATE_FAILPOINT=list "$1/tollgate" 2>/dev/null | grep -E '^add\.' | head -1)" ]; }
# The walk runs in FP_JOBS (default 3) workers at once: runs of this file
# (FP_WORKER=DIR) that each walk some of the scenarios (FP_ONLY) with a
# topology of their own (see "the walk, in workers" below). FP_JOBS=1 walks
# them all in this process, one after the other.
fp_parallel() { [ -z "${FP_WORKER:-}" ] && [ "${FP_JOBS:-3}" -gt 1 ]; }
# a worker: the production build's checks are its parent's
prod_checks() { [ -z "${FP_WORKER:-}" ] && ! has_failpoints "$TOLLGATE_BIN_DIR"; }

# ------------------------------------------------- the production build
if prod_checks; then
	FP_DIR=$TG_ROOT/build-san
	t_begin "production binaries hold no failpoint code or name"
	if ! has_failpoints "$FP_DIR"; then
		t_fail "no failpoint build to compare with: $FP_DIR/tollgate lists no point (make SAN=1)"
	else
		names=$(for b in tollgate tollgate-ipam; do TOLLGATE_FAILPOINT=list "$FP_DIR/$b"; done | sort -u)
		[ "$(wc -l <<<"$names")" -ge 20 ] || t_fail "the failpoint build lists only $(wc -l <<<"$names") points"
		for b in tollgate tollgate-ipam tollgate-agent; do
			n=$(strings "$TOLLGATE_BIN_DIR/$b" | grep -cFx -f <(printf '%s\n' "$names" tg_failpoints tg_failpoint_fire))
			t_expect "$b: failpoint names in the binary" "$n" 0
			n=$(strings "$TOLLGATE_BIN_DIR/$b" | grep -ci 'failpoint')
			t_expect "$b: strings naming failpoints" "$n" 0
		done
	fi
	t_end
fi

FP_DIR=${FP_DIR:-$TOLLGATE_BIN_DIR}
has_failpoints "$FP_DIR" || tap_bail "no failpoint build to walk ($FP_DIR): run make SAN=1"

# the workers build their own: this process needs one for the production
# build's checks, or when it walks the points itself
if prod_checks || ! fp_parallel; then
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
fi

CONF=$(tg_conf '.accounting={enabled: true, perPod: true}
	| .shaping={internetEgress: {node: "1G", namespaceDefault: "500M", podDefault: "100M"},
	            internetIngress: {podDefault: "200M"}}
	| .runtimeConfig={bandwidth: {ingressRate: 300000000, ingressBurst: 3000000,
	                              egressRate: 200000000, egressBurst: 2000000}}
	| .ipam.addresses=["10.1.0.10-10.1.0.200"]')
# ADD and the declaration compare the store's bytes: a cool-down that outlasts
# the test keeps released addresses from expiring (and the store changing)
# during a failed ADD's update.
CONF_KEEP=$(jq -c '.ipam.cooldownSeconds=3600' <<<"$CONF")
IPAM() { # [VAR=value...] ARGS...: tollgate-ipam (the failpoint build's) in the node
	local envs=()
	while [[ ${1:-} == *=* ]]; do envs+=("$1"); shift; done
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "${envs[@]}" "$FP_DIR/tollgate-ipam" \
		--data-dir "$TG_TMP/data" --network "$TG_NETNAME" "$@"
}
STATE=$(tg_state_file)

if prod_checks; then
	t_begin "the production plugin ignores TOLLGATE_FAILPOINT"
	pod_add k fp "$CONF" || { t_fail "keeper ADD rc=$TG_RC"; tg_diag_last; }
	before=$(tg_snapshot)
	for p in add.veth.after add.nft.after add.result.write store.save.before; do
		TG_EXTRA_ENV=(TOLLGATE_FAILPOINT="$p")
		pod_add v fp "$CONF" || { t_fail "ADD with $p armed: rc=$TG_RC"; tg_diag_last; }
		{ [ -n "${POD_IP[v]:-}" ] && ip netns exec "$TG_ID-v" ip -4 addr show eth0 | grep -q "${POD_IP[v]}/32"; } ||
			t_fail "ADD with $p armed: the pod has no address"
		pod_del v "$CONF" || { t_fail "DEL with $p armed: rc=$TG_RC"; tg_diag_last; }
		TG_EXTRA_ENV=()
		d=$(snap_diff "$before" "$(tg_snapshot)")
		[ -z "$d" ] || { t_fail "ADD+DEL with $p armed left the node changed"; diag "$d"; break; }
	done
	pod_del k "$CONF" >/dev/null
	t_end
	# tests/run.sh runs this file against the failpoint build too (make test:
	# build build-san): the walk is done there, once.
	for b in ${TG_RUN_BUILDS:-}; do
		if [ "$(cd "$TG_ROOT" && realpath -m "$b")" = "$(realpath -m "$FP_DIR")" ]; then
			diag "the walk runs against $b in this run"
			tap_done
			exit $?
		fi
	done
fi

# From here on: the failpoint build.
# shellcheck disable=SC2034  # read by lib.sh's tg_exec
TG_BIN=$FP_DIR/tollgate
mapfile -t PLUGIN_POINTS < <(TOLLGATE_FAILPOINT=list "$FP_DIR/tollgate")
mapfile -t IPAM_POINTS < <(TOLLGATE_FAILPOINT=list "$FP_DIR/tollgate-ipam")
declare -A HIT=()
# FP_SCENARIOS=regex (by hand): only the matching scenarios (add del gc ipamgc declare reshape sync)
wanted() { [[ $1 =~ ${FP_SCENARIOS:-.} ]]; }
# want SCENARIO: this process walks it (a worker: the ones it was given;
# with workers: none, they walk them)
want() {
	if [ -n "${FP_WORKER:-}" ]; then
		[[ " $FP_ONLY " == *" $1 "* ]]
	else
		! fp_parallel && wanted "$1"
	fi
}
# section NAME: a worker's output from here on goes to its file NAME.tap
# (printed by its parent in the order of the sections)
section() { [ -z "${FP_WORKER:-}" ] || exec >"$FP_WORKER/$1.tap" 2>&1; }

# ---------------------------------------------------------- snapshots
# tc_dump: every device's qdiscs, classes and filters in the node, from one
# tc -batch: the qdiscs, then for each device its classes and its filters
# on ingress, egress and root. Each device's part starts where tc reports
# the device "@NAME" missing (its stderr, unbuffered, joins its stdout, which
# tc flushes after each command). One awk sorts the qdisc lines and each
# device's class lines and keeps each device's filters in the kernel's order.
tc_dump() {
	local d
	{
		echo "qdisc show"
		for d in $(ip -n "$TG_NODE" -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort); do
			printf '%s\n' "class show dev @$d" "class show dev $d" \
				"filter show dev $d ingress" "filter show dev $d egress" "filter show dev $d root"
		done
	} | tc -n "$TG_NODE" -force -batch - 2>&1 | awk '
		function flush(   i, j, t) { # s[1..n], sorted
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
			for (i = 1; i <= n; i++) print s[i]
			n = 0
		}
		/^Cannot find device "@.*"$/ { flush(); sub(/^Cannot find device "@/, "# "); sub(/"$/, ""); print; dev = 1; next }
		/^Command failed -:[0-9]+$/ { next }
		!dev { sub(/qdisc bfifo [0-9a-f]+:/, "qdisc bfifo N:"); s[++n] = $0; next }
		/^class / { sub(/ leaf [0-9a-f]+:/, " leaf N:"); s[++n] = $0; next }
		{ flush(); print }
		END { flush() }'
}
# snap [pod...]: the node (tg_snapshot, tc, the store file's bytes) and the
# links, addresses and routes of these pods' namespaces.
snap() {
	local p
	tg_snapshot
	echo "## tc"
	tc_dump
	echo "## store bytes"
	cat "$STATE" 2>/dev/null || echo "(none)"
	for p in "$@"; do
		echo "## pod $p"
		ip -n "$TG_ID-$p" -d -batch - <<-'EOF'
			link show
			addr show
			route show table all
			neigh show nud permanent
		EOF
	done
}
# norm: the kernel's own picks (see the header)
norm() { sed -E 's/(qdisc bfifo )[0-9a-f]+:/\1N:/; s/(^|[[:space:]])index [0-9]+ ref/\1index N ref/; s/direct_packets_stat [0-9]+/direct_packets_stat N/'; }
# without the store's cool-down list (DEL, GC: a released address rests there)
# (norm's expressions and these, in one sed)
norm_cool() {
	sed -E 's/(qdisc bfifo )[0-9a-f]+:/\1N:/; s/(^|[[:space:]])index [0-9]+ ref/\1index N ref/; s/direct_packets_stat [0-9]+/direct_packets_stat N/
		s/"cooling":\[[^]]*\]/"cooling":[..]/; s/"lastIp":"[0-9.]+"/"lastIp":N/'
}
# declaration: u32 handles, and the lines sorted (a link brought up again
# gets its routes listed last)
norm_decl() { norm_cool | sed -E 's/ fh [0-9a-f:]+/ fh N/' | sort; }
# diff_of A B: snap_diff A B, empty when A and B are equal (diff runs only
# when they differ)
diff_of() { [ "$1" = "$2" ] || snap_diff "$1" "$2"; }

point_problem() { # POINT: why the last run is not a proper failure at POINT (empty when it is)
	local why
	why=$(cni_error_problem 5)
	[ -n "$why" ] && { echo "$why"; return; }
	grep -qF "failpoint $1:" <<<"$TG_OUT" || echo "the error does not name the point: ${TG_OUT:0:200}"
}
armed() { TG_EXTRA_ENV=(TOLLGATE_FAILPOINT="$1"); }
# shellcheck disable=SC2034  # read by lib.sh's tg_exec
unarmed() { TG_EXTRA_ENV=(); }
# v_add CONF, v_del CONF: pod_add v fp CONF and pod_del v CONF as the walk's
# loops run them, once or twice per point: the same plugin run (its
# environment and config), with v's container ID and CNI_ARGS worked out
# once, and without pod_add's parsing of the result (nothing here reads v's
# address or veth).
V_CID=$(cid_for v)
V_ADD_ARGS=$(k8s_args fp v "$V_CID")
V_DEL_ARGS=$(k8s_args default v "$V_CID")
v_add() {
	local path
	path=$TG_NETNS_DIR/$TG_ID-v # netns_path v
	[ -e "$path" ] || pod_ns_add v || return 1
	tg_run ADD "$V_CID" eth0 "$path" "$V_ADD_ARGS" <<<"$1"
}
v_del() {
	local path
	path=$TG_NETNS_DIR/$TG_ID-v # netns_path v
	[ -e "$path" ] || path=""
	tg_run DEL "$V_CID" eth0 "$path" "$V_DEL_ARGS" <<<"$1"
}

# ---------------------------------------------------- the walk, in workers
# Each worker is a run of this file with a topology of its own (lib.sh's
# per-run prefix: its own namespaces, tmp dir, store and node tables) that
# sets up the node below and walks its scenarios; its output goes to a file
# per section (FP_WORKER/NAME.tap), the points it reached to FP_WORKER/hit.
# Here their output is printed in the order of the sections, as one process
# walking them all prints it: the node's check once (a worker's failure when
# one has one, the others' failures as diagnostics), then each scenario's.
# The coverage check below takes the union of the points they reached. A
# worker that stops before its end stops this file there too (no end mark).
# The scenarios go to the least loaded worker, the costliest first (FP_COST:
# their relative walk times, FP_BY_COST: the scenarios by it).
FP_ORDER=(add del gc ipamgc declare reshape sync)
declare -A FP_COST=([add]=6 [del]=7 [gc]=8 [ipamgc]=7 [declare]=3 [reshape]=7 [sync]=1)
FP_BY_COST=(gc del ipamgc reshape add declare sync)
fp_print() { # FILE: its lines, the TAP ones counted
	local l
	[ -f "$1" ] || return 0
	while IFS= read -r l; do
		case $l in
		"ok - "*) TAP_PASS=$((TAP_PASS + 1)) ;;
		"not ok - "*) TAP_FAIL=$((TAP_FAIL + 1)) ;;
		esac
		printf '%s\n' "$l"
	done <"$1"
}
fp_walk() {
	local jobs=${FP_JOBS:-3} dir s w min keep=("${TG_PIDS[@]}") nodes=() pick f stopped=0
	local -a load=() only=() pids=() rcs=()
	local -A owner=()
	[ -n "$TG_TMP" ] || TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || tap_bail "no tmp dir"
	dir=$TG_TMP/walk
	for ((w = 0; w < jobs; w++)); do load[w]=0 only[w]=""; done
	for s in "${FP_BY_COST[@]}"; do
		wanted "$s" || continue
		min=0
		for ((w = 1; w < jobs; w++)); do [ "${load[w]}" -ge "${load[min]}" ] || min=$w; done
		load[min]=$((load[min] + FP_COST[$s])) only[min]+=" $s" owner[$s]=$min
	done
	for ((w = 0; w < jobs; w++)); do
		[ -n "${only[w]}" ] || continue
		mkdir -p "$dir/$w" || tap_bail "no tmp dir"
		FP_WORKER=$dir/$w FP_ONLY=${only[w]} FP_DIR=$FP_DIR TOLLGATE_BIN_DIR=$TOLLGATE_BIN_DIR \
			bash "$0" >"$dir/$w/node.tap" 2>&1 </dev/null &
		pids[w]=$!
		TG_PIDS+=("$!") # ended with this process
	done
	for w in "${!pids[@]}"; do
		wait "${pids[w]}"
		rcs[w]=$?
	done
	TG_PIDS=("${keep[@]}")
	for w in "${!pids[@]}"; do nodes+=("$dir/$w/node.tap"); done
	pick=${nodes[0]}
	for f in "${nodes[@]}"; do grep -q '^not ok - ' "$f" && { pick=$f; break; }; done
	fp_print "$pick"
	for f in "${nodes[@]}"; do
		[ "$f" = "$pick" ] || ! grep -q '^not ok - ' "$f" || diag "another worker: $(grep '^not ok - ' "$f")"
	done
	for s in "${FP_ORDER[@]}"; do
		[ -n "${owner[$s]:-}" ] && fp_print "$dir/${owner[$s]}/$s.tap"
	done
	for w in "${!pids[@]}"; do
		if grep -qx "# tollgate-tap: end of .*" "$dir/$w/end.tap" 2>/dev/null; then
			while read -r s; do HIT[$s]=1; done <"$dir/$w/hit"
		else
			diag "the worker walking${only[w]} stopped early (exit status ${rcs[w]})"
			stopped=1
		fi
	done
	[ "$stopped" -eq 0 ] || exit 1
}

# ----------------------------------------------------------- the node
if fp_parallel; then
	fp_walk
else
t_begin "a shaped, accounted node with one pod"
pod_add k fp "$CONF" || { t_fail "keeper ADD rc=$TG_RC"; tg_diag_last; }
ip -n "$TG_NODE" link show tollgate-inet >/dev/null 2>&1 || t_fail "no tollgate-inet"
ip -n "$TG_NODE" link show "ti${POD_VETH[k]#tg}" >/dev/null 2>&1 || t_fail "the keeper has no IFB"
[ "${#PLUGIN_POINTS[@]}" -ge 20 ] || t_fail "the plugin lists ${#PLUGIN_POINTS[@]} points"
t_end
[ -e "$(netns_path v)" ] || pod_ns_add v
S0=$(snap k v)
S0C=$(norm_cool <<<"$S0")
fi

# ------------------------------------------------------------------ ADD
section add
if want add; then
t_begin "ADD: a failure at any point leaves the node byte-identical"
n=0 base=$(norm <<<"$S0") # normalised
for p in "${PLUGIN_POINTS[@]}"; do
	armed "$p"
	v_add "$CONF_KEEP"
	unarmed
	if [ "$TG_RC" -eq 0 ]; then
		# not on ADD's path: the pod goes again; its address rests in cool-down
		v_del "$CONF_KEEP" || t_fail "$p: DEL after an ADD that passed: rc=$TG_RC"
		base=$(snap k v | norm)
		continue
	fi
	HIT[$p]=1
	n=$((n + 1))
	why=$(point_problem "$p")
	[ -z "$why" ] || t_fail "$p: $why"
	d=$(diff_of "$base" "$(snap k v | norm)")
	if [ -n "$d" ]; then
		t_fail "$p: the node changed"
		diag "$p: $d"
		# go on from a clean node
		v_del "$CONF_KEEP" >/dev/null
		base=$(snap k v | norm)
	fi
done
diag "ADD: $n points reached"
[ "$n" -ge 15 ] || t_fail "only $n points on ADD's path"
t_end
fi

# ------------------------------------------------------------------ DEL
section del
if want del; then
# The node where v never existed (norm_cool: the store's cool-down list).
t_begin "DEL: after a failure at any point, a rerun removes everything"
n=0
for p in "${PLUGIN_POINTS[@]}"; do
	v_add "$CONF" || { t_fail "$p: ADD rc=$TG_RC"; tg_diag_last; break; }
	armed "$p"
	v_del "$CONF"
	unarmed
	if [ "$TG_RC" -ne 0 ] || grep -qF "failpoint $p:" <<<"$TG_OUT$TG_ERR"; then
		HIT[$p]=1
		n=$((n + 1))
		[ "$TG_RC" -eq 0 ] || [ -z "$(point_problem "$p")" ] || t_fail "$p: $(point_problem "$p")"
		v_del "$CONF" || { t_fail "$p: the rerun DEL failed: rc=$TG_RC"; tg_diag_last; }
	fi
	d=$(diff_of "$S0C" "$(snap k v | norm_cool)")
	[ -z "$d" ] || { t_fail "$p: not as if the pod had never existed"; diag "$p: $d"; }
done
diag "DEL: $n points reached"
t_end
fi

# --------------------------------------------------------- the plugin's GC
section gc
if want gc; then
GC_CONF=$(jq -c --arg c "${POD_CID[k]}" '.["cni.dev/valid-attachments"]=[{containerID: $c, ifname: "eth0"}]' <<<"$CONF")
t_begin "GC: after a failure at any point, a rerun collects the pod"
n=0
for p in "${PLUGIN_POINTS[@]}"; do
	v_add "$CONF" || { t_fail "$p: ADD rc=$TG_RC"; tg_diag_last; break; }
	armed "$p"
	tg_run GC "" "" "" <<<"$GC_CONF"
	unarmed
	if [ "$TG_RC" -ne 0 ]; then
		HIT[$p]=1
		n=$((n + 1))
		why=$(point_problem "$p")
		[ -z "$why" ] || t_fail "$p: $why"
		tg_run GC "" "" "" <<<"$GC_CONF" || { t_fail "$p: the rerun GC failed: rc=$TG_RC"; tg_diag_last; }
	fi
	d=$(diff_of "$S0C" "$(snap k v | norm_cool)")
	[ -z "$d" ] || { t_fail "$p: not as if the pod had never existed"; diag "$p: $d"; }
done
diag "GC: $n points reached"
[ "$n" -ge 5 ] || t_fail "only $n points on GC's path"
t_end
fi

# ----------------------------------------------------- tollgate-ipam gc
section ipamgc
if want ipamgc; then
t_begin "tollgate-ipam gc: after a failure at any point, a rerun collects the pod"
n=0
for p in "${IPAM_POINTS[@]}"; do
	v_add "$CONF" || { t_fail "$p: ADD rc=$TG_RC"; tg_diag_last; break; }
	pod_ns_del v # its netns is gone: gc's to collect
	IPAM TOLLGATE_FAILPOINT="$p" gc >"$TG_TMP/gc.out" 2>"$TG_TMP/gc.err"
	rc=$?
	if grep -qF "failpoint $p:" "$TG_TMP/gc.err"; then
		HIT[$p]=1
		n=$((n + 1))
		[ "$rc" -eq 1 ] || t_fail "$p: exit status $rc, expected 1"
		IPAM gc >"$TG_TMP/gc.out" 2>"$TG_TMP/gc.err" || t_fail "$p: the rerun failed: $(cat "$TG_TMP/gc.err")"
	elif [ "$rc" -ne 0 ]; then
		t_fail "$p: exit status $rc without naming the point: $(cat "$TG_TMP/gc.err")"
	fi
	pod_ns_add v
	d=$(diff_of "$S0C" "$(snap k v | norm_cool)")
	[ -z "$d" ] || { t_fail "$p: not as if the pod had never existed"; diag "$p: $d"; }
done
diag "tollgate-ipam gc: $n points reached"
[ "$n" -ge 5 ] || t_fail "only $n points on gc's path"
t_end
fi

# ---------------------------------------------------- the node's declaration
# Node-wide state gone (the table, tollgate-inet's tree, state and stamp,
# the uplink's steering, ip_forward): the next ADD declares it; failing there, that ADD leaves the
# pod's objects and the store as they were; a clean ADD then converges.
section declare
if want declare; then
unshape_node() {
	ip netns exec "$TG_NODE" nft delete table inet tollgate 2>/dev/null
	# tollgate-inet stays (a new one would get a new random MAC and ifindex)
	# but down, without its tree and its stamp: everything on it is redone
	ip -n "$TG_NODE" link set tollgate-inet down alias ""
	ip netns exec "$TG_NODE" tc qdisc del dev tollgate-inet root 2>/dev/null
	ip netns exec "$TG_NODE" tc qdisc del dev eth0 clsact 2>/dev/null
	_tg_sysctl "$TG_NODE" net.ipv4.ip_forward 0
}
t_begin "node declaration: after a failure at any point, the next ADD converges"
unshape_node
v_add "$CONF_KEEP" || { t_fail "ADD on a bare node: rc=$TG_RC"; tg_diag_last; }
v_del "$CONF_KEEP" || t_fail "DEL rc=$TG_RC"
SD=$(snap k v | norm_decl)
d=$(snap_diff "$(norm_decl <<<"$S0")" "$SD")
[ -z "$d" ] || { t_fail "a bare node's first ADD does not declare the node as before"; diag "$d"; }
n=0
for p in "${PLUGIN_POINTS[@]}"; do
	case $p in declare.* | tc.node.* | add.node.*) ;; *) continue ;; esac
	unshape_node
	STORE_BEFORE=$(cat "$STATE")
	armed "$p"
	v_add "$CONF_KEEP"
	unarmed
	if [ "$TG_RC" -ne 0 ]; then
		HIT[$p]=1
		n=$((n + 1))
		why=$(point_problem "$p")
		[ -z "$why" ] || t_fail "$p: $why"
		[ "$(cat "$STATE")" = "$STORE_BEFORE" ] || t_fail "$p: the store changed"
		if node_links_tg | grep -qv "^${POD_VETH[k]}\$"; then t_fail "$p: a veth was left: $(node_links_tg)"; fi
		v_add "$CONF_KEEP" || { t_fail "$p: the rerun ADD failed: rc=$TG_RC"; tg_diag_last; }
	fi
	v_del "$CONF_KEEP" || t_fail "$p: DEL rc=$TG_RC"
	d=$(diff_of "$SD" "$(snap k v | norm_decl)")
	[ -z "$d" ] || { t_fail "$p: not converged"; diag "$p: $d"; }
done
diag "declaration: $n points reached"
t_end
fi

# ------------------------------------------------------------------ reshape
# Policy B lowers the namespace and pod caps; reshape to B fails at a point,
# where every class of the pods holds A's caps or B's (none missing: a pod is
# never unshaped), and an unarmed reshape converges to what a clean one
# made; back to A after.
section reshape
if want reshape; then
jq -c '{cniVersion, name, plugins: [.]}' <<<"$CONF" >"$TG_TMP/a.conflist"
jq -c '{cniVersion, name, plugins: [.shaping.internetEgress.namespaceDefault = "300M"
	| .shaping.internetEgress.podDefault = "50M" | .shaping.internetIngress.podDefault = "80M"]}' \
	<<<"$CONF" >"$TG_TMP/b.conflist"
reshape() { # CONFLIST [VAR=value]
	IPAM "${@:2}" --config "$TG_TMP/$1" reshape >"$TG_TMP/rs.out" 2>"$TG_TMP/rs.err"
}
# ceils: "DEV CLASSID CEIL" for every HTB class in the node, sorted
ceils() {
	ip netns exec "$TG_NODE" sh -c 'for d in $(ls /sys/class/net); do
		tc class show dev "$d" | awk -v d="$d" "{for (i = 1; i < NF; i++) if (\$i == \"ceil\") print d, \$3, \$(i + 1)}"
	done' | sort
}
# caps_problem: why the classes now are not each at policy A's caps or B's
# (a class of A's that is missing, or at a third ceiling); empty when they are
caps_problem() {
	local now dev id ceil cur
	now=$(ceils)
	while read -r dev id ceil; do
		cur=$(awk -v d="$dev" -v i="$id" '$1 == d && $2 == i {print $3}' <<<"$now")
		if [ -z "$cur" ]; then
			echo "class $id on $dev is missing"
		elif [ "$cur" != "$ceil" ] && ! grep -qxF "$dev $id $cur" <<<"$CB"; then
			echo "class $id on $dev has ceil $cur: neither A's ($ceil) nor B's"
		fi
	done <<<"$CA"
}
t_begin "reshape: after a failure at any point, a rerun converges"
SA=$(snap k v | norm_cool)
CA=$(ceils)
reshape b.conflist || t_fail "reshape to B: $(cat "$TG_TMP/rs.err")"
SB=$(snap k v | norm_cool)
CB=$(ceils)
# the control: A's and B's caps differ on the pods' classes of both node IFBs
# (uploads and downloads; the pods' own devices hold Kubernetes limits, alike)
[ "$(comm -23 <(echo "$CA") <(echo "$CB") | awk '{print $1}' | sed 's/^t[gi].*/pod/' | sort -u | tr '\n' ' ')" = "tollgate-inet tollgate-inetdl " ] ||
	t_fail "policies A and B do not differ on tollgate-inet's and tollgate-inetdl's classes: $(comm -3 <(echo "$CA") <(echo "$CB"))"
[ "$SB" != "$SA" ] || t_fail "reshape to B changed nothing"
reshape a.conflist || t_fail "reshape to A: $(cat "$TG_TMP/rs.err")"
d=$(snap_diff "$SA" "$(snap k v | norm_cool)")
[ -z "$d" ] || { t_fail "reshape B then A is not the node as it was"; diag "$d"; }
n=0
for p in "${IPAM_POINTS[@]}"; do
	reshape b.conflist TOLLGATE_FAILPOINT="$p"
	rc=$?
	if grep -qF "failpoint $p:" "$TG_TMP/rs.err"; then
		HIT[$p]=1
		n=$((n + 1))
		[ "$rc" -eq 1 ] || t_fail "$p: exit status $rc, expected 1"
		# stopped midway, each class holds A's caps or B's: never none
		why=$(caps_problem)
		[ -z "$why" ] || t_fail "$p: a reshape stopped there left the pods unshaped: $(tr '\n' ';' <<<"$why")"
		reshape b.conflist || t_fail "$p: the rerun failed: $(cat "$TG_TMP/rs.err")"
	elif [ "$rc" -ne 0 ]; then
		t_fail "$p: exit status $rc without naming the point: $(cat "$TG_TMP/rs.err")"
	fi
	d=$(diff_of "$SB" "$(snap k v | norm_cool)")
	[ -z "$d" ] || { t_fail "$p: not converged"; diag "$p: $d"; }
	reshape a.conflist || t_fail "$p: back to A: $(cat "$TG_TMP/rs.err")"
done
diag "reshape: $n points reached"
t_end
fi

# --------------------------------------------------------------------- sync
# A pool from an IMDS document (the node's uplink carries the document's MAC)
# into a store of its own, made anew by each run.
section sync
if want sync; then
ip -n "$TG_NODE" link set eth0 address 00:0d:3a:f8:06:ec
SYNC_STATE=$TG_TMP/data/fpsync/state.json
sync_run() { # [VAR=value]
	ip netns exec "$TG_NODE" env -i PATH="$TG_PATH" "$@" "$FP_DIR/tollgate-ipam" --data-dir "$TG_TMP/data" \
		--network fpsync sync --from-file "$TG_ROOT/tests/fixtures/imds/one_nic.json" --uplink eth0 \
		>"$TG_TMP/sync.out" 2>"$TG_TMP/sync.err"
}
norm_sync() { jq -S '.pool.lastSyncMs = 0' "$SYNC_STATE" 2>/dev/null || echo "(no store)"; }
t_begin "sync: after a failure at any point, a rerun converges"
sync_run || t_fail "sync: $(cat "$TG_TMP/sync.err")"
SS=$(norm_sync)
jq -e '.pool.addresses | length > 0' "$SYNC_STATE" >/dev/null 2>&1 || t_fail "sync filled no pool: $SS"
n=0
for p in "${IPAM_POINTS[@]}"; do
	rm -f "$SYNC_STATE"
	sync_run TOLLGATE_FAILPOINT="$p"
	rc=$?
	if grep -qF "failpoint $p:" "$TG_TMP/sync.err"; then
		HIT[$p]=1
		n=$((n + 1))
		[ "$rc" -eq 1 ] || t_fail "$p: exit status $rc, expected 1"
		sync_run || t_fail "$p: the rerun failed: $(cat "$TG_TMP/sync.err")"
	elif [ "$rc" -ne 0 ]; then
		t_fail "$p: exit status $rc without naming the point: $(cat "$TG_TMP/sync.err")"
	fi
	d=$(diff_of "$SS" "$(norm_sync)")
	[ -z "$d" ] || { t_fail "$p: not converged"; diag "$p: $d"; }
done
diag "sync: $n points reached"
t_end
fi

# ----------------------------------------------------------------- coverage
section end
[ -z "${FP_WORKER:-}" ] || printf '%s\n' "${!HIT[@]}" >"$FP_WORKER/hit"
if [ -z "${FP_SCENARIOS:-}" ] && [ -z "${FP_WORKER:-}" ]; then
t_begin "every failpoint is reached by a scenario"
missed=()
for p in "${PLUGIN_POINTS[@]}" "${IPAM_POINTS[@]}"; do
	[ -n "${HIT[$p]:-}" ] || missed+=("$p")
done
[ "${#missed[@]}" -eq 0 ] || t_fail "never reached: $(printf '%s\n' "${missed[@]}" | sort -u | tr '\n' ' ')"
diag "$(printf '%s\n' "${PLUGIN_POINTS[@]}" "${IPAM_POINTS[@]}" | sort -u | wc -l) points, ${#HIT[@]} reached"
t_end
fi

tap_done
