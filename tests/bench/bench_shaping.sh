#!/usr/bin/env bash
# Tollgate shaping benchmark: Kubernetes bandwidth limits (runtimeConfig.bandwidth)
# enforced by tollgate vs the reference chain (Debian containernetworking-plugins
# ptp + host-local, then `bandwidth`, invoked as a conflist would: ADD ptp, then
# ADD bandwidth with prevResult = ptp's result and runtimeConfig.bandwidth).
#
# Usage: tests/bench/bench_shaping.sh [BIN_DIR]   (BIN_DIR default: $TOLLGATE_BIN_DIR or build)
#
# Both plugins get runtimeConfig.bandwidth exactly as containerd (go-cni) sends
# it: capitalised keys, IngressBurst/EgressBurst 4294967295. A third variant,
# "reference, sane burst", gives the bandwidth plugin a burst of
# BENCH_SHAPING_SANE_MS milliseconds at the rate instead.
#
# Topology (fresh network namespaces, names unique to this run; nothing in the
# root namespace is read or changed):
#   <run>-wan   router + "internet host" 203.0.113.1 (lo): iperf3 / transfer servers
#   <run>-ntg   tollgate node   eth0 10.240.0.4/24 -> wan (10.240.0.1)
#   <run>-nref  reference node  eth0 10.240.1.4/24 -> wan (10.240.1.1)
#   <run>-p<k>  one fresh pod netns per measurement (so every token bucket starts full,
#               as for a pod that has just started); <run>-a*  pods of the ADD timing
# Order: the ADD latency first (its time is then known), then the rounds; each
# round measures every variant at every rate, rotating which goes first.
#
# Per (variant, rate, round), on a fresh pod:
#   - short transfers (rate == BENCH_SHAPING_XFER_RATE only): BENCH_SHAPING_XFER_N
#     uploads then downloads of BENCH_SHAPING_XFER_BYTES with a python socket client
#     in the pod (bench_shaping_xfer.py), timed from connect() to "the last byte
#     arrived" (for an upload: the server's answer after it read everything), and
#     the sending side's TCP retransmits (tcpi_total_retrans)
#   - idle RTT: ping pod -> 203.0.113.1, 20 echoes
#   - egress (pod -> 203.0.113.1) then ingress (iperf3 -R) saturation,
#     BENCH_SHAPING_SECONDS each: iperf3 JSON (goodput, bytes, retransmits; the
#     first 1-s interval from the receiver's side), the shaping root qdisc's byte,
#     packet and drop counters (tc -s; the IFB for egress, the host veth for
#     ingress) read before the run, at 1.5 s, at the end - 0.25 s and after the
#     run, and a ping every 50 ms from 1.0 s to the end - 0.5 s.
# ADD latency: pairs of ADDs with / without shaping back to back (alternating
#   which goes first), each followed by an untimed DEL, 5 pairs per batch, one
#   shell inside the node netns per batch (netns-exec cost not timed), tollgate
#   and reference batches alternating. The reference "with" is ptp ADD + bandwidth
#   ADD (with prevResult), "without" is ptp alone.
#
# Knobs (env):
#   BENCH_SHAPING_ROUNDS=3          rounds (each: every variant x every rate)
#   BENCH_SHAPING_SECONDS=4         iperf3 duration per direction (>= 3)
#   BENCH_SHAPING_RATES="100000000 1000000000"   rates in bits/s (ingress = egress)
#   BENCH_SHAPING_XFER_RATE=100000000  rate at which short transfers are timed
#   BENCH_SHAPING_XFER_BYTES=2000000   short transfer size (bytes)
#   BENCH_SHAPING_XFER_N=3          short transfers per direction per pod
#   BENCH_SHAPING_SANE=1            also measure the reference with a sane burst (0: skip)
#   BENCH_SHAPING_SANE_MS=4         that burst, in ms at the rate (tollgate derives 4 ms)
#   BENCH_SHAPING_ADD_N=30          ADDs per kind for the ADD latency (rounded up to a multiple of 5)
#   BENCH_SHAPING_BUDGET=280        seconds: the sane-burst reference is dropped from later rounds
#                                   when they would not fit (measured first: ADD latency, then rounds)
#   BENCH_SHAPING_REF_IPMASQ=auto   ptp ipMasq: auto (iptables usable in the node netns), 1, 0
#   BENCH_REPORT=FILE               also write the markdown report to FILE
# It states no pass/fail target (it compares with the reference plugin), so
# it exits 0 once it has measured; a target added as a table row with a
# PASS/MISS status cell makes it exit 1 when missed (lib.sh bench_verdict).
#   BENCH_RAW=DIR                   also copy raw samples (and iperf3 JSON) to DIR
set -u
export LC_ALL=C

# ------------------------------------------------------- ADD timing worker --
# Runs inside a node netns: __addloop FAMILY PAIRS NSPREFIX IDPREFIX
#   FAMILY tg : pairs of ADDs of tollgate with ($W_CONF_BW) and without ($W_CONF) runtimeConfig.bandwidth
#   FAMILY ref: pairs of ADDs of ptp+bandwidth ($W_CONF, then $W_BWCONF with prevResult) and ptp alone
# The two ADDs of a pair run back to back, alternating which goes first, each on
# its own fresh pod netns and followed by an untimed DEL (bandwidth DEL, then
# ptp DEL for the chain). Appends "KIND usec" (tg-bw tg-plain ref-chain ref-ptp) to $W_TIMES.
if [[ ${1:-} == __addloop ]]; then
    fam=$2 count=$3 nsp=$4 idp=$5
    exec 5>>"$W_TIMES"
    fail() { printf 'addloop %s: %s\n' "$fam" "$1" >&2; shift; for f in "$@"; do [[ -e $f ]] && { printf -- '--- %s:\n' "$f" >&2; head -c 2000 "$f" >&2; echo >&2; }; done; exit 1; }
    if [[ $fam == ref ]]; then BW=$(<"$W_BWCONF"); BW_HEAD=${BW%\}}; fi
    one() { # kind pod-index
        local kind=$1 k=$2 plugin cnipath conf id ns out args t0 t1 rc res
        case $kind in
            tg-*) plugin=$W_TGBIN cnipath=${W_TGBIN%/*} ;;
            *) plugin=/usr/lib/cni/ptp cnipath=/usr/lib/cni ;;
        esac
        conf=$W_CONF
        [[ $kind == tg-bw ]] && conf=$W_CONF_BW
        id=$idp$(printf '%056x' "$k")
        ns=/var/run/netns/$nsp$k out=$W_OUT/$kind.$k
        args="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=add-$k;K8S_POD_INFRA_CONTAINER_ID=$id;K8S_POD_UID=${id:0:8}-0000-4000-8000-${id:52:12}"
        t0=$EPOCHREALTIME
        CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$cnipath CNI_ARGS=$args \
            "$plugin" <"$conf" >"$out" 2>"$out.err"
        rc=$?
        if [[ $kind == ref-chain && $rc == 0 ]]; then
            res=; IFS= read -r -d '' res <"$out"
            printf '%s,"prevResult":%s}\n' "$BW_HEAD" "$res" >"$out.bwconf"
            CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$cnipath CNI_ARGS=$args \
                /usr/lib/cni/bandwidth <"$out.bwconf" >"$out.bw" 2>"$out.bw.err"
            rc=$?
            [[ $rc == 0 ]] || fail "bandwidth ADD $k exited $rc" "$out.bw" "$out.bw.err"
        fi
        t1=$EPOCHREALTIME
        [[ $rc == 0 ]] || fail "$kind ADD $k exited $rc" "$out" "$out.err"
        echo "$kind $((${t1//[!0-9]/} - ${t0//[!0-9]/}))" >&5
        res=; IFS= read -r -d '' res <"$out"
        [[ $res == *'"address"'* ]] || fail "$kind ADD $k: no address in the result" "$out"
        if [[ $kind == ref-chain ]]; then
            CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$cnipath CNI_ARGS=$args \
                /usr/lib/cni/bandwidth <"$out.bwconf" >"$out.bwdel" 2>&1 || fail "bandwidth DEL $k failed" "$out.bwdel"
        fi
        conf=$(<"$conf")
        printf '%s,"prevResult":%s}\n' "${conf%\}}" "$res" >"$out.delconf"
        CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$cnipath CNI_ARGS=$args \
            "$plugin" <"$out.delconf" >"$out.del" 2>&1 || fail "$kind DEL $k failed" "$out.del"
    }
    if [[ $fam == tg ]]; then with=tg-bw without=tg-plain; else with=ref-chain without=ref-ptp; fi
    for ((i = 0; i < count; i++)); do
        if ((i % 2)); then one "$without" $((2 * i)); one "$with" $((2 * i + 1))
        else one "$with" $((2 * i)); one "$without" $((2 * i + 1)); fi
    done
    exit 0
fi

# --------------------------------------------------------------- controller --
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
REF_DIR=/usr/lib/cni
XFER_PY=$HERE/bench_shaping_xfer.py
R=${BENCH_SHAPING_ROUNDS:-3}
DUR=${BENCH_SHAPING_SECONDS:-4}
RATES=${BENCH_SHAPING_RATES:-100000000 1000000000}
XFER_RATE=${BENCH_SHAPING_XFER_RATE:-100000000}
XFER_BYTES=${BENCH_SHAPING_XFER_BYTES:-2000000}
XFER_N=${BENCH_SHAPING_XFER_N:-3}
SANE=${BENCH_SHAPING_SANE:-1}
SANE_MS=${BENCH_SHAPING_SANE_MS:-4}
ADD_N=${BENCH_SHAPING_ADD_N:-30}
BUDGET=${BENCH_SHAPING_BUDGET:-280}
REF_IPMASQ=${BENCH_SHAPING_REF_IPMASQ:-auto}
HUGE=4294967295
WAN_IP=203.0.113.1
IPERF_PORT=5201 XFER_PORT=5301

die() { printf 'bench_shaping: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_shaping: [%3ds] %s\n' "$SECONDS" "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "plugin binary $TG_BIN not found or not executable (run make first)"
for p in ptp host-local bandwidth; do
    [[ -x $REF_DIR/$p ]] || die "reference plugin $REF_DIR/$p missing: apt-get install containernetworking-plugins"
done
for t in ip tc jq iperf3 ping timeout; do command -v "$t" >/dev/null || die "'$t' not installed (make deps)"; done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || die "python3 missing"
[[ -r $XFER_PY ]] || die "$XFER_PY missing"
[[ $R =~ ^[0-9]+$ && $DUR =~ ^[0-9]+$ && $XFER_N =~ ^[0-9]+$ && $ADD_N =~ ^[0-9]+$ && $XFER_BYTES =~ ^[0-9]+$ && $BUDGET =~ ^[0-9]+$ ]] ||
    die "BENCH_SHAPING_* knobs must be integers"
((R >= 1 && DUR >= 3 && XFER_N >= 1 && ADD_N >= 5)) || die "bad BENCH_SHAPING_* knobs (ROUNDS>=1, SECONDS>=3, XFER_N>=1, ADD_N>=5)"
for rate in $RATES; do [[ $rate =~ ^[1-9][0-9]*$ ]] || die "bad rate '$rate' in BENCH_SHAPING_RATES"; done

RUNHEX=$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
RUN=tgs$RUNHEX
WORK=$(mktemp -d /dev/shm/tollgate-bench-shaping.XXXXXX) || die "mktemp failed"
NTG=$RUN-ntg NREF=$RUN-nref NWAN=$RUN-wan
PIDS=()
CLEANED=0

# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    netns_del_run
    [[ -n ${WORK:-} && $WORK == /dev/shm/tollgate-bench-shaping.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# forget PIDs that have been waited for (so cleanup never signals a recycled PID)
pid_forget() {
    local p keep=()
    for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}
now_us() { echo "${EPOCHREALTIME//[!0-9]/}"; }
sleep_until() { # absolute time in usec
    local d=$(($1 - $(now_us)))
    ((d > 0)) && sleep "$(printf '%d.%06d' $((d / 1000000)) $((d % 1000000)))"
    return 0
}
mbit() { awk -v b="$1" 'BEGIN { printf "%g", b / 1e6 }'; }

# ---------------------------------------------------------------- topology
log "run $RUN, work dir $WORK"
two_nodes "$NWAN" "$NTG" "$NREF" "$WAN_IP"

# ----------------------------------------------------------------- configs
mkdir -p "$WORK/tgdata" "$WORK/hl" "$WORK/bin" "$WORK/out" "$WORK/ipf"
cp "$TG_BIN" "$WORK/bin/tollgate" || die "cannot copy $TG_BIN"   # a rebuild during the run must not mix binaries
TG_SHA=$(sha256sum "$WORK/bin/tollgate" | cut -c1-12)
if [[ $REF_IPMASQ == auto ]]; then
    if command -v iptables >/dev/null && ip netns exec "$NREF" iptables -w 5 -t nat -S >/dev/null 2>&1; then
        REF_IPMASQ=1
    else
        REF_IPMASQ=0
    fi
fi
[[ $REF_IPMASQ == 1 ]] && REF_IPMASQ_JSON=true || REF_IPMASQ_JSON=false
# Same cniVersion for both: the Debian plugins (1.1.1) stop at 1.0.0.
jq -cn --arg dd "$WORK/tgdata" --arg lf "$WORK/tollgate.log" '{cniVersion: "1.0.0", name: "tgbench",
    type: "tollgate", mtu: 1500, uplink: "eth0", internalCIDRs: ["10.0.0.0/8"], masquerade: true,
    dataDir: $dd, logFile: $lf, ipam: {source: "static", addresses: ["10.1.0.0/22"], cooldownSeconds: 0}}' >"$WORK/tg.conf"
jq -cn --arg dd "$WORK/hl" --argjson masq "$REF_IPMASQ_JSON" '{cniVersion: "1.0.0", name: "refbench",
    type: "ptp", mtu: 1500, ipMasq: $masq, ipam: {type: "host-local", ranges: [[{subnet: "10.2.0.0/22"}]],
    routes: [{dst: "0.0.0.0/0"}], dataDir: $dd}}' >"$WORK/ptp.conf"
# runtimeConfig.bandwidth as containerd (go-cni) serialises it: capitalised keys
bw_json() { # rate burst
    jq -cn --argjson r "$1" --argjson b "$2" '{IngressRate: $r, IngressBurst: $b, EgressRate: $r, EgressBurst: $b}'
}
tg_conf_bw() { jq -c --argjson bw "$(bw_json "$1" "$2")" '. + {runtimeConfig: {bandwidth: $bw}}' "$WORK/tg.conf"; }
ref_conf_bw() { # rate burst: the bandwidth plugin entry as libcni hands it over (prevResult added later)
    jq -cn --argjson bw "$(bw_json "$1" "$2")" '{cniVersion: "1.0.0", name: "refbench", type: "bandwidth",
        capabilities: {bandwidth: true}, runtimeConfig: {bandwidth: $bw}}'
}
sane_burst() { # bits: SANE_MS at the rate, at least two full-size frames
    local b=$(($1 * SANE_MS / 1000))
    echo $((b < 2 * 1514 * 8 ? 2 * 1514 * 8 : b))
}

# ------------------------------------------------------------------- pods
# The measuring loop spawns few processes (on a loaded 2-CPU machine every
# fork+exec costs 50-150 ms): counters are parsed with bash regexes, each
# iperf3 run is summarised by one jq and one awk.
RAWF=$WORK/samples   # "variant metric value" lines
: >"$RAWF"
NOTES=()
sample() { echo "$1 $2 $3" >>"$RAWF"; }
PODK=0
POD="" NODE="" HOSTVETH="" IFB="" CID="" PODARGS="" IDLE_RTT=""
for rate in $RATES; do   # configs per (variant, rate), made once
    tg_conf_bw "$rate" "$HUGE" >"$WORK/conf.tg.$rate"
    ref_conf_bw "$rate" "$HUGE" >"$WORK/conf.ref.$rate"
    ref_conf_bw "$rate" "$(sane_burst "$rate")" >"$WORK/conf.refsane.$rate"
done
slurp() { REPLY=; IFS= read -r -d '' REPLY <"$1"; }   # file -> $REPLY, no fork
with_prev() { # conf-file result-file out-file: the config plus "prevResult"
    local c
    slurp "$1"; c=$REPLY
    slurp "$2"
    printf '%s,"prevResult":%s}\n' "${c%\}*}" "$REPLY" >"$3"
}

# plugin run in a node netns: node plugin conf-file out-prefix CMD
cni_run() {
    local node=$1 plugin=$2 conf=$3 out=$4 cmd=$5
    ip netns exec "$node" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND="$cmd" CNI_CONTAINERID="$CID" \
        CNI_NETNS="/var/run/netns/$POD" CNI_IFNAME=eth0 CNI_PATH="${plugin%/*}" CNI_ARGS="$PODARGS" \
        "$plugin" <"$conf" >"$out" 2>"$out.err"
}
cni_fail() { # msg files...
    local f
    log "ABORT: $1"; shift
    for f in "$@"; do [[ -s $f ]] && { echo "--- $f:" >&2; head -c 3000 "$f" >&2; echo >&2; }; done
    [[ -s $WORK/tollgate.log ]] && { echo "--- tollgate.log (tail):" >&2; tail -n 20 "$WORK/tollgate.log" >&2; }
    exit 1
}

# pod_up VARIANT RATE: fresh pod netns + ADD; sets POD NODE HOSTVETH IFB
pod_up() {
    local v=$1 rate=$2 o l ifbs=() qd
    PODK=$((PODK + 1))
    POD=$RUN-p$PODK
    printf -v CID '%s%056x' "$RUNHEX" "$PODK"
    PODARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=shape-$PODK;K8S_POD_INFRA_CONTAINER_ID=$CID;K8S_POD_UID=${CID:0:8}-0000-4000-8000-${CID:52:12}"
    o=$WORK/out/$PODK
    ip netns add "$POD" || die "ip netns add $POD failed"
    ip -n "$POD" link set lo up
    case $v in
        tg)
            NODE=$NTG
            cni_run "$NODE" "$WORK/bin/tollgate" "$WORK/conf.tg.$rate" "$o.add" ADD ||
                cni_fail "tollgate ADD ($v, $rate)" "$o.add" "$o.add.err"
            with_prev "$WORK/conf.tg.$rate" "$o.add" "$o.delconf"
            ;;
        ref | refsane)
            NODE=$NREF
            cni_run "$NODE" "$REF_DIR/ptp" "$WORK/ptp.conf" "$o.add" ADD || cni_fail "ptp ADD" "$o.add" "$o.add.err"
            with_prev "$WORK/conf.$v.$rate" "$o.add" "$o.bwconf"
            cni_run "$NODE" "$REF_DIR/bandwidth" "$o.bwconf" "$o.bw" ADD ||
                cni_fail "bandwidth ADD ($v, $rate)" "$o.bw" "$o.bw.err" "$o.bwconf"
            with_prev "$WORK/ptp.conf" "$o.add" "$o.delconf"
            ;;
    esac
    HOSTVETH=$(jq -r '[.interfaces[] | select((.sandbox // "") == "")][0].name // empty' "$o.add")
    [[ -n $HOSTVETH ]] || cni_fail "no host interface in the ADD result" "$o.add"
    while IFS= read -r l; do
        [[ $l =~ ^[0-9]+:\ ([^:@]+)[:@] ]] && ifbs+=("${BASH_REMATCH[1]}")
    done < <(ip -n "$NODE" -o link show type ifb)
    ((${#ifbs[@]} == 1)) || cni_fail "expected exactly one IFB in $NODE after ADD, found: ${ifbs[*]:-none}"
    IFB=${ifbs[0]}
    qd=$(tc -n "$NODE" qdisc show)
    for l in "$HOSTVETH" "$IFB"; do   # both shaping qdiscs must be there
        [[ $qd =~ qdisc\ (htb|tbf)\ [0-9a-f]+:\ dev\ $l\ root ]] || cni_fail "$v: no htb/tbf root qdisc on $l: $qd"
    done
    ip netns exec "$POD" ping -n -q -c 1 -W 2 "$WAN_IP" >/dev/null 2>&1 ||
        ip netns exec "$POD" ping -n -q -c 2 -W 2 "$WAN_IP" >/dev/null 2>&1 ||
        cni_fail "$v: pod $POD cannot ping $WAN_IP"
}
pod_down() {
    local v=$1 o=$WORK/out/$PODK
    case $v in
        tg)
            cni_run "$NODE" "$WORK/bin/tollgate" "$o.delconf" "$o.del" DEL || cni_fail "tollgate DEL" "$o.del" "$o.del.err" ;;
        ref | refsane)
            cni_run "$NODE" "$REF_DIR/bandwidth" "$o.bwconf" "$o.bwdel" DEL || cni_fail "bandwidth DEL" "$o.bwdel" "$o.bwdel.err"
            cni_run "$NODE" "$REF_DIR/ptp" "$o.delconf" "$o.del" DEL || cni_fail "ptp DEL" "$o.del" "$o.del.err" ;;
    esac
    ip netns del "$POD"
}

# counters DEV: the root qdisc's counters in NODE -> "time_us bytes packets drops" (empty if unreadable)
CNT_RE=$' root[^\n]*\n Sent ([0-9]+) bytes ([0-9]+) pkt \\(dropped ([0-9]+),'
# The read is timed at the midpoint of the tc run; on a busy machine one tc run can
# take 100 ms, so up to 4 reads are made until one takes under 15 ms, and the
# tightest is kept (its width is recorded as the metric cnt_us).
counters() {
    local t0 t1 out k best="" bw=999999999
    for ((k = 0; k < 4; k++)); do
        t0=${EPOCHREALTIME//[!0-9]/}
        out=$(tc -n "$NODE" -s qdisc show dev "$1")
        t1=${EPOCHREALTIME//[!0-9]/}
        if [[ $out =~ $CNT_RE ]] && ((t1 - t0 < bw)); then
            bw=$((t1 - t0))
            best="$(((t0 + t1) / 2)) ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]} $bw"
        fi
        ((bw < 15000)) && break
    done
    echo "$best"
}
median_of() { sort -g | awk '{ v[++n] = $1 } END { if (!n) { print "NaN"; exit } print (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2 }'; }

idle_rtt() { # variant rate
    local f=$WORK/ipf/$PODK.idle
    ip netns exec "$POD" ping -n -c 20 -i 0.01 -W 1 "$WAN_IP" >"$f" 2>&1
    IDLE_RTT=$(grep -o 'time=[0-9.]*' "$f" | cut -d= -f2 | median_of)
    sample "$1" "rtt_idle_$2" "$IDLE_RTT"
}

SRV_PID=""
iperf_server() { # (re)start the iperf3 server in the wan netns
    [[ -n $SRV_PID ]] && stop_pid "$SRV_PID"
    ip netns exec "$NWAN" iperf3 -s -J -B "$WAN_IP" -p "$IPERF_PORT" >"$WORK/ipf/server.log" 2>&1 &
    SRV_PID=$!
    PIDS+=("$SRV_PID")
    local k
    for ((k = 0; k < 150; k++)); do
        ip netns exec "$NWAN" ss -Hltn "sport = :$IPERF_PORT" 2>/dev/null | grep -q . && return 0
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.02
    done
    die "iperf3 server did not start: $(tail -c 500 "$WORK/ipf/server.log")"
}
stop_pid() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; pid_forget "$1"; }

# saturate VARIANT RATE eg|in
saturate() {
    local v=$1 rate=$2 dir=$3 dev rflag="" base ts ipid ppid z a b try rc tag=${3}_$2
    local ta ba pa da wa tb bb pb db wb d0 rbps ppm
    if [[ $dir == eg ]]; then dev=$IFB; else dev=$HOSTVETH; rflag=-R; fi
    base=$WORK/ipf/$PODK.$dir
    for try in 1 2; do
        z=$(counters "$dev")
        ip netns exec "$POD" timeout $((DUR + 20)) iperf3 -c "$WAN_IP" -p "$IPERF_PORT" -t "$DUR" -J \
            --connect-timeout 3000 --get-server-output $rflag >"$base.json" 2>"$base.err" &
        ipid=$!; PIDS+=("$ipid")
        ts=$(now_us)
        sleep_until $((ts + 1000000))
        ip netns exec "$POD" ping -n -i 0.05 -c $(((DUR * 1000 - 1500) / 50)) -W 1 "$WAN_IP" >"$base.ping" 2>&1 &
        ppid=$!; PIDS+=("$ppid")
        sleep_until $((ts + 1500000))
        a=$(counters "$dev")
        sleep_until $((ts + DUR * 1000000 - 250000))
        b=$(counters "$dev")
        wait "$ipid"; rc=$?; pid_forget "$ipid"
        wait "$ppid"; pid_forget "$ppid"
        d0=$(counters "$dev")
        slurp "$base.json"
        [[ $rc == 0 && $REPLY == *'"sum_received"'* ]] && break
        NOTES+=("$v $(mbit "$rate") Mbit/s $dir round $ROUND: iperf3 failed (rc $rc: $(jq -r '.error // empty' "$base.json" 2>/dev/null) $(head -c 200 "$base.err")), $([[ $try == 1 ]] && echo "server restarted, retried" || echo "gave up")")
        [[ $try == 2 ]] && return 0
        iperf_server
    done
    # steady window: IP bytes = qdisc bytes - 14 (Ethernet header) per packet
    read -r ta ba pa da wa <<<"$a"; read -r tb bb pb db wb <<<"$b"
    if [[ -n ${ta:-} && -n ${tb:-} ]] && ((tb > ta)); then
        sample "$v" cnt_us "$wa"; sample "$v" cnt_us "$wb"
        rbps=$(((bb - ba - 14 * (pb - pa)) * 8 * 1000000 / (tb - ta)))
        ppm=$((rbps * 1000000 / rate))
        sample "$v" "acc_ss_$tag" "$(printf '%d.%06d' $((ppm / 1000000)) $((ppm % 1000000)))"
    else
        NOTES+=("$v $(mbit "$rate") Mbit/s $dir round $ROUND: could not read the qdisc counters of $dev")
    fi
    read -r _ _ _ da _ <<<"$z"; read -r _ _ _ db _ <<<"$d0"
    [[ -n ${da:-} && -n ${db:-} ]] && sample "$v" "drops_$tag" $((db - da))
    # whole run (from iperf3): received payload bytes + 52 B (IPv4 20 + TCP 32 with timestamps) per MSS segment;
    # the first second from the receiver's side (the server for egress)
    jq -r --arg v "$v" --arg tag "$tag" --arg dir "$dir" --argjson r "$rate" '
        (.start.tcp_mss_default // 1448) as $mss
        | .end.sum_received as $s
        | "\($v) acc_run_\($tag) \($s.bytes * ($mss + 52) / $mss * 8 / $s.seconds / $r)",
          "\($v) goodput_\($tag) \($s.bits_per_second / 1e6)",
          "\($v) first1s_\($tag) \(((if $dir == "eg" then .server_output_json.intervals[0] else .intervals[0] end).sum.bits_per_second // 0) / $r)",
          "\($v) retrans_\($tag) \(.end.sum_sent.retransmits // 0)",
          "\($v) cc \(.end.sender_tcp_congestion // "?")"' "$base.json" >>"$RAWF"
    # ping under load: median and p90 minus the idle median, loss
    awk -v v="$v" -v tag="$tag" -v idle="$IDLE_RTT" '
        match($0, /time=[0-9.]+/) { x[++n] = substr($0, RSTART + 5, RLENGTH - 5) + 0 }
        /packets transmitted/ { for (i = 1; i <= NF; i++) if ($i ~ /%$/) { loss = $i; sub("%", "", loss) } }
        END {
            if (!n) exit
            for (i = 2; i <= n; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j+1] = x[j]; x[j+1] = t }
            med = (n % 2) ? x[(n+1)/2] : (x[n/2] + x[n/2+1]) / 2
            r = int(0.9 * n); if (r < 0.9 * n) r++
            printf "%s rtt_add_%s %.3f\n%s rtt_add90_%s %.3f\n%s ploss_%s %s\n", v, tag, med - idle, v, tag, x[r] - idle, v, tag, loss + 0
        }' "$base.ping" >>"$RAWF"
}

XFER_SRV=""
xfer_server() {
    ip netns exec "$NWAN" "$PY" "$XFER_PY" serve "$WAN_IP" "$XFER_PORT" 2>"$WORK/xfer-server.log" &
    XFER_SRV=$!; PIDS+=("$XFER_SRV")
    local k
    for ((k = 0; k < 150; k++)); do
        ip netns exec "$NWAN" ss -Hltn "sport = :$XFER_PORT" 2>/dev/null | grep -q . && return 0
        kill -0 "$XFER_SRV" 2>/dev/null || break
        sleep 0.02
    done
    die "transfer server did not start: $(cat "$WORK/xfer-server.log")"
}
short_xfers() { # variant: XFER_N uploads then XFER_N downloads, one python process
    local v=$1 mode s retr last=""
    ip netns exec "$POD" timeout $((20 + 4 * XFER_N)) "$PY" "$XFER_PY" seq "$WAN_IP" "$XFER_PORT" "$XFER_BYTES" "$XFER_N" \
        >"$WORK/xfer.out" 2>"$WORK/xfer.err" || die "$v: short transfers failed: $(cat "$WORK/xfer.err")"
    while read -r mode s retr; do
        sample "$v" "xfer_$mode" "$s"
        sample "$v" "xretr_$mode" "$retr"
        [[ $mode != "$last" ]] && sample "$v" "xfer1_$mode" "$s"
        last=$mode
    done <"$WORK/xfer.out"
}

measure() { # variant rate
    local v=$1 rate=$2
    log "round $ROUND/$R: $v at $(mbit "$rate") Mbit/s"
    pod_up "$v" "$rate"
    [[ $rate == "$XFER_RATE" ]] && short_xfers "$v"
    idle_rtt "$v" "$rate"
    saturate "$v" "$rate" eg
    saturate "$v" "$rate" in
    pod_down "$v"
}

# ------------------------------------------------------------- ADD latency
log "ADD latency: $ADD_N ADDs per kind (pairs with/without shaping, batches of 5 pairs, tollgate and reference alternating)"
: >"$WORK/add.times"
tg_conf_bw 100000000 "$HUGE" >"$WORK/tg-bw.conf"
ref_conf_bw 100000000 "$HUGE" >"$WORK/ref-bw.conf"
mkdir -p "$WORK/addout"
nb=$(((ADD_N + 4) / 5))
for ((bi = 0; bi < nb; bi++)); do
    for fam in $( ((bi % 2)) && echo "ref tg" || echo "tg ref"); do
        [[ $fam == tg ]] && node=$NTG || node=$NREF
        nsp=$RUN-a$fam$bi-
        pods=()
        for ((i = 0; i < 10; i++)); do pods+=("$nsp$i"); done
        netns_batch add "${pods[@]}"
        W_TIMES=$WORK/add.times W_OUT=$WORK/addout W_TGBIN=$WORK/bin/tollgate W_BWCONF=$WORK/ref-bw.conf \
            W_CONF=$([[ $fam == tg ]] && echo "$WORK/tg.conf" || echo "$WORK/ptp.conf") W_CONF_BW=$WORK/tg-bw.conf \
            ip netns exec "$node" bash "$HERE/bench_shaping.sh" __addloop "$fam" 5 "$nsp" "$RUNHEX$(printf '%08x' $((bi * 2 + ${#fam} % 2)))" ||
            die "ADD timing ($fam, batch $bi) failed"
        netns_batch del "${pods[@]}"
    done
done

# -------------------------------------------------------------- throughput
# Rounds: every variant at every rate, the order rotating per round. The
# sane-burst reference is an extra: it is dropped from the remaining rounds when
# they would not fit in BENCH_SHAPING_BUDGET seconds (tollgate and the
# containerd-burst reference always get all rounds).
declare -A MDUR=()   # "variant rate" -> seconds of the last measurement
SANE_ROUNDS=0
xfer_server
iperf_server
for ((ROUND = 1; ROUND <= R; ROUND++)); do
    vs=(tg ref)
    if ((SANE)); then
        if ((ROUND == 1)); then
            vs+=(refsane)
        elif ((SANE_ROUNDS == ROUND - 1)); then
            need=0 extra=0
            for rate in $RATES; do
                need=$((need + MDUR["tg $rate"] + MDUR["ref $rate"]))
                extra=$((extra + MDUR["refsane $rate"]))
            done
            left=$((R - ROUND + 1))
            if ((SECONDS + left * (need + extra) + 5 <= BUDGET)); then
                vs+=(refsane)
            else
                NOTES+=("time budget (${BUDGET} s): the sane-burst reference was measured in rounds 1-$SANE_ROUNDS only (≈$((left * extra)) s more would have ended at ≈$((SECONDS + left * (need + extra))) s)")
            fi
        fi
    fi
    nv=${#vs[@]}
    [[ ${vs[2]:-} == refsane ]] && SANE_ROUNDS=$ROUND
    for rate in $RATES; do
        for ((j = 0; j < nv; j++)); do
            v=${vs[(j + ROUND - 1) % nv]}
            t_m=$SECONDS
            measure "$v" "$rate"
            MDUR["$v $rate"]=$((SECONDS - t_m))
        done
    done
done
stop_pid "$XFER_SRV"
stop_pid "$SRV_PID"
# leftovers after every DEL: links other than lo/eth0 in the nodes, tollgate attachments
for node in "$NTG" "$NREF"; do
    left=$(ip -n "$node" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); if ($2 != "lo" && $2 != "eth0") printf " %s", $2 }')
    [[ -n $left ]] && NOTES+=("after every DEL, links remain in ${node#"$RUN"-}:$left")
done
if [[ -f $WORK/tgdata/tgbench/state.json ]]; then
    att=$(jq '.attachments // [] | length' "$WORK/tgdata/tgbench/state.json" 2>/dev/null)
    [[ $att == 0 ]] || NOTES+=("after every DEL, tollgate's state.json still lists ${att:-?} attachments")
fi
((SECONDS > BUDGET)) && NOTES+=("the run took ${SECONDS} s, over the ${BUDGET} s budget (BENCH_SHAPING_BUDGET): lower BENCH_SHAPING_ROUNDS/SECONDS/ADD_N or set BENCH_SHAPING_SANE=0 on this machine")

# ------------------------------------------------------------------ report
# All cells in one awk pass over the samples: CELL["variant metric"] = "median unit (min–max)",
# the unit and scale following the metric's name; xferx_* = median transfer time ÷ ideal.
declare -A CELL=()
load_cells() {
    local v m c
    while IFS=$'\t' read -r v m c; do CELL["$v $m"]=$c; done < <(awk -v ideal="$1" '
        $3 != "" && $3 != "NaN" { k = $1 SUBSEP $2; x[k, ++n[k]] = $3 + 0 }
        END {
            for (k in n) {
                c = n[k]
                for (i = 2; i <= c; i++) { t = x[k, i]; for (j = i - 1; j >= 1 && x[k, j] > t; j--) x[k, j+1] = x[k, j]; x[k, j+1] = t }
                med = (c % 2) ? x[k, (c+1)/2] : (x[k, c/2] + x[k, c/2+1]) / 2
                lo = x[k, 1]; hi = x[k, c]
                split(k, vm, SUBSEP); m = vm[2]
                f = "%.0f"; u = ""; s = 1
                if (m ~ /^(acc_|first1s_)/) { s = 100; f = "%.1f"; u = "%" }
                else if (m ~ /^goodput_/) { f = "%.1f"; u = " Mbit/s" }
                else if (m ~ /^rtt_/) { f = "%.2f"; u = " ms" }
                else if (m ~ /^xfer/) { s = 1000; f = "%.1f"; u = " ms" }
                out = sprintf(f, med * s) u
                if (c > 1) out = out sprintf(" (" f "–" f ")", lo * s, hi * s)
                printf "%s\t%s\t%s\n", vm[1], m, out
                if (m ~ /^xfer_/) printf "%s\t%s\t%.2fx\n", vm[1], "xferx_" substr(m, 6), med * 1000 / ideal
            }
        }' "$RAWF")
}
row() { # label metric note
    local line="| $1 | ${CELL["tg $2"]:-n/a} | ${CELL["ref $2"]:-n/a}"
    ((SANE_ROUNDS)) && line+=" | ${CELL["refsane $2"]:-n/a}"
    echo "$line | $3 |"
}
ELAPSED=$((($(now_us) - ${T_START//[!0-9]/}) / 1000000))
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v a="${LOAD_START%% *}" -v b="${LOAD_END%% *}" -v n="$(nproc)" 'BEGIN { exit !(a > n || b > n) }'; then
    NOTES+=("machine busy (1-min load ${LOAD_START%% *} at start, ${LOAD_END%% *} at end, $(nproc) CPUs): other work competes for the CPUs; ADD times and the unshaped (line-rate) phases are the most affected")
fi
[[ $REF_IPMASQ == 1 ]] && masq_txt="ipMasq true (iptables in the node netns)" || masq_txt="ipMasq false (no usable iptables)"
XFER_IDEAL_MS=$(awk -v b="$XFER_BYTES" -v r="$XFER_RATE" 'BEGIN { printf "%.1f", b * 8 / r * 1000 }')
XFER_WIRE_MS=$(awk -v b="$XFER_BYTES" -v r="$XFER_RATE" 'BEGIN { printf "%.1f", b * 1514 / 1448 * 8 / r * 1000 }')

# ADD latency (ms): per kind, and the median of the paired differences (with − without, same pair)
add_vals() { awk -v k="$1" '$1 == k { print $2 / 1000 }' "$WORK/add.times"; }
add_med() { add_vals "$1" | median_of; }
add_p90() { add_vals "$1" | sort -g | awk '{ v[++n] = $1 } END { if (!n) { print "NaN"; exit } r = int(0.9 * n); if (r < 0.9 * n) r++; if (r < 1) r = 1; print v[r] }'; }
add_n() { add_vals "$1" | wc -l; }
add_pairdiff() { # with without
    awk -v w="$1" -v o="$2" '$1 == w || $1 == o { if (have) { d = ($1 == w) ? $2 - pv : pv - $2; print d / 1000; have = 0 } else { pv = $2; have = 1 } }' "$WORK/add.times" | median_of
}
fmt_diff() { awk -v d="$1" -v b="$2" 'BEGIN { if (d == "NaN") print "n/a"; else printf "%+.2f ms (%+.0f%% of the ADD without)", d, d / b * 100 }'; }

report() {
    local hdr="| metric | tollgate | reference (ptp+bandwidth, burst $HUGE)" sep="|---|---|---"
    if ((SANE_ROUNDS)); then hdr+=" | reference, sane burst ($SANE_MS ms at the rate)$( ((SANE_ROUNDS < R)) && echo ", $SANE_ROUNDS rounds")"; sep+="|---"; fi
    hdr+=" | note |"; sep+="|---|"
    echo "## Tollgate shaping benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg $LOAD_START at start, $LOAD_END at end, ${ELAPSED}s)"
    echo
    echo "- tollgate: \`$TG_BIN\` (sha256 $TG_SHA...), masquerade true, runtimeConfig.bandwidth {IngressRate: R, IngressBurst: $HUGE, EgressRate: R, EgressBurst: $HUGE} (as containerd sends it)."
    echo "- reference: containernetworking-plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins 2>/dev/null) ptp + host-local ($masq_txt), then bandwidth with prevResult = ptp's result and the same runtimeConfig.bandwidth$( ((SANE_ROUNDS)) && echo "; the sane-burst variant sends burst = R × $SANE_MS ms instead")."
    echo "- Every measurement on a freshly added pod (full token buckets); $R rounds, the order of the variants rotating per round; iperf3 $(iperf3 --version | awk 'NR==1 {print $2}') (one TCP flow, congestion control ${CC:-?}), ${DUR} s per direction, pod ↔ 203.0.113.1 in a wan netns beyond the node. Cells: median (min–max) over the rounds."
    echo "- accuracy, steady window: IP-layer rate from the shaping root qdisc's counters (tc -s: bytes − 14 B Ethernet header × packets; IFB for egress, host veth for ingress) between 1.5 s and ${DUR} s − 0.25 s, ÷ R. Both shapers charge the 14 B header, so exact shaping of full-size frames reads 99.1% (1500/1514)."
    echo "- accuracy, whole run: iperf3 receiver bytes × (MSS+52)/MSS (IPv4 + TCP-with-timestamps headers) ÷ iperf3 receiver duration ÷ R; includes the start, where a bucket is full."
    echo "- first second: receiver-side goodput of iperf3's first 1-s interval ÷ R (exact shaping: 95.6% = 1448/1514). Added latency: ping RTT (every 50 ms, 1.0 s to ${DUR} s − 0.5 s) − the same pod's idle median RTT."
    for rate in $RATES; do
        local m dir dn
        m=$(mbit "$rate")
        echo
        echo "### R = ${m} Mbit/s, ingress and egress"
        echo
        echo "$hdr"; echo "$sep"
        for dir in eg in; do
            [[ $dir == eg ]] && dn="egress" || dn="ingress"
            row "$dn: accuracy, steady window (tc counters)" "acc_ss_${dir}_$rate" "IP bits/s ÷ R"
            row "$dn: accuracy, whole run (iperf3 bytes + headers)" "acc_run_${dir}_$rate" "IP bits/s ÷ R"
            row "$dn: first second ÷ R" "first1s_${dir}_$rate" "goodput; the initial burst"
            row "$dn: TCP goodput" "goodput_${dir}_$rate" "iperf3 receiver, whole run"
            row "$dn: added latency under saturation, median" "rtt_add_${dir}_$rate" ""
            row "$dn: added latency under saturation, p90" "rtt_add90_${dir}_$rate" ""
            row "$dn: TCP retransmits per run" "retrans_${dir}_$rate" "iperf3 sender"
            row "$dn: shaper drops per run" "drops_${dir}_$rate" "root qdisc drop counter over the whole run (skbs; one HTB/bfifo drop can be a whole GSO skb)"
        done
        row "idle RTT" "rtt_idle_$rate" "pod → 203.0.113.1"
    done
    echo
    echo "### Short transfer: $XFER_BYTES bytes at R = $(mbit "$XFER_RATE") Mbit/s (ideal $XFER_IDEAL_MS ms for the payload; $XFER_WIRE_MS ms counting Ethernet+IP+TCP headers per segment)"
    echo
    echo "$hdr"; echo "$sep"
    row "upload (pod → wan), all transfers" xfer_up "$XFER_N per pod; connect() → server confirms the last byte"
    row "upload, first transfer on a fresh pod" xfer1_up "full bucket"
    row "download (wan → pod), all transfers" xfer_down "connect() → last byte read"
    row "download, first transfer on a fresh pod" xfer1_down "full bucket"
    row "upload: TCP retransmits per transfer" xretr_up "the pod's tcpi_total_retrans"
    row "download: TCP retransmits per transfer" xretr_down "the server's tcpi_total_retrans"
    row "upload: median time ÷ ideal" xferx_up "below 1 = faster than R allows (unshaped)"
    row "download: median time ÷ ideal" xferx_down "below 1 = faster than R allows (unshaped)"
    echo
    echo "### ADD latency added by shaping"
    echo
    echo "Pairs of ADDs (with / without shaping) back to back, alternating which goes first, each on a fresh pod netns and followed by an untimed DEL; batches of 5 pairs, tollgate and reference batches alternating; timed inside the node netns around the plugin exec(s)."
    echo
    echo "| metric | tollgate | reference | note |"
    echo "|---|---|---|---|"
    printf '| ADD median with runtimeConfig.bandwidth (n=%s / %s) | %.2f ms | %.2f ms | reference: ptp ADD + bandwidth ADD (two execs, as libcni runs the chain) |\n' \
        "$(add_n tg-bw)" "$(add_n ref-chain)" "$A_TGBW" "$A_RC"
    printf '| ADD median without (n=%s / %s) | %.2f ms | %.2f ms | tollgate: same config, no runtimeConfig; reference: ptp alone |\n' \
        "$(add_n tg-plain)" "$(add_n ref-ptp)" "$A_TG" "$A_RP"
    printf '| added by shaping: median of paired differences | %s | %s | with − without within each pair |\n' \
        "$(fmt_diff "$(add_pairdiff tg-bw tg-plain)" "$A_TG")" "$(fmt_diff "$(add_pairdiff ref-chain ref-ptp)" "$A_RP")"
    printf '| added by shaping: difference of the medians | %s | %s | |\n' \
        "$(fmt_diff "$(awk -v a="$A_TGBW" -v b="$A_TG" 'BEGIN { print a - b }')" "$A_TG")" \
        "$(fmt_diff "$(awk -v a="$A_RC" -v b="$A_RP" 'BEGIN { print a - b }')" "$A_RP")"
    printf '| ADD p90 with / without | %.2f / %.2f ms | %.2f / %.2f ms | |\n' "$(add_p90 tg-bw)" "$(add_p90 tg-plain)" "$(add_p90 ref-chain)" "$(add_p90 ref-ptp)"
    if ((${#NOTES[@]})); then
        echo
        echo "Notes:"
        printf -- '- %s\n' "${NOTES[@]}"
    fi
}
CC=$(awk '$2 == "cc" { c[$3] = 1 } END { for (k in c) s = s (s ? "/" : "") k; print s }' "$RAWF")
while read -r v m val; do
    NOTES+=("$v, ${m#ploss_}: ${val}% of the pings under saturation were lost")
done < <(awk '$2 ~ /^ploss_/ && $3 + 0 > 0' "$RAWF")
load_cells "$XFER_IDEAL_MS"
read -r CNT_MED CNT_MAX < <(awk '$2 == "cnt_us" { v[++n] = $3 } END { if (!n) exit; for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j+1] = v[j]; v[j+1] = t }; printf "%.1f %.1f\n", v[int((n+1)/2)] / 1000, v[n] / 1000 }' "$RAWF")
if [[ -n ${CNT_MAX:-} ]]; then
    NOTES+=("each qdisc counter read took ${CNT_MED} ms (median; worst ${CNT_MAX} ms) and is timed at its midpoint: the steady-window accuracy is good to about ±$(awk -v w="$CNT_MAX" -v d="$DUR" 'BEGIN { printf "%.1f", w / ((d - 1.75) * 1000) * 100 }')% at worst")
fi
A_TGBW=$(add_med tg-bw) A_TG=$(add_med tg-plain) A_RC=$(add_med ref-chain) A_RP=$(add_med ref-ptp)
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
if [[ -n ${BENCH_RAW:-} ]]; then
    mkdir -p "$BENCH_RAW" && cp "$RAWF" "$BENCH_RAW/shaping.samples" && cp "$WORK/add.times" "$BENCH_RAW/add.times" &&
        cp -r "$WORK/ipf" "$BENCH_RAW/iperf3"
    [[ -f $WORK/tollgate.log ]] && cp "$WORK/tollgate.log" "$BENCH_RAW/tollgate.log"
fi
bench_verdict "$WORK/report.md" # (no stated target yet: a comparison)
