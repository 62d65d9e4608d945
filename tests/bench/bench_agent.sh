#!/usr/bin/env bash
# tollgate-agent benchmark: what the node daemon costs idle on a node with
# 250 pods in 100 namespaces (RSS, CPU per hour apart from scrapes), and what
# namespace retention saves after 5,000 namespaces came and went (series on
# /metrics and scrape time, retention on against off).
#
# Usage: tests/bench/bench_agent.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Everything runs in fresh network namespaces named <run>-* (<run> = tgx<hex>,
# unique to this run); the root namespace is never touched:
#   <run>-node    the node (eth0 via <run>-wan, lib.sh node_uplink); the agent
#                 on 127.0.0.1:9617; every client
#   <run>-p<i>    one netns per pod, i = 1..250; real ADDs of the real plugin
#                 (static pool), pod i in namespace ns-<i mod 100>
# Phases:
#   1. idle: the agent with its default intervals (declaration every 30 s,
#      collection every 60 s, sync every 300 s) for BENCH_AGENT_IDLE_S seconds,
#      no scrape: CPU (from /proc/PID/schedstat) scaled to an hour, VmRSS and
#      VmHWM at the end
#   2. 5,000 namespaces came and went: their counters (4 classes each, as their
#      pods left them) are in the table with no pod; the agent with
#      retainSeconds 30 days (off): series on /metrics and scrape time; then
#      with retainSeconds 0 (on): once every one is retired, the same
#
# Knobs (env):
#   BENCH_AGENT_PODS=250 BENCH_AGENT_NAMESPACES=100 BENCH_AGENT_GONE=5000
#   BENCH_AGENT_IDLE_S=120     the idle measurement
#   BENCH_AGENT_SCRAPES=20     timed scrapes per retention setting
#   BENCH_STRICT=1             exit 1 (after the report) when a stated target is missed
#   BENCH_REPORT=FILE          also write the markdown report to FILE
# shellcheck disable=SC2317,SC2016  # cleanup runs from the EXIT trap; bash -c scripts
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
AGENT=$BIN_DIR/tollgate-agent
PODS=${BENCH_AGENT_PODS:-250}
NSS=${BENCH_AGENT_NAMESPACES:-100}
GONE=${BENCH_AGENT_GONE:-5000}
IDLE_S=${BENCH_AGENT_IDLE_S:-120}
SCRAPES=${BENCH_AGENT_SCRAPES:-20}
PORT=9617
NETNAME=benchagent

die() { printf 'bench_agent: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_agent: %s\n' "$*" >&2; }

[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN && -x $AGENT ]] || die "binaries not found in $BIN_DIR (run make first)"
for t in ip nft jq curl; do command -v "$t" >/dev/null 2>&1 || die "'$t' missing (make deps)"; done
((PODS >= 1 && PODS <= 500 && NSS >= 1 && GONE >= 1 && IDLE_S >= 10 && SCRAPES >= 5)) || die "bad BENCH_AGENT_* knobs"

RUN=tgx$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
NODE=$RUN-node WAN=$RUN-wan
WORK=$(mktemp -d /dev/shm/tollgate-bench-agent.XXXXXX) || die "mktemp failed"
AGENT_PID=""
CLEANED=0
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    agent_stop
    netns_del_run
    [[ $WORK == */tollgate-bench-agent.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

N() { ip netns exec "$NODE" "$@"; }
get() { N curl -s --max-time 10 "http://127.0.0.1:$PORT$1"; }
metric() { get /metrics | awk -v m="$1" '$1 == m { print $2 }'; }

# conflist RETAIN_SECONDS
conflist() {
    jq -n --arg dd "$WORK/data" --arg lf "$WORK/tollgate.log" --arg name "$NETNAME" --argjson r "$1" '{
        cniVersion: "1.0.0", name: $name, plugins: [{
            type: "tollgate", mtu: 1500, uplink: "eth0", internalCIDRs: ["10.0.0.0/8"],
            masquerade: true, dataDir: $dd, logFile: $lf, accounting: {retainSeconds: $r},
            ipam: {source: "static", addresses: ["10.1.0.0/23"], cooldownSeconds: 0}}]}' >"$WORK/conflist"
}
agent_start() { # extra args
    # `ip netns exec` execs the agent: $! is the agent's own PID
    ip netns exec "$NODE" "$AGENT" --config "$WORK/conflist" --listen "127.0.0.1:$PORT" --log-level warn "$@" \
        2>>"$WORK/agent.log" &
    AGENT_PID=$!
    for _ in $(seq 200); do
        [[ $(get /readyz) == ready ]] && return 0
        kill -0 "$AGENT_PID" 2>/dev/null || die "agent exited: $(tail -3 "$WORK/agent.log")"
        sleep 0.05
    done
    die "agent not ready within 10 s: $(tail -3 "$WORK/agent.log")"
}
agent_stop() {
    [[ -n $AGENT_PID ]] || return 0
    kill "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
    AGENT_PID=""
}
# CPU time on the CPU so far, in ns (schedstat: finer than utime + stime's ticks)
cpu_ns() { awk '{ print $1 }' "/proc/$AGENT_PID/schedstat"; }
status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$AGENT_PID/status"; }
# scrape_stats -> "series median_ms p90_ms" over SCRAPES scrapes
scrape_stats() {
    local i t0 t1 series
    : >"$WORK/scrape.ms"
    for ((i = 0; i < SCRAPES; i++)); do
        t0=$EPOCHREALTIME
        get /metrics >"$WORK/page"
        t1=$EPOCHREALTIME
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }' >>"$WORK/scrape.ms"
    done
    series=$(grep -vc '^#' "$WORK/page")
    sort -n "$WORK/scrape.ms" | awk -v s="$series" '{ v[NR] = $1 } END { printf "%d %.2f %.2f\n", s, v[int((NR + 1) / 2)], v[int(NR * 0.9)] }'
}

# ---------------------------------------------------------------- node + pods
log "run $RUN: node and $PODS pod namespaces"
netns_batch add "$WAN" "$NODE"
node_uplink "$WAN" "$NODE" 0
N ip link set lo up
for ((i = 1; i <= PODS; i++)); do echo "netns add $RUN-p$i"; done | ip -batch - || die "pod netns"
conflist 2592000
jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$WORK/conflist" >"$WORK/conf"
log "ADD $PODS pods in $NSS namespaces"
N env -i PATH="$PATH" PODS="$PODS" NSS="$NSS" RUN="$RUN" BIN="$TG_BIN" CONF="$WORK/conf" bash -c '
    for ((i = 1; i <= PODS; i++)); do
        cid=$(printf "%064x" "$i")
        ns=$(printf "ns-%03d" $((i % NSS)))
        CNI_COMMAND=ADD CNI_CONTAINERID=$cid CNI_NETNS=/var/run/netns/$RUN-p$i CNI_IFNAME=eth0 CNI_PATH=/nonexistent \
            CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=$ns;K8S_POD_NAME=trainer-$i" \
            "$BIN" <"$CONF" >/dev/null 2>"/dev/shm/$RUN-add.err" || { cat "/dev/shm/$RUN-add.err" >&2; exit 1; }
    done; rm -f "/dev/shm/$RUN-add.err"' || die "ADD failed"

# ---------------------------------------------------------------- phase 1: idle
log "phase 1: the agent idle for $IDLE_S s (default intervals, no scrape)"
agent_start
c0=$(cpu_ns)
sleep "$IDLE_S"
c1=$(cpu_ns)
RSS=$(status_kb VmRSS) HWM=$(status_kb VmHWM)
DECLS=$(metric 'tollgate_agent_declarations_total{result="ok"}')
GCS=$(metric tollgate_agent_gc_runs_total)
CPU_S=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
CPU_H=$(awk -v c="$CPU_S" -v s="$IDLE_S" 'BEGIN { printf "%.2f", c * 3600 / s }')
agent_stop

# ---------------------------------------------------------------- phase 2: retention
log "phase 2: $GONE namespaces came and went (their counters left, no pod)"
for ((i = 1; i <= GONE; i++)); do
    for c in egress_internal egress_internet ingress_internal ingress_internet; do
        printf 'add counter inet tollgate ns_ci-%d_%s\n' "$i" "$c"
    done
done >"$WORK/gone.nft"
N nft -f "$WORK/gone.nft" || die "nft -f failed"
agent_start --page-cache-ms 0
read -r OFF_SERIES OFF_MED OFF_P90 < <(scrape_stats)
agent_stop
conflist 0
t0=$EPOCHREALTIME
agent_start --page-cache-ms 0 --gc-interval 1
for _ in $(seq 600); do
    n=$(metric tollgate_agent_namespaces_retired_total)
    [[ ${n:-0} -ge $GONE ]] && break
    sleep 0.1
done
RETIRE_S=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
RETIRED=$(metric tollgate_agent_namespaces_retired_total)
read -r ON_SERIES ON_MED ON_P90 < <(scrape_stats)
LEFT=$(N nft list counters table inet tollgate | grep -c 'counter ns_ci-')
agent_stop

# ---------------------------------------------------------------- report
pass() { awk "BEGIN { print (($1) ? \"PASS\" : \"MISS\") }"; }
REPORT=$WORK/report.md
{
    echo "## tollgate-agent benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg at start $LOAD_START)"
    echo
    echo "agent: \`$AGENT\`; $PODS pods (real ADDs) in $NSS namespaces; default intervals."
    echo
    echo "| idle, $IDLE_S s, no scrape | measured | target | status |"
    echo "|---|---|---|---|"
    echo "| VmRSS at the end (VmHWM) | $RSS kB ($HWM kB) | < 10 MB (10240 kB) | $(pass "$RSS < 10240") |"
    echo "| CPU time, scaled to an hour | $CPU_H s/h ($CPU_S s in $IDLE_S s; $DECLS declarations, $GCS collections) | < 1 s/h | $(pass "$CPU_H < 1") |"
    echo
    echo "| $GONE namespaces came and went | series on /metrics | scrape median | scrape p90 |"
    echo "|---|---|---|---|"
    echo "| retention off (retainSeconds 30 days) | $OFF_SERIES | $OFF_MED ms | $OFF_P90 ms |"
    echo "| retention on (retainSeconds 0): $RETIRED retired in $RETIRE_S s, $LEFT counters left | $ON_SERIES | $ON_MED ms | $ON_P90 ms |"
    echo
    echo "| target | measured | status |"
    echo "|---|---|---|"
    echo "| every gone namespace retired, its counters and series gone | $RETIRED retired, $LEFT left | $(pass "${RETIRED:-0} >= $GONE && $LEFT == 0") |"
    if grep -q 'level=error' "$WORK/agent.log"; then
        echo
        echo "The agent logged errors (first 5):"
        echo '```'
        grep 'level=error' "$WORK/agent.log" | head -5
        echo '```'
    fi
} >"$REPORT"
cat "$REPORT"
[[ -n ${BENCH_REPORT:-} ]] && cp "$REPORT" "$BENCH_REPORT"
bench_verdict "$REPORT"
