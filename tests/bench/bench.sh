#!/usr/bin/env bash
# Tollgate benchmark: CNI ADD/DEL latency and burst wall time, tollgate vs the
# reference chain (Debian containernetworking-plugins: ptp + host-local).
#
# Usage: tests/bench/bench.sh [BIN_DIR]      (BIN_DIR default: $TOLLGATE_BIN_DIR or build)
#
# Everything runs in fresh network namespaces whose names are unique to this run:
#   <run>-wan   the "cloud fabric / internet": peer of both node uplinks, 203.0.113.1
#   <run>-ntg   node for tollgate   (eth0 10.240.0.4/24, default via 10.240.0.1)
#   <run>-nref  node for reference  (eth0 10.240.1.4/24, default via 10.240.1.1)
#   <run>-t<i>, <run>-r<i>, <run>-tb<r>-<i>, <run>-rb<r>-<i>   one netns per pod
# The root namespace (its links, routes, nftables/iptables) is never touched.
# Each node netns runs one long-lived worker shell (started once with
# `ip netns exec`), so netns-exec overhead is outside every timed region; the
# controller drives both workers in lock-step (alternating which goes first)
# so drift hits tollgate and the reference equally. Timings use bash's
# $EPOCHREALTIME around the plugin invocation itself (fork+exec+run+exit).
#
# Knobs (env):
#   BENCH_PODS=100        sequential ADD/DEL pods per plugin (>= 50)
#   BENCH_BURST=50        concurrent ADDs per burst
#   BENCH_ROUNDS=3        burst rounds per plugin (median reported)
#   BENCH_VETH_BATCH=20   pairs per amortised `ip -batch` veth floor
#   BENCH_REF_IPMASQ=auto ptp ipMasq: auto (true if iptables works in the node netns), 1, 0
#   BENCH_DEL_PREVRESULT=1  send the ADD result as prevResult on DEL (as containerd does)
#   BENCH_DEL_SLACK_MS=5  "within a few ms of the veth deletion floor"
#   BENCH_STRICT=1        exit 1 (after the report) when a stated target is missed; 0: report only
#   BENCH_REPORT=FILE     also write the markdown report to FILE
#   BENCH_RAW=DIR         also copy the raw samples ("metric usec" lines) to DIR
set -u
export LC_ALL=C

# ---------------------------------------------------------------- worker --
# Runs inside a node netns. Reads commands from $CMD_FIFO, answers on $ACK_FIFO
# ("ok" or "FAIL"; details in $W_DIR/fail.txt), appends "metric usec" to
# $W_DIR/times.
if [[ ${1:-} == __worker ]]; then
    set +e
    exec 3<"$CMD_FIFO" 4>"$ACK_FIFO" 5>>"$W_DIR/times"
    w_stop() { local j; j=$(jobs -p); [[ -n $j ]] && kill $j 2>/dev/null; exit 143; }
    trap w_stop TERM INT
    CONF=$(<"$W_CONF")
    CONF_HEAD=${CONF%\}}               # config without its closing brace
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
    # check one ADD: rc, an IP in the result, in our range, not handed out twice
    check_add() { # id rc
        local id=$1 rc=$2 out=$W_DIR/out/$1.add res ip
        if [[ $rc != 0 ]]; then
            w_fail "ADD $id exited $rc" "$out" "$out.err"; return 1
        fi
        res=; IFS= read -r -d '' res <"$out"
        if [[ ! $res =~ \"address\"[[:space:]]*:[[:space:]]*\"([0-9.]+)/[0-9]+\" ]]; then
            w_fail "ADD $id exited 0 but its result has no ips[].address" "$out" "$out.err"; return 1
        fi
        ip=${BASH_REMATCH[1]}
        if [[ ! $ip =~ $W_IPRE ]]; then
            w_fail "ADD $id returned $ip, outside the configured range ($W_IPRE)" "$out"; return 1
        fi
        if [[ -n ${OWNER_OF[$ip]:-} ]]; then
            w_fail "ADD $id returned $ip, which is still held by ${OWNER_OF[$ip]}" "$out"; return 1
        fi
        OWNER_OF[$ip]=$id; IP_OF[$id]=$ip
        if [[ $BENCH_DEL_PREVRESULT == 1 ]]; then
            printf '%s,"prevResult":%s}\n' "$CONF_HEAD" "$res" >"$out.delconf"
        else
            printf '%s\n' "$CONF" >"$out.delconf"
        fi
    }
    check_del() { # id rc
        local out=$W_DIR/out/$1.add
        if [[ $2 != 0 ]]; then
            w_fail "DEL $1 exited $2" "$out.del" "$out.del.err"; return 1
        fi
        local ip=${IP_OF[$1]:-}
        [[ -n $ip ]] && unset "OWNER_OF[$ip]"
        unset "IP_OF[$1]"
    }

    w_add() { # ns id pod
        local ns=$1 id=$2 out=$W_DIR/out/$2.add t0 t1 rc ARGS
        cni_args "$id" "$3"
        t0=$EPOCHREALTIME
        CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/var/run/netns/$ns CNI_IFNAME=eth0 \
            CNI_PATH=$W_CNIPATH CNI_ARGS=$ARGS "$W_BIN" <"$W_CONF" >"$out" 2>"$out.err"
        rc=$?
        t1=$EPOCHREALTIME
        echo "add $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))" >&5
        check_add "$id" "$rc" && echo ok >&4
    }
    w_del() { # ns id pod
        local ns=$1 id=$2 out=$W_DIR/out/$2.add t0 t1 rc ARGS
        cni_args "$id" "$3"
        t0=$EPOCHREALTIME
        CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=/var/run/netns/$ns CNI_IFNAME=eth0 \
            CNI_PATH=$W_CNIPATH CNI_ARGS=$ARGS "$W_BIN" <"$out.delconf" >"$out.del" 2>"$out.del.err"
        rc=$?
        t1=$EPOCHREALTIME
        echo "del $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))" >&5
        check_del "$id" "$rc" && echo ok >&4
    }
    w_burst() { # add|del round count
        local cmd=$1 r=$2 k=$3 i t0 t1 ok=1 ARGS
        local -a ids nss argv pids rcs
        for ((i = 1; i <= k; i++)); do
            printf -v 'ids[i]' '%s%08x%048x' "$RUNHEX" "$((1000 + r))" "$i"
            nss[i]=$RUN-${W_KIND:0:1}b$r-$i
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
                check_add "${ids[i]}" "${rcs[i]}" || { ok=0; break; }
            else
                check_del "${ids[i]}" "${rcs[i]}" || { ok=0; break; }
            fi
        done
        ((ok)) && echo ok >&4
    }
    w_true() {
        local t0 t1
        t0=$EPOCHREALTIME; /bin/true; t1=$EPOCHREALTIME
        echo "true $(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))" >&5
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
    w_veth() { # pairs: 1 -> one `ip -batch` process each for create and delete
        local k=$1 i t0 t1 rc1 rc2 d1 d2
        if [[ ! -e $W_DIR/vc$k ]]; then
            for ((i = 1; i <= k; i++)); do echo "link add bvh$i type veth peer name bvp$i"; done >"$W_DIR/vc$k"
            for ((i = 1; i <= k; i++)); do echo "link del bvh$i"; done >"$W_DIR/vd$k"
        fi
        t0=$EPOCHREALTIME; ip -batch "$W_DIR/vc$k" 2>"$W_DIR/veth.err"; rc1=$?; t1=$EPOCHREALTIME
        d1=$(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))
        t0=$EPOCHREALTIME; ip -batch "$W_DIR/vd$k" 2>>"$W_DIR/veth.err"; rc2=$?; t1=$EPOCHREALTIME
        d2=$(( ${t1//[!0-9]/} - ${t0//[!0-9]/} ))
        if [[ $rc1 != 0 || $rc2 != 0 ]]; then w_fail "veth floor: ip -batch failed" "$W_DIR/veth.err"; return; fi
        if ((k == 1)); then
            echo "vethc1 $d1" >&5; echo "vethd1 $d2" >&5; echo "vethcd1 $((d1 + d2))" >&5
        else
            echo "vethcB $((d1 / k))" >&5; echo "vethdB $((d2 / k))" >&5
        fi
        echo ok >&4
    }

    echo ready >&4
    while read -r op a b c <&3; do
        case $op in
            add) w_add "$a" "$b" "$c" ;;
            del) w_del "$a" "$b" "$c" ;;
            burst) w_burst "$a" "$b" "$c" ;;
            true) w_true ;;
            version) w_version ;;
            veth) w_veth "$a" ;;
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
N=${BENCH_PODS:-100}
K=${BENCH_BURST:-50}
R=${BENCH_ROUNDS:-3}
VB=${BENCH_VETH_BATCH:-20}
REF_IPMASQ=${BENCH_REF_IPMASQ:-auto}
export BENCH_DEL_PREVRESULT=${BENCH_DEL_PREVRESULT:-1}
SLACK_MS=${BENCH_DEL_SLACK_MS:-5}

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench: %s\n' "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "plugin binary $TG_BIN not found or not executable (run make first)"
[[ -x $REF_DIR/ptp && -x $REF_DIR/host-local ]] || die "reference plugins missing: apt-get install containernetworking-plugins"
command -v ip >/dev/null || die "ip (iproute2) missing"
((N >= 1 && K >= 1 && R >= 1 && VB >= 2)) || die "bad BENCH_* knobs"

RUNHEX=$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
RUN=tgb$RUNHEX
WORK=$(mktemp -d /dev/shm/tollgate-bench.XXXXXX) || die "mktemp failed"
NTG=$RUN-ntg NREF=$RUN-nref NWAN=$RUN-wan
WORKER_PIDS=()
CLEANED=0

cleanup() {
    ((CLEANED)) && return; CLEANED=1
    local p
    exec 13>&- 14<&- 15>&- 16<&- 2>/dev/null
    for p in "${WORKER_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${WORKER_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    netns_del_run
    [[ -n ${WORK:-} && $WORK == /dev/shm/tollgate-bench.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# pods netns batch helpers

# ---------------------------------------------------------------- topology
log "run $RUN, work dir $WORK"
two_nodes "$NWAN" "$NTG" "$NREF" 203.0.113.1

# ----------------------------------------------------------------- configs
mkdir -p "$WORK/tg" "$WORK/ref" "$WORK/tgdata" "$WORK/hl" "$WORK/bin"
# Snapshot the plugin: a rebuild of $BIN_DIR during the run must not mix binaries.
cp "$TG_BIN" "$WORK/bin/tollgate" || die "cannot copy $TG_BIN"
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
printf '%s\n' "{\"cniVersion\":\"1.0.0\",\"name\":\"tgbench\",\"type\":\"tollgate\",\"mtu\":1500,\"uplink\":\"eth0\",\"internalCIDRs\":[\"10.0.0.0/8\"],\"masquerade\":true,\"dataDir\":\"$WORK/tgdata\",\"logFile\":\"$WORK/tollgate.log\",\"ipam\":{\"source\":\"static\",\"addresses\":[\"10.1.0.0/22\"],\"cooldownSeconds\":0}}" >"$WORK/tg/conf.json"
printf '%s\n' "{\"cniVersion\":\"1.0.0\",\"name\":\"refbench\",\"type\":\"ptp\",\"mtu\":1500,\"ipMasq\":$REF_IPMASQ_JSON,\"ipam\":{\"type\":\"host-local\",\"ranges\":[[{\"subnet\":\"10.2.0.0/22\"}]],\"routes\":[{\"dst\":\"0.0.0.0/0\"}],\"dataDir\":\"$WORK/hl\"}}" >"$WORK/ref/conf.json"

# ----------------------------------------------------------------- workers
start_worker() { # kind node bin cnipath ipre fdw fdr
    local kind=$1 node=$2
    mkfifo "$WORK/$kind/cmd" "$WORK/$kind/ack" || die mkfifo
    : >"$WORK/$kind/times"
    W_KIND=$kind W_BIN=$3 W_CNIPATH=$4 W_IPRE=$5 W_CONF=$WORK/$kind/conf.json W_DIR=$WORK/$kind \
        CMD_FIFO=$WORK/$kind/cmd ACK_FIFO=$WORK/$kind/ack RUN=$RUN RUNHEX=$RUNHEX \
        ip netns exec "$node" bash "$HERE/bench.sh" __worker </dev/null &
    WORKER_PIDS+=($!)
    WPID[$kind]=$!
}
declare -A WPID=()
start_worker tg "$NTG" "$WORK/bin/tollgate" "$WORK/bin" '^10\.1\.[0-3]\.[0-9]+$'
start_worker ref "$NREF" "$REF_DIR/ptp" "$REF_DIR" '^10\.2\.[0-3]\.[0-9]+$'
# read-write opens never block, so a worker that dies before opening its FIFOs is noticed
exec 13<>"$WORK/tg/cmd" 14<>"$WORK/tg/ack" 15<>"$WORK/ref/cmd" 16<>"$WORK/ref/ack"
declare -A WFD_OUT=([tg]=13 [ref]=15) WFD_IN=([tg]=14 [ref]=16)
reply_of() { # worker what -> sets REPLY_LINE; dies if the worker exits or stays silent for 300 s
    local w=$1 s
    for ((s = 0; s < 300; s++)); do
        read -r -t 1 REPLY_LINE <&"${WFD_IN[$w]}" && return 0
        kill -0 "${WPID[$w]}" 2>/dev/null || die "worker $w exited during '$2'"
    done
    die "worker $w: no answer to '$2' within 300 s"
}
for w in tg ref; do
    reply_of "$w" start
    [[ $REPLY_LINE == ready ]] || die "worker $w did not start (said '$REPLY_LINE')"
done

ask() { # worker command...
    local w=$1 reply; shift
    echo "$*" >&"${WFD_OUT[$w]}"
    reply_of "$w" "$*"; reply=$REPLY_LINE
    if [[ $reply != ok ]]; then
        printf '\nbench: ABORT: a plugin invocation failed (%s)\n' "$*" >&2
        cat "$WORK/$w/fail.txt" >&2 2>/dev/null
        exit 1
    fi
}
order() { (($1 % 2)) && echo "tg ref" || echo "ref tg"; }

cid() { printf '%s%08x%048x' "$RUNHEX" 0 "$1"; }

# ------------------------------------------------------ sequential ADD/DEL
pods=()
for ((i = 1; i <= N; i++)); do pods+=("$RUN-t$i" "$RUN-r$i"); done
netns_batch add "${pods[@]}"

log "sequential: $N ADDs per plugin (interleaved)"
for ((i = 1; i <= N; i++)); do
    read -r first second <<<"$(order "$i")"
    id=$(cid "$i")
    ask "$first" add "$RUN-${first:0:1}$i" "$id" "pod-$i"
    ask "$second" add "$RUN-${second:0:1}$i" "$id" "pod-$i"
    ask "$first" true
    ask "$second" version
    ask "$first" version
done

# data path sanity (not timed): first pod of each plugin reaches the "internet" host
NOTES=()
if awk -v l="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    NOTES+=("machine busy at start (1-min load ${LOAD_START%% *} > $(nproc) CPUs): absolute times inflated; interleaving keeps the ratios comparable, not exact")
fi
if command -v ping >/dev/null; then
    for w in tg ref; do
        if ip netns exec "$RUN-${w:0:1}1" ping -c1 -W2 -q 203.0.113.1 >/dev/null 2>&1; then
            NOTES+=("data path: pod 1 of $w pings 203.0.113.1 (wan) ok")
        else
            NOTES+=("data path: pod 1 of $w could NOT ping 203.0.113.1 (wan)")
        fi
    done
fi
tg_links_full=$(ip -n "$NTG" -o link show | grep -c ': tg[0-9a-f]\{12\}[@:]')
[[ $tg_links_full == "$N" ]] || NOTES+=("after $N ADDs the tollgate node has $tg_links_full tg* host veths (expected $N)")

log "sequential: $N DELs per plugin (interleaved) + veth floor"
for ((i = 1; i <= N; i++)); do
    read -r first second <<<"$(order "$i")"
    id=$(cid "$i")
    ask "$first" del "$RUN-${first:0:1}$i" "$id" "pod-$i"
    ask "$second" del "$RUN-${second:0:1}$i" "$id" "pod-$i"
    ask "$first" veth 1
done
for ((i = 1; i <= 3; i++)); do ask tg veth "$VB"; ask ref veth "$VB"; done

# leftovers after every DEL (while the pod netns still exist)
left_tg=$(ip -n "$NTG" -o link show | grep -c ': tg[0-9a-f]\{12\}[@:]')
left_ref=$(ip -n "$NREF" -o link show type veth | grep -vc ': eth0@')
left_route=$(ip -n "$NTG" -4 route show | grep -c '^10\.1\.')
((left_tg)) && NOTES+=("after all DELs $left_tg tg* veths remain in the tollgate node")
((left_route)) && NOTES+=("after all DELs $left_route 10.1.x host routes remain in the tollgate node")
((left_ref)) && NOTES+=("after all DELs $left_ref veths remain in the reference node")
if command -v nft >/dev/null; then
    for set in pods masq; do
        nft_left=$(ip netns exec "$NTG" nft list set inet tollgate "$set" 2>/dev/null | grep -o '10\.1\.[0-9]*\.[0-9]*' | wc -l)
        ((nft_left)) && NOTES+=("after all DELs the nft set inet tollgate $set still has $nft_left elements")
    done
fi
st=$WORK/tgdata/tgbench/state.json
if [[ -f $st ]]; then
    att=$(grep -o '"containerId"' "$st" | wc -l)
    ((att)) && NOTES+=("after all DELs state.json still lists $att attachments")
    cool=$(grep -o '"releasedMs"' "$st" | wc -l)
    ((cool > 1)) && NOTES+=("after all DELs (cooldownSeconds 0) state.json keeps $cool cooling entries ($(stat -c %s "$st") bytes)")
else
    NOTES+=("no state file at <dataDir>/tgbench/state.json")
fi
netns_batch del "${pods[@]}"

# ------------------------------------------------------------------ bursts
for ((r = 1; r <= R; r++)); do
    log "burst round $r/$R: $K concurrent ADDs per plugin, then $K concurrent DELs"
    pods=()
    for ((i = 1; i <= K; i++)); do pods+=("$RUN-tb$r-$i" "$RUN-rb$r-$i"); done
    netns_batch add "${pods[@]}"
    read -r first second <<<"$(order "$r")"
    ask "$first" burst add "$r" "$K"
    ask "$second" burst add "$r" "$K"
    ask "$second" burst del "$r" "$K"
    ask "$first" burst del "$r" "$K"
    netns_batch del "${pods[@]}"
done
ask tg quit; ask ref quit

# ------------------------------------------------------------------ report
# stats: metric -> "n median p99" (ms), nearest-rank p99, median of even n = mean of middle two
stats() { # file metric
    awk -v m="$2" '$1 == m { v[++n] = $2 } END {
        if (!n) { print "0 NaN NaN"; exit }
        for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j+1] = v[j]; v[j+1] = x }
        med = (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
        r = int(0.99 * n); if (r < 0.99 * n) r++; if (r < 1) r = 1
        printf "%d %.3f %.3f\n", n, med / 1000, v[r] / 1000 }' "$1"
}
cat "$WORK/tg/times" "$WORK/ref/times" >"$WORK/all.times"
read -r n_tadd tadd_med tadd_p99 < <(stats "$WORK/tg/times" add)
read -r _ radd_med radd_p99 < <(stats "$WORK/ref/times" add)
read -r _ tdel_med tdel_p99 < <(stats "$WORK/tg/times" del)
read -r _ rdel_med rdel_p99 < <(stats "$WORK/ref/times" del)
read -r _ tver_med _ < <(stats "$WORK/tg/times" version)
read -r _ rver_med _ < <(stats "$WORK/ref/times" version)
read -r _ tba_med tba_p99 < <(stats "$WORK/tg/times" burst_add)
read -r _ rba_med rba_p99 < <(stats "$WORK/ref/times" burst_add)
read -r _ tbd_med _ < <(stats "$WORK/tg/times" burst_del)
read -r _ rbd_med _ < <(stats "$WORK/ref/times" burst_del)
read -r n_true true_med true_p99 < <(stats "$WORK/all.times" true)
read -r n_v1 vc1_med vc1_p99 < <(stats "$WORK/all.times" vethc1)
read -r _ vd1_med vd1_p99 < <(stats "$WORK/all.times" vethd1)
read -r _ vcd1_med vcd1_p99 < <(stats "$WORK/all.times" vethcd1)
read -r n_vb vcb_med vcb_p99 < <(stats "$WORK/all.times" vethcB)
read -r _ vdb_med vdb_p99 < <(stats "$WORK/all.times" vethdB)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.1fx", a / b; else print "n/a" }'; }
ms() { awk -v a="$1" 'BEGIN { printf "%.2f ms", a }'; }
row() { printf '| %s | %s | %s | %s |\n' "$1" "$(ms "$2")" "$(ms "$3")" "$(ratio "$3" "$2")"; }
chk() { awk "BEGIN { print (($1) ? \"PASS\" : \"MISS\") }"; }

ELAPSED=$(( (${EPOCHREALTIME//[!0-9]/} - ${T_START//[!0-9]/}) / 1000000 ))
[[ $REF_IPMASQ == 1 ]] && masq_txt="ipMasq:true (iptables $(iptables -V 2>/dev/null | awk '{print $2, $3}'), run inside the reference node netns only)" || masq_txt="ipMasq:false (no iptables usable in the node netns)"
add_ratio=$(awk -v a="$radd_med" -v b="$tadd_med" 'BEGIN { print (b > 0) ? a / b : 0 }')
burst_ratio=$(awk -v a="$rba_med" -v b="$tba_med" 'BEGIN { print (b > 0) ? a / b : 0 }')
del_gap=$(awk -v a="$tdel_med" -v b="$vd1_med" 'BEGIN { printf "%.2f", a - b }')
t1=$(chk "$add_ratio >= 5"); t1b=$(chk "$add_ratio >= 10"); t2=$(chk "$burst_ratio >= 5")
t3=$(chk "$tdel_med <= $rdel_med"); t4=$(chk "$del_gap <= $SLACK_MS")

report() {
    echo "## Tollgate benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg at start $LOAD_START, ${ELAPSED}s)"
    echo
    echo "tollgate: \`$TG_BIN\` (sha256 $TG_SHA..., run from a snapshot copy), static pool 10.1.0.0/22, masquerade true, cooldownSeconds 0, dataDir+logFile on tmpfs."
    echo "reference: containernetworking-plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins 2>/dev/null) ptp + host-local, 10.2.0.0/22, $masq_txt, host-local dataDir on tmpfs."
    echo "Both: cniVersion 1.0.0, mtu 1500, own node netns (uplink eth0 veth to a shared wan netns), one fresh netns per pod, DEL $([[ $BENCH_DEL_PREVRESULT == 1 ]] && echo with || echo without) prevResult; runs interleaved (alternating first)."
    echo "Sequential: $n_tadd pods per plugin (ADD all, then DEL all). Burst: $K concurrent ADDs (then $K concurrent DELs), $R rounds, median round shown. Times include fork+exec of the plugin."
    echo
    echo "| metric | tollgate | reference (ptp+host-local) | ratio (ref/tollgate) |"
    echo "|---|---|---|---|"
    row "ADD median" "$tadd_med" "$radd_med"
    row "ADD p99" "$tadd_p99" "$radd_p99"
    row "DEL median" "$tdel_med" "$rdel_med"
    row "DEL p99" "$tdel_p99" "$rdel_p99"
    row "plugin start+exit (CNI_COMMAND=VERSION) median" "$tver_med" "$rver_med"
    row "burst $K ADD wall (median of $R)" "$tba_med" "$rba_med"
    row "burst $K ADD wall (worst of $R)" "$tba_p99" "$rba_p99"
    row "burst $K DEL wall (median of $R)" "$tbd_med" "$rbd_med"
    echo
    echo "| floor (same run, node netns) | median | p99 |"
    echo "|---|---|---|"
    echo "| start a trivial process (/bin/true), n=$n_true | $(ms "$true_med") | $(ms "$true_p99") |"
    echo "| veth create: one \`ip -batch\` process, 1 pair, n=$n_v1 | $(ms "$vc1_med") | $(ms "$vc1_p99") |"
    echo "| veth delete: one \`ip -batch\` process, 1 pair, n=$n_v1 | $(ms "$vd1_med") | $(ms "$vd1_p99") |"
    echo "| veth create+delete (sum of the two above) | $(ms "$vcd1_med") | $(ms "$vcd1_p99") |"
    echo "| veth create per pair, amortised over \`ip -batch\` of $VB, n=$n_vb | $(ms "$vcb_med") | $(ms "$vcb_p99") |"
    echo "| veth delete per pair, amortised over \`ip -batch\` of $VB, n=$n_vb | $(ms "$vdb_med") | $(ms "$vdb_p99") |"
    echo
    echo "| target | measured | status |"
    echo "|---|---|---|"
    echo "| median ADD <= 1/5 of reference (aim 1/10) | $(ratio "$radd_med" "$tadd_med") faster | $t1 (aim: $t1b) |"
    echo "| burst $K ADD wall <= 1/5 of reference | $(ratio "$rba_med" "$tba_med") faster | $t2 |"
    echo "| DEL median no slower than reference | $(ms "$tdel_med") vs $(ms "$rdel_med") | $t3 |"
    echo "| DEL median within ${SLACK_MS} ms of the veth delete floor | +$del_gap ms over $(ms "$vd1_med") | $t4 |"
    if ((${#NOTES[@]})); then
        echo
        echo "Notes:"
        printf -- '- %s\n' "${NOTES[@]}"
    fi
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
if [[ -n ${BENCH_RAW:-} ]]; then
    mkdir -p "$BENCH_RAW" && cp "$WORK/tg/times" "$BENCH_RAW/tollgate.times" && cp "$WORK/ref/times" "$BENCH_RAW/reference.times"
    [[ -f $WORK/tollgate.log ]] && cp "$WORK/tollgate.log" "$BENCH_RAW/tollgate.log"
fi
bench_verdict "$WORK/report.md"
