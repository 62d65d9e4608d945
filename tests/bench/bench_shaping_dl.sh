#!/usr/bin/env bash
# Tollgate download-shaping benchmark: a pod's internet download cap
# (shaping.internetIngress.podDefault) as shaped now (the pod's class under
# its namespace's and the node's on the IFB tollgate-inetdl, fed by a cls_bpf
# filter on the host veth's clsact egress hook) against the layout it replaced
# (class 1:2 of an HTB root on the pod's host veth, fed by nftables'
# `meta priority set 1:2`), the latter from the plugin built at
# BENCH_DL_OLD_REV, both in the same run.
#
# Usage: tests/bench/bench_shaping_dl.sh [BIN_DIR]   (BIN_DIR default: $TOLLGATE_BIN_DIR or build)
#
# Topology (fresh network namespaces, names unique to this run; nothing in the
# root namespace is read or changed):
#   <run>-wan   router + "internet host" 203.0.113.1 (lo): iperf3 server; its
#               uplink ends 10.240.<k>.1 are the internal peer of the pps runs
#   <run>-nnew  node 0 (10.1.0.0/22): the plugin under test (BIN_DIR/tollgate)
#   <run>-nold  node 1 (10.2.0.0/22): the plugin built at BENCH_DL_OLD_REV
#   <run>-noff  node 2 (10.3.0.0/22): the plugin under test, no internetIngress
#   <run>-a*    pods of the ADD timing; <run>-p<k> pods of the other parts
# Every node runs with the same config (masquerade, static pool) but its pod
# range and, for noff, no shaping.internetIngress.
#
# Three parts, in this order:
# 1. ADD latency with a download cap (internetIngress.podDefault 100M), new
#    plugin vs old, same config: pairs of ADDs (one per plugin, each on its own
#    fresh pod netns, the order alternating), each followed by an untimed DEL;
#    one warm-up ADD+DEL per plugin first (the node's own objects are made
#    then). Timed inside the node netns around the plugin's exec. Reported: p50,
#    p99, the ratio of the p50s and the per-pair ratios. Noise: the same ratio
#    between the two halves of one plugin's own samples (even vs odd pairs); the
#    target new/old <= 1.0 passes when the ratio is within 1 + that noise.
# 2. 64-byte pps of internal traffic to a pod: iperf3 -u -l 64 -b 0 from the
#    wan netns (source 10.240.<k>.1, inside internalCIDRs, so never the
#    internet's) to a pod on nnew (download cap set: its veth has the clsact and
#    the cls_bpf filter) and to a pod on noff (no internetIngress: no filter),
#    BENCH_DL_PPS_ROUNDS rounds of BENCH_DL_PPS_SECS s runs; received pps
#    (iperf3 server in the pod: packets - lost). Per round: on and off one
#    after the other (order alternating; information), then on and off at
#    once, both senders pinned to one CPU (the target: the median of the
#    per-round on/off ratios >= 0.97), and every other round two pods of noff
#    at once the same way (A/A control: what the method reads with no
#    difference). Control: the filter is checked present on the "on" veth and
#    absent on the "off" ones.
# 3. A capped download saturated (iperf3 -R, the wan host sending to the pod) at
#    each rate of BENCH_DL_RATES, new layout vs old side by side: per round and
#    rate a fresh pod on nnew and one on nold, both downloading at once (each
#    from its own iperf3 server on the wan host; which starts first alternates),
#    so that both meet the same moments of the machine; BENCH_DL_ROUNDS rounds:
#    ping RTT added under load (pings every 20 ms from 1.0 s to the end - 0.5 s, minus the
#    same pod's idle median; p50 and p99 over every ping of every round) and
#    the sender's TCP retransmits (the wan host's socket: the iperf3 server's
#    own sum_sent, fetched with --get-server-output). Targets: retransmits new <= old x 1.1 (sum over rounds),
#    added-latency p99 new <= old x 1.1. Control: the goodput must be within
#    0.80-1.02 of the cap for both (else the cap did not shape, a MISS), and
#    each pod's shaping objects are checked where each layout puts them.
#
# Knobs (env):
#   BENCH_DL_OLD_REV=1b96bab     git revision of the old layout's plugin
#   BENCH_DL_OLD_BIN=PATH        use this old plugin instead of building it
#                                (else built once into BIN_DIR/bench-old-<commit>/)
#   BENCH_DL_ADD_N=40            ADD pairs
#   BENCH_DL_PPS_ROUNDS=10       pps rounds (each: on and off)
#   BENCH_DL_PPS_SECS=2          iperf3 -t of a pps run
#   BENCH_DL_RATES="10000000 100000000"   download caps in bits/s
#   BENCH_DL_ROUNDS=5            saturation rounds (each: every rate, new and old at once)
#   BENCH_DL_SECONDS=4           iperf3 -t of a saturation run (>= 3)
#   BENCH_REPORT=FILE            also write the markdown report to FILE
#   BENCH_RAW=DIR                also copy the raw samples to DIR
#   BENCH_STRICT=1               exit 1 when a target is missed (0: report only)
set -u
export LC_ALL=C

# Runs inside a node netns: __add PLUGIN CONF NETNS CID ARGS OUT -> prints the
# ADD's microseconds; the DEL that follows is not timed.
if [[ ${1:-} == __add ]]; then
    plugin=$2 conf=$3 ns=$4 id=$5 args=$6 out=$7
    t0=$EPOCHREALTIME
    CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=${plugin%/*} CNI_ARGS=$args \
        "$plugin" <"$conf" >"$out" 2>"$out.err"
    rc=$?
    t1=$EPOCHREALTIME
    ((rc == 0)) || { echo "ADD exited $rc: $(head -c 1500 "$out" "$out.err")" >&2; exit 1; }
    res=; IFS= read -r -d '' res <"$out"
    [[ $res == *'"address"'* ]] || { echo "ADD: no address in the result: ${res:0:1500}" >&2; exit 1; }
    c=; IFS= read -r -d '' c <"$conf"
    printf '%s,"prevResult":%s}\n' "${c%\}*}" "$res" >"$out.delconf"
    CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=${plugin%/*} CNI_ARGS=$args \
        "$plugin" <"$out.delconf" >"$out.del" 2>&1 || { echo "DEL failed: $(head -c 1500 "$out.del")" >&2; exit 1; }
    echo $((${t1//[!0-9]/} - ${t0//[!0-9]/}))
    exit 0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
OLD_REV=${BENCH_DL_OLD_REV:-1b96bab}
OLD_BIN=${BENCH_DL_OLD_BIN:-}
ADD_N=${BENCH_DL_ADD_N:-40}
PPS_R=${BENCH_DL_PPS_ROUNDS:-10}
PPS_T=${BENCH_DL_PPS_SECS:-2}
RATES=${BENCH_DL_RATES:-10000000 100000000}
R=${BENCH_DL_ROUNDS:-5}
DUR=${BENCH_DL_SECONDS:-4}
WAN_IP=203.0.113.1
PORT=5201
ADD_CAP=100000000

die() { printf 'bench_shaping_dl: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_shaping_dl: [%3ds] %s\n' "$SECONDS" "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "plugin binary $TG_BIN not found or not executable (run make first)"
for t in ip tc jq iperf3 ping timeout git make; do command -v "$t" >/dev/null || die "'$t' not installed (make deps)"; done
for k in "$ADD_N" "$PPS_R" "$PPS_T" "$R" "$DUR"; do [[ $k =~ ^[1-9][0-9]*$ ]] || die "BENCH_DL_* counts must be positive integers"; done
((DUR >= 3 && ADD_N >= 4)) || die "BENCH_DL_SECONDS must be >= 3, BENCH_DL_ADD_N >= 4"
for rate in $RATES; do [[ $rate =~ ^[1-9][0-9]*$ ]] || die "bad rate '$rate' in BENCH_DL_RATES"; done

RUNHEX=$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
RUN=tgd$RUNHEX
WORK=$(mktemp -d /dev/shm/tollgate-bench-dl.XXXXXX) || die "mktemp failed"
NWAN=$RUN-wan NNEW=$RUN-nnew NOLD=$RUN-nold NOFF=$RUN-noff
PIDS=()
CLEANED=0
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    netns_del_run
    [[ -n ${WORK:-} && $WORK == /dev/shm/tollgate-bench-dl.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM
pid_forget() {
    local p keep=()
    for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}
stop_pid() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; pid_forget "$1"; }
now_us() { echo "${EPOCHREALTIME//[!0-9]/}"; }
sleep_until() { # absolute time in usec
    local d=$(($1 - $(now_us)))
    ((d > 0)) && sleep "$(printf '%d.%06d' $((d / 1000000)) $((d % 1000000)))"
    return 0
}
mbit() { awk -v b="$1" 'BEGIN { printf "%g", b / 1e6 }'; }
median_of() { sort -g | awk '{ v[++n] = $1 } END { if (!n) { print "NaN"; exit } print (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2 }'; }
NOTES=()

# ------------------------------------------------------------ the old plugin
mkdir -p "$WORK/bin" "$WORK/out" "$WORK/ipf"
if [[ -z $OLD_BIN ]]; then
    OLD_SHA=$(git -C "$ROOT" rev-parse --short=12 "$OLD_REV^{commit}" 2>/dev/null) ||
        die "revision $OLD_REV not in $ROOT's git history (set BENCH_DL_OLD_BIN to a plugin built from it)"
    OLD_BIN=$BIN_DIR/bench-old-$OLD_SHA/tollgate
    if [[ ! -x $OLD_BIN ]]; then
        log "building the plugin at $OLD_REV ($OLD_SHA) into ${OLD_BIN%/*} (once)"
        mkdir -p "$WORK/oldsrc" "${OLD_BIN%/*}"
        git -C "$ROOT" archive "$OLD_SHA" | tar -x -C "$WORK/oldsrc" || die "git archive $OLD_SHA failed"
        make -C "$WORK/oldsrc" -j2 COMMIT="$OLD_SHA" build/tollgate >"$WORK/oldbuild.log" 2>&1 ||
            die "building the plugin at $OLD_REV failed: $(tail -5 "$WORK/oldbuild.log")"
        { cp "$WORK/oldsrc/build/tollgate" "$OLD_BIN.tmp" && mv "$OLD_BIN.tmp" "$OLD_BIN"; } || die "cannot store $OLD_BIN"
        rm -rf "$WORK/oldsrc"
    fi
else
    OLD_SHA="(given)"
fi
[[ -x $OLD_BIN ]] || die "old plugin $OLD_BIN not executable"
# copies: a rebuild during the run must not mix binaries
{ cp "$TG_BIN" "$WORK/bin/tollgate-new" && cp "$OLD_BIN" "$WORK/bin/tollgate-old"; } || die "cannot copy the plugins"
NEW_SUM=$(sha256sum "$WORK/bin/tollgate-new" | cut -c1-12)
OLD_SUM=$(sha256sum "$WORK/bin/tollgate-old" | cut -c1-12)
[[ $NEW_SUM != "$OLD_SUM" ]] || die "the old and the new plugin are the same binary"
T_MEASURE=$SECONDS

# ----------------------------------------------------------------- topology
log "run $RUN, work dir $WORK"
two_nodes "$NWAN" "$NNEW" "$NOLD" "$WAN_IP"
netns_batch add "$NOFF"
node_uplink "$NWAN" "$NOFF" 2 10.3.0.0/22
# off2: a second pod of noff (the pps runs' A/A control)
declare -A NODE_OF=([new]=$NNEW [old]=$NOLD [off]=$NOFF [off2]=$NOFF)
declare -A BIN_OF=([new]=$WORK/bin/tollgate-new [old]=$WORK/bin/tollgate-old [off]=$WORK/bin/tollgate-new [off2]=$WORK/bin/tollgate-new)
declare -A NET_OF=([new]=10.1.0.0/22 [old]=10.2.0.0/22 [off]=10.3.0.0/22)
declare -A PEER_OF=([new]=10.240.0.1 [old]=10.240.1.1 [off]=10.240.2.1 [off2]=10.240.2.1)

# conf VARIANT CAP(bits/s, 0: no internetIngress) -> path of that config
conf() {
    [[ $1 == off2 ]] && set -- off "$2"   # the same node's config
    local f=$WORK/conf.$1.$2
    [[ -f $f ]] || jq -cn --arg dd "$WORK/data-$1" --arg lf "$WORK/tollgate-$1.log" --arg net "${NET_OF[$1]}" \
        --argjson cap "$2" '{cniVersion: "1.0.0", name: "tgdl", type: "tollgate", mtu: 1500, uplink: "eth0",
        internalCIDRs: ["10.0.0.0/8"], masquerade: true, dataDir: $dd, logFile: $lf,
        ipam: {source: "static", addresses: [$net], cooldownSeconds: 0}}
        + (if $cap > 0 then {shaping: {internetIngress: {podDefault: $cap}}} else {} end)' >"$f"
    echo "$f"
}

# ------------------------------------------------------------- ADD latency
log "ADD latency: $ADD_N pairs (new, old) with internetIngress.podDefault $(mbit $ADD_CAP)M"
: >"$WORK/add.times"
add_one() { # variant pod-netns tag -> prints usec
    local v=$1 ns=$2 id args
    printf -v id '%s%056x' "$RUNHEX" "$3"
    args="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=add-$3;K8S_POD_INFRA_CONTAINER_ID=$id;K8S_POD_UID=${id:0:8}-0000-4000-8000-${id:52:12}"
    ip netns exec "${NODE_OF[$v]}" bash "$HERE/bench_shaping_dl.sh" __add "${BIN_OF[$v]}" "$(conf "$v" $ADD_CAP)" \
        "/var/run/netns/$ns" "$id" "$args" "$WORK/out/add-$3" 2>"$WORK/out/add-$3.fail" ||
        die "$v ADD timing failed: $(head -c 2000 "$WORK/out/add-$3.fail")"
}
pods=()
for ((i = 0; i <= ADD_N; i++)); do pods+=("$RUN-an$i" "$RUN-ao$i"); done
netns_batch add "${pods[@]}"
tag=1
for ((i = 0; i <= ADD_N; i++)); do   # pair 0: the warm-up, not counted
    for v in $( ((i % 2)) && echo "old new" || echo "new old"); do
        [[ $v == new ]] && ns=$RUN-an$i || ns=$RUN-ao$i
        us=$(add_one "$v" "$ns" $tag) || exit 1
        tag=$((tag + 1))
        ((i > 0)) && echo "$i $v $us" >>"$WORK/add.times"
    done
done
netns_batch del "${pods[@]}"

# ------------------------------------------------------------------- pods
PODK=0
POD="" CID="" PODARGS="" HOSTVETH="" PODIP=""
cni_run() { # node plugin conf out CMD
    ip netns exec "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND="$5" CNI_CONTAINERID="$CID" \
        CNI_NETNS="/var/run/netns/$POD" CNI_IFNAME=eth0 CNI_PATH="${2%/*}" CNI_ARGS="$PODARGS" \
        "$2" <"$3" >"$4" 2>"$4.err"
}
cni_fail() { # msg files...
    local f
    log "ABORT: $1"; shift
    for f in "$@"; do [[ -s $f ]] && { echo "--- $f:" >&2; head -c 3000 "$f" >&2; echo >&2; }; done
    exit 1
}
# pod_up VARIANT CAP: a fresh pod netns + ADD; sets POD CID PODARGS HOSTVETH PODIP
pod_up() {
    local v=$1 c o res
    c=$(conf "$v" "$2")
    PODK=$((PODK + 1))
    POD=$RUN-p$PODK o=$WORK/out/$PODK
    printf -v CID '%s%056x' "$RUNHEX" $((PODK + 100000))
    PODARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=dl-$PODK;K8S_POD_INFRA_CONTAINER_ID=$CID;K8S_POD_UID=${CID:0:8}-0000-4000-8000-${CID:52:12}"
    ip netns add "$POD" || die "ip netns add $POD failed"
    ip -n "$POD" link set lo up
    cni_run "${NODE_OF[$v]}" "${BIN_OF[$v]}" "$c" "$o.add" ADD || cni_fail "$v ADD" "$o.add" "$o.add.err"
    res=; IFS= read -r -d '' res <"$o.add"
    local cc; cc=$(<"$c")
    printf '%s,"prevResult":%s}\n' "${cc%\}*}" "$res" >"$o.delconf"
    HOSTVETH=$(jq -r '[.interfaces[] | select((.sandbox // "") == "")][0].name // empty' "$o.add")
    PODIP=$(jq -r '.ips[0].address // empty' "$o.add")
    PODIP=${PODIP%/*}
    [[ -n $HOSTVETH && -n $PODIP ]] || cni_fail "$v: no host interface or address in the ADD result" "$o.add"
}
pod_down() { # variant
    cni_run "${NODE_OF[$1]}" "${BIN_OF[$1]}" "$WORK/out/$PODK.delconf" "$WORK/out/$PODK.del" DEL ||
        cni_fail "$1 DEL" "$WORK/out/$PODK.del" "$WORK/out/$PODK.del.err"
    ip netns del "$POD"
}
# has_steer NODE VETH: the veth's egress hook holds a bpf filter
has_steer() { tc -n "$1" filter show dev "$2" egress 2>/dev/null | grep -q ' bpf '; }

declare -A SRV=()   # port -> iperf3 server pid
iperf_server() { # netns address port: (re)start the iperf3 server on that port
    local ns=$1 addr=$2 port=$3 k
    [[ -n ${SRV[$port]:-} ]] && stop_pid "${SRV[$port]}"
    ip netns exec "$ns" iperf3 -s -J -B "$addr" -p "$port" >>"$WORK/ipf/server-$port.log" 2>&1 </dev/null &
    SRV[$port]=$!
    PIDS+=("${SRV[$port]}")
    for ((k = 0; k < 150; k++)); do
        ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
        kill -0 "${SRV[$port]}" 2>/dev/null || break
        sleep 0.02
    done
    die "iperf3 server did not start in $ns: $(tail -c 500 "$WORK/ipf/server-$port.log")"
}

# ---------------------------------------------------------------- 64 B pps
log "pps: $PPS_R rounds of ${PPS_T}s, internal peer -> pod, download cap on (nnew) vs off (noff)"
declare -A PPOD=() PIP=() PSRV=() PK=() PCID=() PARGS=()
for v in new off off2; do
    if [[ $v == new ]]; then pod_up new $ADD_CAP; else pod_up "$v" 0; fi
    PPOD[$v]=$POD PIP[$v]=$PODIP
    PK[$v]=$PODK PCID[$v]=$CID PARGS[$v]=$PODARGS
    if [[ $v == new ]]; then
        has_steer "$NNEW" "$HOSTVETH" || die "control: the capped pod's veth $HOSTVETH has no bpf filter on its egress hook: $(tc -n "$NNEW" filter show dev "$HOSTVETH" egress)"
    else
        ! has_steer "$NOFF" "$HOSTVETH" || die "control: the uncapped pod's veth $HOSTVETH has a bpf filter on its egress hook"
    fi
    ip netns exec "$POD" iperf3 -s -B "$PODIP" -p "$PORT" >"$WORK/ipf/pps-$v.srv" 2>&1 </dev/null &
    PSRV[$v]=$!; PIDS+=("${PSRV[$v]}")
done
for v in new off off2; do
    for ((k = 0; k < 150; k++)); do
        ip netns exec "${PPOD[$v]}" ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && break
        sleep 0.02
    done
done
: >"$WORK/pps"
CLK_TCK=$(getconf CLK_TCK)
KSOFT=()
for f in /proc/[0-9]*/comm; do
    read -r c 2>/dev/null <"$f" || continue
    [[ $c == ksoftirqd/* ]] && { p=${f#/proc/}; KSOFT+=("/proc/${p%/comm}/stat"); }
done
ksoft_ticks() { # -> KS: utime+stime of every ksoftirqd thread (clock ticks)
    local f line a
    KS=0
    for f in "${KSOFT[@]}"; do
        read -r line 2>/dev/null <"$f" || continue
        read -ra a <<<"${line##*) }"
        KS=$((KS + a[11] + a[12]))
    done
}
pps_run() { # variant round -> appends "round variant pps loss% sender-cpu-us-per-packet"
    local v=$1 r=$2 js=$WORK/ipf/pps-$2-$1.json try out k0
    for try in 1 2; do
        ksoft_ticks; k0=$KS
        timeout -k 2 $((PPS_T + 15)) ip netns exec "$NWAN" iperf3 -c "${PIP[$v]}" -B "${PEER_OF[$v]}" -p "$PORT" \
            -u -l 64 -b 0 -w 2M -t "$PPS_T" -J --connect-timeout 3000 >"$js" 2>"$js.err"
        ksoft_ticks
        # sender CPU: the client's getrusage (forwarding runs in softirq in its context) + ksoftirqd's
        out=$(jq -r --argjson ks "$((KS - k0))" --argjson hz "$CLK_TCK" '.end.sum as $s
            | if (.error // "") != "" or ($s.seconds // 0) <= 0 or ($s.packets // 0) <= 0 then empty
            else "\(($s.packets - $s.lost_packets) / $s.seconds) \($s.lost_percent) \(((.end.cpu_utilization_percent.host_total // 0) / 100 * $s.seconds + $ks / $hz) / $s.packets * 1e6)" end' "$js" 2>/dev/null)
        [[ -n $out ]] && { echo "$r $v $out" >>"$WORK/pps"; return 0; }
        NOTES+=("pps $v round $r: iperf3 failed ($(jq -r '.error // empty' "$js" 2>/dev/null) $(head -c 200 "$js.err"))$([[ $try == 1 ]] && echo ", retried")")
        sleep 0.5
    done
}
# Both at once, both senders pinned to one CPU (their receivers free): the same
# moment's machine for both, the same CPU shared by the scheduler between them.
# The forwarding to each pod runs in softirq in its own sender's context, so each
# sender's share of the CPU buys packets at its own path's cost; the ratio of the
# two rates is the ratio of the two costs, paired in time. The same between two
# uncapped pods (A/A) shows what the method reads where there is no difference.
PIN=$(($(nproc) - 1))
pps_together() { # round tag variant-a variant-b -> "round TAG-VARIANT pps loss% 0" for both
    local r=$1 tag=$2 v js out try ok
    shift 2
    for try in 1 2; do
        declare -A tp=()
        for v in "$@"; do
            js=$WORK/ipf/pps-$r-$v-$tag.json
            taskset -c "$PIN" timeout -k 2 $((PPS_T + 15)) ip netns exec "$NWAN" iperf3 -c "${PIP[$v]}" -B "${PEER_OF[$v]}" \
                -p "$PORT" -u -l 64 -b 0 -w 2M -t "$PPS_T" -J --connect-timeout 3000 >"$js" 2>"$js.err" &
            tp[$v]=$!; PIDS+=("${tp[$v]}")
        done
        for v in "$@"; do wait "${tp[$v]}"; pid_forget "${tp[$v]}"; done
        ok=1 out=()
        for v in "$@"; do
            js=$WORK/ipf/pps-$r-$v-$tag.json
            out+=("$(jq -r '.end.sum as $s | if (.error // "") != "" or ($s.seconds // 0) <= 0 or ($s.packets // 0) <= 0 then empty
                else "\(($s.packets - $s.lost_packets) / $s.seconds) \($s.lost_percent) 0" end' "$js" 2>/dev/null)")
            [[ -n ${out[-1]} ]] || ok=0
        done
        if ((ok)); then
            printf '%s %s-%s %s\n%s %s-%s %s\n' "$r" "$tag" "$1" "${out[0]}" "$r" "$tag" "$2" "${out[1]}" >>"$WORK/pps"
            return 0
        fi
        NOTES+=("pps $tag round $r: an iperf3 failed$([[ $try == 1 ]] && echo ", retried")")
        sleep 0.5
    done
}
for v in new off; do pps_run "$v" 0; done   # warm-up, not counted
pps_together 0 together new off
for ((r = 1; r <= PPS_R; r++)); do
    for v in $( ((r % 2)) && echo "new off" || echo "off new"); do pps_run "$v" "$r"; done
    if ((r % 2)); then pps_together "$r" together new off; else pps_together "$r" together off new; fi
    ((r % 2)) && pps_together "$r" aa off2 off   # the A/A control, every other round
done
for v in new off off2; do
    stop_pid "${PSRV[$v]}"
    PODK=${PK[$v]} CID=${PCID[$v]} PODARGS=${PARGS[$v]} POD=${PPOD[$v]}
    pod_down "$v"
done

# ------------------------------------------------------- capped downloads
RAWF=$WORK/samples   # "variant metric value"
: >"$RAWF"
sample() { echo "$1 $2 $3" >>"$RAWF"; }
# check_cap VARIANT CAP: the pod's download class is where its layout puts it, at CAP
check_cap() {
    local v=$1 cap=$2 node=${NODE_OF[$1]} out
    if [[ $v == new ]]; then
        has_steer "$node" "$HOSTVETH" || cni_fail "new: no bpf filter on $HOSTVETH's egress hook"
        out=$(tc -n "$node" class show dev tollgate-inetdl 2>&1)
    else
        out=$(tc -n "$node" class show dev "$HOSTVETH" 2>&1)
        [[ $out == *"class htb 1:2 "* ]] || cni_fail "old: no class 1:2 on $HOSTVETH: $out"
    fi
    # the pod's cap: the new class's ceil (its rate is a share guaranteed under the namespace's), the old's rate
    [[ $out == *" leaf "*" ceil $(mbit "$cap")Mbit "* || ($v == old && $out == *" rate $(mbit "$cap")Mbit "*) ]] ||
        cni_fail "$v: no leaf class capped at $(mbit "$cap")Mbit: $out"
}
# Both layouts at once: the new one's pod on nnew and the old one's on nold, each
# capped at the same rate, each downloading from its own iperf3 server on the wan
# host, the pings beside them: the same moments of the machine for both.
declare -A SPOD=() SVETH=() SPK=() SCID=() SARGS=() SIDLE=() SPORT=([new]=5202 [old]=5203)
saturate() { # cap first-variant second-variant
    local cap=$1 v base ts rc try ok
    local -A ipid=() ppid=()
    for v in new old; do
        base=$WORK/ipf/sat-${SPK[$v]}
        ip netns exec "${SPOD[$v]}" ping -n -c 20 -i 0.01 -W 1 "$WAN_IP" >"$base.idle" 2>&1
        SIDLE[$v]=$(grep -o 'time=[0-9.]*' "$base.idle" | cut -d= -f2 | median_of)
        [[ ${SIDLE[$v]} != NaN ]] || cni_fail "$v: pod ${SPOD[$v]} cannot ping $WAN_IP" "$base.idle"
        sample "$v" "idle_$cap" "${SIDLE[$v]}"
    done
    for try in 1 2; do
        for v in "$2" "$3"; do
            base=$WORK/ipf/sat-${SPK[$v]}
            ip netns exec "${SPOD[$v]}" timeout $((DUR + 20)) iperf3 -c "$WAN_IP" -p "${SPORT[$v]}" -t "$DUR" -J -R \
                --connect-timeout 3000 --get-server-output >"$base.json" 2>"$base.err" &
            ipid[$v]=$!; PIDS+=("${ipid[$v]}")
        done
        ts=$(now_us)
        sleep_until $((ts + 1000000))
        for v in "$2" "$3"; do
            ip netns exec "${SPOD[$v]}" ping -n -i 0.02 -c $(((DUR * 1000 - 1500) / 20)) -W 1 "$WAN_IP" >"$WORK/ipf/sat-${SPK[$v]}.ping" 2>&1 &
            ppid[$v]=$!; PIDS+=("${ppid[$v]}")
        done
        ok=1
        for v in new old; do
            wait "${ipid[$v]}"; rc=$?; pid_forget "${ipid[$v]}"
            wait "${ppid[$v]}"; pid_forget "${ppid[$v]}"
            base=$WORK/ipf/sat-${SPK[$v]}
            [[ $rc == 0 ]] && grep -q '"sum_received"' "$base.json" && continue
            ok=0
            NOTES+=("$v $(mbit "$cap")M round $ROUND: iperf3 failed (rc $rc: $(jq -r '.error // empty' "$base.json" 2>/dev/null) $(head -c 200 "$base.err"))$([[ $try == 1 ]] && echo ", both runs again")")
        done
        ((ok)) && break
        [[ $try == 2 ]] && return 0
        for v in new old; do iperf_server "$NWAN" "$WAN_IP" "${SPORT[$v]}"; done
    done
    for v in new old; do
        base=$WORK/ipf/sat-${SPK[$v]}
        # the shaper's drops: the pod's bfifo (fresh with the pod: the only one under a
        # class on tollgate-inetdl, the one under 1:2 on the pod's own veth)
        local dev=${SVETH[$v]}
        [[ $v == new ]] && dev=tollgate-inetdl
        {
            tc -n "${NODE_OF[$v]}" -s qdisc show dev "$dev" | awk -v v="$v" -v c="$cap" '
                /^qdisc bfifo/ { b = 1; next } /^qdisc/ { b = 0 }
                b && /Sent/ { for (i = 1; i <= NF; i++) if ($i == "(dropped") { d = $(i + 1); sub(",", "", d); t += d } }
                END { printf "%s drops_%s %d\n", v, c, t }'
            jq -r --arg v "$v" --arg c "$cap" '"\($v) retrans_\($c) \(.server_output_json.end.sum_sent.retransmits // "NaN")",
                "\($v) goodput_\($c) \(.end.sum_received.bits_per_second)"' "$base.json"
            awk -v v="$v" -v c="$cap" -v idle="${SIDLE[$v]}" 'match($0, /time=[0-9.]+/) { printf "%s rtt_%s %.3f\n", v, c, substr($0, RSTART + 5, RLENGTH - 5) - idle }
                /packets transmitted/ { for (i = 1; i <= NF; i++) if ($i ~ /%$/) { l = $i; sub("%", "", l); printf "%s ploss_%s %s\n", v, c, l } }' \
                "$base.ping"
        } >>"$RAWF"
    done
}
for v in new old; do iperf_server "$NWAN" "$WAN_IP" "${SPORT[$v]}"; done
for ((ROUND = 1; ROUND <= R; ROUND++)); do
    for rate in $RATES; do
        log "round $ROUND/$R: new and old at once at $(mbit "$rate") Mbit/s"
        for v in new old; do
            pod_up "$v" "$rate"
            check_cap "$v" "$rate"
            SPOD[$v]=$POD SVETH[$v]=$HOSTVETH SPK[$v]=$PODK SCID[$v]=$CID SARGS[$v]=$PODARGS
        done
        if ((ROUND % 2)); then saturate "$rate" new old; else saturate "$rate" old new; fi
        for v in new old; do
            POD=${SPOD[$v]} PODK=${SPK[$v]} CID=${SCID[$v]} PODARGS=${SARGS[$v]}
            pod_down "$v"
        done
    done
done
for v in new old; do stop_pid "${SRV[${SPORT[$v]}]}"; done
for v in new old off; do
    left=$(ip -n "${NODE_OF[$v]}" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); if ($2 != "lo" && $2 != "eth0" && $2 !~ /^tollgate-/) printf " %s", $2 }')
    [[ -n $left ]] && NOTES+=("after every DEL, links remain in ${v}'s node:$left")
done

# ------------------------------------------------------------------ report
ELAPSED=$((($(now_us) - ${T_START//[!0-9]/}) / 1000000))
MEASURED=$((SECONDS - T_MEASURE))
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

report() {
    local v rate a b
    echo "## Tollgate download shaping: tollgate-inetdl vs the per-veth class ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg $LOAD_START at start, $LOAD_END at end, ${ELAPSED}s, ${MEASURED}s measuring)"
    echo
    echo "- new: \`$TG_BIN\` (sha256 $NEW_SUM...): the pod's class on tollgate-inetdl, cls_bpf on the host veth's egress hook."
    echo "- old: the plugin at $OLD_REV ($OLD_SHA, \`$OLD_BIN\`, sha256 $OLD_SUM...): class 1:2 of an HTB root on the host veth."
    echo "- Same config for both but the pod range: masquerade, static pool, shaping.internetIngress {podDefault: CAP}; each on a node netns of its own behind one wan netns."
    echo
    echo "### ADD latency with a download cap ($(mbit $ADD_CAP)M), new vs old"
    echo
    echo "$ADD_N pairs of ADDs (one per plugin, order alternating, each on a fresh pod netns, each followed by an untimed DEL; one warm-up pair not counted), timed in the node netns around the plugin's exec."
    echo "Noise: the ratio of the p50s of one plugin's even and odd pairs (an A/A comparison); the larger deviation from 1 of the two plugins'."
    echo
    awk -v n="$ADD_N" '
        function sortv(a, c,   i, j, t) { for (i = 2; i <= c; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
        function q(a, c, p,   r, b, i) { for (i = 1; i <= c; i++) b[i] = a[i]; sortv(b, c); r = int(p * c); if (r < p * c) r++; if (r < 1) r = 1; return b[r] }
        function dev(x) { return x > 1 ? x - 1 : 1 - x }
        { t[$2, $1] = $3 / 1000 }
        END {
            for (i = 1; i <= n; i++) {
                N[i] = t["new", i]; O[i] = t["old", i]; P[i] = N[i] / O[i]
                if (i % 2) { ne[++cne] = N[i]; oe[++coe] = O[i] } else { no[++cno] = N[i]; oo[++coo] = O[i] }
            }
            nm = q(N, n, 0.5); om = q(O, n, 0.5); ratio = nm / om
            an = q(ne, cne, 0.5) / q(no, cno, 0.5); ao = q(oe, coe, 0.5) / q(oo, coo, 0.5)
            noise = dev(an) > dev(ao) ? dev(an) : dev(ao)
            print "| metric | new (tollgate-inetdl) | old (veth 1:2) | ratio new/old | target | status |"
            print "|---|---|---|---|---|---|"
            printf "| ADD p50 | %.2f ms | %.2f ms | %.3f | <= 1.0 within noise (<= %.3f) | %s |\n", nm, om, ratio, 1 + noise, ratio <= 1 + noise ? "PASS" : "MISS"
            printf "| ADD p99 (n=%d, nearest rank) | %.2f ms | %.2f ms | %.3f | | |\n", n, q(N, n, 0.99), q(O, n, 0.99), q(N, n, 0.99) / q(O, n, 0.99)
            printf "| ADD min–max | %.2f–%.2f ms | %.2f–%.2f ms | | | |\n", q(N, n, 0), q(N, n, 1), q(O, n, 0), q(O, n, 1)
            printf "| per-pair ratio new/old: median (IQR) | | | %.3f (%.3f–%.3f) | | |\n", q(P, n, 0.5), q(P, n, 0.25), q(P, n, 0.75)
            printf "| noise: A/A ratio, even ÷ odd pairs | %.3f | %.3f | ±%.3f | | |\n", an, ao, noise
        }' "$WORK/add.times"
    echo
    echo "### 64-byte pps of internal traffic to a pod: download cap on vs off"
    echo
    echo "iperf3 -u -l 64 -b 0 -w 2M -t $PPS_T from the wan netns (10.240.k.1, inside internalCIDRs) to an iperf3 server in the pod; received pps = (packets - lost) / seconds at the server. On: a pod on a node with internetIngress.podDefault $(mbit $ADD_CAP)M (its veth's egress hook: clsact + cls_bpf, checked); off: a pod on a node without internetIngress (no filter, checked). $PPS_R rounds after one warm-up round; each round: on and off one after the other (order alternating), then on and off at once with both senders pinned to CPU $PIN (the receivers unpinned); every other round, two uncapped pods of the off node at once the same way (A/A control)."
    echo "The target is read on the runs at once: both rates come from the same moment of the machine and the same CPU, shared between the two senders by the scheduler; the forwarding to each pod runs in softirq in its own sender's context, so the ratio of the rates is the ratio of the per-packet costs. One after the other, each run meets the machine's load of its own 2 s (the spread shows it)."
    echo
    echo "| metric | on (cap set; A/A: a second uncapped pod) | off (no internetIngress) | ratio on/off: median (IQR) | n | target | status | IQR clear of target |"
    echo "|---|---|---|---|---|---|---|---|"
    local spec on off lab mode
    for spec in "together-new together-off target at once, one CPU" "aa-off2 aa-off control A/A: two uncapped pods, at once, one CPU" "new off info one after the other"; do
        read -r on off mode lab <<<"$spec"
        awk -v on="$on" -v off="$off" -v mode="$mode" -v lab="$lab" '
        function sortv(a, c,   i, j, t) { for (i = 2; i <= c; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
        function q(a, c, p,   r, b, i) { if (!c) return "nan"; for (i = 1; i <= c; i++) b[i] = a[i]; sortv(b, c); r = int(p * c); if (r < p * c) r++; if (r < 1) r = 1; return b[r] }
        $1 >= 1 { x[$2, $1] = $3; l[$2, $1] = $4; u[$2, $1] = $5; h[$2, $1] = 1; if ($1 > rmax) rmax = $1 }
        END {
            for (r = 1; r <= rmax; r++) {
                if (h[on, r] && h[off, r] && x[off, r] > 0) {
                    P[++n] = x[on, r] / x[off, r]; A[n] = x[on, r]; B[n] = x[off, r]; LA[n] = l[on, r]; LB[n] = l[off, r]
                    UA[n] = u[on, r]; UB[n] = u[off, r]; C[n] = u[on, r] > 0 ? u[off, r] / u[on, r] : 0
                }
            }
            m = q(P, n, 0.5); lo = q(P, n, 0.25); hi = q(P, n, 0.75)
            if (!n) { printf "| received pps, %s | n/a | n/a | n/a | 0 | %s | %s | - |\n", lab, mode == "target" ? ">= 0.97" : "(" mode ")", mode == "target" ? "MISS" : ""; exit }
            if (mode != "target")
                printf "| received kpps, %s: median (min–max) | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) | %.3f (%.3f–%.3f) | %d | (%s) | | |\n", lab,
                    q(A, n, 0.5) / 1e3, q(A, n, 0) / 1e3, q(A, n, 1) / 1e3, q(B, n, 0.5) / 1e3, q(B, n, 0) / 1e3, q(B, n, 1) / 1e3, m, lo, hi, n, mode
            else
                printf "| received kpps, %s: median (min–max) | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) | %.3f (%.3f–%.3f) | %d | >= 0.97 | %s | %s |\n", lab,
                    q(A, n, 0.5) / 1e3, q(A, n, 0) / 1e3, q(A, n, 1) / 1e3, q(B, n, 0.5) / 1e3, q(B, n, 0) / 1e3, q(B, n, 1) / 1e3,
                    m, lo, hi, n, (m >= 0.97) ? "PASS" : "MISS", (lo >= 0.97 || hi < 0.97) ? "yes" : "no (within noise)"
            printf "| loss at the receiver, %s: median | %.1f %% | %.1f %% | | | | | |\n", lab, q(LA, n, 0.5), q(LB, n, 0.5)
            if (mode == "info")
                printf "| sender CPU per packet sent, %s: median (min–max) | %.2f µs (%.2f–%.2f) | %.2f µs (%.2f–%.2f) | capacity at equal CPU, off÷on CPU: %.3f (%.3f–%.3f) | %d | (info) | | |\n", lab,
                    q(UA, n, 0.5), q(UA, n, 0), q(UA, n, 1), q(UB, n, 0.5), q(UB, n, 0), q(UB, n, 1), q(C, n, 0.5), q(C, n, 0.25), q(C, n, 0.75), n
        }' "$WORK/pps"
    done
    echo
    echo "### A capped download at saturation: new vs old"
    echo
    echo "iperf3 -R -t $DUR (one TCP flow, wan host -> pod). Per round and rate, a fresh pod under each layout (new on one node, old on another), both downloading at once from two iperf3 servers on the wan host (which starts first alternates): the same moments of the machine for both; $R rounds. Added RTT: pings pod -> 203.0.113.1 every 20 ms from 1.0 s to $DUR s - 0.5 s, minus the same pod's idle median (20 pings); p50/p99 over every ping of every round. Retransmits: the sender's (the wan host's socket: the iperf3 server's own sum_sent, --get-server-output), summed over the rounds. Goodput: iperf3 receiver."
    echo
    echo "| cap | metric | new (tollgate-inetdl) | old (veth 1:2) | target | status |"
    echo "|---|---|---|---|---|---|"
    for rate in $RATES; do
        awk -v c="$rate" -v m="$(mbit "$rate")" '
            function sortv(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
            function q(a, n, p,   r) { if (!n) return "nan"; r = int(p * n); if (r < p * n) r++; if (r < 1) r = 1; return a[r] }
            $2 == "rtt_" c { rt[$1, ++nr[$1]] = $3 }
            $2 == "retrans_" c && $3 != "NaN" { rs[$1] += $3; rl[$1] = rl[$1] (rl[$1] == "" ? "" : ", ") $3; nrs[$1]++ }
            $2 == "goodput_" c { g[$1, ++ng[$1]] = $3 / c }
            $2 == "drops_" c { ds[$1] += $3; dl[$1] = dl[$1] (dl[$1] == "" ? "" : ", ") $3 }
            $2 == "ploss_" c { pl[$1] += $3; npl[$1]++ }
            $2 == "idle_" c { id[$1, ++ni[$1]] = $3 }
            END {
                split("new old", V, " ")
                for (k = 1; k <= 2; k++) {
                    v = V[k]
                    delete a; for (i = 1; i <= nr[v]; i++) a[i] = rt[v, i]; sortv(a, nr[v]); p50[v] = q(a, nr[v], 0.5); p99[v] = q(a, nr[v], 0.99)
                    delete a; for (i = 1; i <= ng[v]; i++) a[i] = g[v, i]; sortv(a, ng[v]); gmin[v] = q(a, ng[v], 0); gmax[v] = q(a, ng[v], 1); gmed[v] = q(a, ng[v], 0.5)
                    delete a; for (i = 1; i <= ni[v]; i++) a[i] = id[v, i]; sortv(a, ni[v]); idm[v] = q(a, ni[v], 0.5)
                    ok[v] = (ng[v] > 0 && gmin[v] >= 0.80 && gmax[v] <= 1.02)
                }
                printf "| %sM | shaped: goodput ÷ cap, median (min–max) | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | both within 0.80–1.02 | %s |\n", m,
                    gmed["new"], gmin["new"], gmax["new"], gmed["old"], gmin["old"], gmax["old"], (ok["new"] && ok["old"]) ? "PASS" : "MISS"
                printf "| %sM | idle RTT, median | %.3f ms | %.3f ms | | |\n", m, idm["new"], idm["old"]
                printf "| %sM | added RTT under load, p50 (n=%d / %d) | %.2f ms | %.2f ms | | |\n", m, nr["new"], nr["old"], p50["new"], p50["old"]
                st = (p99["new"] != "nan" && p99["old"] != "nan" && p99["new"] <= p99["old"] * 1.1) ? "PASS" : "MISS"
                printf "| %sM | added RTT under load, p99 | %.2f ms | %.2f ms | new <= old × 1.1 | %s |\n", m, p99["new"], p99["old"], st
                st = (nrs["new"] && nrs["old"] && rs["new"] <= rs["old"] * 1.1) ? "PASS" : "MISS"
                printf "| %sM | sender TCP retransmits, sum over %d / %d runs (each run) | %d (%s) | %d (%s) | new <= old × 1.1 | %s |\n", m, nrs["new"], nrs["old"],
                    rs["new"], rl["new"], rs["old"], rl["old"], st
                printf "| %sM | drops at the pod'"'"'s bfifo, sum (each run) | %d (%s) | %d (%s) | | |\n", m, ds["new"], dl["new"], ds["old"], dl["old"]
                printf "| %sM | pings lost under load, mean | %.1f %% | %.1f %% | | |\n", m, npl["new"] ? pl["new"] / npl["new"] : 0, npl["old"] ? pl["old"] / npl["old"] : 0
            }' "$RAWF"
    done
    if awk -v a="${LOAD_START%% *}" -v b="${LOAD_END%% *}" -v n="$(nproc)" 'BEGIN { exit !(a > n || b > n) }'; then
        NOTES+=("machine busy (1-min load ${LOAD_START%% *} at start, ${LOAD_END%% *} at end, $(nproc) CPUs): other work competes for the CPUs; the ADD times and the pps are the most affected")
    fi
    if ((${#NOTES[@]})); then
        echo
        echo "Notes:"
        printf -- '- %s\n' "${NOTES[@]}"
    fi
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
if [[ -n ${BENCH_RAW:-} ]]; then
    mkdir -p "$BENCH_RAW" && cp "$RAWF" "$BENCH_RAW/dl.samples" && cp "$WORK/add.times" "$BENCH_RAW/add.times" &&
        cp "$WORK/pps" "$BENCH_RAW/pps" && cp -r "$WORK/ipf" "$BENCH_RAW/iperf3"
fi
bench_verdict "$WORK/report.md"
