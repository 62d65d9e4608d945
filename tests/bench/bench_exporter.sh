#!/usr/bin/env bash
# /metrics benchmark (tollgate-agent --metrics-only): scrape latency and memory with 250 pods in 100
# namespaces (accounting.perPod on), against what exporters that shell out do
# per scrape on an equivalent ruleset: `iptables-save -c` (250 and 2,000
# rules) and `nft -j list counters` (250 counters, the Tollgate table itself,
# 10,000 counters).
#
# Usage: tests/bench/bench_exporter.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Everything runs in fresh network namespaces named <run>-* (<run> = tgx<hex>,
# unique to this run); the root namespace is never touched:
#   <run>-node    the node: eth0 10.240.0.4/24, default via <run>-wan
#                 (10.240.0.1; lib.sh node_uplink, no traffic goes there);
#                 lo up; the exporter on 127.0.0.1:9617; every client and
#                 every timed command
#   <run>-p<i>    one netns per pod, i = 1..250; real ADDs of the real plugin
#                 (static pool 10.1.0.0/23, perPod true), pod i in namespace
#                 ns-<i mod 100>: 100 x 4 namespace counters, 250 x 4 pod
#                 counters, 4 host counters = 1,404 counters in inet tollgate
# Four phases, each one steady ruleset in the node netns (in the order A, B, D, C):
#   A  + iptables mangle chain TGACCT with 250 counting rules as the
#      iptables-exporter design had them (per pod: -s IP/32 -d 10.0.0.0/8 and
#      ! -d 10.0.0.0/8, a comment naming namespace/pod); rounds of scrapes,
#      then /bin/true, `iptables-save -c`, `nft -j list counters table inet
#      tollgate` once each
#   B  the same chain with 2,000 rules; rounds of scrapes, then `iptables-save -c`
#   D  every pod shaped by `tollgate-ipam reshape` (internet egress caps on
#      tollgate-inet, an internet ingress cap on each host veth): rounds of
#      scrapes, the shaper collector's time read from every page
#   C  exporter stopped, iptables flushed; a table of 250 named counters, then
#      (alone) one of 10,000: `nft -j list counters table ...`
# Scrapes (tests/integration/exporter_tool.py mix): per round S GET /metrics on
# one keep-alive connection (as Prometheus scrapes) alternating with S on a
# new connection each, timed from the request to the last body byte; the
# exporter's own tollgate_scrape_duration_seconds and nftables collector time
# are read from every page. Commands are timed from spawn to exit (what an
# exporter that runs them pays per scrape); spawning /bin/true is the floor.
# Alternating rounds spread the load of a shared machine over both sides.
#
# Knobs (env):
#   BENCH_EXP_PODS=250 BENCH_EXP_NAMESPACES=100 BENCH_EXP_SCRAPES=200
#   BENCH_EXP_RUNS=25       rounds of phases A and B (scrapes + each command once)
#   BENCH_EXP_NFT_RUNS=10   rounds of phase C (nft with 250 and 10,000 counters: slow)
#   BENCH_STRICT=1          exit 1 (after the report) when a stated target is missed; 0: report only
#   BENCH_REPORT=FILE       also write the markdown report to FILE
# shellcheck disable=SC2317,SC2016  # cleanup runs from the EXIT trap; bash -c scripts
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
EXP_BIN=$BIN_DIR/tollgate-agent
TOOL=$ROOT/tests/integration/exporter_tool.py
PODS=${BENCH_EXP_PODS:-250}
NSS=${BENCH_EXP_NAMESPACES:-100}
SCRAPES=${BENCH_EXP_SCRAPES:-200}
RUNS=${BENCH_EXP_RUNS:-25}
NFT_RUNS=${BENCH_EXP_NFT_RUNS:-10}
PORT=9617
NETNAME=benchexp

die() { printf 'bench_exporter: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_exporter: %s\n' "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "plugin binary $TG_BIN not found (run make first)"
[[ -x $EXP_BIN ]] || die "exporter binary $EXP_BIN not found (run make first)"
for t in ip nft jq python3 iptables-save iptables-restore; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' missing (make deps)"
done
((PODS >= 1 && PODS <= 500 && NSS >= 1 && SCRAPES >= 10 && RUNS >= 5 && NFT_RUNS >= 3)) || die "bad BENCH_EXP_* knobs"
PY=$(python3 -c 'import sys; print(sys.executable)')

RUN=tgx$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
NODE=$RUN-node WAN=$RUN-wan
WORK=$(mktemp -d /dev/shm/tollgate-bench-exp.XXXXXX 2>/dev/null || mktemp -d /tmp/tollgate-bench-exp.XXXXXX) || die "mktemp failed"
EXP_PID=""
CLEANED=0

cleanup() {
    ((CLEANED)) && return; CLEANED=1
    if [[ -n $EXP_PID ]]; then kill "$EXP_PID" 2>/dev/null; wait "$EXP_PID" 2>/dev/null; fi
    netns_del_run
    [[ $WORK == */tollgate-bench-exp.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

N() { ip netns exec "$NODE" "$@"; }
tool() { N "$PY" "$TOOL" --port "$PORT" "$@"; }

# ---------------------------------------------------------------- node + pods
log "run $RUN: node and $PODS pod namespaces"
netns_batch add "$WAN" "$NODE"
node_uplink "$WAN" "$NODE" 0
for ((i = 1; i <= PODS; i++)); do echo "netns add $RUN-p$i"; done | ip -batch - || die "pod netns"

jq -n -c --arg dd "$WORK/data" --arg lf "$WORK/tollgate.log" --arg name "$NETNAME" '{
    cniVersion: "1.1.0", name: $name, type: "tollgate", mtu: 1500, uplink: "eth0",
    internalCIDRs: ["10.0.0.0/8"], masquerade: true, dataDir: $dd, logFile: $lf,
    accounting: {enabled: true, perPod: true},
    ipam: {source: "static", addresses: ["10.1.0.0/23"], cooldownSeconds: 0}}' >"$WORK/conf"

log "ADD $PODS pods in $NSS namespaces (real plugin, perPod)"
t0=$EPOCHREALTIME
# one shell in the node netns runs every ADD (no netns-exec per pod)
N env -i PATH="$PATH" PODS="$PODS" NSS="$NSS" RUN="$RUN" BIN="$TG_BIN" CONF="$WORK/conf" OUT="$WORK/add" bash -c '
    mkdir -p "$OUT"
    for ((i = 1; i <= PODS; i++)); do
        cid=$(printf "%064x" "$i")
        ns=$(printf "ns-%03d" $((i % NSS)))
        CNI_COMMAND=ADD CNI_CONTAINERID=$cid CNI_NETNS=/var/run/netns/$RUN-p$i CNI_IFNAME=eth0 CNI_PATH=/nonexistent \
            CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=$ns;K8S_POD_NAME=trainer-$i;K8S_POD_INFRA_CONTAINER_ID=$cid" \
            "$BIN" <"$CONF" >"$OUT/$i" 2>&1 || { echo "ADD $i failed: $(head -c 300 "$OUT/$i")" >&2; exit 1; }
    done' || die "ADD failed"
t1=$EPOCHREALTIME
ADD_S=$(awk -v a="${t0}" -v b="${t1}" 'BEGIN { printf "%.1f", b - a }')
N_COUNTERS=$(N nft -j list counters table inet tollgate | jq '[.nftables[] | select(.counter)] | length')
N_ELEMS=$(N nft -j list set inet tollgate pods | jq '[.nftables[] | select(.set) | .set.elem // [] | .[]] | length')
log "ADDs took ${ADD_S}s; table: $N_COUNTERS counters, $N_ELEMS pods in @pods"
[[ $N_COUNTERS == $((NSS * 4 + PODS * 4 + 4)) ]] || log "note: expected $((NSS * 4 + PODS * 4 + 4)) counters"

# ---------------------------------------------------------------- exporter
# The page cache is off: every timed scrape is a collection, as the
# shelled-out commands it is compared with are.
ip netns exec "$NODE" "$EXP_BIN" --metrics-only --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --network "$NETNAME" \
    --page-cache-ms 0 --log-level warn >"$WORK/exporter.out" 2>"$WORK/exporter.log" &
EXP_PID=$!
for ((i = 0; i < 100; i++)); do
    [[ $(N curl -s --max-time 1 "http://127.0.0.1:$PORT/healthz" 2>/dev/null) == ok ]] && break
    kill -0 "$EXP_PID" 2>/dev/null || die "exporter exited: $(tail -n 3 "$WORK/exporter.log")"
    sleep 0.05
done
((i < 100)) || die "exporter did not answer /healthz"

N curl -s -o "$WORK/page.prom" "http://127.0.0.1:$PORT/metrics" || die "first scrape failed"
PAGE_BYTES=$(wc -c <"$WORK/page.prom")
N_NS_SERIES=$(grep -c '^tollgate_namespace_bytes_total{' "$WORK/page.prom")
N_POD_SERIES=$(grep -c '^tollgate_pod_bytes_total{' "$WORK/page.prom")
N_SERIES=$(grep -vc '^#' "$WORK/page.prom")
PROMTOOL="not run (promtool missing)"
if command -v promtool >/dev/null 2>&1; then
    if out=$(promtool check metrics <"$WORK/page.prom" 2>&1) && [[ -z $out ]]; then PROMTOOL="accepted"; else PROMTOOL="REJECTED: ${out:0:200}"; fi
fi
log "page: $PAGE_BYTES bytes, $N_SERIES samples ($N_NS_SERIES namespace, $N_POD_SERIES pod bytes series); promtool $PROMTOOL"

# ---------------------------------------------------------------- measure
# per-pod counting rules as the iptables-exporter design had them
ipt_rules() { # COUNT -> iptables-restore input
    local n=$1 i ip ns
    echo "*mangle"
    echo ":TGACCT - [0:0]"
    echo "-A FORWARD -j TGACCT"
    for ((i = 0; i < n; i++)); do
        ip="10.1.$((i / 2 / 250)).$((i / 2 % 250 + 1))"
        ns=$(printf "ns-%03d" $((i / 2 % NSS)))
        if ((i % 2 == 0)); then
            echo "-A TGACCT -s $ip/32 -d 10.0.0.0/8 -m comment --comment \"$ns/trainer-$i internal\" -j RETURN"
        else
            echo "-A TGACCT -s $ip/32 ! -d 10.0.0.0/8 -m comment --comment \"$ns/trainer-$i internet\" -j RETURN"
        fi
    done
    echo "COMMIT"
}
ipt_load() { # COUNT
    ipt_rules "$1" | N iptables-restore || die "iptables-restore of $1 rules failed"
    local got
    got=$(N iptables-save -c -t mangle | grep -c '^\[[0-9]*:[0-9]*\] -A TGACCT')
    [[ $got == "$1" ]] || die "iptables-save shows $got rules, expected $1"
}
nft_counters() { # TABLE COUNT -> nft -f input
    local i
    echo "table inet $1 {"
    for ((i = 0; i < $2; i++)); do echo "  counter c$i { packets $((i * 3)) bytes $((i * 1500)) }"; done
    echo "}"
}
IPT_VER=$(iptables-save --version 2>/dev/null | head -n1)
# Scrapes and commands alternate round by round, so that the load of this
# (shared) machine hits both alike. Each phase measures one steady ruleset.
PER_ROUND=$(( (SCRAPES + 2 * RUNS - 1) / (2 * RUNS) ))
log "phase A: $RUNS rounds of $PER_ROUND+$PER_ROUND scrapes, /bin/true, iptables-save -c (250 rules), nft -j list counters table inet tollgate"
ipt_load 250
tool mix --rounds "$RUNS" --scrapes "$PER_ROUND" --cmd "true=/bin/true" --cmd "ipt250=iptables-save -c" \
    --cmd "nfttg=nft -j list counters table inet tollgate" >"$WORK/A.json" || die "phase A failed"
log "phase B: $RUNS rounds of $PER_ROUND+$PER_ROUND scrapes, iptables-save -c (2,000 rules)"
ipt_load 2000
tool mix --rounds "$RUNS" --scrapes "$PER_ROUND" --cmd "ipt2000=iptables-save -c" >"$WORK/B.json" || die "phase B failed"
HWM_KB=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$EXP_PID/status")
RSS_KB=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$EXP_PID/status")
# phase D: the same pods, every one shaped (internet egress caps on
# tollgate-inet, an internet ingress cap on each host veth), applied to the
# running pods by tollgate-ipam reshape: the shaper collector reads
# tollgate-inet once and each pod's veth once
log "phase D: every pod shaped (tollgate-ipam reshape); $RUNS rounds of $PER_ROUND+$PER_ROUND scrapes"
jq -c '{cniVersion, name, plugins: [. + {shaping: {internetEgress: {node: "10G", namespaceDefault: "2G", podDefault: "1G"},
        internetIngress: {podDefault: "500M"}}}]}' "$WORK/conf" >"$WORK/shaped.conflist"
N "$BIN_DIR/tollgate-ipam" --config "$WORK/shaped.conflist" reshape >"$WORK/reshape.out" 2>&1 ||
    die "reshape failed: $(tail -n 3 "$WORK/reshape.out")"
N curl -s -o "$WORK/shaped.prom" "http://127.0.0.1:$PORT/metrics" || die "scrape of the shaped node failed"
SHAPED_BYTES=$(wc -c <"$WORK/shaped.prom")
SHAPED_SERIES=$(grep -c '^tollgate_shaper_' "$WORK/shaped.prom")
SHAPED_DEVS=$(( $(N tc qdisc show | grep -c '^qdisc htb 1: dev tg') + 1 ))
tool mix --rounds "$RUNS" --scrapes "$PER_ROUND" >"$WORK/D.json" || die "phase D failed"
HWM_D_KB=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$EXP_PID/status")
kill "$EXP_PID" 2>/dev/null
wait "$EXP_PID" 2>/dev/null
EXP_RC=$?
EXP_PID=""
N iptables -t mangle -F >/dev/null 2>&1
N iptables -t mangle -X >/dev/null 2>&1
# phase C without the exporter (10,000 more objects would slow its dump), and
# one bench table at a time (nft reads every table of the netns into its cache)
log "phase C: nft -j list counters with 250, then 10,000 counters"
nft_counters tgbench250 250 | N nft -f - || die "nft -f 250 counters failed"
tool mix --rounds "$NFT_RUNS" --scrapes 0 --cmd "true2=/bin/true" \
    --cmd "nft250=nft -j list counters table inet tgbench250" >"$WORK/C1.json" || die "phase C failed"
N nft delete table inet tgbench250
nft_counters tgbench10k 10000 | N nft -f - || die "nft -f 10000 counters failed"
tool mix --rounds "$NFT_RUNS" --scrapes 0 --cmd "nft10k=nft -j list counters table inet tgbench10k" \
    >"$WORK/C2.json" || die "phase C failed"
N nft delete table inet tgbench10k

# ---------------------------------------------------------------- report
f2() { awk -v a="$1" 'BEGIN { printf "%.2f", a }'; }
f3() { awk -v a="$1" 'BEGIN { printf "%.3f", a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "n/a" }'; }
chk() { awk "BEGIN { print (($1) ? \"PASS\" : \"MISS\") }"; }
# sample series of both phases: stats NAME FIELD(median_ms|p99_ms|max_ms|n)
jq -s '{keepalive: (.[0].keepalive.samples + .[1].keepalive.samples),
        newconn: (.[0].newconn.samples + .[1].newconn.samples),
        server: (.[0].server.samples + .[1].server.samples),
        server_nftables: (.[0].server_nftables.samples + .[1].server_nftables.samples),
        true: (.[0].true.samples + .[2].true2.samples),
        ipt250: .[0].ipt250.samples, nfttg: .[0].nfttg.samples, ipt2000: .[1].ipt2000.samples,
        nft250: .[2].nft250.samples, nft10k: .[3].nft10k.samples,
        shaped_keepalive: .[4].keepalive.samples, shaped_server: .[4].server.samples,
        shaped_nftables: .[4].server_nftables.samples, shaped_shaper: .[4].server_shaper.samples}
       | map_values(sort)' "$WORK/A.json" "$WORK/B.json" "$WORK/C1.json" "$WORK/C2.json" "$WORK/D.json" >"$WORK/all.json"
declare -A BYTES=(
    [ipt250]=$(jq .ipt250.bytes "$WORK/A.json") [nfttg]=$(jq .nfttg.bytes "$WORK/A.json")
    [ipt2000]=$(jq .ipt2000.bytes "$WORK/B.json") [nft250]=$(jq .nft250.bytes "$WORK/C1.json")
    [nft10k]=$(jq .nft10k.bytes "$WORK/C2.json") [true]=0)
st() { # NAME median|p99|max|n  (ms)
    jq -r --arg k "$1" --arg f "$2" '.[$k] as $v | ($v | length) as $n |
        if $f == "n" then $n
        elif $f == "median" then (if $n % 2 == 1 then $v[($n - 1) / 2] else ($v[$n / 2 - 1] + $v[$n / 2]) / 2 end) * 1000
        elif $f == "p99" then $v[([0, ((0.99 * $n) | ceil) - 1] | max)] * 1000
        else $v[$n - 1] * 1000 end' "$WORK/all.json"
}
KA_MED=$(st keepalive median) NC_MED=$(st newconn median)
IPT250=$(st ipt250 median) IPT2000=$(st ipt2000 median)
ELAPSED=$(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
HWM_MB=$(awk -v k="$HWM_KB" 'BEGIN { printf "%.1f", k / 1024 }')
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

srow() { printf '| %s, n=%s | %s ms | %s ms | %s ms |\n' "$2" "$(st "$1" n)" "$(f3 "$(st "$1" median)")" "$(f3 "$(st "$1" p99)")" "$(f3 "$(st "$1" max)")"; }
crow() { # NAME label
    local med
    med=$(st "$1" median)
    printf '| %s | %s ms | %s ms | %s B | %s | %s |\n' "$2" "$(f2 "$med")" "$(f2 "$(st "$1" p99)")" \
        "${BYTES[$1]}" "$(ratio "$med" "$KA_MED")" "$(ratio "$med" "$NC_MED")"
}

report() {
    echo "## /metrics benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg $LOAD_START at start, $LOAD_END at end, ${ELAPSED}s)"
    echo
    echo "exporter: \`$EXP_BIN\`; $PODS pods (real ADDs, ${ADD_S}s) in $NSS namespaces, accounting.perPod true:"
    echo "table inet tollgate holds $N_COUNTERS named counters; /metrics is $PAGE_BYTES bytes, $N_SERIES samples ($N_NS_SERIES namespace and $N_POD_SERIES pod series per kind); promtool: $PROMTOOL."
    echo "Client and commands in the node netns (127.0.0.1). $RUNS rounds per phase, each: $PER_ROUND keep-alive and $PER_ROUND new-connection scrapes alternating, then each command once (spawn to exit); a warm-up round is not counted."
    echo
    echo "| tollgate-agent /metrics | median | p99 | max |"
    echo "|---|---|---|---|"
    srow keepalive "GET /metrics on a keep-alive connection (as Prometheus), request to last byte"
    srow newconn "GET /metrics on a new connection each (as curl)"
    srow server "tollgate_scrape_duration_seconds (server: collect + render)"
    srow server_nftables "tollgate_collector_duration_seconds{collector=\"nftables\"} (one netlink dump)"
    echo "| peak RSS (VmHWM) after all scrapes | $HWM_MB MB ($HWM_KB kB; VmRSS $RSS_KB kB) | | |"
    echo
    echo "Every pod shaped (phase D: $SHAPED_DEVS devices with Tollgate's HTB classes, $SHAPED_SERIES tollgate_shaper_* samples, page $SHAPED_BYTES bytes):"
    echo
    echo "| tollgate-agent /metrics, every pod shaped | median | p99 | max |"
    echo "|---|---|---|---|"
    srow shaped_keepalive "GET /metrics on a keep-alive connection"
    srow shaped_server "tollgate_scrape_duration_seconds"
    srow shaped_nftables "tollgate_collector_duration_seconds{collector=\"nftables\"}"
    srow shaped_shaper "tollgate_collector_duration_seconds{collector=\"shaper\"} (one class dump per device)"
    echo "| peak RSS (VmHWM) after phase D | $(awk -v k="$HWM_D_KB" 'BEGIN { printf "%.1f", k / 1024 }') MB | | |"
    echo
    echo "| per-scrape work of a shell-out exporter (node netns) | median | p99 | output | vs keep-alive scrape | vs new-connection scrape |"
    echo "|---|---|---|---|---|---|"
    crow ipt250 "\`iptables-save -c\`, 250 rules ($IPT_VER)"
    crow ipt2000 "\`iptables-save -c\`, 2,000 rules"
    crow nft250 "\`nft -j list counters\`, 250 counters"
    crow nfttg "\`nft -j list counters table inet tollgate\` (this ruleset: $N_COUNTERS counters)"
    crow nft10k "\`nft -j list counters\`, 10,000 counters"
    crow true "floor: spawn and reap \`/bin/true\`"
    echo
    echo "| target | measured | status |"
    echo "|---|---|---|"
    echo "| median scrape <= 2 ms (keep-alive) | $(f3 "$KA_MED") ms | $(chk "$KA_MED <= 2") |"
    echo "| median scrape <= 2 ms (new connection) | $(f3 "$NC_MED") ms | $(chk "$NC_MED <= 2") |"
    echo "| >= 10x faster than \`iptables-save -c\`, 250 rules (keep-alive, as Prometheus scrapes) | $(ratio "$IPT250" "$KA_MED") (new connection: $(ratio "$IPT250" "$NC_MED")) | $(chk "$IPT250 >= 10 * $KA_MED") |"
    echo "| >= 10x faster than \`iptables-save -c\`, 2,000 rules (keep-alive) | $(ratio "$IPT2000" "$KA_MED") (new connection: $(ratio "$IPT2000" "$NC_MED")) | $(chk "$IPT2000 >= 10 * $KA_MED") |"
    echo "| peak RSS <= 10 MB | $HWM_MB MB | $(chk "$HWM_KB <= 10240") |"
    echo "| exporter exits 0 on SIGTERM | exit $EXP_RC | $(chk "$EXP_RC == 0") |"
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
bench_verdict "$WORK/report.md"
