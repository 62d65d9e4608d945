#!/usr/bin/env bash
# The node-wide declaration while other nftables commits land in the same
# netns (every ADD and DEL commits one): a commit during one of its table
# dumps interrupts the dump (NLM_F_DUMP_INTR, EINTR), and the declaration
# must read again instead of failing. Found by the chaos suite (the agent's
# "declaration failed: nftables: reading table inet tollgate failed:
# Interrupted system call" under ADD/DEL churn); here two writers commit to a
# table of their own in the node (~100 commits/s) while `tollgate-agent
# --once` declares again and again: no declaration may fail.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_declare_commits.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
DUR=${TG_DECLARE_SECONDS:-12}
[ -x "$AGENT" ] || { echo "not ok - preconditions: $AGENT not found (run make)"; exit 1; }

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
CONF=$(tg_conf '.accounting = {enabled: true, perPod: true}')
jq '{cniVersion: "1.0.0", name: .name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$TG_TMP/c.conflist"
declare_once() {
	ip netns exec "$TG_NODE" "$AGENT" --once --config "$TG_TMP/c.conflist" --listen 127.0.0.1:19999 \
		2>>"$TG_TMP/agent.log" >/dev/null
}
declare_once || tap_bail "the first declaration failed: $(tail -n 3 "$TG_TMP/agent.log")"
if ! { ip netns exec "$TG_NODE" nft add table inet tgnoise &&
	ip netns exec "$TG_NODE" nft add set inet tgnoise s '{ type ipv4_addr; }'; }; then
	tap_bail "cannot make table tgnoise"
fi
: >"$TG_TMP/agent.log"
t_end

t_begin "declarations while other commits land: none fails"
END=$((SECONDS + DUR))
for w in 1 2; do
	(
		c=0
		while [ "$SECONDS" -lt "$END" ]; do
			ip netns exec "$TG_NODE" nft add element inet tgnoise s "{ 192.0.2.$w }"
			ip netns exec "$TG_NODE" nft delete element inet tgnoise s "{ 192.0.2.$w }"
			c=$((c + 2))
		done
		echo "$c" >"$TG_TMP/commits.$w"
	) &
	TG_PIDS+=($!)
done
n=0 crashed=0 last_rc=0
while [ "$SECONDS" -lt "$END" ]; do
	declare_once || { last_rc=$?; crashed=$((crashed + 1)); }
	n=$((n + 1))
done
for p in "${TG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
TG_PIDS=()
commits=$(($(cat "$TG_TMP/commits.1" 2>/dev/null || echo 0) + $(cat "$TG_TMP/commits.2" 2>/dev/null || echo 0)))
errors=$(grep -c 'level=error' "$TG_TMP/agent.log")
diag "$n declarations beside $commits commits: $errors failed, $crashed exited non-zero"
[ "$commits" -gt 100 ] || t_fail "only $commits commits: the declarations were not disturbed"
[ "$errors" = 0 ] || t_fail "$errors declarations failed: $(grep 'level=error' "$TG_TMP/agent.log" | head -n 2)"
# An agent that dies (a crash, an abort) may log nothing at level=error
[ "$crashed" = 0 ] || t_fail "$crashed of $n declarations exited non-zero (last status $last_rc): $(tail -n 2 "$TG_TMP/agent.log")"
t_end

tap_done
