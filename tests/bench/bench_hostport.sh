#!/usr/bin/env bash
# hostPort benchmark: what a pod's hostPort costs, Tollgate's own mapping
# against the strongest honest anchor, Debian's reference portmap (1.1.1,
# iptables) chained after Tollgate without the capability, in one run on one
# node, with the kernel's floor (no DNAT at all: the client connects to the
# pod's own address) from the same run.
#
#   - ADD and DEL of a pod with one hostPort: Tollgate's ADD alone, against
#     Tollgate's ADD followed by portmap's (and portmap's DEL, then Tollgate's);
#   - new TCP connections per second from outside the node to the hostPort
#     of the last of PODS pods that each have one (portmap's rules for that
#     pod come last of PODS; Tollgate's are one hash lookup), against the
#     same client connecting to the pod's address (the floor). Each
#     connection is a new conntrack entry, so each passes the DNAT chains.
#
# Usage: tests/bench/bench_hostport.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Everything runs in fresh network namespaces named <run>-* (<run> = tgh<hex>):
#   <run>-wan     the client (10.240.0.1), routes the pods' range to the node
#   <run>-node    the node (eth0 10.240.0.4, lib.sh node_uplink)
#   <run>-p<i>    one netns per pod, i = 1..PODS
#
# Knobs (env):
#   BENCH_HOSTPORT_PODS=100    pods, each with its own hostPort
#   BENCH_HOSTPORT_SECONDS=4   each connection-rate measurement
#   BENCH_HOSTPORT_ROUNDS=3    rounds of (floor, Tollgate, portmap), the median kept
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
ROUNDS=${BENCH_HOSTPORT_ROUNDS:-3}
PORTMAP=/usr/lib/cni/portmap
PY=$(command -v python3)
NETNAME=benchhp
BASE_PORT=20000

die() { printf 'bench_hostport: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_hostport: %s\n' "$*" >&2; }

[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "$TG_BIN not found (run make first)"
[[ -x $PORTMAP ]] || die "$PORTMAP missing (containernetworking-plugins, make deps)"
for t in ip nft jq iptables python3; do command -v "$t" >/dev/null 2>&1 || die "'$t' missing (make deps)"; done
((PODS >= 2 && PODS <= 250 && SECS >= 1 && ROUNDS >= 1)) || die "bad BENCH_HOSTPORT_* knobs"

RUN=tgh$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
NODE=$RUN-node WAN=$RUN-wan NODE_IP=10.240.0.4
WORK=$(mktemp -d /dev/shm/tollgate-bench-hostport.XXXXXX) || die "mktemp failed"
SERVER_PID=""
CLEANED=0
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    [[ -z $SERVER_PID ]] || { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; }
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
ports() { jq -nc --argjson p "$((BASE_PORT + $1))" '{portMappings: [{hostPort: $p, containerPort: 80, protocol: "tcp"}]}'; }
# plugin BIN CMD I CONF: one plugin run for pod I; ms on stdout, its result in $WORK/out
plugin() {
    local t0=$EPOCHREALTIME
    N env -i PATH="$PATH" CNI_COMMAND="$2" CNI_CONTAINERID="$(cid "$3")" CNI_NETNS="/var/run/netns/$RUN-p$3" \
        CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=p$3" \
        "$1" <<<"$4" >"$WORK/out" 2>"$WORK/err" || die "$1 $2 of p$3: $(cat "$WORK/out" "$WORK/err")"
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
p90() { sort -n | awk '{ v[NR] = $1 } END { print v[int(NR * 0.9) > 0 ? int(NR * 0.9) : 1] }'; }

# up MODE: every pod ADDed with its hostPort (native: Tollgate's; portmap: Tollgate's ADD, then portmap's)
up() {
    local i rt c
    : >"$WORK/$1.add"
    for ((i = 1; i <= PODS; i++)); do
        rt=$(ports "$i")
        if [[ $1 == native ]]; then
            plugin "$TG_BIN" ADD "$i" "$(conf true | jq -c --argjson rt "$rt" '. + {runtimeConfig: $rt}')" >>"$WORK/$1.add"
        else
            c=$(plugin "$TG_BIN" ADD "$i" "$(conf false)")
            cp "$WORK/out" "$WORK/prev.$i"
            awk -v a="$c" -v b="$(plugin "$PORTMAP" ADD "$i" "$(pm_conf "$i")")" 'BEGIN { printf "%.3f\n", a + b }' >>"$WORK/$1.add"
        fi
    done
}
pm_conf() {
    jq -c --arg name "$NETNAME" --argjson rt "$(ports "$1")" --slurpfile prev "$WORK/prev.$1" \
        '{cniVersion: "1.0.0", name: $name, type: "portmap", capabilities: {portMappings: true}, snat: true,
          prevResult: $prev[0], runtimeConfig: $rt}' <<<'{}'
}
down() {
    local i c
    : >"$WORK/$1.del"
    for ((i = 1; i <= PODS; i++)); do
        if [[ $1 == native ]]; then
            plugin "$TG_BIN" DEL "$i" "$(conf true | jq -c --argjson rt "$(ports "$i")" '. + {runtimeConfig: $rt}')" >>"$WORK/$1.del"
        else
            c=$(plugin "$PORTMAP" DEL "$i" "$(pm_conf "$i")")
            awk -v a="$c" -v b="$(plugin "$TG_BIN" DEL "$i" "$(conf false)")" 'BEGIN { printf "%.3f\n", a + b }' >>"$WORK/$1.del"
        fi
    done
}
pod_ip() { jq -r --arg c "$(cid "$1")" '.attachments[] | select(.containerId == $c) | .ip' "$WORK/data/$NETNAME/state.json"; }

# the last pod's server: accept and close, as fast as python does it
serve_last() {
    ip netns exec "$RUN-p$PODS" "$PY" -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 80))
s.listen(4096)
while True:
    c, _ = s.accept()
    c.close()' "$1" >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do
        ip netns exec "$WAN" "$PY" -c 'import socket, sys; socket.create_connection((sys.argv[1], 80), 0.2)' "$1" \
            2>/dev/null && return 0
        sleep 0.05
    done
    die "the last pod's server did not start: $(cat "$WORK/server.log")"
}
serve_stop() { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; }
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
log "run $RUN: node, client and $PODS pod namespaces"
netns_batch add "$WAN" "$NODE"
node_uplink "$WAN" "$NODE" 0 10.1.0.0/23
for ((i = 1; i <= PODS; i++)); do echo "netns add $RUN-p$i"; done | ip -batch - || die "pod netns"

declare -A RATE=()
measure() { # MODE: RATE[MODE] and RATE[floor-MODE], median of ROUNDS
    local ip r
    ip=$(pod_ip "$PODS")
    serve_last "$ip"
    : >"$WORK/$1.rate"; : >"$WORK/floor-$1.rate"
    for ((r = 0; r < ROUNDS; r++)); do
        rate "$ip" 80 >>"$WORK/floor-$1.rate"
        rate "$NODE_IP" "$((BASE_PORT + PODS))" >>"$WORK/$1.rate"
    done
    serve_stop
    RATE[$1]=$(median <"$WORK/$1.rate")
    RATE[floor-$1]=$(median <"$WORK/floor-$1.rate")
}

log "Tollgate's own hostPorts: $PODS ADDs"
up native
[[ $(N nft -j list map inet tollgate hostport | jq '[.nftables[] | .map // empty][0].elem | length') == "$PODS" ]] ||
    die "the hostport map does not hold $PODS mappings"
measure native
log "DEL"
down native
log "portmap after Tollgate: $PODS ADDs"
up portmap
N iptables-save -t nat | grep -q -- "--to-destination $(pod_ip "$PODS"):80" || die "portmap's DNAT of the last pod is missing"
measure portmap
log "DEL"
down portmap

# ---------------------------------------------------------------- report
A_N=$(median <"$WORK/native.add") A_N90=$(p90 <"$WORK/native.add")
A_P=$(median <"$WORK/portmap.add") A_P90=$(p90 <"$WORK/portmap.add")
D_N=$(median <"$WORK/native.del") D_P=$(median <"$WORK/portmap.del")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
pass() { awk "BEGIN { exit !($1) }" && echo PASS || echo MISS; }
R_N=$(ratio "${RATE[native]}" "${RATE[floor-native]}")
R_P=$(ratio "${RATE[portmap]}" "${RATE[floor-portmap]}")
REPORT=$WORK/report.md
{
    echo "## hostPort benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg at start $LOAD_START)"
    echo
    echo "$PODS pods, one hostPort each (real ADDs); Tollgate \`$TG_BIN\`, portmap \`$PORTMAP\` (containernetworking-plugins $(
        dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null), $(iptables --version))."
    echo "New connections: one python client, closed with a reset, to the last pod's hostPort; the floor is the same client to the pod's address; median of $ROUNDS rounds of $SECS s."
    echo
    echo "| | Tollgate | portmap after Tollgate | portmap / Tollgate |"
    echo "|---|---|---|---|"
    echo "| ADD with a hostPort, median (p90) | $A_N ms ($A_N90 ms) | $A_P ms ($A_P90 ms) | $(ratio "$A_P" "$A_N") |"
    echo "| DEL, median | $D_N ms | $D_P ms | $(ratio "$D_P" "$D_N") |"
    echo "| new connections/s through the hostPort of pod $PODS | ${RATE[native]} | ${RATE[portmap]} | $(ratio "${RATE[portmap]}" "${RATE[native]}") |"
    echo "| the floor, to the pod's address, same phase | ${RATE[floor-native]} | ${RATE[floor-portmap]} | |"
    echo "| hostPort / floor | $R_N | $R_P | |"
    echo
    echo "| target | measured | status |"
    echo "|---|---|---|"
    echo "| Tollgate's hostPort within 10 % of the floor's connection rate | $R_N | $(pass "$R_N >= 0.90") |"
    echo "| Tollgate's ADD with a hostPort no slower than the chain with portmap | $A_N ms vs $A_P ms | $(pass "$A_N <= $A_P") |"
} >"$REPORT"
cat "$REPORT"
[[ -n ${BENCH_REPORT:-} ]] && cp "$REPORT" "$BENCH_REPORT"
bench_verdict "$REPORT"
