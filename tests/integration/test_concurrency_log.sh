#!/usr/bin/env bash
# logFile is capped: past logMaxBytes it is renamed to logFile.1 and a new
# one begun, so the plugin never holds more than two files of that size.
# Plugins rotating at once lose no line and tear none: N concurrent ADDs,
# whose lines fit in two files of the cap, leave exactly N whole lines
# across logFile and logFile.1, one per container, and neither file over
# the cap. A logMaxBytes below its floor is refused (code 7).
#
#   pods c1..cN (concurrent ADDs) -- node ($TG_ID-node, topology from lib.sh)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_concurrency_log.sh
# shellcheck disable=SC1091,SC2016
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
t_end

N=16
CAP=4096
LOG=$TG_TMP/capped.log
CONF=$(tg_conf '.logFile=$l | .logMaxBytes=($c | tonumber)' --arg l "$LOG" --arg c "$CAP")

t_begin "setup: $N pod namespaces"
for i in $(seq 1 $N); do pod_ns_add "c$i" || t_fail "netns c$i"; done
t_end

t_begin "$N concurrent ADDs with logMaxBytes $CAP: one rotation, no line lost or torn"
pids=()
for i in $(seq 1 $N); do
	cid=$(cid_for "c$i")
	(tg_exec CNI_COMMAND=ADD CNI_CONTAINERID="$cid" CNI_IFNAME=eth0 CNI_NETNS="$(netns_path "c$i")" \
		CNI_PATH="$TOLLGATE_BIN_DIR" CNI_ARGS="$(k8s_args research "c$i" "$cid")" \
		<<<"$CONF" >"$TG_TMP/add$i.out" 2>&1) &
	pids+=($!)
done
fails=0
for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
t_expect "failed ADDs" "$fails" 0
[ -f "$LOG.1" ] || t_fail "no $LOG.1: not rotated"
for f in "$LOG" "$LOG.1"; do
	[ -f "$f" ] || continue
	sz=$(stat -c %s "$f")
	[ "$sz" -le "$CAP" ] || t_fail "$(basename "$f") holds $sz bytes, over the cap $CAP"
done
lines=$(cat "$LOG.1" "$LOG" 2>/dev/null)
t_expect "lines across both files" "$(grep -c . <<<"$lines")" "$N"
t_expect "whole lines (a timestamp first, result last)" \
	"$(grep -cE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[^ ]+Z cmd=ADD .* result=ok$' <<<"$lines")" "$N"
for i in $(seq 1 $N); do
	grep -q "container=$(cid_for "c$i") " <<<"$lines" || t_fail "no line for c$i"
done
t_end

t_begin "DELs keep the cap: neither file over it"
for i in $(seq 1 $N); do pod_del "c$i" "$CONF" || t_fail "DEL c$i rc=$TG_RC"; done
for f in "$LOG" "$LOG.1"; do
	sz=$(stat -c %s "$f" 2>/dev/null || echo 0)
	[ "$sz" -le "$CAP" ] || t_fail "$(basename "$f") holds $sz bytes, over the cap $CAP"
done
for f in "$LOG".*; do [ "$f" = "$LOG.1" ] || t_fail "more than one old file: $f"; done
t_end

t_begin "logMaxBytes below its floor (4096) or of the wrong type is refused (code 7)"
for v in 4095 '"1M"'; do
	tg_run ADD "$(cid_for c1)" eth0 "$(netns_path c1)" "$(k8s_args research c1 "$(cid_for c1)")" \
		<<<"$(tg_conf ".logMaxBytes=$v")"
	r=$(cni_error_problem 7)
	[ -z "$r" ] || t_fail "logMaxBytes $v: $r"
	grep -q logMaxBytes <<<"$TG_OUT" || t_fail "the message names no key: $TG_OUT"
done
t_end

tap_done
