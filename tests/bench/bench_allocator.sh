#!/usr/bin/env bash
# tollgate-allocator at cluster size: N nodes, each reporting 3 budgeted
# namespaces (of 100 budgets) once a second, spread evenly over the second,
# on one kept-alive connection per node (tests/bench/alloc_load.c, libcurl's
# multi interface), against one allocator, for N = 1,000, 7,500 and 20,000.
# Per N: report latency (p50, p99, from the moment a report is due to its
# answer), the allocator's CPU (utime + stime of /proc/PID/stat over the
# measured seconds), its peak RSS (VmHWM) and its last round's time (its
# own metric); the targets at 7,500 nodes: p99 <= 50 ms, <= 1 core, peak
# RSS <= 200 MiB. Then the one-round time of 7,500 nodes x 100 budgets, when
# budget/'s own benchmark (BIN_DIR/bench_budget_round) is built.
#
# Usage: tests/bench/bench_allocator.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Everything runs in two fresh network namespaces named <run>-* (<run> =
# tga<hex>, unique to this run); the root namespace is never touched:
#   <run>-alloc   eth0 10.63.0.1/30; tollgate-allocator on 10.63.0.1:9618,
#                 its policy (--policy) budgets ns000..ns099 at 20G each,
#                 reportSeconds 1, leaseSeconds 2; 10.64.0.0/16 routed via
#                 10.63.0.2
#   <run>-gen     eth0 10.63.0.2/30; 10.64.0.0/16 local (a route of type local
#                 on lo): node i reports from 10.64.0.1 + i, an address of its
#                 own, as nodes have (and no source address runs out of ports)
# Both share the machine's CPUs as the scheduler likes (pinning each to one
# CPU left the generator, whose libcurl costs about as much per report as
# the allocator, short of CPU at 7,500 nodes). Each node needs a descriptor on both sides: past the open-file hard
# limit (which only CAP_SYS_RESOURCE raises) N is lowered to what fits, and
# the report says so. A warm-up (the connections made, the allocator past
# its learning lease) is not measured.
#
# Knobs (env):
#   BENCH_ALLOC_NODES="1000 7500 20000"  the sizes
#   BENCH_ALLOC_SECONDS=15               measured seconds per size
#   BENCH_ALLOC_WARMUP=4                 warm-up seconds per size
#   BENCH_STRICT=1          exit 1 (after the report) when a stated target is missed; 0: report only
#   BENCH_REPORT=FILE       also write the markdown report to FILE
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
ALLOC_BIN=$BIN_DIR/tollgate-allocator
LOAD_BIN=$BIN_DIR/alloc_load
ROUND_BIN=$BIN_DIR/bench_budget_round
SIZES=${BENCH_ALLOC_NODES:-1000 7500 20000}
SECS=${BENCH_ALLOC_SECONDS:-15}
WARMUP=${BENCH_ALLOC_WARMUP:-4}
TARGET_N=7500
PORT=9618

die() { printf 'bench_allocator: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_allocator: %s\n' "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $ALLOC_BIN ]] || die "$ALLOC_BIN not found (run make first)"
[[ -x $LOAD_BIN ]] || die "$LOAD_BIN not found (run make first)"
for t in ip jq curl python3; do command -v "$t" >/dev/null 2>&1 || die "'$t' missing (make deps)"; done
((SECS >= 3 && WARMUP >= 3)) || die "BENCH_ALLOC_SECONDS and BENCH_ALLOC_WARMUP are at least 3"
for n in $SIZES; do
    if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 10 || n > 60000)); then die "bad size '$n'"; fi
done

RUN=tga$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
ANS=$RUN-alloc GEN=$RUN-gen
WORK=$(mktemp -d /dev/shm/tollgate-bench-alloc.XXXXXX 2>/dev/null || mktemp -d /tmp/tollgate-bench-alloc.XXXXXX) || die "mktemp failed"
ALLOC_PID=""
CLEANED=0

cleanup() {
    ((CLEANED)) && return; CLEANED=1
    if [[ -n $ALLOC_PID ]]; then kill "$ALLOC_PID" 2>/dev/null; wait "$ALLOC_PID" 2>/dev/null; fi
    netns_del_run
    [[ $WORK == */tollgate-bench-alloc.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# ---------------------------------------------------------------- topology
log "run $RUN: the allocator's and the nodes' namespaces"
netns_batch add "$ANS" "$GEN"
ip -n "$ANS" link set lo up
ip -n "$GEN" link set lo up
ip -n "$ANS" link add eth0 type veth peer name eth0 netns "$GEN" || die "veth failed"
ip -n "$ANS" addr add 10.63.0.1/30 dev eth0
ip -n "$GEN" addr add 10.63.0.2/30 dev eth0
ip -n "$ANS" link set eth0 up
ip -n "$GEN" link set eth0 up
ip -n "$ANS" route add 10.64.0.0/16 via 10.63.0.2 || die "route to the nodes failed"
ip -n "$GEN" route add local 10.64.0.0/16 dev lo table local || die "the nodes' addresses failed"
# a reconnect burst of every node must not end in SYN cookies
ip netns exec "$ANS" sh -c 'echo 4096 > /proc/sys/net/core/somaxconn; echo 8192 > /proc/sys/net/ipv4/tcp_max_syn_backlog'

# the allocator's policy file
python3 -c '
import json
ns = {"ns%03d" % i: {"internetEgress": "20G"} for i in range(100)}
print(json.dumps({"version": 1, "reportSeconds": 1, "leaseSeconds": 2, "namespaces": ns}))' >"$WORK/policy.json" || die "policy"

CPUS=$(nproc)
HARD=$(ulimit -Hn)
# a node: one descriptor in the allocator, one in the generator (and 2 per 200 nodes there)
fit() {
    local n=$1
    [[ $HARD == unlimited ]] && { echo "$n"; return; }
    ((n + n / 100 + 300 <= HARD)) || n=$(((HARD - 300) * 100 / 101))
    echo "$n"
}

declare -A R=()
NOTES=() RAN=()
up() { ip netns exec "$ANS" curl -sf -o /dev/null --max-time 1 "http://10.63.0.1:$PORT/readyz"; }
for asked in $SIZES; do
    n=$(fit "$asked")
    ((n == asked)) || NOTES+=("$asked nodes asked, $n run: the open-file hard limit is $HARD (raising it needs CAP_SYS_RESOURCE)")
    log "$n nodes: $WARMUP s warm-up, $SECS s measured"
    # `ip netns exec` execs the allocator: $! is its PID
    ip netns exec "$ANS" "$ALLOC_BIN" --policy "$WORK/policy.json" --insecure-no-auth \
        --listen "10.63.0.1:$PORT" 2>"$WORK/alloc-$n.log" &
    ALLOC_PID=$!
    for _ in $(seq 50); do up && break; sleep 0.1; done
    up || die "the allocator did not start: $(tail -3 "$WORK/alloc-$n.log")"
    targets=()
    ((n != TARGET_N)) || targets=(--targets)
    ip netns exec "$GEN" "$LOAD_BIN" --url "http://10.63.0.1:$PORT" --nodes "$n" \
        --seconds "$SECS" --warmup "$WARMUP" --namespaces 100 --per-node 3 --src-base 10.64.0.1 \
        --pid "$ALLOC_PID" "${targets[@]}" >"$WORK/load-$n.out" 2>"$WORK/load-$n.err"
    rc=$?
    cat "$WORK/load-$n.out" >&2
    ip netns exec "$ANS" curl -sf --max-time 3 "http://10.63.0.1:$PORT/metrics" >"$WORK/metrics-$n" ||
        log "no /metrics after the $n-node run"
    kill -TERM "$ALLOC_PID"
    wait "$ALLOC_PID"
    arc=$?
    ALLOC_PID=""
    line=$(grep '^result ' "$WORK/load-$n.out")
    [[ -n $line ]] || die "alloc_load printed no result (exit $rc): $(tail -3 "$WORK/load-$n.err")"
    for kv in ${line#result }; do R[$n,${kv%%=*}]=${kv#*=}; done
    R[$n,round_ms]=$(awk '$1 == "tollgate_allocator_round_duration_seconds" { printf "%.3f", $2 * 1000 }' "$WORK/metrics-$n")
    R[$n,served]=$(awk '$1 == "tollgate_allocator_reports_total{result=\"ok\"}" { print $2 }' "$WORK/metrics-$n")
    R[$n,exit]=$arc
    R[$n,load_rc]=$rc
    RAN+=("$n")
done

ROUND_OUT=""
if [[ -x $ROUND_BIN ]]; then
    log "budget/'s one-round benchmark: $ROUND_BIN"
    ROUND_OUT=$("$ROUND_BIN" 2>&1) || ROUND_OUT="exit $?: $ROUND_OUT"
fi

# ---------------------------------------------------------------- report
f1() { awk -v a="$1" 'BEGIN { printf "%.1f", a }'; }
chk() { awk "BEGIN { print (($1) ? \"PASS\" : \"MISS\") }"; }
ELAPSED=$(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

report() {
    local n
    echo "## tollgate-allocator benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $CPUS CPUs, load avg $LOAD_START at start, $LOAD_END at end, ${ELAPSED}s)"
    echo
    echo "allocator: \`$ALLOC_BIN\`, the generator beside it on the same CPUs; 100 budgets; each node reports 3 of them once a second (spread over the second), one kept-alive connection and one source address per node; ${WARMUP} s warm-up, ${SECS} s measured per size."
    echo
    echo "| nodes | reports answered / due | errors | not sent | report p50 | report p99 | max | allocator CPU | peak RSS (VmHWM) | last round | generator CPU, lag |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for n in "${RAN[@]}"; do
        printf '| %s | %s / %s | %s | %s | %s ms | %s ms | %s ms | %s cores | %s MiB | %s ms | %s cores, %s ms |\n' \
            "$n" "${R[$n,reports]}" "${R[$n,expected]}" "${R[$n,errors]}" "${R[$n,skipped]}" \
            "${R[$n,p50_ms]}" "${R[$n,p99_ms]}" "${R[$n,max_ms]}" "${R[$n,cpu_cores]}" \
            "$(f1 "$(awk -v k="${R[$n,rss_kb]}" 'BEGIN { print k / 1024 }')")" "${R[$n,round_ms]:-?}" \
            "${R[$n,generator_cores]}" "${R[$n,max_lag_ms]}"
    done
    echo
    for n in "${NOTES[@]}"; do echo "- $n"; done
    for n in "${RAN[@]}"; do
        echo "- $n nodes: ${R[$n,policy_answers]:-?} answers carried the policy (a node names the policy it heard in its next reports: about one a node)"
    done
    echo "- a generator near a whole core or lagging by more than a few ms is the bottleneck of its row: its latencies are the generator's as much as the allocator's"
    echo
    if [[ -n $ROUND_OUT ]]; then
        echo "One allocation round, 7,500 nodes x 100 budgets (\`$ROUND_BIN\`):"
        echo
        echo '```'
        echo "$ROUND_OUT"
        echo '```'
    else
        echo "One allocation round, 7,500 nodes x 100 budgets: \`$ROUND_BIN\` is not built."
    fi
    echo
    n=$TARGET_N
    if [[ -n ${R[$n,p99_ms]:-} ]]; then
        echo "| target ($n nodes) | measured | status |"
        echo "|---|---|---|"
        echo "| every due report answered, no error | ${R[$n,reports]} / ${R[$n,expected]}, ${R[$n,errors]} errors | $(chk "${R[$n,reports]} == ${R[$n,expected]} && ${R[$n,errors]} == 0") |"
        echo "| report p99 <= 50 ms | ${R[$n,p99_ms]} ms | $(chk "${R[$n,p99_ms]} <= 50") |"
        echo "| allocator CPU <= 1 core | ${R[$n,cpu_cores]} cores | $(chk "${R[$n,cpu_cores]} >= 0 && ${R[$n,cpu_cores]} <= 1") |"
        echo "| allocator peak RSS <= 200 MiB | $(f1 "$(awk -v k="${R[$n,rss_kb]}" 'BEGIN { print k / 1024 }')") MiB | $(chk "${R[$n,rss_kb]} > 0 && ${R[$n,rss_kb]} <= 204800") |"
        echo "| the allocator exits 0 on SIGTERM | exit ${R[$n,exit]} | $(chk "${R[$n,exit]} == 0") |"
    fi
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
bench_verdict "$WORK/report.md"
