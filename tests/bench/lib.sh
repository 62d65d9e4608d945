# shellcheck shell=bash
# Shared pieces of the benchmarks; netns_batch, node_uplink and two_nodes call
# die(), netns_del_run reads RUN.
# Every namespace a benchmark makes is named "$RUN-…", so one glob finds them.

# shellcheck disable=SC2034  # globals for the sourcing script
# bench_start [BIN_DIR]: sets T_START and LOAD_START (for the report), ROOT,
# BIN_DIR (absolute; default $TOLLGATE_BIN_DIR or build) and TG_BIN
bench_start() {
    T_START=$EPOCHREALTIME
    LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
    ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    BIN_DIR=${1:-${TOLLGATE_BIN_DIR:-build}}
    [[ $BIN_DIR == /* ]] || BIN_DIR=$ROOT/$BIN_DIR
    TG_BIN=$BIN_DIR/tollgate
}

# bench_verdict REPORT: the last word of a benchmark, once its report is
# printed. Every target a benchmark states is a row of a markdown table whose
# status cell reads PASS or MISS; a cell "| MISS" is a missed target. Lists
# the missed ones on stderr and exits 1 when there are any (0 otherwise);
# BENCH_STRICT=0 only lists them and exits 0.
bench_verdict() {
    local missed
    missed=$(grep -F '| MISS' "$1")
    if [[ -n $missed ]]; then
        printf '%s: %d stated target(s) missed:\n%s\n' "${0##*/}" "$(wc -l <<<"$missed")" "$missed" >&2
        [[ ${BENCH_STRICT:-1} == 0 ]] || exit 1
    fi
    exit 0
}

# netns_batch add|del NAMES...: one `ip -batch` for many namespaces
netns_batch() {
    local verb=$1; shift
    (($#)) || return 0
    printf "netns $verb %s\n" "$@" | ip -batch - || die "ip netns $verb failed"
}

# netns_del_run: deletes every namespace of this run, quietly (for the EXIT trap)
netns_del_run() {
    local f list=()
    [[ -d /run/netns ]] || return 0
    for f in /run/netns/"$RUN"-*; do [[ -e $f ]] && list+=("netns del ${f##*/}"); done
    ((${#list[@]})) && printf '%s\n' "${list[@]}" | ip -force -batch - >/dev/null 2>&1
    return 0
}

# node_uplink WAN NODE K [PODNET]: the node's uplink. NODE and WAN are
# existing namespaces; NODE gets lo up and eth0, a veth whose other end u<K>
# sits in WAN: 10.240.K.4/24 on the node, 10.240.K.1/24 on WAN, the node's
# default route via WAN. With PODNET, WAN routes it back via the node (its
# pods are reachable without masquerade).
node_uplink() {
    local wan=$1 node=$2 k=$3 podnet=${4:-}
    ip -n "$node" link set lo up
    ip -n "$node" link add eth0 type veth peer name "u$k" netns "$wan" || die "uplink veth of $node failed"
    ip -n "$node" addr add "10.240.$k.4/24" dev eth0
    ip -n "$node" link set eth0 up
    ip -n "$node" route add default via "10.240.$k.1" || die "default route of $node failed"
    ip -n "$wan" addr add "10.240.$k.1/24" dev "u$k"
    ip -n "$wan" link set "u$k" up
    [[ -z $podnet ]] || ip -n "$wan" route add "$podnet" via "10.240.$k.4" || die "route to $podnet via $node failed"
}

# two_nodes WAN NODE_A NODE_B WAN_IP: two "nodes" side by side behind one
# "internet" host WAN (WAN_IP/32 on its lo): node A (node_uplink 0) with pods
# in 10.1.0.0/22, node B (node_uplink 1) with pods in 10.2.0.0/22, both pod
# ranges routed back by WAN.
two_nodes() {
    local wan=$1 a=$2 b=$3 wan_ip=$4
    netns_batch add "$wan" "$a" "$b"
    ip -n "$wan" link set lo up
    ip -n "$wan" addr add "$wan_ip/32" dev lo
    node_uplink "$wan" "$a" 0 10.1.0.0/22
    node_uplink "$wan" "$b" 1 10.2.0.0/22
}
