#!/usr/bin/env bash
# The arm64 build (make ARCH=arm64, build-arm64/) under qemu-aarch64-static,
# beside the native build (TOLLGATE_BIN_DIR) in the same run:
#   - every binary is an aarch64 ELF and says so in --version, with the
#     native build's version and commit;
#   - every unit test binary passes under qemu (the budgets' property test
#     over 100,000 events of a world where every kind occurs, not its
#     million); the only cases left out are
#     those that need tc's netlink messages (NEED_NETNS_TC, counted from the
#     sources), which qemu-user does not translate; and the kernel case of
#     the metrics endpoint's HTTP server on loopback, in a namespace of its own;
#   - the plugin in a throwaway node namespace: VERSION, STATUS, a refused
#     config (the same error object as the native plugin's), CHECK and DEL of
#     a container it never saw, the node unchanged by all of them;
#   - tollgate-ipam reads the store the native plugin wrote for two real
#     pods and prints what the native tollgate-ipam prints; `validate` and
#     `tollgate-agent --check` give the native verdicts, good and bad;
#   - tollgate-allocator serves its page and answers a node's report.
#
# qemu-user is no kernel: it refuses NETLINK_NETFILTER sockets, passes no
# tc message and no NS_GET_NSTYPE ioctl, so the plugin's ADD (which checks
# CNI_NETNS with that ioctl and writes nftables) cannot run under it: the
# arm64 ADD, CHECK and DEL run on an arm64 kernel in test_arm64_vm.sh.
#
# The loader: qemu without -L, so that the arm64 binaries load the
# multiarch libraries (/usr/lib/aarch64-linux-gnu, Debian's arm64 -dev
# packages) with the loader of the same libc6:arm64. With -L
# /usr/aarch64-linux-gnu they would get the cross toolchain's loader, of
# another glibc build than that libc, and every fork hangs.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_arm64.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

A64=${TG_ARM64_DIR:-$TG_ROOT/build-arm64}
NATIVE=$TOLLGATE_BIN_DIR
QEMU=$(command -v qemu-aarch64-static || true)
if [ -z "$QEMU" ]; then
	echo "not ok - preconditions: qemu-aarch64-static not found (make deps)"
	exit 1
fi
for b in tollgate tollgate-ipam tollgate-agent tollgate-allocator; do
	if [ ! -x "$A64/$b" ] || [ ! -x "$NATIVE/$b" ]; then
		echo "not ok - preconditions: $A64/$b or $NATIVE/$b missing (make ARCH=arm64 all; make all)"
		exit 1
	fi
done
q() { "$QEMU" "$@"; }

# ------------------------------------------------------------ the binaries
t_begin "every arm64 binary is an aarch64 ELF and names its target, version and commit"
for b in tollgate tollgate-ipam tollgate-agent tollgate-allocator; do
	# e_machine, bytes 18-19 of the ELF header: 0xb7 is aarch64
	m=$(od -An -tx1 -j18 -N2 "$A64/$b" | tr -d ' ')
	[ "$m" = b700 ] || t_fail "$b: e_machine $m, expected b700 (aarch64)"
	v=$(q "$A64/$b" --version 2>&1) || t_fail "$b --version under qemu failed: $v"
	n=$("$NATIVE/$b" --version 2>&1)
	case $v in *aarch64-linux-gnu*) ;; *) t_fail "$b --version does not name aarch64: $v" ;; esac
	# the same words but the target: version and commit agree
	[ "${v%%;*}" = "${n%%;*}" ] || t_fail "$b: arm64 says '$v', native '$n'"
done
t_end

# ------------------------------------------------------------ unit tests
n_units=0
for u in "$A64"/tests/unit_test_*; do
	case $u in *.d) continue ;; esac
	n_units=$((n_units + 1))
	name=$(basename "$u")
	src=$TG_ROOT/tests/unit/${name#unit_}.c
	want_skip=$(grep -c 'NEED_NETNS_TC();' "$src" 2>/dev/null)
	t_begin "arm64 $name under qemu-aarch64-static"
	# the budgets' property test: 100,000 events of world 1 here (one in which every kind
	# of event occurs within them), its million in the native builds (the same code;
	# under qemu a million take two minutes)
	out=$(cd "$TG_ROOT" && TG_UNIT_QEMU_USER=1 TG_BUDGET_EVENTS=100000 TG_BUDGET_SEED=1 \
		timeout 240 "$QEMU" "$u" 2>&1)
	rc=$?
	passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -1)
	skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -1)
	[ "$rc" = 0 ] || t_fail "exit $rc: $(grep -E 'FAILED|ERROR|LINE' <<<"$out" | head -5 | tr '\n' ' ')"
	[ "${passed:-0}" -gt 0 ] || t_fail "no case passed"
	[ "${skipped:-0}" = "${want_skip:-0}" ] ||
		t_fail "${skipped:-0} cases skipped, expected ${want_skip:-0} (those needing tc netlink)"
	t_end
	diag "$name: ${passed:-0} passed${skipped:+, $skipped left to the native builds (tc netlink)}"
done
# The HTTP server on loopback: a kernel case (a network namespace of its
# own), which qemu-user runs as it runs the unit tests.
t_begin "arm64 ktest_http (the metrics endpoint's server on loopback) under qemu-aarch64-static"
if [ -x "$A64/tests/ktest_http" ] && _tg_netns_add "$TG_ID-khttp"; then
	out=$(cd "$TG_ROOT" && ip netns exec "$TG_ID-khttp" env TG_UNIT_QEMU_USER=1 \
		timeout 240 "$QEMU" "$A64/tests/ktest_http" 2>&1)
	rc=$?
	passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -1)
	[ "$rc" = 0 ] || t_fail "exit $rc: $(grep -E 'FAILED|ERROR|LINE|SKIPPED' <<<"$out" | head -5 | tr '\n' ' ')"
	[ "${passed:-0}" -gt 0 ] || t_fail "no case passed"
	grep -q '^\[  SKIPPED \]' <<<"$out" && t_fail "cases skipped: $(grep -A3 'SKIPPED' <<<"$out" | head -4 | tr '\n' ' ')"
	diag "ktest_http: ${passed:-0} passed"
	ip netns del "$TG_ID-khttp"
else
	t_fail "no $A64/tests/ktest_http (make ARCH=arm64 all), or no namespace for it"
fi
t_end
t_begin "the arm64 build holds unit tests"
[ "$n_units" -ge 10 ] || t_fail "only $n_units unit test binaries in $A64/tests"
t_end

# ------------------------------------------------------------ the plugin
# (in the node namespace: ADD and CHECK open CNI_NETNS with NS_GET_NSTYPE,
# which qemu-user does not pass; STATUS and DEL of a gone netns do not)
topo_up || tap_bail "topology"
WRAP=$TG_TMP/arm64-bin
mkdir -p "$WRAP"
printf '#!/bin/sh\nexec %s %s "$@"\n' "$QEMU" "$A64/tollgate" >"$WRAP/tollgate"
chmod +x "$WRAP/tollgate"
conf=$(tg_conf)
native() { TG_BIN=$NATIVE/tollgate tg_run "$@"; }
arm64() { TG_BIN=$WRAP/tollgate tg_run "$@"; }

t_begin "arm64 plugin: VERSION, STATUS and a refused config answer as the native plugin's"
cid=$(cid_for gone)
declare -A WANT=()
# the native answers first: the arm64 runs that follow must leave the node as it is then
native VERSION "" "" "" <<<"$conf"
WANT[version]=$TG_OUT
BADS=('.mtu=10' '.ipam.addresses=["10.1.0.300"]' '.internalCIDRs=["10.0.0.0/8","10.1.0.0/16"]')
for i in "${!BADS[@]}"; do
	native STATUS "" "" "" <<<"$(tg_conf "${BADS[$i]}")"
	WANT[bad$i]=$TG_OUT
	[ -n "$(cni_error_problem 7)" ] && t_fail "control: the native plugin took ${BADS[$i]}"
done
native DEL "$cid" eth0 "" <<<"$conf"
before=$(tg_snapshot)
arm64 VERSION "" "" "" <<<"$conf"
[ "$TG_RC" = 0 ] || t_fail "VERSION exit $TG_RC: $TG_ERR"
[ "$TG_OUT" = "${WANT[version]}" ] || t_fail "VERSION: '$TG_OUT', native '${WANT[version]}'"
arm64 STATUS "" "" "" <<<"$conf"
[ "$TG_RC" = 0 ] || t_fail "STATUS exit $TG_RC: $TG_OUT $TG_ERR"
for i in "${!BADS[@]}"; do
	arm64 STATUS "" "" "" <<<"$(tg_conf "${BADS[$i]}")"
	p=$(cni_error_problem 7)
	[ -z "$p" ] || t_fail "${BADS[$i]}: $p"
	[ "$TG_OUT" = "${WANT[bad$i]}" ] || t_fail "${BADS[$i]}: '$TG_OUT', native '${WANT[bad$i]}'"
done
t_end

t_begin "arm64 plugin: DEL of a container whose netns is gone succeeds, as the native one's"
arm64 DEL "$cid" eth0 "" <<<"$conf"
if [ "$TG_RC" != 0 ] || [ -n "$TG_OUT" ]; then
	t_fail "DEL: exit $TG_RC, stdout '$TG_OUT' $TG_ERR"
fi
t_end

t_begin "the arm64 plugin's runs left the node as it was"
d=$(snap_diff "$before" "$(tg_snapshot)")
[ -z "$d" ] || t_fail "the node changed: ${d:0:600}"
t_end

# ------------------------------------------------------------ tollgate-ipam
t_begin "arm64 tollgate-ipam reads the native plugin's store as the native one does"
for p in a b; do
	pod_add "$p" "team-$p" "$conf" || t_fail "native ADD $p: $TG_OUT $TG_ERR"
done
ipam() { # BIN_PREFIX... -- ARGS: tollgate-ipam in the node netns
	ip netns exec "$TG_NODE" "$@"
}
# (not `show`: it reads the pod's tc objects, whose messages qemu-user does not pass)
for verb in "list" "status" "--json list" "--json status"; do
	# shellcheck disable=SC2086 # the verb's words
	n=$(ipam "$NATIVE/tollgate-ipam" --data-dir "$TG_TMP/data" --network "$TG_NETNAME" $verb 2>&1)
	# shellcheck disable=SC2086
	a=$(ipam "$QEMU" "$A64/tollgate-ipam" --data-dir "$TG_TMP/data" --network "$TG_NETNAME" $verb 2>&1)
	# ages are printed in seconds: the two runs may be a second apart
	strip() { sed -E 's/\b[0-9]+s\b/Ns/g; s/"age(_s|Seconds)?": *[0-9]+/"age": N/g'; }
	[ "$(strip <<<"$a")" = "$(strip <<<"$n")" ] ||
		t_fail "$verb: arm64 printed '${a:0:300}', native '${n:0:300}'"
done
grep -q "${POD_IP[a]:-none}" <<<"$(ipam "$QEMU" "$A64/tollgate-ipam" --data-dir "$TG_TMP/data" --network "$TG_NETNAME" list)" ||
	t_fail "arm64 list does not show pod a's address ${POD_IP[a]:-none}"
t_end

t_begin "arm64 validate and tollgate-agent --check: the native verdicts, good and bad"
good=$TG_ROOT/deploy/10-tollgate.conflist
badf=$TG_TMP/bad.conflist
jq '.plugins[0].mtu = 10' "$good" >"$badf"
for f in "$good" "$badf"; do
	n=$("$NATIVE/tollgate-ipam" validate "$f" 2>&1)
	nrc=$?
	a=$(q "$A64/tollgate-ipam" validate "$f" 2>&1)
	arc=$?
	[ "$arc:$a" = "$nrc:$n" ] || t_fail "validate $(basename "$f"): arm64 $arc '$a', native $nrc '$n'"
	n=$("$NATIVE/tollgate-agent" --check --config "$f" 2>&1)
	nrc=$?
	a=$(q "$A64/tollgate-agent" --check --config "$f" 2>&1)
	arc=$?
	[ "$arc:$a" = "$nrc:$n" ] || t_fail "--check $(basename "$f"): arm64 $arc '$a', native $nrc '$n'"
done
# the control: the two files get different verdicts
"$NATIVE/tollgate-ipam" validate "$good" >/dev/null 2>&1 || t_fail "control: the shipped conflist refused"
"$NATIVE/tollgate-ipam" validate "$badf" >/dev/null 2>&1 && t_fail "control: mtu 10 accepted"
t_end

# ------------------------------------------------------------ the allocator
t_begin "arm64 tollgate-allocator serves its page and answers a node's report"
POLICY=$TG_TMP/policy.json
jq -n '{version: 1, namespaces: {"team-a": {internetEgress: "100M"}}}' >"$POLICY" || t_fail "cannot write the policy"
ip netns exec "$TG_NODE" "$QEMU" "$A64/tollgate-allocator" --policy "$POLICY" --insecure-no-auth \
	--listen 127.0.0.1:19628 2>>"$TG_TMP/alloc.log" &
TG_PIDS+=("$!")
AURL=http://127.0.0.1:19628
acurl() { ip netns exec "$TG_NODE" curl -s --max-time 3 "$@"; }
up=""
for _ in $(seq 1 100); do
	if [ "$(acurl -o /dev/null -w '%{http_code}' "$AURL/readyz")" = 200 ]; then
		up=1
		break
	fi
	sleep 0.1
done
[ -n "$up" ] || t_fail "not ready in 10 s: $(tail -3 "$TG_TMP/alloc.log")"
grep -q '^tollgate_build_info{.*aarch64\|^tollgate_build_info{.*version=' <<<"$(acurl "$AURL/metrics")" ||
	t_fail "no tollgate_build_info on its page"
# a node's first report (as in test_allocator.sh): saturated at 1 Mbyte/s applied
report=$(jq -cn '{version: 1, node: "n1", seq: 1, budgets: [{namespace: "team-a", sentBytes: 1000000,
	intervalMs: 1000, saturated: true, applied: 1000000, limit: 125000000, state: "fallback",
	pods: 1, safeShare: 0, nodes: 0}]}')
code=$(acurl -o "$TG_TMP/answer" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Expect:' \
	--data-binary "$report" "$AURL/v1/report")
t_expect "report: HTTP status" "$code" 200
g=$(jq -r '[.grants[] | select(.namespace == "team-a") | .grant][0] // "none"' "$TG_TMP/answer" 2>/dev/null)
# while it learns, a node is granted what it applied (test_allocator.sh)
t_expect "team-a's grant" "$g" 1000000
# the report named no policy: the answer carries the one in force (bytes/s)
t_expect "the answer's policy" "$(jq -c '.policy | [(.id | test("^[0-9a-f]{16}$")), .namespaces]' "$TG_TMP/answer" 2>/dev/null)" \
	'[true,[{"namespace":"team-a","internetEgress":12500000}]]'
t_end

tap_done
