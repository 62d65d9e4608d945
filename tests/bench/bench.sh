#!/usr/bin/env bash
# Tollgate benchmark: CNI ADD/DEL latency, burst wall time and the plugin's
# per-step breakdown, against Debian's containernetworking-plugins and against
# the kernel's own floor, all measured interleaved in one run.
#
# Usage: tests/bench/bench.sh [BIN_DIR]      (BIN_DIR default: $TOLLGATE_BIN_DIR or build)
#
# Variants ("kinds"), each with its own node netns, network name and pod range:
#   ta  tollgate, scenario A: accounting + masquerade, no shaping        10.1.0.0/22
#   ra  ptp + host-local, ipMasq false: the anchor of scenario A         10.2.0.0/22
#   rm  ptp + host-local, ipMasq true (iptables), for information only;  10.3.0.0/22
#       only when iptables works in the node netns (BENCH_REF_IPMASQ)
#   tb  tollgate, scenario B: internet egress shaping of pod, namespace  10.4.0.0/22
#       and node, plus runtimeConfig.bandwidth (ingress and egress), with
#       capabilities {"bandwidth": true} as kubelet's runtime sends it
#   rb  ptp + host-local + bandwidth as libcni runs that conflist: ADD   10.5.0.0/22
#       ptp, then bandwidth with prevResult; DEL bandwidth, then ptp
# Phases:
#   1. every kind gets BENCH_RESIDENT_LOW resident pods (ADDs that stay), then
#      BENCH_PODS cycles: one ADD per kind, the floors, one DEL per kind
#   2. bursts (ta ra rm): BENCH_ROUNDS rounds of BENCH_BURST concurrent ADDs,
#      then as many concurrent DELs, on top of the low residents
#   3. ta ra rm grow to BENCH_RESIDENT_HIGH resident pods, then BENCH_PODS
#      more ADD/DEL cycles (the "flat" target: ADD at high - ADD at low)
# Floors, in the node netns, same run: exec of /bin/true; a veth pair's create
# and delete and an IFB's create and delete, each amortised over one
# `ip -batch` of BENCH_VETH_BATCH (and, for reference, one `ip -batch` of one
# pair, its exec included); and the delete of a pod's kind of veth pair (its
# peer up in a network namespace of its own with a /32, the host end up with
# its /32 route; both ends in one namespace delete ~2 ms faster). ADD floor of
# A = /bin/true + veth create; DEL floor = the devices the plugin deletes: the
# pod's veth (A), the pod's veth and its IFB (B).
# Per-step breakdown: the plugin's logFile line of every call (duration_ms,
# steps_ms=config:..,store:..) joined by container ID with the wall time the
# bench measured; medians per column.
#
# Namespaces: <run>-wan (the "internet", 203.0.113.1, peer of every node
# uplink), <run>-n-<kind> (nodes), <run>-<kind>-<tag>-<i> (one per pod); all
# deleted on exit. The root namespace (its links, routes, nftables/iptables) is
# never touched. Each node netns runs one long-lived worker shell (started
# once with `ip netns exec`), so netns-exec overhead is outside every timed
# region; the controller drives the workers in lock-step, rotating which goes
# first, so drift hits every variant alike. Timings use bash's $EPOCHREALTIME
# around the plugin invocation(s) (fork+exec+run+exit). dataDir, logFile and
# host-local's dataDir live on tmpfs (/dev/shm).
#
# Knobs (env):
#   BENCH_PODS=60            ADD/DEL cycles per kind, in each of phases 1 and 3
#   BENCH_RESIDENT_LOW=10    resident pods per kind during phases 1 and 2
#   BENCH_RESIDENT_HIGH=250  resident pods per kind (ta ra rm) during phase 3
#   BENCH_BURST=50           concurrent ADDs per burst
#   BENCH_ROUNDS=5           burst rounds per kind (median reported)
#   BENCH_VETH_BATCH=10      veths / IFBs per amortised `ip -batch` floor sample
#   BENCH_FLOOR_EVERY=5      take the amortised floors every this many cycles
#   BENCH_REF_IPMASQ=auto    the rm kind: auto (when iptables works in the node netns), 1, 0
#   BENCH_B_RATE=100000000   scenario B: runtimeConfig.bandwidth ingressRate and egressRate (bits/s)
#   BENCH_B_BURST=400000     scenario B: ingressBurst and egressBurst (bits; 4 ms at 100 Mbit/s)
#   BENCH_DEL_PREVRESULT=1   send the ADD result as prevResult on DEL (as containerd does)
#   BENCH_DEL_SLACK_MS=3     DEL target: within this of the floor of the devices it deletes
#   BENCH_STRICT=1           exit 1 (after the report) when a stated target is missed; 0: report only
#   BENCH_REPORT=FILE        also write the markdown report to FILE
#   BENCH_RAW=DIR            also copy the raw samples ("metric usec [containerID]") and plugin logs to DIR
set -u
export LC_ALL=C

# ---------------------------------------------------------------- worker --
# Runs inside a node netns. Reads commands from $CMD_FIFO, answers on $ACK_FIFO
# ("ok" or "FAIL"; details in $W_DIR/fail.txt), appends "metric usec [id]" to
# $W_DIR/times. W_BWCONF (reference chains only): the bandwidth plugin's entry.
if [[ ${1:-} == __worker ]]; then
    set +e
    exec 3<"$CMD_FIFO" 4>"$ACK_FIFO" 5>>"$W_DIR/times"
    # shellcheck disable=SC2317  # invoked by the trap
    w_stop() { local -a j; mapfile -t j < <(jobs -p); ((${#j[@]})) && kill "${j[@]}" 2>/dev/null; exit 143; }
    trap w_stop TERM INT
    CONF=$(<"$W_CONF")
    CONF_HEAD=${CONF%\}}               # config without its closing brace
    BW_HEAD=
    if [[ -n ${W_BWCONF:-} ]]; then BW=$(<"$W_BWCONF"); BW_HEAD=${BW%\}}; fi
    declare -A IP_OF=() OWNER_OF=()
    mkdir -p "$W_DIR/out"

    w_fail() {  # msg [files...]
        {
            printf '%s: %s\n' "$W_KIND" "$1"; shift
            local f
            for f in "$@"; do
                [[ -e $f ]] || continue
                printf -- '--- %s:\n' "${f##*/}"; head -c 3000 "$f"; printf '\n'
            done
        } >"$W_DIR/fail.txt"
        echo FAIL >&4
    }
    cni_args() { # id pod
        printf -v ARGS 'IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s' "$2" "$1" "${1:0:8}-0000-4000-8000-${1:52:12}"
    }
    # check one ADD: rc, an IP in the result, in our range, not handed out twice;
    # writes the DEL configs (with prevResult = the chain's final result)
    check_add() { # id rc result-file
        local id=$1 rc=$2 res_f=$3 out=$W_DIR/out/$1.add res ip
        if [[ $rc != 0 ]]; then
            w_fail "ADD $id exited $rc" "$out" "$out.err" "$out.bw" "$out.bw.err"; return 1
        fi
        res=; IFS= read -r -d '' res <"$res_f"
        if [[ ! $res =~ \"address\"[[:space:]]*:[[:space:]]*\"([0-9.]+)/[0-9]+\" ]]; then
            w_fail "ADD $id exited 0 but its result has no ips[].address" "$res_f" "$out.err"; return 1
        fi
        ip=${BASH_REMATCH[1]}
        if [[ ! $ip =~ $W_IPRE ]]; then
            w_fail "ADD $id returned $ip, outside the configured range ($W_IPRE)" "$res_f"; return 1
        fi
        if [[ -n ${OWNER_OF[$ip]:-} ]]; then
            w_fail "ADD $id returned $ip, which is still held by ${OWNER_OF[$ip]}" "$res_f"; return 1
        fi
        OWNER_OF[$ip]=$id; IP_OF[$id]=$ip
        if [[ $BENCH_DEL_PREVRESULT == 1 ]]; then
            printf '%s,"prevResult":%s}\n' "$CONF_HEAD" "$res" >"$out.delconf"
            [[ -z $BW_HEAD ]] || printf '%s,"prevResult":%s}\n' "$BW_HEAD" "$res" >"$out.bwdelconf"
        else
            printf '%s\n' "$CONF" >"$out.delconf"
            [[ -z $BW_HEAD ]] || printf '%s\n' "$BW" >"$out.bwdelconf"
        fi
    }
    check_del() { # id rc
        local out=$W_DIR/out/$1.add
        if [[ $2 != 0 ]]; then
            w_fail "DEL $1 exited $2" "$out.del" "$out.del.err" "$out.bwdel" "$out.bwdel.err"; return 1
        fi
        local ip=${IP_OF[$1]:-}
        [[ -n $ip ]] && unset "OWNER_OF[$ip]"
        unset "IP_OF[$1]"
    }

    w_add() { # metric ns id pod
        local m=$1 ns=$2 id=$3 out=$W_DIR/out/$3.add t0 t1 rc ARGS res res_f
        cni_args "$id" "$4"
        res_f=$out
        t0=$EPOCHREALTIME
        CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/var/run/netns/$ns CNI_IFNAME=eth0 \
            CNI_PATH=$W_CNIPATH CNI_ARGS=$ARGS "$W_BIN" <"$W_CONF" >"$out" 2>"$out.err"
        rc=$?
        if [[ -n $BW_HEAD && $rc == 0 ]]; then
            res=; IFS= read -r -d '' res <"$out"
            printf '%s,"prevResult":%s}\n' "$BW_HEAD" "$res" >"$out.bwconf"
            CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/var/run/netns/$ns CNI_IFNAME=eth0 \
                CNI_PATH=$W_CNIPATH CNI_ARGS=$ARGS "$W_BW" <"$out.bwconf" >"$out.bw" 2>"$out.bw.err"
            rc=$?
            res_f=$out.bw
        fi
        t1=$EPOCHREALTIME
        echo "$m $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} )) $id" >&5
        check_add "$id" "$rc" "$res_f" && echo ok >&4
    }
    w_del() { # metric ns id pod
        local m=$1 ns=$2 id=$3 out=$W_DIR/out/$3.add t0 t1 rc=0 ARGS
        cni_args "$id" "$4"
        t0=$EPOCHREALTIME
        if [[ -n $BW_HEAD ]]; then  # libcni: the chain's plugins in reverse order
            CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=/var/run/netns/$ns CNI_IFNAME=eth0 \
                CNI_PATH=$W_CNIPATH CNI_ARGS=$ARGS "$W_BW" <"$out.bwdelconf" >"$out.bwdel" 2>"$out.bwdel.err"
            rc=$?
        fi
        if [[ $rc == 0 ]]; then
            CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=/var/run/netns/$ns CNI_IFNAME=eth0 \
                CNI_PATH=$W_CNIPATH CNI_ARGS=$ARGS "$W_BIN" <"$out.delconf" >"$out.del" 2>"$out.del.err"
            rc=$?
        fi
        t1=$EPOCHREALTIME
        echo "$m $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} )) $id" >&5
        check_del "$id" "$rc" && echo ok >&4
    }
    w_burst() { # add|del round count
        local cmd=$1 r=$2 k=$3 i t0 t1 ok=1 ARGS
        local -a ids nss argv pids rcs
        if [[ -n $BW_HEAD ]]; then w_fail "bursts of a plugin chain are not implemented"; return; fi
        for ((i = 1; i <= k; i++)); do
            printf -v 'ids[i]' '%s%08x%048x' "$RUNHEX" "$((1000 + r))" "$i"
            nss[i]=$RUN-$W_KIND-b$r-$i
            cni_args "${ids[i]}" "burst$r-$i"; argv[i]=$ARGS
        done
        if [[ $cmd == add ]]; then
            t0=$EPOCHREALTIME
            for ((i = 1; i <= k; i++)); do
                CNI_COMMAND=ADD CNI_CONTAINERID=${ids[i]} CNI_NETNS=/var/run/netns/${nss[i]} CNI_IFNAME=eth0 \
                    CNI_PATH=$W_CNIPATH CNI_ARGS=${argv[i]} "$W_BIN" <"$W_CONF" \
                    >"$W_DIR/out/${ids[i]}.add" 2>"$W_DIR/out/${ids[i]}.add.err" &
                pids[i]=$!
            done
        else
            t0=$EPOCHREALTIME
            for ((i = 1; i <= k; i++)); do
                CNI_COMMAND=DEL CNI_CONTAINERID=${ids[i]} CNI_NETNS=/var/run/netns/${nss[i]} CNI_IFNAME=eth0 \
                    CNI_PATH=$W_CNIPATH CNI_ARGS=${argv[i]} "$W_BIN" <"$W_DIR/out/${ids[i]}.add.delconf" \
                    >"$W_DIR/out/${ids[i]}.add.del" 2>"$W_DIR/out/${ids[i]}.add.del.err" &
                pids[i]=$!
            done
        fi
        for ((i = 1; i <= k; i++)); do wait "${pids[i]}"; rcs[i]=$?; done
        t1=$EPOCHREALTIME
        echo "burst_$cmd $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))" >&5
        for ((i = 1; i <= k; i++)); do
            if [[ $cmd == add ]]; then
                check_add "${ids[i]}" "${rcs[i]}" "$W_DIR/out/${ids[i]}.add" || { ok=0; break; }
            else
                check_del "${ids[i]}" "${rcs[i]}" || { ok=0; break; }
            fi
        done
        ((ok)) && echo ok >&4
    }
    w_true() { # [metric suffix]
        local t0 t1
        t0=$EPOCHREALTIME; /bin/true; t1=$EPOCHREALTIME
        echo "true${1:-} $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))" >&5
        echo ok >&4
    }
    w_version() { # plugin start-up cost: CNI_COMMAND=VERSION (exec, dynamic linking / runtime init, exit)
        local t0 t1 rc out=$W_DIR/out/version
        t0=$EPOCHREALTIME
        CNI_COMMAND=VERSION "$W_BIN" <"$W_CONF" >"$out" 2>"$out.err"
        rc=$?
        t1=$EPOCHREALTIME
        echo "version $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))" >&5
        if [[ $rc != 0 ]]; then w_fail "VERSION exited $rc" "$out" "$out.err"; return; fi
        echo ok >&4
    }
    # w_devs veth|ifb K SUFFIX: one `ip -batch` creating K devices, one deleting
    # them; K=1 records "<dev>c1"/"<dev>d1" (one process each, its exec
    # included), K>1 the per-device share "<dev>cB<SUFFIX>"/"<dev>dB<SUFFIX>"
    w_devs() {
        local dev=$1 k=$2 sfx=${3:-} i t0 t1 rc1 rc2 d1 d2 f=$W_DIR/$1.$2
        if [[ ! -e $f.c ]]; then
            for ((i = 1; i <= k; i++)); do
                case $dev in
                    veth) echo "link add bvh$i type veth peer name bvp$i" ;;
                    podveth) echo "link add bph$i type veth peer name eth0 netns $RUN-fl$i" ;;
                    *) echo "link add bif$i type ifb" ;;
                esac
            done >"$f.c"
            for ((i = 1; i <= k; i++)); do
                case $dev in
                    veth) echo "link del bvh$i" ;;
                    podveth) echo "link del bph$i" ;;
                    *) echo "link del bif$i" ;;
                esac
            done >"$f.d"
        fi
        t0=$EPOCHREALTIME; ip -batch "$f.c" 2>"$W_DIR/devs.err"; rc1=$?; t1=$EPOCHREALTIME
        d1=$(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))
        if [[ $dev == podveth && $rc1 == 0 ]]; then
            # made like a pod's (untimed): both ends up, a /32 inside, its route outside
            for ((i = 1; i <= k; i++)); do
                ip link set "bph$i" up && ip -n "$RUN-fl$i" link set eth0 up &&
                    ip -n "$RUN-fl$i" addr add "10.255.0.$i/32" dev eth0 &&
                    ip route add "10.255.0.$i/32" dev "bph$i" || rc1=1
            done 2>>"$W_DIR/devs.err"
        fi
        t0=$EPOCHREALTIME; ip -batch "$f.d" 2>>"$W_DIR/devs.err"; rc2=$?; t1=$EPOCHREALTIME
        d2=$(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))
        if [[ $rc1 != 0 || $rc2 != 0 ]]; then w_fail "$dev floor: ip -batch failed" "$W_DIR/devs.err"; return; fi
        if ((k == 1)); then
            echo "${dev}c1 $d1" >&5; echo "${dev}d1 $d2" >&5
        else
            echo "${dev}cB$sfx $((d1 / k))" >&5; echo "${dev}dB$sfx $((d2 / k))" >&5
        fi
        echo ok >&4
    }

    echo ready >&4
    while read -r op a b c d <&3; do
        case $op in
            add) w_add "$a" "$b" "$c" "$d" ;;
            del) w_del "$a" "$b" "$c" "$d" ;;
            burst) w_burst "$a" "$b" "$c" ;;
            true) w_true "$a" ;;
            version) w_version ;;
            devs) w_devs "$a" "$b" "$c" ;;
            quit) echo ok >&4; exit 0 ;;
            *) w_fail "unknown worker command '$op'" ;;
        esac
    done
    exit 0
fi

# ------------------------------------------------------------ controller --
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
REF_DIR=/usr/lib/cni
N=${BENCH_PODS:-60}
RLO=${BENCH_RESIDENT_LOW:-10}
RHI=${BENCH_RESIDENT_HIGH:-250}
K=${BENCH_BURST:-50}
R=${BENCH_ROUNDS:-5}
VB=${BENCH_VETH_BATCH:-10}
FE=${BENCH_FLOOR_EVERY:-5}
REF_IPMASQ=${BENCH_REF_IPMASQ:-auto}
B_RATE=${BENCH_B_RATE:-100000000}
B_BURST=${BENCH_B_BURST:-400000}
export BENCH_DEL_PREVRESULT=${BENCH_DEL_PREVRESULT:-1}
SLACK_MS=${BENCH_DEL_SLACK_MS:-3}

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench: %s\n' "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "plugin binary $TG_BIN not found or not executable (run make first)"
for p in ptp host-local bandwidth; do
    [[ -x $REF_DIR/$p ]] || die "reference plugin $REF_DIR/$p missing: apt-get install containernetworking-plugins"
done
command -v ip >/dev/null || die "ip (iproute2) missing"
((N >= 1 && RLO >= 1 && RHI >= RLO && K >= 1 && R >= 1 && VB >= 2 && FE >= 1)) || die "bad BENCH_* knobs"
((RHI + N + K < 1000)) || die "BENCH_RESIDENT_HIGH + BENCH_PODS + BENCH_BURST must stay below 1000 (a /22 per kind)"

RUNHEX=$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
RUN=tgb$RUNHEX
export RUN RUNHEX                    # the workers name their burst pods' netns with them
WORK=$(mktemp -d /dev/shm/tollgate-bench.XXXXXX) || die "mktemp failed"
NWAN=$RUN-wan
WORKER_PIDS=()
CLEANED=0
declare -A WPID=() WFD_OUT=() WFD_IN=()

# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    local p fd
    for fd in "${WFD_OUT[@]}" "${WFD_IN[@]}"; do exec {fd}>&-; done 2>/dev/null
    for p in "${WORKER_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${WORKER_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    netns_del_run
    [[ -n ${WORK:-} && $WORK == /dev/shm/tollgate-bench.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# ---------------------------------------------------------------- topology
log "run $RUN, work dir $WORK"
netns_batch add "$NWAN" "$RUN-n-ta" "$RUN-n-ra" "$RUN-n-rm" "$RUN-n-tb" "$RUN-n-rb"
# the pod side of the pod-like veth floor: one namespace per pair
FLNS=(); for ((i = 1; i <= VB; i++)); do FLNS+=("$RUN-fl$i"); done
netns_batch add "${FLNS[@]}"
ip -n "$NWAN" link set lo up
ip -n "$NWAN" addr add 203.0.113.1/32 dev lo
# node_uplink k: uplink 10.240.k.0/24, pod range 10.<k+1>.0.0/22 routed back
k=0
for kind in ta ra rm tb rb; do
    node_uplink "$NWAN" "$RUN-n-$kind" "$k" "10.$((k + 1)).0.0/22"
    k=$((k + 1))
done

if [[ $REF_IPMASQ == auto ]]; then
    if command -v iptables >/dev/null && ip netns exec "$RUN-n-rm" iptables -w 5 -t nat -S >/dev/null 2>&1; then
        REF_IPMASQ=1
    else
        REF_IPMASQ=0
    fi
fi
KA=(ta ra)                      # scenario A kinds (and the info variant)
((REF_IPMASQ == 1)) && KA+=(rm)
K1=("${KA[@]}" tb rb)           # phase 1: every kind
declare -A KNAME=([ta]="tollgate A" [ra]="ptp+host-local" [rm]="ptp+host-local+ipMasq" [tb]="tollgate B" [rb]="ptp+host-local+bandwidth")

# ----------------------------------------------------------------- configs
mkdir -p "$WORK/bin"
# Snapshot the plugin: a rebuild of $BIN_DIR during the run must not mix binaries.
cp "$TG_BIN" "$WORK/bin/tollgate" || die "cannot copy $TG_BIN"
TG_SHA=$(sha256sum "$WORK/bin/tollgate" | cut -c1-12)
for kind in "${K1[@]}"; do mkdir -p "$WORK/$kind"; done
# Same cniVersion for all: the Debian plugins (1.1.1) stop at 1.0.0.
tg_conf() { # kind range [extra JSON members]
    printf '%s\n' "{\"cniVersion\":\"1.0.0\",\"name\":\"tgbench-$1\",\"type\":\"tollgate\",\"mtu\":1500,\"uplink\":\"eth0\",\"internalCIDRs\":[\"10.0.0.0/8\"],\"masquerade\":true,\"dataDir\":\"$WORK/$1/data\",\"logFile\":\"$WORK/$1/tollgate.log\",\"ipam\":{\"source\":\"static\",\"addresses\":[\"$2\"],\"cooldownSeconds\":0}${3:+,$3}}" >"$WORK/$1/conf.json"
}
ref_conf() { # kind range ipMasq
    printf '%s\n' "{\"cniVersion\":\"1.0.0\",\"name\":\"refbench-$1\",\"type\":\"ptp\",\"mtu\":1500,\"ipMasq\":$3,\"ipam\":{\"type\":\"host-local\",\"ranges\":[[{\"subnet\":\"$2\"}]],\"routes\":[{\"dst\":\"0.0.0.0/0\"}],\"dataDir\":\"$WORK/$1/hl\"}}" >"$WORK/$1/conf.json"
}
BW_JSON="{\"ingressRate\":$B_RATE,\"ingressBurst\":$B_BURST,\"egressRate\":$B_RATE,\"egressBurst\":$B_BURST}"
B_SHAPING='{"internetEgress":{"node":"1G","namespaceDefault":"200M","podDefault":"100M"}}'
tg_conf ta 10.1.0.0/22
ref_conf ra 10.2.0.0/22 false
((REF_IPMASQ == 1)) && ref_conf rm 10.3.0.0/22 true
tg_conf tb 10.4.0.0/22 "\"shaping\":$B_SHAPING,\"capabilities\":{\"bandwidth\":true},\"runtimeConfig\":{\"bandwidth\":$BW_JSON}"
ref_conf rb 10.5.0.0/22 false
printf '%s\n' "{\"cniVersion\":\"1.0.0\",\"name\":\"refbench-rb\",\"type\":\"bandwidth\",\"capabilities\":{\"bandwidth\":true},\"runtimeConfig\":{\"bandwidth\":$BW_JSON}}" >"$WORK/rb/bwconf.json"

# ----------------------------------------------------------------- workers
start_worker() { # kind bin cnipath ipre [bwconf]
    local kind=$1 fdo fdi
    mkfifo "$WORK/$kind/cmd" "$WORK/$kind/ack" || die mkfifo
    : >"$WORK/$kind/times"
    W_KIND=$kind W_BIN=$2 W_CNIPATH=$3 W_IPRE=$4 W_BWCONF=${5:-} W_BW=$REF_DIR/bandwidth \
        W_CONF=$WORK/$kind/conf.json W_DIR=$WORK/$kind \
        CMD_FIFO=$WORK/$kind/cmd ACK_FIFO=$WORK/$kind/ack \
        ip netns exec "$RUN-n-$kind" bash "$HERE/bench.sh" __worker </dev/null &
    WORKER_PIDS+=($!)
    WPID[$kind]=$!
    # read-write opens never block, so a worker that dies before opening its FIFOs is noticed
    exec {fdo}<>"$WORK/$kind/cmd" {fdi}<>"$WORK/$kind/ack"
    WFD_OUT[$kind]=$fdo WFD_IN[$kind]=$fdi
}
start_worker ta "$WORK/bin/tollgate" "$WORK/bin" '^10\.1\.[0-3]\.[0-9]+$'
start_worker ra "$REF_DIR/ptp" "$REF_DIR" '^10\.2\.[0-3]\.[0-9]+$'
((REF_IPMASQ == 1)) && start_worker rm "$REF_DIR/ptp" "$REF_DIR" '^10\.3\.[0-3]\.[0-9]+$'
start_worker tb "$WORK/bin/tollgate" "$WORK/bin" '^10\.4\.[0-3]\.[0-9]+$'
start_worker rb "$REF_DIR/ptp" "$REF_DIR" '^10\.5\.[0-3]\.[0-9]+$' "$WORK/rb/bwconf.json"
reply_of() { # worker what -> sets REPLY_LINE; dies if the worker exits or stays silent for 300 s
    local w=$1 s
    for ((s = 0; s < 300; s++)); do
        read -r -t 1 REPLY_LINE <&"${WFD_IN[$w]}" && return 0
        kill -0 "${WPID[$w]}" 2>/dev/null || die "worker $w exited during '$2'"
    done
    die "worker $w: no answer to '$2' within 300 s"
}
for w in "${K1[@]}"; do
    reply_of "$w" start
    [[ $REPLY_LINE == ready ]] || die "worker $w did not start (said '$REPLY_LINE')"
done

ask() { # worker command...
    local w=$1 reply; shift
    echo "$*" >&"${WFD_OUT[$w]}"
    reply_of "$w" "$*"; reply=$REPLY_LINE
    if [[ $reply != ok ]]; then
        printf '\nbench: ABORT: a plugin invocation failed (%s: %s)\n' "$w" "$*" >&2
        cat "$WORK/$w/fail.txt" >&2 2>/dev/null
        exit 1
    fi
}
# rot I KINDS...: the kinds rotated by I (which one goes first changes every time)
rot() { local i=$1; shift; local n=$# s; s=$((i % n)); ROT=("${@:s+1}" "${@:1:s}"); }
cid() { printf '%s%08x%048x' "$RUNHEX" "$1" "$2"; }  # tag index
# pods TAG FROM TO KINDS...: netns names "$RUN-<kind>-TAG-<i>" into PODS
pods() { local t=$1 a=$2 b=$3 i w; shift 3; PODS=(); for ((i = a; i <= b; i++)); do for w in "$@"; do PODS+=("$RUN-$w-$t-$i"); done; done; }
# residents FROM TO KINDS...: ADDs that stay (tag "r", metric "res"), interleaved
residents() {
    local a=$1 b=$2 i w; shift 2
    pods r "$a" "$b" "$@"; netns_batch add "${PODS[@]}"
    for ((i = a; i <= b; i++)); do
        rot "$i" "$@"
        for w in "${ROT[@]}"; do ask "$w" add res "$RUN-$w-r-$i" "$(cid 1 "$i")" "res-$i"; done
    done
}
# cycles TAG METRIC-SUFFIX FLOOR-SUFFIX KINDS...: N cycles of ADD per kind, floors, DEL per kind
cycles() {
    local t=$1 sfx=$2 fsfx=$3 i w tag; shift 3
    tag=$((t == 1 ? 2 : 3))
    pods "c$t" 1 "$N" "$@"; netns_batch add "${PODS[@]}"
    for ((i = 1; i <= N; i++)); do
        rot "$i" "$@"
        for w in "${ROT[@]}"; do ask "$w" add "add$sfx" "$RUN-$w-c$t-$i" "$(cid "$tag" "$i")" "pod-$i"; done
        if ((t == 1)); then
            ask ta true
            for w in "${ROT[@]}"; do ask "$w" version; done
            ask ta devs veth 1
        else
            ask ta true _hi   # the exec floor again, on the node with many pods
        fi
        for w in "${ROT[@]}"; do ask "$w" del "del$sfx" "$RUN-$w-c$t-$i" "$(cid "$tag" "$i")" "pod-$i"; done
        if ((i % FE == 0)); then
            ask ta devs veth "$VB" "$fsfx"
            ask ta devs podveth "$VB" "$fsfx"
            ((t == 1)) && ask tb devs ifb "$VB" "$fsfx"
        fi
    done
    netns_batch del "${PODS[@]}"
}
count_links() { ip -n "$RUN-n-$1" -o link show | grep -c ": $2[0-9a-f]\{12\}[@:]"; }
store_atts() { local st=$WORK/$1/data/tgbench-$1/state.json; [[ -f $st ]] && grep -o '"containerId"' "$st" | wc -l || echo none; }
NOTES=()
# leftovers KINDS... (expected: RES residents each)
leftovers() {
    local w n want=$1; shift
    for w in "$@"; do
        case $w in
            t?)
                n=$(count_links "$w" tg); ((n == want)) || NOTES+=("${KNAME[$w]}: $n tg* host veths with $want resident pods (expected $want)")
                n=$(store_atts "$w"); [[ $n == "$want" ]] || NOTES+=("${KNAME[$w]}: state.json lists $n attachments with $want resident pods")
                n=$(ip -n "$RUN-n-$w" -4 route show | grep -c ' dev tg[0-9a-f]')
                ((n == want)) || NOTES+=("${KNAME[$w]}: $n 10.x host routes with $want resident pods")
                ;;
            *)
                n=$(ip -n "$RUN-n-$w" -o link show type veth | grep -vc ': eth0@')
                ((n == want)) || NOTES+=("${KNAME[$w]}: $n host veths with $want resident pods")
                ;;
        esac
    done
}

if awk -v l="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    NOTES+=("machine busy at start (1-min load ${LOAD_START%% *} > $(nproc) CPUs): absolute times inflated; interleaving keeps the ratios comparable, not exact")
fi

# ----------------------------------------------------------------- phase 1
log "phase 1: $RLO resident pods per kind (${K1[*]}), then $N ADD/DEL cycles"
residents 1 "$RLO" "${K1[@]}"
IFB_PER_POD=0
n_ti=$(count_links tb ti)
if ((n_ti == RLO)); then IFB_PER_POD=1
else NOTES+=("scenario B: $n_ti per-pod IFBs (ti*) for $RLO resident pods; the B DEL floor counts the veth only")
fi
if command -v tc >/dev/null; then  # scenario B shapes: node, namespace and pod classes on the internet IFB
    n=$(tc -n "$RUN-n-tb" class show dev tollgate-inet 2>/dev/null | grep -c '^class htb')
    ((n >= RLO + 2)) || NOTES+=("scenario B: $n HTB classes on tollgate-inet with $RLO resident pods (expected node + namespace + $RLO pods)")
fi
if command -v ping >/dev/null; then
    for w in "${K1[@]}"; do
        ip netns exec "$RUN-$w-r-1" ping -c1 -W2 -q 203.0.113.1 >/dev/null 2>&1 ||
            NOTES+=("data path: resident pod 1 of ${KNAME[$w]} could NOT ping 203.0.113.1 (wan)")
    done
fi
cycles 1 10 "" "${K1[@]}"
leftovers "$RLO" "${K1[@]}"
((IFB_PER_POD)) && { n_ti=$(count_links tb ti); ((n_ti == RLO)) || NOTES+=("scenario B: $n_ti ti* IFBs after the cycles, with $RLO resident pods"); }

# ----------------------------------------------------------------- phase 2
for ((r = 1; r <= R; r++)); do
    log "burst round $r/$R: $K concurrent ADDs per kind (${KA[*]}), then $K concurrent DELs"
    PODS=()
    for w in "${KA[@]}"; do for ((i = 1; i <= K; i++)); do PODS+=("$RUN-$w-b$r-$i"); done; done
    netns_batch add "${PODS[@]}"
    rot "$r" "${KA[@]}"
    for w in "${ROT[@]}"; do ask "$w" burst add "$r" "$K"; done
    for w in "${ROT[@]}"; do ask "$w" burst del "$r" "$K"; done
    netns_batch del "${PODS[@]}"
done
leftovers "$RLO" "${KA[@]}"

# ----------------------------------------------------------------- phase 3
log "phase 3: ${KA[*]} grow to $RHI resident pods, then $N ADD/DEL cycles"
((RHI > RLO)) && residents $((RLO + 1)) "$RHI" "${KA[@]}"
cycles 3 "$RHI" _hi "${KA[@]}"
leftovers "$RHI" "${KA[@]}"
for w in "${K1[@]}"; do ask "$w" quit; done

# ------------------------------------------------------------------ report
# stats FILE METRIC -> "n median p99" (ms), nearest-rank p99, median of even n = mean of middle two
stats() {
    awk -v m="$2" '$1 == m { v[++n] = $2 } END {
        if (!n) { print "0 NaN NaN"; exit }
        for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j+1] = v[j]; v[j+1] = x }
        med = (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
        r = int(0.99 * n); if (r < 0.99 * n) r++; if (r < 1) r = 1
        printf "%d %.3f %.3f\n", n, med / 1000, v[r] / 1000 }' "$1"
}
cat "$WORK"/*/times >"$WORK/all.times"
declare -A MED=() P99=() CNT=()
for w in "${K1[@]}"; do
    for m in add10 del10 "add$RHI" "del$RHI" res version burst_add burst_del; do
        read -r "CNT[$w.$m]" "MED[$w.$m]" "P99[$w.$m]" < <(stats "$WORK/$w/times" "$m")
    done
done
for m in true true_hi vethc1 vethd1 vethcB vethdB podvethdB ifbcB ifbdB vethcB_hi vethdB_hi podvethdB_hi; do
    read -r "CNT[$m]" "MED[$m]" "P99[$m]" < <(stats "$WORK/all.times" "$m")
done
calc() { [[ $* == *NaN* ]] && { echo NaN; return; }; awk "BEGIN { printf \"%.3f\", $* }"; }
ms() { awk -v a="$1" 'BEGIN { if (a == "NaN" || a == "") print "n/a"; else printf "%.2f ms", a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "NaN") printf "%.2fx", a / b; else print "n/a" }'; }
chk() { [[ $1 == *NaN* ]] && { echo MISS; return; }; awk "BEGIN { print (($1) ? \"PASS\" : \"MISS\") }"; }
# cell kind metric [p99]
cell() { local k="$1.$2"; [[ -n ${MED[$k]:-} ]] || { echo "-"; return; }; if [[ -n ${3:-} ]]; then ms "${P99[$k]}"; else ms "${MED[$k]}"; fi; }

ADD_FLOOR=$(calc "${MED[true]} + ${MED[vethcB]}")
DEL_FLOOR_A=${MED[podvethdB]}
if ((IFB_PER_POD)); then DEL_FLOOR_B=$(calc "${MED[podvethdB]} + ${MED[ifbdB]}"); else DEL_FLOOR_B=$DEL_FLOOR_A; fi

# breakdown KIND METRIC CMD -> "name value" lines (median ms over the calls of
# that metric): exec (wall - duration_ms), each step, other (duration_ms - steps),
# inproc (duration_ms), wall; steps "n/a" when the log lines lack steps_ms
breakdown() {
    awk -v m="$2" -v cmd="$3" '
        FNR == NR { if ($1 == m && NF >= 3) wall[$3] = $2 / 1000; next }
        {
            c = ""; id = ""; dur = ""; st = ""
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^cmd=/) c = substr($i, 5)
                else if ($i ~ /^container=/) id = substr($i, 11)
                else if ($i ~ /^duration_ms=/) dur = substr($i, 13)
                else if ($i ~ /^steps_ms=/) st = substr($i, 10)
            }
            if (c != cmd || !(id in wall) || dur == "" || $NF != "result=ok") next
            n++
            put("exec", n, wall[id] - dur); put("inproc", n, dur); put("wall", n, wall[id])
            if (st == "") { nosteps = 1; next }
            k = split(st, parts, ","); sum = 0
            for (j = 1; j <= k; j++) {
                split(parts[j], kv, ":")
                if (!(kv[1] in seen)) { seen[kv[1]] = 1; order[++no] = kv[1] }
                put(kv[1], n, kv[2]); sum += kv[2]
                if (kv[2] + 0 != 0) nonzero[kv[1]] = 1
            }
            put("other", n, dur - sum)
        }
        function put(name, i, v) { cnt[name]++; val[name, cnt[name]] = v + 0 }
        function median(name,   c, a, i, j, x) {
            c = cnt[name]; if (!c) return "n/a"
            for (i = 1; i <= c; i++) a[i] = val[name, i]
            for (i = 2; i <= c; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
            return sprintf("%.2f", (c % 2) ? a[(c+1)/2] : (a[c/2] + a[c/2+1]) / 2)
        }
        END {
            print "n", n + 0
            print "exec", median("exec")
            for (j = 1; j <= no; j++) print order[j], (nosteps ? "n/a" : median(order[j]))
            print "other", ((nosteps || !no) ? "n/a" : median("other"))
            print "inproc", median("inproc")
            print "wall", median("wall")
            for (j = 1; j <= no; j++) if (!nosteps && !(order[j] in nonzero)) print "zero", order[j]
        }' "$WORK/$1/times" "$WORK/$1/tollgate.log"
}
declare -A BD=()
BD_COLS=("ta add10 ADD" "ta del10 DEL" "ta add$RHI ADD" "ta del$RHI DEL" "tb add10 ADD" "tb del10 DEL")
BD_HEAD=("A ADD ($RLO resident)" "A DEL ($RLO)" "A ADD ($RHI resident)" "A DEL ($RHI)" "B ADD ($RLO resident)" "B DEL ($RLO)")
BD_ROWS=()
for c in "${!BD_COLS[@]}"; do
    read -r kind metric cmd <<<"${BD_COLS[c]}"
    [[ -f $WORK/$kind/tollgate.log ]] || continue
    while read -r name v; do
        [[ $name == n ]] && { BD[n.$c]=$v; continue; }
        [[ $name == zero ]] && { BD[zero.$v]=$((${BD[zero.$v]:-0} + 1)); continue; }
        [[ -n ${BD[seen.$name]:-} ]] || { BD[seen.$name]=1; BD_ROWS+=("$name"); }
        BD[$name.$c]=$v
    done < <(breakdown "$kind" "$metric" "$cmd")
done
zero_steps=()
for row in "${BD_ROWS[@]}"; do
    [[ ${BD[zero.$row]:-0} == "${#BD_COLS[@]}" ]] && zero_steps+=("$row")
done
((${#zero_steps[@]})) && NOTES+=("the plugin logged 0.00 ms for step(s) ${zero_steps[*]} in every call of every column: time it does not attribute to a step shows up as \"other\"")
bd_label() {
    case $1 in
        exec) echo "exec and start-up (wall - duration_ms)" ;;
        other) echo "other (duration_ms - steps)" ;;
        inproc) echo "in-process total (duration_ms)" ;;
        wall) echo "**total (wall, measured by the bench)**" ;;
        *) echo "step: $1" ;;
    esac
}

a_add=${MED[ta.add10]} a_del=${MED[ta.del10]} a_add_hi=${MED[ta.add$RHI]}
ra_add=${MED[ra.add10]} b_add=${MED[tb.add10]} b_del=${MED[tb.del10]} rb_add=${MED[rb.add10]}
flat=$(calc "$a_add_hi - $a_add")
# t_ratio LABEL VALUE REF FACTOR: target VALUE <= FACTOR x REF
t_ratio() {
    local lim; lim=$(calc "$4 * $3")
    T+=("| $1 | $(ms "$2") = $(ratio3 "$2" "$3") of $(ms "$3"); limit $(ms "$lim") | $(chk "$2 <= $lim") |")
}
# t_abs LABEL VALUE BASE SLACK TEXT: target VALUE <= BASE + SLACK (TEXT names BASE)
t_abs() {
    local lim; lim=$(calc "$3 + $4")
    T+=("| $1 | $(ms "$2"); limit $5 $(ms "$3") + $4 ms = $(ms "$lim") | $(chk "$2 <= $lim") |")
}
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "NaN") printf "%.3fx", a / b; else print "n/a" }'; }
T=()
t_ratio "A: ADD median <= 0.3x ptp+host-local ADD median" "$a_add" "$ra_add" 0.3
t_ratio "A: ADD median <= 2.5x the floor (exec of /bin/true + veth create)" "$a_add" "$ADD_FLOOR" 2.5
T+=("| A: flat: ADD median at $RHI attachments - at $RLO <= 1 ms | $(ms "$a_add_hi") - $(ms "$a_add") = $(ms "$flat") | $(chk "$flat <= 1") |")
# For information: how much of that the node's own floor grew by in the same run
floor_growth=$(calc "${MED[true_hi]} + ${MED[vethcB_hi]} - ${MED[true]} - ${MED[vethcB]}")
T+=("| (information) the ADD floor's own growth from $RLO to $RHI pods (exec of /bin/true + veth create, same run); Tollgate's beyond it | $(ms "$floor_growth"); $(ms "$(calc "$flat - $floor_growth")") | info |")
t_ratio "A: burst of $K ADDs wall <= 0.5x ptp+host-local (medians of $R)" "${MED[ta.burst_add]}" "${MED[ra.burst_add]}" 0.5
t_ratio "B: ADD median <= 0.3x ptp+host-local+bandwidth ADD median" "$b_add" "$rb_add" 0.3
t_abs "A: DEL median <= pod's veth delete floor + $SLACK_MS ms" "$a_del" "$DEL_FLOOR_A" "$SLACK_MS" "floor"
b_devs="pod's veth$( ((IFB_PER_POD)) && echo " + IFB") delete floor"
t_abs "B: DEL median <= $b_devs + $SLACK_MS ms" "$b_del" "$DEL_FLOOR_B" "$SLACK_MS" "floor"

ELAPSED=$(( (${EPOCHREALTIME//[!0-9]/} - ${T_START//[!0-9]/}) / 1000000 ))
MAIN_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)

report() {
    local w c row
    echo "## Tollgate benchmark ($(date -u +%Y-%m-%dT%H:%MZ), commit $MAIN_REV, kernel $(uname -r), $(nproc) CPUs, load avg at start $LOAD_START, ${ELAPSED}s)"
    echo
    echo "- tollgate: \`$TG_BIN\` (sha256 $TG_SHA..., run from a snapshot copy), static pool, cooldownSeconds 0, dataDir and logFile on tmpfs."
    echo "  A: accounting + masquerade, no shaping. B: A plus \`\"shaping\":$B_SHAPING\`, \`\"capabilities\":{\"bandwidth\":true}\`, \`\"runtimeConfig\":{\"bandwidth\":$BW_JSON}\`."
    echo "- reference: containernetworking-plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins 2>/dev/null): ptp + host-local (ipMasq false: the anchor); $( ((REF_IPMASQ == 1)) && echo "ptp + host-local with ipMasq true (iptables $(iptables -V 2>/dev/null | awk '{print $2, $3}') in the node netns; information only)" || echo "no ipMasq variant (iptables not usable in the node netns)"); for B ptp + host-local + bandwidth (same runtimeConfig.bandwidth) run as libcni runs a conflist (ADD ptp, bandwidth with prevResult; DEL in reverse); host-local dataDir on tmpfs."
    echo "- All: cniVersion 1.0.0, mtu 1500, one node netns per variant, one fresh netns per pod, DEL $([[ $BENCH_DEL_PREVRESULT == 1 ]] && echo with || echo without) prevResult, interleaved (rotating which goes first). Times include fork+exec of the plugin(s)."
    echo "- Sequential: $N ADD/DEL cycles per variant with $RLO resident pods (every variant), then $N more with $RHI resident pods (A variants). Burst: $K concurrent ADDs then $K concurrent DELs on top of $RLO residents, $R rounds, median round."
    echo
    echo "### Scenario A: accounting + masquerade"
    echo
    printf '| metric |'; for w in "${KA[@]}"; do printf ' %s |' "${KNAME[$w]}"; done; printf ' tollgate / ptp+host-local |\n'
    printf '|---|'; for w in "${KA[@]}"; do printf -- '---|'; done; printf -- '---|\n'
    for row in "add10:ADD median, $RLO resident" "add10:ADD p99, $RLO resident:p" "del10:DEL median, $RLO resident" "del10:DEL p99, $RLO resident:p" \
        "add$RHI:ADD median, $RHI resident" "add$RHI:ADD p99, $RHI resident:p" "del$RHI:DEL median, $RHI resident" \
        "res:ADD median of the resident pods (store growing 0 -> $RHI)" \
        "burst_add:burst of $K ADDs, wall (median of $R)" "burst_add:burst of $K ADDs, wall (worst of $R):p" "burst_del:burst of $K DELs, wall (median of $R)" \
        "version:start-up and exit (CNI_COMMAND=VERSION), median"; do
        IFS=: read -r m label p <<<"$row"
        printf '| %s |' "$label"
        for w in "${KA[@]}"; do printf ' %s |' "$(cell "$w" "$m" "$p")"; done
        if [[ -n $p ]]; then printf ' %s |\n' "$(ratio "${P99[ta.$m]}" "${P99[ra.$m]}")"
        else printf ' %s |\n' "$(ratio "${MED[ta.$m]}" "${MED[ra.$m]}")"; fi
    done
    echo
    echo "### Scenario B: full feature set ($RLO resident pods)"
    echo
    echo "| metric | tollgate B | ptp+host-local+bandwidth | tollgate / reference |"
    echo "|---|---|---|---|"
    for row in "add10:ADD median" "add10:ADD p99:p" "del10:DEL median" "del10:DEL p99:p"; do
        IFS=: read -r m label p <<<"$row"
        if [[ -n $p ]]; then printf '| %s | %s | %s | %s |\n' "$label" "$(cell tb "$m" p)" "$(cell rb "$m" p)" "$(ratio "${P99[tb.$m]}" "${P99[rb.$m]}")"
        else printf '| %s | %s | %s | %s |\n' "$label" "$(cell tb "$m")" "$(cell rb "$m")" "$(ratio "${MED[tb.$m]}" "${MED[rb.$m]}")"; fi
    done
    echo
    echo "### Floors (same run, node netns)"
    echo
    echo "| floor | median | p99 | n |"
    echo "|---|---|---|---|"
    echo "| exec of /bin/true | $(ms "${MED[true]}") | $(ms "${P99[true]}") | ${CNT[true]} |"
    echo "| exec of /bin/true, node with $RHI pods (information: what the flat target's difference owes to the node, not to Tollgate) | $(ms "${MED[true_hi]}") | $(ms "${P99[true_hi]}") | ${CNT[true_hi]} |"
    echo "| veth create, per pair, amortised over \`ip -batch\` of $VB | $(ms "${MED[vethcB]}") | $(ms "${P99[vethcB]}") | ${CNT[vethcB]} |"
    echo "| veth delete, per pair, amortised over \`ip -batch\` of $VB | $(ms "${MED[vethdB]}") | $(ms "${P99[vethdB]}") | ${CNT[vethdB]} |"
    echo "| IFB create, amortised over \`ip -batch\` of $VB | $(ms "${MED[ifbcB]}") | $(ms "${P99[ifbcB]}") | ${CNT[ifbcB]} |"
    echo "| pod's veth delete (peer up in its own netns, /32 and route), per pair, amortised over \`ip -batch\` of $VB | $(ms "${MED[podvethdB]}") | $(ms "${P99[podvethdB]}") | ${CNT[podvethdB]} |"
    echo "| IFB delete, amortised over \`ip -batch\` of $VB | $(ms "${MED[ifbdB]}") | $(ms "${P99[ifbdB]}") | ${CNT[ifbdB]} |"
    echo "| veth create / delete, amortised, node with $RHI pods | $(ms "${MED[vethcB_hi]}") / $(ms "${MED[vethdB_hi]}") | $(ms "${P99[vethcB_hi]}") / $(ms "${P99[vethdB_hi]}") | ${CNT[vethcB_hi]} |"
    echo "| (info) one \`ip -batch\` process creating 1 veth pair / deleting it | $(ms "${MED[vethc1]}") / $(ms "${MED[vethd1]}") | $(ms "${P99[vethc1]}") / $(ms "${P99[vethd1]}") | ${CNT[vethc1]} |"
    echo "| **ADD floor** (exec of /bin/true + veth create) | $(ms "$ADD_FLOOR") | | |"
    ((IFB_PER_POD)) && echo "| ADD floor B, for information (exec of /bin/true + veth create + IFB create) | $(ms "$(calc "$ADD_FLOOR + ${MED[ifbcB]}")") | | |"
    echo "| **DEL floor A** (pod's veth delete) | $(ms "$DEL_FLOOR_A") | | |"
    echo "| **DEL floor B** ($b_devs) | $(ms "$DEL_FLOOR_B") | | |"
    echo
    echo "### Where tollgate's time goes (median ms per row over the sequential calls; rows need not add up)"
    echo
    if ((${#BD_ROWS[@]})); then
        printf '| |'; for c in "${!BD_HEAD[@]}"; do printf ' %s |' "${BD_HEAD[c]}"; done; echo
        printf '|---|'; for c in "${!BD_HEAD[@]}"; do printf -- '---|'; done; echo
        printf '| calls matched in the log |'; for c in "${!BD_HEAD[@]}"; do printf ' %s |' "${BD[n.$c]:-0}"; done; echo
        for row in "${BD_ROWS[@]}"; do
            printf '| %s |' "$(bd_label "$row")"
            for c in "${!BD_HEAD[@]}"; do printf ' %s |' "${BD[$row.$c]:-n/a}"; done; echo
        done
    else
        echo "(no plugin log lines matched)"
    fi
    echo
    echo "### Targets"
    echo
    echo "| target | measured | status |"
    echo "|---|---|---|"
    printf '%s\n' "${T[@]}"
    if ((${#NOTES[@]})); then
        echo
        echo "Notes:"
        printf -- '- %s\n' "${NOTES[@]}"
    fi
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
if [[ -n ${BENCH_RAW:-} ]]; then
    mkdir -p "$BENCH_RAW" || die "cannot create $BENCH_RAW"
    for w in "${K1[@]}"; do
        cp "$WORK/$w/times" "$BENCH_RAW/$w.times"
        [[ -f $WORK/$w/tollgate.log ]] && cp "$WORK/$w/tollgate.log" "$BENCH_RAW/$w.tollgate.log"
    done
fi
bench_verdict "$WORK/report.md"
