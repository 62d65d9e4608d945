# shellcheck shell=bash
# Shared pieces of the benchmarks; netns_batch and two_nodes call die(), netns_del_run reads RUN.
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

# two_nodes WAN NODE_A NODE_B WAN_IP: two "nodes" side by side behind one
# "internet" host WAN (WAN_IP/32 on its lo): node A eth0 10.240.0.4/24 with
# pods in 10.1.0.0/22, node B eth0 10.240.1.4/24 with pods in 10.2.0.0/22,
# each with a default route via WAN, which routes the pod ranges back.
two_nodes() {
    local wan=$1 a=$2 b=$3 wan_ip=$4 i=0 pair node net podnet
    netns_batch add "$wan" "$a" "$b"
    ip -n "$wan" link set lo up
    ip -n "$wan" addr add "$wan_ip/32" dev lo
    for pair in "$a:10.240.0:10.1.0.0/22" "$b:10.240.1:10.2.0.0/22"; do
        IFS=: read -r node net podnet <<<"$pair"
        ip -n "$node" link set lo up
        ip -n "$node" link add eth0 type veth peer name up$i netns "$wan" || die "uplink veth failed"
        ip -n "$node" addr add "$net.4/24" dev eth0
        ip -n "$node" link set eth0 up
        ip -n "$node" route add default via "$net.1"
        ip -n "$wan" addr add "$net.1/24" dev up$i
        ip -n "$wan" link set up$i up
        ip -n "$wan" route add "$podnet" via "$net.4"
        i=$((i + 1))
    done
}
