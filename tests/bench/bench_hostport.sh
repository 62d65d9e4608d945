#!/usr/bin/env bash
# hostPort benchmark: what a pod's hostPort costs, Tollgate's own mapping
# against the strongest honest anchor, Debian's reference portmap (1.1.1,
# iptables) chained after Tollgate without the capability, in one run on one
# node, with the kernel's floor (no DNAT at all: the client connects to the
# pod's own address) from the same run.
#
#   - ADD and DEL of a pod with one hostPort: Tollgate's ADD alone, against
#     Tollgate's ADD followed by portmap's (and portmap's DEL, then Tollgate's),
#     the two kinds of pod taking turns;
#   - new TCP connections per second from outside the node to the hostPort
#     of the last of PODS pods of each kind, all mapped at once (Tollgate's
#     on ports 20000+i, portmap's on 30000+i: portmap's rules for its last
#     pod come last of PODS, Tollgate's are one hash lookup), against the
#     same client connecting to the pods' own addresses (the floor); rounds
#     of floor, Tollgate, portmap. Each connection is a new conntrack entry,
#     so each passes the DNAT chains.
#
# Usage: tests/bench/bench_hostport.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Everything runs in fresh network namespaces named <run>-* (<run> = tgh<hex>):
#   <run>-wan     the client (10.240.0.1), routes the pods' range to the node
#   <run>-node    the node (eth0 10.240.0.4, lib.sh node_uplink)
#   <run>-p<i>    one netns per pod: i = 1..PODS Tollgate's, PODS+1..2*PODS portmap's
#
# Knobs (env):
#   BENCH_HOSTPORT_PODS=100    pods, each with its own hostPort
#   BENCH_HOSTPORT_SECONDS=4   each connection-rate measurement
#   BENCH_HOSTPORT_ROUNDS=5    rounds of each phase's rates, the median kept
#   BENCH_STRICT=1             exit 1 (after the report) when a stated target is missed
#   BENCH_REPORT=FILE          also write the markdown report to FILE
# shellcheck disable=SC2317,SC2016  # cleanup runs from the EXIT trap; jq filters
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
PODS=${BENCH_HOSTPORT_PODS:-100}
SECS=${BENCH_HOSTPORT_SECONDS:-4}
ROUNDS=${BENCH_HOSTPORT_ROUNDS:-5}
PORTMAP=/usr/lib/cni/portmap
PY=$(command -v python3)
NETNAME=benchhp
NATIVE_PORT=20000 PORTMAP_PORT=30000

die() { printf 'bench_hostport: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_hostport: %s\n' "$*" >&2; }

[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "$TG_BIN not found (run make first)"
[[ -x $PORTMAP ]] || die "$PORTMAP missing (containernetworking-plugins, make deps)"
for t in ip nft jq iptables python3; do command -v "$t" >/dev/null 2>&1 || die "'$t' missing (make deps)"; done
((PODS >= 2 && PODS <= 200 && SECS >= 1 && ROUNDS >= 1)) || die "bad BENCH_HOSTPORT_* knobs"

RUN=tgh$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
NODE=$RUN-node WAN=$RUN-wan NODE_IP=10.240.0.4
WORK=$(mktemp -d /dev/shm/tollgate-bench-hostport.XXXXXX) || die "mktemp failed"
SERVER_PIDS=()
CLEANED=0
cleanup() {
    local p
    ((CLEANED)) && return; CLEANED=1
    for p in "${SERVER_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    netns_del_run
    [[ $WORK == */tollgate-bench-hostport.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

N() { ip netns exec "$NODE" "$@"; }
cid() { printf '%064x' "$1"; }
# conf CAPABILITY(true|false): Tollgate's entry, with the portMappings capability or without
conf() {
    jq -nc --arg dd "$WORK/data" --arg lf "$WORK/tollgate.log" --arg name "$NETNAME" --argjson cap "$1" '{
        cniVersion: "1.0.0", name: $name, type: "tollgate", mtu: 1500, uplink: "eth0",
        internalCIDRs: ["10.0.0.0/8"], masquerade: true, dataDir: $dd, logFile: $lf,
        ipam: {source: "static", addresses: ["10.1.0.0/23"], cooldownSeconds: 0}}
        | if $cap then .capabilities = {portMappings: true} else . end'
}
# ports I: pod I's mapping (Tollgate's pods on 20000+I, portmap's on 30000+I-PODS)
hostport() { (($1 <= PODS)) && echo $((NATIVE_PORT + $1)) || echo $((PORTMAP_PORT + $1 - PODS)); }
ports() { jq -nc --argjson p "$(hostport "$1")" '{portMappings: [{hostPort: $p, containerPort: 80, protocol: "tcp"}]}'; }
# plugin BIN CMD I CONF: one plugin run for pod I; ms on stdout, its result in $WORK/out
plugin() {
    local t0=$EPOCHREALTIME
    N env -i PATH="$PATH" CNI_COMMAND="$2" CNI_CONTAINERID="$(cid "$3")" CNI_NETNS="/var/run/netns/$RUN-p$3" \
        CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=p$3" \
        "$1" <<<"$4" >"$WORK/out" 2>"$WORK/err" || die "$1 $2 of p$3: $(cat "$WORK/out" "$WORK/err")"
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
p90() { sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.9); if (i < 1) i = 1; print v[i] }'; }

# add_native I / add_portmap I: one pod's ADD with its hostPort, the ms it took
add_native() { plugin "$TG_BIN" ADD "$1" "$(conf true | jq -c --argjson rt "$(ports "$1")" '. + {runtimeConfig: $rt}')"; }
add_portmap() {
    local c p
    c=$(plugin "$TG_BIN" ADD "$1" "$(conf false)") || return 1
    cp "$WORK/out" "$WORK/prev.$1"
    p=$(plugin "$PORTMAP" ADD "$1" "$(pm_conf "$1")") || return 1
    awk -v a="$c" -v b="$p" 'BEGIN { printf "%.3f\n", a + b }'
}
del_native() { plugin "$TG_BIN" DEL "$1" "$(conf true | jq -c --argjson rt "$(ports "$1")" '. + {runtimeConfig: $rt}')"; }
del_portmap() {
    local c t
    c=$(plugin "$PORTMAP" DEL "$1" "$(pm_conf "$1")") || return 1
    t=$(plugin "$TG_BIN" DEL "$1" "$(conf false)") || return 1
    awk -v a="$c" -v b="$t" 'BEGIN { printf "%.3f\n", a + b }'
}
pm_conf() {
    jq -c --arg name "$NETNAME" --argjson rt "$(ports "$1")" --slurpfile prev "$WORK/prev.$1" \
        '{cniVersion: "1.0.0", name: $name, type: "portmap", capabilities: {portMappings: true}, snat: true,
          prevResult: $prev[0], runtimeConfig: $rt}' <<<'{}'
}
pod_ip() { jq -r --arg c "$(cid "$1")" '.attachments[] | select(.containerId == $c) | .ip' "$WORK/data/$NETNAME/state.json"; }

# serve I: pod I's server, accepting and closing as fast as python does it
serve() {
    local ip
    ip=$(pod_ip "$1")
    ip netns exec "$RUN-p$1" "$PY" -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 80))
s.listen(4096)
while True:
    c, _ = s.accept()
    c.close()' "$ip" >>"$WORK/server.log" 2>&1 &
    SERVER_PIDS+=($!)
    for _ in $(seq 100); do
        ip netns exec "$WAN" "$PY" -c 'import socket, sys; socket.create_connection((sys.argv[1], 80), 0.2)' "$ip" \
            2>/dev/null && return 0
        sleep 0.05
    done
    die "pod $1's server did not start: $(cat "$WORK/server.log")"
}
# rate ADDR PORT: new connections a second from the client for SECS s (closed with a reset: no TIME_WAIT)
rate() {
    ip netns exec "$WAN" "$PY" -c '
import socket, struct, sys, time
addr, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
linger = struct.pack("ii", 1, 0)
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
    s.settimeout(1)
    s.connect((addr, port))
    s.close()
    n += 1
print("%.0f" % (n / (time.monotonic() - t0)))' "$1" "$2" "$SECS" || die "connections to $1:$2 failed"
}

# ---------------------------------------------------------------- node + pods
log "run $RUN: node, client and $((2 * PODS)) pod namespaces"
netns_batch add "$WAN" "$NODE"
node_uplink "$WAN" "$NODE" 0 10.1.0.0/23
for ((i = 1; i <= 2 * PODS; i++)); do echo "netns add $RUN-p$i"; done | ip -batch - || die "pod netns"

# rates MODE PORT_POD: ROUNDS rounds of (floor, MODE's hostPort of pod PORT_POD[, Tollgate's]) into $WORK/*.rate
rates() {
    local r
    for ((r = 0; r < ROUNDS; r++)); do
        rate "$(pod_ip "$PODS")" 80 >>"$WORK/floor-$1.rate" || die "rate"
        rate "$NODE_IP" "$(hostport "$2")" >>"$WORK/$1.rate" || die "rate"
        [[ $1 == native ]] || rate "$NODE_IP" "$(hostport "$PODS")" >>"$WORK/native-beside.rate" || die "rate"
    done
}
log "$PODS pods with Tollgate's hostPorts"
: >"$WORK/native.add"; : >"$WORK/portmap.add"
for ((i = 1; i <= PODS; i++)); do add_native "$i" >>"$WORK/native.add" || die "ADD failed"; done
[[ $(N nft -j list map inet tollgate hostport | jq '[.nftables[] | .map // empty][0].elem | length') == "$PODS" ]] ||
    die "the hostport map does not hold $PODS mappings"
serve "$PODS"
log "new connections, Tollgate's alone: $ROUNDS rounds of floor, Tollgate ($SECS s each)"
rates native "$PODS"
# portmap's rules, once there, are walked by every new connection to the node: measured beside them
log "$PODS more pods, through portmap"
for ((i = 1; i <= PODS; i++)); do add_portmap "$((PODS + i))" >>"$WORK/portmap.add" || die "ADD failed"; done
N iptables-save -t nat | grep -q -- "--to-destination $(pod_ip "$((2 * PODS))"):80" || die "portmap's DNAT of its last pod is missing"
serve "$((2 * PODS))"
log "new connections beside portmap's rules: $ROUNDS rounds of floor, portmap, Tollgate ($SECS s each)"
rates portmap "$((2 * PODS))"
declare -A RATE=()
for k in native floor-native portmap floor-portmap native-beside; do RATE[$k]=$(median <"$WORK/$k.rate"); done
log "DEL in turn"
: >"$WORK/native.del"; : >"$WORK/portmap.del"
for ((i = 1; i <= PODS; i++)); do
    del_native "$i" >>"$WORK/native.del" || die "DEL failed"
    del_portmap "$((PODS + i))" >>"$WORK/portmap.del" || die "DEL failed"
done
left=$(N nft -j list map inet tollgate hostport | jq '[.nftables[] | .map // empty][0].elem // [] | length')
[[ $left == 0 ]] || die "$left mappings left after DEL"

# ---------------------------------------------------------------- report
A_N=$(median <"$WORK/native.add") A_N90=$(p90 <"$WORK/native.add")
A_P=$(median <"$WORK/portmap.add") A_P90=$(p90 <"$WORK/portmap.add")
D_N=$(median <"$WORK/native.del") D_P=$(median <"$WORK/portmap.del")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
pass() { awk "BEGIN { exit !($1) }" && echo PASS || echo MISS; }
R_N=$(ratio "${RATE[native]}" "${RATE[floor-native]}")
R_P=$(ratio "${RATE[portmap]}" "${RATE[floor-portmap]}")
R_B=$(ratio "${RATE[native-beside]}" "${RATE[floor-portmap]}")
REPORT=$WORK/report.md
{
    echo "## hostPort benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg at start $LOAD_START)"
    echo
    echo "$PODS pods, one hostPort each (real ADDs); Tollgate \`$TG_BIN\`, portmap \`$PORTMAP\` (containernetworking-plugins $(
        dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null), $(iptables --version))."
    echo "New connections: one python client, closed with a reset, to the hostPort of the last of $PODS pods; the floor is the same client to a pod's own address, in rounds with it; median of $ROUNDS rounds of $SECS s. First with Tollgate's $PODS mappings alone on the node, then with portmap's $PODS beside them: iptables' nat chains are walked by every new connection to the node, so that phase also measures Tollgate's hostPort again."
    echo
    echo "| | Tollgate | portmap after Tollgate | portmap / Tollgate |"
    echo "|---|---|---|---|"
    echo "| ADD with a hostPort, median (p90) | $A_N ms ($A_N90 ms) | $A_P ms ($A_P90 ms) | $(ratio "$A_P" "$A_N") |"
    echo "| DEL, median | $D_N ms | $D_P ms | $(ratio "$D_P" "$D_N") |"
    echo "| new connections/s through the hostPort of the last of $PODS | ${RATE[native]} | ${RATE[portmap]} | $(ratio "${RATE[portmap]}" "${RATE[native]}") |"
    echo "| the same / the floor of its phase (${RATE[floor-native]}/s, ${RATE[floor-portmap]}/s) | $R_N | $R_P | |"
    echo "| Tollgate's hostPort with portmap's rules on the node / the floor | $R_B (${RATE[native-beside]}/s) | | |"
    echo
    echo "| target | measured | status |"
    echo "|---|---|---|"
    echo "| Tollgate's hostPort takes new connections at least as fast as portmap's (3 % for noise) | ${RATE[native]}/s vs ${RATE[portmap]}/s | $(pass "${RATE[native]} >= 0.97 * ${RATE[portmap]}") |"
    echo "| Tollgate's ADD with a hostPort no slower than the chain with portmap | $A_N ms vs $A_P ms | $(pass "$A_N <= $A_P") |"
} >"$REPORT"
cat "$REPORT"
[[ -n ${BENCH_REPORT:-} ]] && cp "$REPORT" "$BENCH_REPORT"
bench_verdict "$REPORT"
