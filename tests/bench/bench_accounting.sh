#!/usr/bin/env bash
# Tollgate accounting benchmark: forwarding cost of the nftables accounting
# table (pod -> internet, masqueraded) with 10 and 10,000 attachments, against
# no table at all and against the naive iptables extension (one FORWARD rule
# per namespace); and the cost of anti-spoofing (on vs off, at 10 and 10,000).
#
# Usage: tests/bench/bench_accounting.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Topology (fresh network namespaces, names unique to this run, <run>=tga<hex>):
#
#   <run>-p<k>-1 (pod, iperf3 client)   ... <run>-p<k>-<j> (more pods of node k)
#        | veth made by the tollgate plugin (real binary, static pool, masquerade true)
#   <run>-n<k>  "node" k: eth0 10.240.<k>.4/24, default via 10.240.<k>.1
#        | veth
#   <run>-inet  "internet host": 203.0.113.10/32 on lo, u<k> 10.240.<k>.1/24;
#               no route to the pods, so a pod reaches it only when masqueraded;
#               one iperf3 server per node (bound to 203.0.113.10).
#
# One node per variant, each built by the plugin the same way (ADD of its pods),
# then changed into its variant; nothing is reconfigured between runs, so a
# run measures exactly one steady kernel state:
#   A  no Tollgate table: `delete table inet tollgate`, plus a minimal
#      `table ip natonly` masquerading the pod (routes etc. as the plugin left them)
#   B  table inet tollgate with 10 real attachments (10 ADDs)
#   C  10 real attachments + 9,990 synthetic ones: elements added to the sets
#      pods, masq and pod_src and to the four ns_* and two spoofed_* maps
#      (pointing at 10 extra namespaces' counters), in one `nft -f` transaction
#   D  as A, plus 2,000 iptables-nft counting rules in FORWARD (`-s IP/32`, one
#      per namespace, the pod's rule last)
#   E  as D with 250 rules (UDP only; when it fits in the time budget)
#   F  as B with anti-spoofing off: chains from_pod and spoofed deleted and
#      prerouting_raw's mark rule as it was without them (`ip saddr @pods ...`; from_pod's
#      nodeAccess jumps go too) (UDP only)
#   G  as C with anti-spoofing off (UDP only)
#   H  as B with internetGuard on: connections (limits far above what a run
#      opens) and destinations (top 10 of /24s, 1,024 tracked): every internet
#      packet goes through its namespace's guard chain, and its prefix's set
#      element counts it, both ways
# Runs alternate A B H F C G D [E] within each metric of each round, in reverse
# order every other round (so that no variant always runs before its
# partner); ratios are taken per round (paired) and their median is
# reported. Anti-spoofing's cost is B against F and C against G: the same
# table but for anti-spoofing, each pair run back to back; the internet
# guard's is H against B.
#
# Metrics (iperf3 -J, client in the pod, server on the internet host):
#   TCP 1 and 4 streams: end.sum_received.bits_per_second
#   UDP 64-byte payload, -b 0: received pps = (packets - lost_packets)/seconds
#     (server side), plus the packets the node forwarded (rx delta of the
#     internet host's interface facing that node, read from /proc/<server>/net/dev).
#     -w 2M: with the default 208 KiB receive buffer (~270 small packets) any
#     scheduling hiccup of the server on this busy 2-CPU machine dropped 25-45%
#     at its socket, so "received" measured the server, not the node.
#   CPU: per-netns CPU time cannot be read, so CPU = getrusage of the iperf3
#     client and server (iperf3's cpu_utilization_percent x seconds) + the
#     ksoftirqd threads' time over the run. Forwarding through the node runs
#     in softirq on the sending CPU, mostly in the client's context and, with
#     tick accounting (no CONFIG_IRQ_TIME_ACCOUNTING), is charged to that task;
#     the rest lands in ksoftirqd. Variant differences are the node's cost.
#     TCP: client+server+ksoftirqd per GB; UDP: client+ksoftirqd per packet.
#     Both are also turned into "capacity at equal CPU" ratios, which on a
#     shared machine are steadier than the rates (a run's rate depends on the
#     CPU share it got, its CPU per byte much less).
#
# Time: about 7 minutes with the defaults (10 rounds x 15 runs of 2 s + setup);
# never more than BENCH_ACCT_DEADLINE + ~15 s.
#
# Knobs (env):
#   BENCH_ACCT_ROUNDS=10       rounds (each: every metric x every variant)
#   BENCH_ACCT_SECS=auto       iperf3 -t seconds; auto = longest of 5, 3, 2 that fits
#   BENCH_ACCT_DEADLINE=420    seconds since start by which the last round must end;
#                              a round that would not fit is not started (said so)
#   BENCH_ACCT_EXTRA=9990      synthetic attachments of variant C
#   BENCH_ACCT_IPT_RULES=2000  FORWARD rules of variant D
#   BENCH_ACCT_IPT_SMALL=auto  rules of variant E: a number, 0 (off) or auto (250 if it fits)
#   BENCH_ACCT_SPOOF=1         variants F and G (anti-spoofing off); 0: leave them out
#   BENCH_ACCT_GUARD=1         variant H (internetGuard on); 0: leave it out
#   BENCH_ACCT_UDP_WINDOW=2M   iperf3 -w for the UDP runs (socket buffers; see below)
#   BENCH_STRICT=1             exit 1 (after the report) when a stated target is missed; 0: report only
#   BENCH_ACCT_REPORT=FILE     also write the markdown report to FILE
#   BENCH_ACCT_RAW=DIR         also copy the raw per-run results and iperf3 JSON to DIR
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"

ROUNDS=${BENCH_ACCT_ROUNDS:-10}
SECS=${BENCH_ACCT_SECS:-auto}
DEADLINE=${BENCH_ACCT_DEADLINE:-420}
EXTRA=${BENCH_ACCT_EXTRA:-9990}
IPT_RULES=${BENCH_ACCT_IPT_RULES:-2000}
IPT_SMALL=${BENCH_ACCT_IPT_SMALL:-auto}
SPOOF=${BENCH_ACCT_SPOOF:-1}
GUARD=${BENCH_ACCT_GUARD:-1}
UDP_WIN=${BENCH_ACCT_UDP_WINDOW:-2M}
RUN_OVERHEAD=0.5    # estimated seconds per iperf3 run beyond -t (start, handshake, parsing)
SETUP_EST=15        # estimated seconds for setup + warm-up

die() { printf 'bench_accounting: %s\n' "$*" >&2; exit 1; }
elapsed() { echo $(( (${EPOCHREALTIME//[!0-9]/} - ${T_START//[!0-9]/}) / 1000000 )); }
log() { printf 'bench_accounting: [%3ss] %s\n' "$(elapsed)" "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $TG_BIN ]] || die "plugin binary $TG_BIN not found or not executable (run make first)"
for t in ip nft iperf3 jq timeout; do command -v "$t" >/dev/null || die "'$t' missing (make deps)"; done
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 ]] || die "BENCH_ACCT_ROUNDS must be >= 1"
[[ $SECS == auto || ($SECS =~ ^[0-9]+$ && SECS -ge 1) ]] || die "BENCH_ACCT_SECS must be auto or an integer >= 1"
[[ $DEADLINE =~ ^[0-9]+$ ]] || die "BENCH_ACCT_DEADLINE must be an integer"
[[ $EXTRA =~ ^[0-9]+$ && $EXTRA -le 60000 ]] || die "BENCH_ACCT_EXTRA must be 0..60000"
[[ $IPT_RULES =~ ^[0-9]+$ && $IPT_RULES -ge 1 && $IPT_RULES -le 60000 ]] || die "BENCH_ACCT_IPT_RULES must be 1..60000"
[[ $IPT_SMALL == auto || ($IPT_SMALL =~ ^[0-9]+$ && $IPT_SMALL -le 60000) ]] || die "BENCH_ACCT_IPT_SMALL must be auto or 0..60000"
[[ $SPOOF == 0 || $SPOOF == 1 ]] || die "BENCH_ACCT_SPOOF must be 0 or 1"
[[ $GUARD == 0 || $GUARD == 1 ]] || die "BENCH_ACCT_GUARD must be 0 or 1"
NSPOOF=$((SPOOF ? 2 : 0)) # UDP-only variants F and G

RUNHEX=$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
RUN=tga$RUNHEX
[[ -e /run/netns/$RUN-inet ]] && die "netns $RUN-inet already exists (retry)"
WORK=$(mktemp -d /dev/shm/tollgate-bench-acct.XXXXXX) || die "mktemp failed"
INET=$RUN-inet
INET_IP=203.0.113.10
declare -A SRV_PID=()
CLEANED=0

# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    local p f list=()
    for p in "${SRV_PID[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${SRV_PID[@]}"; do wait "$p" 2>/dev/null; done
    netns_del_run
    [[ -n ${WORK:-} && $WORK == /dev/shm/tollgate-bench-acct.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# ------------------------------------------------------------ plan / budget
IPT_OK=1
IPT_WHY=""
if ! command -v iptables-restore >/dev/null; then
    IPT_OK=0; IPT_WHY="iptables-restore not installed"
elif ! iptables-restore -V 2>/dev/null | grep -q nf_tables; then
    # legacy iptables would hit the xtables hooks, not nftables: not the comparison asked for
    IPT_OK=0; IPT_WHY="iptables-restore is not the nf_tables variant ($(iptables-restore -V 2>&1 | head -1))"
fi
NM=3 # metrics per full variant: tcp1 tcp4 udp
est_total() { # secs udp_only_variants -> estimated seconds for the whole script
    local nv=$((3 + GUARD))
    ((IPT_OK)) && nv=$((nv + 1))
    awk -v s="$1" -v e="$2" -v r="$ROUNDS" -v nv="$nv" -v nm="$NM" -v o="$RUN_OVERHEAD" -v su="$SETUP_EST" \
        'BEGIN { printf "%d\n", su + r * (nv * nm + e) * (s + o) + 0.999 }'
}
# Plans are made against the deadline minus 30 s: on this shared 2-CPU
# machine a run often takes twice its overhead estimate.
PLAN=$((DEADLINE - 30))
SECS_NOTE=""
if [[ $SECS == auto ]]; then
    for s in 5 3 2; do
        SECS=$s
        (($(est_total "$s" "$NSPOOF") <= PLAN)) && break
    done
    if ((SECS < 5)); then
        SECS_NOTE="iperf3 runs cut from 5 s to $SECS s to fit the time budget: $ROUNDS rounds x ($((IPT_OK ? 4 : 3)) variants x $NM metrics + $NSPOOF UDP-only) at 5 s would take ~$(est_total 5 "$NSPOOF") s, at 3 s ~$(est_total 3 "$NSPOOF") s, against a plan of $PLAN s (deadline $DEADLINE s; BENCH_ACCT_SECS / BENCH_ACCT_ROUNDS / BENCH_ACCT_DEADLINE change this)"
    fi
fi
SMALL=0
SMALL_NOTE=""
if ((IPT_OK)); then
    if [[ $IPT_SMALL == auto ]]; then
        if (($(est_total "$SECS" $((NSPOOF + 1))) <= PLAN)); then
            SMALL=250
        else
            SMALL_NOTE="variant E (250 iptables rules) skipped: it does not fit the time budget at $SECS s runs (set BENCH_ACCT_IPT_SMALL=250 to force it)"
        fi
    else
        SMALL=$IPT_SMALL
    fi
fi
EST=$(est_total "$SECS" $((NSPOOF + (SMALL > 0))))

# variants: letter -> node index, label
# each anti-spoofing-off variant runs next to its "on" twin
VARS=(A B)
((GUARD)) && VARS+=(H)
((SPOOF)) && VARS+=(F)
VARS+=(C)
((SPOOF)) && VARS+=(G)
((IPT_OK)) && VARS+=(D)
((SMALL > 0)) && VARS+=(E)
declare -A VNODE=([A]=1 [B]=2 [C]=3 [D]=4 [E]=5 [F]=6 [G]=7 [H]=8)
declare -A VLABEL=(
    [A]="A: no tollgate table (natonly masquerade)"
    [B]="B: tollgate table, 10 attachments"
    [C]="C: tollgate table, $((10 + EXTRA)) attachments"
    [D]="D: no table, natonly + $IPT_RULES iptables rules"
    [E]="E: no table, natonly + $SMALL iptables rules"
    [F]="F: as B, anti-spoofing off"
    [G]="G: as C, anti-spoofing off"
    [H]="H: as B, internetGuard on"
)
declare -A VPODS=([A]=1 [B]=10 [C]=10 [D]=1 [E]=1 [F]=10 [G]=10 [H]=10)

log "run $RUN, work dir $WORK, ${ROUNDS} rounds x variants ${VARS[*]} x {tcp1,tcp4,udp}, ${SECS}s runs, estimated ${EST}s (deadline ${DEADLINE}s)"

# ---------------------------------------------------------------- topology
mkdir -p "$WORK/bin" "$WORK/json" || die "mkdir failed"
# Snapshot the plugin: a rebuild of $BIN_DIR during the run must not change it.
cp "$TG_BIN" "$WORK/bin/tollgate" || die "cannot copy $TG_BIN"
TG_SHA=$(sha256sum "$WORK/bin/tollgate" | cut -c1-12)

batch=("netns add $INET")
for v in "${VARS[@]}"; do
    k=${VNODE[$v]}
    batch+=("netns add $RUN-n$k")
    for ((j = 1; j <= VPODS[$v]; j++)); do batch+=("netns add $RUN-p$k-$j"); done
done
printf '%s\n' "${batch[@]}" | ip -batch - || die "ip netns add failed"

{
    echo "link set lo up"
    echo "addr add $INET_IP/32 dev lo"
} | ip -n "$INET" -batch - || die "internet host setup failed"
for v in "${VARS[@]}"; do
    node_uplink "$INET" "$RUN-n${VNODE[$v]}" "${VNODE[$v]}"
done

# ------------------------------------------------------------- plugin ADDs
log "plugin ADDs"
cid() { printf '%s%02x%02x%052x' "$RUNHEX" "$1" "$2" 0; } # node pod -> 64 hex
declare -A POD_IP=()
for v in "${VARS[@]}"; do
    k=${VNODE[$v]}
    node=$RUN-n$k
    mkdir -p "$WORK/n$k"
    printf '%s\n' "{\"cniVersion\":\"1.1.0\",\"name\":\"tgacct\",\"type\":\"tollgate\",\"mtu\":1500,\"uplink\":\"eth0\",\"internalCIDRs\":[\"10.0.0.0/8\"],\"masquerade\":true,\"dataDir\":\"$WORK/n$k/data\",\"logFile\":\"$WORK/n$k/tollgate.log\",\"ipam\":{\"source\":\"static\",\"addresses\":[\"10.1.$k.10-10.1.$k.60\"],\"cooldownSeconds\":0}}" >"$WORK/n$k/conf.json"
    if [[ $v == H ]]; then
        jq -c '.internetGuard = {connections: {namespaceDefault: 1000000, newPerSecond: 1000000},
                destinations: {top: 10, prefixLength: 24, tracked: 1024}}' \
            "$WORK/n$k/conf.json" >"$WORK/n$k/conf.guard" || die "node $k: cannot write the guard's config"
        mv "$WORK/n$k/conf.guard" "$WORK/n$k/conf.json" || die "node $k: cannot write the guard's config"
    fi
    for ((j = 1; j <= VPODS[$v]; j++)); do
        id=$(cid "$k" "$j")
        out=$WORK/n$k/add$j
        ip netns exec "$node" env -i PATH="$PATH" CNI_COMMAND=ADD CNI_CONTAINERID="$id" \
            CNI_NETNS="/var/run/netns/$RUN-p$k-$j" CNI_IFNAME=eth0 CNI_PATH="$WORK/bin" \
            CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod$j;K8S_POD_INFRA_CONTAINER_ID=$id" \
            "$WORK/bin/tollgate" <"$WORK/n$k/conf.json" >"$out" 2>"$out.err" ||
            die "ADD of pod $j on node $k failed: $(head -c 600 "$out") $(head -c 300 "$out.err")"
        if ((j == 1)); then
            POD_IP[$v]=$(jq -r '.ips[0].address // "" | split("/")[0]' "$out" 2>/dev/null)
            [[ ${POD_IP[$v]} =~ ^10\.1\.$k\.[0-9]+$ ]] || die "ADD on node $k: no usable IP in the result: $(head -c 600 "$out")"
        fi
    done
done

reach() { # variant -> pod 1 of its node pings the internet host
    local k=${VNODE[$1]}
    ip netns exec "$RUN-p$k-1" ping -n -q -c 1 -W 1 "$INET_IP" >/dev/null 2>&1 ||
        ip netns exec "$RUN-p$k-1" ping -n -q -c 2 -i 0.2 -W 1 "$INET_IP" >/dev/null 2>&1
}
for v in "${VARS[@]}"; do
    reach "$v" || die "pod of node ${VNODE[$v]} cannot reach $INET_IP after ADD (masquerade by tollgate broken?)"
done

# ------------------------------------------------------------ variant setup
natonly() { # variant: replace tollgate by a minimal masquerade for the pod
    local k=${VNODE[$1]}
    ip netns exec "$RUN-n$k" nft -f - <<-EOF || die "node $k: cannot replace the tollgate table by natonly"
	delete table inet tollgate
	table ip natonly {
		chain post {
			type nat hook postrouting priority 100; policy accept;
			ip saddr ${POD_IP[$1]} masquerade
		}
	}
	EOF
}
ipt_rules() { # variant count: count-1 other namespaces' rules, the pod's rule last
    local k=${VNODE[$1]} n=$2 i
    {
        echo '*filter'
        echo ':INPUT ACCEPT [0:0]'
        echo ':FORWARD ACCEPT [0:0]'
        echo ':OUTPUT ACCEPT [0:0]'
        for ((i = 0; i < n - 1; i++)); do
            echo "-A FORWARD -s 10.128.$((i / 250)).$((i % 250 + 1))/32"
        done
        echo "-A FORWARD -s ${POD_IP[$1]}/32"
        echo 'COMMIT'
    } >"$WORK/n$k/ipt.rules"
    ip netns exec "$RUN-n$k" iptables-restore -w 5 <"$WORK/n$k/ipt.rules" ||
        die "node $k: iptables-restore of $n rules failed"
    local got
    got=$(ip netns exec "$RUN-n$k" iptables -w 5 -S FORWARD | grep -c '^-A FORWARD')
    [[ $got == "$n" ]] || die "node $k: FORWARD has $got rules, expected $n"
}
nft_count() { # node set|map -> number of elements
    ip netns exec "$1" nft -j list "$2" inet tollgate "$3" 2>/dev/null |
        jq '[.nftables[] | (.set // .map // empty) | .elem // [] | length] | add // 0'
}

synthetic() { # variant: $EXTRA synthetic attachments, as variant C describes
    local k=${VNODE[$1]} n c i set classes t0 t1
    # 10 extra namespaces x 4 classes + 2 families of counters; 9,990 IPs spread over them
    log "variant $1: generating $EXTRA synthetic attachments"
    {
        classes=(egress_internal egress_internet ingress_internal ingress_internet)
        for ((n = 0; n < 10; n++)); do
            for c in "${classes[@]}" spoofed_ipv4 spoofed_ipv6; do echo "add counter inet tollgate ns_bk${n}_$c"; done
        done
        for set in pods masq; do
            for ((i = 0; i < EXTRA; i++)); do
                ((i % 1000 == 0)) && printf 'add element inet tollgate %s { ' "$set"
                printf '10.64.%d.%d' $((i / 250)) $((i % 250 + 1))
                if ((i % 1000 == 999 || i == EXTRA - 1)); then echo ' }'; else printf ', '; fi
            done
        done
        for c in "${classes[@]}"; do
            for ((i = 0; i < EXTRA; i++)); do
                ((i % 1000 == 0)) && printf 'add element inet tollgate ns_%s { ' "$c"
                printf '10.64.%d.%d : "ns_bk%d_%s"' $((i / 250)) $((i % 250 + 1)) $((i % 10)) "$c"
                if ((i % 1000 == 999 || i == EXTRA - 1)); then echo ' }'; else printf ', '; fi
            done
        done
        # anti-spoofing: each synthetic pod's link (tgf + 11 hex digits) with its address
        for ((i = 0; i < EXTRA; i++)); do
            ((i % 1000 == 0)) && printf 'add element inet tollgate pod_src { '
            printf '"tgf%011x" . 10.64.%d.%d' "$i" $((i / 250)) $((i % 250 + 1))
            if ((i % 1000 == 999 || i == EXTRA - 1)); then echo ' }'; else printf ', '; fi
        done
        for c in ipv4 ipv6; do
            for ((i = 0; i < EXTRA; i++)); do
                ((i % 1000 == 0)) && printf 'add element inet tollgate spoofed_%s { ' "$c"
                printf '"tgf%011x" : "ns_bk%d_spoofed_%s"' "$i" $((i % 10)) "$c"
                if ((i % 1000 == 999 || i == EXTRA - 1)); then echo ' }'; else printf ', '; fi
            done
        done
    } >"$WORK/n$k/extra.nft"
    t0=$EPOCHREALTIME
    if ((EXTRA > 0)); then
        ip netns exec "$RUN-n$k" nft -f "$WORK/n$k/extra.nft" 2>"$WORK/n$k/extra.err" ||
            die "node $k: adding $EXTRA synthetic attachments failed: $(head -c 600 "$WORK/n$k/extra.err")"
    fi
    t1=$EPOCHREALTIME
    NOTES+=("variant $1: $EXTRA synthetic elements x 9 sets/maps added in one nft -f transaction in $(( (${t1//[!0-9]/} - ${t0//[!0-9]/}) / 1000 )) ms")
}
spoof_off() { # variant: the table as it is without anti-spoofing, nothing else changed
    local k=${VNODE[$1]}
    # without the check in from_pod, telling a pod's packet for the mark takes a lookup in @pods;
    # from_pod's nodeAccess jumps go with it
    ip netns exec "$RUN-n$k" nft -f - <<-EOF || die "node $k: cannot take anti-spoofing out"
	flush chain inet tollgate prerouting_raw
	add rule inet tollgate prerouting_raw ip saddr @pods ip daddr != @internal meta mark set meta mark | 0x10000
	flush chain inet tollgate from_pod
	delete chain inet tollgate from_pod
	flush chain inet tollgate spoofed
	delete chain inet tollgate spoofed
	EOF
}

NOTES=()
[[ -n $SECS_NOTE ]] && NOTES+=("$SECS_NOTE")
[[ -n $SMALL_NOTE ]] && NOTES+=("$SMALL_NOTE")
((IPT_OK)) || NOTES+=("variants D/E skipped: $IPT_WHY")

log "variant setup"
for v in "${VARS[@]}"; do
    k=${VNODE[$v]}
    case $v in
    A) natonly A ;;
    B) ;;
    C) synthetic C ;;
    D) natonly D; ipt_rules D "$IPT_RULES" ;;
    E) natonly E; ipt_rules E "$SMALL" ;;
    F) spoof_off F ;;
    G) synthetic G; spoof_off G ;;
    esac
    reach "$v" || die "variant $v: pod cannot reach $INET_IP after the variant setup"
done
# state check of the tollgate variants
for v in B C F G H; do
    [[ " ${VARS[*]} " == *" $v "* ]] || continue
    k=${VNODE[$v]} want=10
    [[ $v == [CG] ]] && want=$((10 + EXTRA))
    for m in "set pods" "map ns_egress_internet" "set pod_src" "map spoofed_ipv4"; do
        # shellcheck disable=SC2086  # "set NAME" / "map NAME"
        got=$(nft_count "$RUN-n$k" $m)
        [[ $got == "$want" ]] || die "variant $v: $m has $got elements (expected $want)"
    done
    on=0
    ip netns exec "$RUN-n$k" nft list chain inet tollgate from_pod >/dev/null 2>&1 && on=1
    [[ $v == [BCH] && $on == 1 || $v == [FG] && $on == 0 ]] || die "variant $v: chain from_pod present=$on"
    on=0
    ip netns exec "$RUN-n$k" nft list chain inet tollgate guard_bench >/dev/null 2>&1 && on=1
    [[ $v == H && $on == 1 || $v != H && $on == 0 ]] || die "variant $v: chain guard_bench present=$on"
    if [[ $v == H ]]; then
        ip netns exec "$RUN-n$k" nft list set inet tollgate dst_bench_egress >/dev/null 2>&1 ||
            die "variant H: set dst_bench_egress missing (destinations not on)"
    fi
done
for v in A D E; do
    [[ " ${VARS[*]} " == *" $v "* ]] || continue
    ip netns exec "$RUN-n${VNODE[$v]}" nft list table inet tollgate >/dev/null 2>&1 &&
        die "variant $v: table inet tollgate still present"
done

# ----------------------------------------------------------------- iperf3
CLK_TCK=$(getconf CLK_TCK)
KSOFT=()
for f in /proc/[0-9]*/comm; do
    read -r c 2>/dev/null <"$f" || continue
    [[ $c == ksoftirqd/* ]] && { p=${f#/proc/}; KSOFT+=("/proc/${p%/comm}/stat"); }
done
# The per-run probes below use bash builtins only: on this machine, under the
# load of concurrent suites, every extra fork+exec (jq, ip, awk) cost 50-100 ms.
ksoft_ticks() { # -> KS: utime+stime of every ksoftirqd thread (clock ticks)
    local f line a
    KS=0
    for f in "${KSOFT[@]}"; do
        read -r line 2>/dev/null <"$f" || continue
        read -ra a <<<"${line##*) }"
        KS=$((KS + a[11] + a[12]))
    done
}
IRQ_ACCT=unknown
if [[ -r /proc/config.gz ]]; then
    if zcat /proc/config.gz 2>/dev/null | grep -q '^CONFIG_IRQ_TIME_ACCOUNTING=y'; then IRQ_ACCT=on; else IRQ_ACCT=off; fi
fi

server_start() { # variant
    local k=${VNODE[$1]} port=$((5200 + ${VNODE[$1]}))
    # -B: the server's UDP socket must answer from 203.0.113.10; bound to the
    # wildcard it would connect() back from 10.240.k.1 and the client (whose
    # socket is connected to 203.0.113.10) would see "Connection refused".
    ip netns exec "$INET" iperf3 -s -B "$INET_IP" -p "$port" >>"$WORK/srv$k.log" 2>&1 </dev/null &
    SRV_PID[$1]=$!
    local i
    for ((i = 0; i < 100; i++)); do
        ip netns exec "$INET" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
        kill -0 "${SRV_PID[$1]}" 2>/dev/null || break
        sleep 0.05
    done
    die "iperf3 server for variant $1 did not start: $(tail -3 "$WORK/srv$k.log")"
}
server_restart() {
    kill "${SRV_PID[$1]}" 2>/dev/null; wait "${SRV_PID[$1]}" 2>/dev/null
    server_start "$1"
}
rx_packets() { # variant -> RXP: packets the internet host received from that node (= node eth0 tx)
    local name data pk
    RXP=0
    # /proc/<pid>/net/dev shows the network namespace of <pid>: the variant's iperf3 server
    while IFS=: read -r name data; do
        name=${name// /}
        [[ $name == "u${VNODE[$1]}" ]] || continue
        read -r _ pk _ <<<"$data"
        RXP=$pk
    done 2>/dev/null <"/proc/${SRV_PID[$1]}/net/dev"
}

# one_run VARIANT METRIC ROUND SECS -> appends one line to $WORK/results:
#   round variant metric status rate amount seconds cpu_total_s fwd_pkts loss_pct cpu_send_s
# tcp*: rate = received bit/s, amount = received bytes; udp: rate = received
# packets/s, amount = received packets, fwd_pkts = node eth0 tx delta.
one_run() {
    local v=$1 m=$2 r=$3 t=$4 k=${VNODE[$1]} try js line k0 k1 f0 f1 rc
    local port=$((5200 + ${VNODE[$1]}))
    local args=(-c "$INET_IP" -p "$port" -t "$t" -J --connect-timeout 3000)
    case $m in
    tcp1) ;;
    tcp4) args+=(-P 4) ;;
    udp) args+=(-u -l 64 -b 0 -w "$UDP_WIN") ;;
    esac
    for try in 1 2; do
        js=$WORK/json/r$r-$v-$m-$try.json
        ksoft_ticks; k0=$KS; rx_packets "$v"; f0=$RXP
        timeout -k 2 $((t + 20)) ip netns exec "$RUN-p$k-1" iperf3 "${args[@]}" >"$js" 2>"$js.err"
        rc=$?
        ksoft_ticks; k1=$KS; rx_packets "$v"; f1=$RXP
        line=$(jq -r --arg m "$m" --argjson ks "$((k1 - k0))" --argjson hz "$CLK_TCK" --argjson fwd "$((f1 - f0))" '
            # CPU seconds: iperf3 reports % of one CPU over the test; ksoftirqd ticks
            # are added to the sending side (that is where forwarding softirq runs)
            (.end.cpu_utilization_percent // {}) as $u | (.end.sum_sent.seconds // .end.sum.seconds // 0) as $t
            | { host_total: (($u.host_total // 0) / 100 * $t + $ks / $hz), remote_total: (($u.remote_total // 0) / 100 * $t) } as $cpu
            | if (.error // "") != "" then "ERR " + (.error | tostring)
            elif $m == "udp" then
                .end.sum as $s | ($s.packets - $s.lost_packets) as $rx
                | if ($s.seconds // 0) <= 0 or $rx <= 0 then "ERR no UDP packets received"
                  else "\($rx / $s.seconds) \($rx) \($s.seconds) \($cpu.host_total + $cpu.remote_total) \($fwd) \($s.lost_percent) \($cpu.host_total)" end
            else
                .end.sum_received as $s
                | if ($s.seconds // 0) <= 0 or ($s.bytes // 0) <= 0 then "ERR no TCP bytes received"
                  else "\($s.bits_per_second) \($s.bytes) \($s.seconds) \($cpu.host_total + $cpu.remote_total) \($fwd) 0 \($cpu.host_total)" end
            end' "$js" 2>/dev/null)
        [[ -z $line ]] && line="ERR iperf3 exit $rc, no JSON: $(head -c 200 "$js.err" | tr '\n' ' ')"
        if [[ $line != ERR* ]]; then
            echo "$r $v $m ok $line" >>"$WORK/results"
            return 0
        fi
        echo "$r $v $m try$try ${line#ERR }" >>"$WORK/failures"
        server_restart "$v"
    done
    echo "$r $v $m fail 0 0 0 0 0 0 0" >>"$WORK/results"
    return 1
}

for v in "${VARS[@]}"; do server_start "$v"; done
: >"$WORK/results"; : >"$WORK/failures"

# warm-up (not counted): every path once, fails fast if iperf3 cannot run
log "warm-up"
for v in "${VARS[@]}"; do
    m=tcp1
    [[ $v == [EFG] ]] && m=udp
    one_run "$v" $m 0 1 || die "variant $v: iperf3 ($m) does not run: $(tail -1 "$WORK/failures")"
done

# ------------------------------------------------------------------ rounds
metrics_of() { [[ $1 == [EFG] ]] && echo udp || echo tcp1 tcp4 udp; }
ROUNDS_DONE=0
ROUND_MAX=0
for ((r = 1; r <= ROUNDS; r++)); do
    now=$(elapsed)
    if ((r > 1 && now + ROUND_MAX > DEADLINE)); then
        NOTES+=("stopped after $ROUNDS_DONE of $ROUNDS rounds: the next round (~${ROUND_MAX}s) would end past the ${DEADLINE}s deadline (machine slower or busier than planned)")
        break
    fi
    log "round $r/$ROUNDS (t=${now}s)"
    t0=$EPOCHREALTIME
    order=("${VARS[@]}")
    if ((r % 2 == 0)); then
        order=()
        for ((i = ${#VARS[@]} - 1; i >= 0; i--)); do order+=("${VARS[i]}"); done
    fi
    for m in tcp1 tcp4 udp; do
        for v in "${order[@]}"; do
            [[ " $(metrics_of "$v") " == *" $m "* ]] || continue
            one_run "$v" "$m" "$r" "$SECS"
        done
    done
    t1=$EPOCHREALTIME
    d=$(( (${t1//[!0-9]/} - ${t0//[!0-9]/} + 999999) / 1000000 ))
    ((d > ROUND_MAX)) && ROUND_MAX=$d
    ROUNDS_DONE=$r
done

# ------------------------------------------------------ end-of-run checks
ctr_bytes() { # node counter -> bytes
    ip netns exec "$1" nft -j list counter inet tollgate "$2" 2>/dev/null | jq '[.nftables[] | .counter.bytes // empty] | add // 0'
}
for v in B C; do
    k=${VNODE[$v]}
    p=$(ip netns exec "$RUN-n$k" nft -j list counter inet tollgate ns_bench_spoofed_ipv4 2>/dev/null | jq '[.nftables[] | .counter.packets // empty] | add // "none"')
    [[ $p == 0 ]] || NOTES+=("variant $v: counter ns_bench_spoofed_ipv4 is '$p' after the run: anti-spoofing dropped the pods' own traffic")
    b=$(ctr_bytes "$RUN-n$k" ns_bench_egress_internet)
    if [[ $b =~ ^[0-9]+$ ]] && ((b > 0)); then
        NOTES+=("variant $v: counter ns_bench_egress_internet counted $(awk -v b="$b" 'BEGIN { printf "%.2f GB", b / 1e9 }') (accounting path exercised)")
    else
        NOTES+=("variant $v: counter ns_bench_egress_internet is '$b' after the run: the accounting rules did NOT count the pod's traffic")
    fi
done
if ((GUARD)); then
    # nothing reads H's set (no agent): its element holds every byte to the internet host's /24
    k=${VNODE[H]}
    b=$(ip netns exec "$RUN-n$k" nft -j list set inet tollgate dst_bench_egress 2>/dev/null |
        jq '[.nftables[] | .set? // empty | .elem // [] | .[] | .elem.counter.bytes // empty] | add // 0')
    if [[ $b =~ ^[0-9]+$ ]] && ((b > 0)); then
        NOTES+=("variant H: set dst_bench_egress counted $(awk -v b="$b" 'BEGIN { printf "%.2f GB", b / 1e9 }') (the destination path exercised)")
    else
        NOTES+=("variant H: set dst_bench_egress counted '$b': the destination rules were NOT on the path")
    fi
fi
c_end=$(nft_count "$RUN-n3" set pod_src)
[[ $c_end == $((10 + EXTRA)) ]] || NOTES+=("variant C: set pod_src has $c_end elements at the end (expected $((10 + EXTRA))): the table changed during the run")
declare -A VRULES=([D]=$IPT_RULES [E]=$SMALL)
for v in D E; do
    [[ " ${VARS[*]} " == *" $v "* ]] || continue
    k=${VNODE[$v]}
    last=$(ip netns exec "$RUN-n$k" iptables -w 5 -v -S FORWARD 2>/dev/null |
        awk -v ip="${POD_IP[$v]}/32" '{ for (i = 1; i < NF; i++) if ($i == "-s" && $(i+1) == ip) s = 1; else if ($i == "-c" && s) { print $(i+1); exit } }')
    if [[ $last =~ ^[0-9]+$ ]] && ((last > 0)); then
        NOTES+=("variant $v: the pod's rule (last of ${VRULES[$v]}) matched $last packets (every pod packet walked the whole chain)")
    else
        NOTES+=("variant $v: the pod's iptables rule counted '$last' packets: the rules were NOT on the path")
    fi
done
nfail=$(grep -c ' fail ' "$WORK/results")
nretry=$(wc -l <"$WORK/failures")
((nretry)) && NOTES+=("$nretry iperf3 runs failed and were retried ($nfail failed twice and are left out); first: $(head -1 "$WORK/failures" | head -c 200)")
if awk -v l="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    NOTES+=("machine busy at start (1-min load ${LOAD_START%% *} > $(nproc) CPUs): absolute numbers are depressed and noisy; alternation keeps the paired ratios comparable")
fi
NOTES+=("CPU: iperf3's own getrusage figures (cpu_utilization_percent x seconds; client = host, server = remote) + the ksoftirqd threads' time over the run (counted on the sending side). CONFIG_IRQ_TIME_ACCOUNTING $IRQ_ACCT (off: softirq work done in a task's context is charged to that task). Per-netns CPU cannot be read: the veth chain pod -> node -> internet host runs in softirq on the sending CPU (mostly inside the client's send calls), so the node's forwarding is inside these numbers and the difference to variant A ('node extra CPU', median of per-round differences) is the cost of the node's ruleset. TCP uses client+server (the ACKs cross the node in the server's context); UDP uses the sending side only (the server's cost per packet depends on how many packets each wake-up finds, i.e. on the rate, not on the node). Machine-wide /proc/stat was not used: concurrent test suites would pollute it.")
NOTES+=("UDP: iperf3 -u -l 64 -b 0 -w $UDP_WIN; received pps from the iperf3 server (packets - lost); 'forwarded' = packets the internet host received from the node's uplink (interface rx delta over the client's lifetime / its seconds, so a few control packets and the tail are included). When received < forwarded, the receiving socket (not the node) was the bottleneck. The -w is there because with the default 208 KiB buffer the server dropped 25-45% on hiccups")

# ------------------------------------------------------------------ report
ELAPSED=$(elapsed)
CN=$((10 + EXTRA))
((CN == 10000)) && CN=10k
awk_report() { # mode (table|targets) -> markdown rows
    awk -v mode="$1" -v vars="${VARS[*]}" -v rounds="$ROUNDS_DONE" \
        -v lA="${VLABEL[A]}" -v lB="${VLABEL[B]}" -v lC="${VLABEL[C]}" -v lD="${VLABEL[D]}" -v lE="${VLABEL[E]}" \
        -v lF="${VLABEL[F]}" -v lG="${VLABEL[G]}" -v lH="${VLABEL[H]}" \
        -v nD="$IPT_RULES" -v nE="$SMALL" -v nC="$CN" '
    function sorted(a, n, b,    i, j, x) {
        for (i = 1; i <= n; i++) b[i] = a[i]
        for (i = 2; i <= n; i++) { x = b[i]; for (j = i - 1; j >= 1 && b[j] > x; j--) b[j+1] = b[j]; b[j+1] = x }
    }
    function med(a, n,    b) {
        if (n == 0) return "nan"
        sorted(a, n, b)
        return (n % 2) ? b[(n+1)/2] : (b[n/2] + b[n/2+1]) / 2
    }
    function q(a, n, p,    b, pos, lo) { # linear-interpolated quantile
        if (n == 0) return "nan"
        sorted(a, n, b)
        pos = 1 + p * (n - 1); lo = int(pos)
        return (lo >= n) ? b[n] : b[lo] + (pos - lo) * (b[lo+1] - b[lo])
    }
    # val(v, m, r, what): one number of one run ("" when not available)
    #   rate: bit/s or received pps; fwd: forwarded pps; loss: %;
    #   cpu_gb: CPU seconds (client+server+ksoftirqd) per GB received
    #   cpu_pkt: sending-side CPU us (client+ksoftirqd) per forwarded packet
    #   cap_gb / cap_pkt: 1 / CPU cost (capacity at equal CPU)
    function val(v, m, r, what) {
        if (!((v, m, r) in rate)) return ""
        if (what == "rate") return rate[v, m, r]
        if (what == "loss") return loss[v, m, r]
        if (what == "fwd") return (sec[v, m, r] > 0 && fwd[v, m, r] > 0) ? fwd[v, m, r] / sec[v, m, r] : ""
        if (what == "cpu_gb") return (amt[v, m, r] > 0 && cpu[v, m, r] > 0) ? cpu[v, m, r] / (amt[v, m, r] / 1e9) : ""
        if (what == "cpu_pkt") return (fwd[v, m, r] > 0 && cps[v, m, r] > 0) ? cps[v, m, r] / fwd[v, m, r] * 1e6 : ""
        if (what == "cap_gb") return (amt[v, m, r] > 0 && cpu[v, m, r] > 0) ? amt[v, m, r] / cpu[v, m, r] : ""
        if (what == "cap_pkt") return (fwd[v, m, r] > 0 && cps[v, m, r] > 0) ? fwd[v, m, r] / cps[v, m, r] : ""
    }
    function medof(v, m, what,    r, a, n, x) {
        n = 0
        for (r = 1; r <= rounds; r++) { x = val(v, m, r, what); if (x != "") a[++n] = x }
        return med(a, n)
    }
    # median over rounds of val(v) - val(A): the node-side extra cost of v
    function meddiff(v, m, what,    r, a, n, x, y) {
        n = 0
        for (r = 1; r <= rounds; r++) {
            x = val(v, m, r, what); y = val("A", m, r, what)
            if (x != "" && y != "") a[++n] = x - y
        }
        return med(a, n)
    }
    function fmt(x, scale, d) { return (x == "nan") ? "n/a" : sprintf("%." d "f", x / scale) }
    function sfmt(x, scale, d) { return (x == "nan") ? "n/a" : sprintf("%+." d "f", x / scale) }
    # paired ratio va/vb of one quantity over rounds, against a target (>=)
    function ratio(va, vb, m, what, target, desc,    r, a, n, x, y, md, st, lo, hi, clear) {
        if (vars !~ va || vars !~ vb) return
        gsub(/10k/, nC, desc)
        n = 0
        for (r = 1; r <= rounds; r++) {
            x = val(va, m, r, what); y = val(vb, m, r, what)
            if (x != "" && y != "" && y > 0) a[++n] = x / y
        }
        md = med(a, n)
        if (md == "nan") st = "n/a"
        else if (target == "") st = "(info)"
        else st = (md >= target) ? "PASS" : "MISS"
        lo = q(a, n, 0.25); hi = q(a, n, 0.75)
        clear = (target == "" || md == "nan") ? "-" : ((lo >= target || hi < target) ? "yes" : "no (within noise)")
        if (mode == "info")
            printf "| %s | %s | %s-%s | %d |\n", desc, fmt(md, 1, 3), fmt(lo, 1, 3), fmt(hi, 1, 3), n
        else
            printf "| %s | %s | %s-%s | %d | %s | %s | %s |\n", desc, fmt(md, 1, 3), fmt(lo, 1, 3), fmt(hi, 1, 3), n,
                (">= " target), st, clear
    }
    BEGIN { split(vars, V, " "); L["A"] = lA; L["B"] = lB; L["C"] = lC; L["D"] = lD; L["E"] = lE; L["F"] = lF; L["G"] = lG; L["H"] = lH }
    $4 == "ok" && $1 >= 1 {
        rate[$2, $3, $1] = $5; amt[$2, $3, $1] = $6; sec[$2, $3, $1] = $7; cpu[$2, $3, $1] = $8; fwd[$2, $3, $1] = $9; loss[$2, $3, $1] = $10; cps[$2, $3, $1] = $11
        nrun[$2, $3]++
    }
    END {
        if (mode == "table") {
            print "| variant | TCP 1 stream Gbit/s | TCP 4 streams Gbit/s | UDP 64 B received kpps | UDP forwarded kpps | UDP loss % | CPU s/GB (TCP 1 stream) | node extra CPU ms/GB vs A (TCP 1 stream) | sender CPU us/packet (UDP) | node extra CPU ns/packet vs A (UDP) | runs ok tcp1/tcp4/udp |"
            print "|---|---|---|---|---|---|---|---|---|---|---|"
            for (i = 1; i in V; i++) {
                v = V[i]
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d/%d |\n", L[v],
                    fmt(medof(v, "tcp1", "rate"), 1e9, 2), fmt(medof(v, "tcp4", "rate"), 1e9, 2),
                    fmt(medof(v, "udp", "rate"), 1e3, 1), fmt(medof(v, "udp", "fwd"), 1e3, 1), fmt(medof(v, "udp", "loss"), 1, 2),
                    fmt(medof(v, "tcp1", "cpu_gb"), 1, 3), (v == "A") ? "0" : sfmt(meddiff(v, "tcp1", "cpu_gb"), 1e-3, 0),
                    fmt(medof(v, "udp", "cpu_pkt"), 1, 2), (v == "A") ? "0" : sfmt(meddiff(v, "udp", "cpu_pkt"), 1e-3, 0),
                    nrun[v, "tcp1"], nrun[v, "tcp4"], nrun[v, "udp"]
            }
        } else if (mode == "targets") {
            print "| paired ratio (per round) | median | IQR | n | target | status | IQR clear of target |"
            print "|---|---|---|---|---|---|---|"
            ratio("C", "B", "tcp1", "rate", 0.97, "TCP(10k)/TCP(10), 1 stream")
            ratio("C", "B", "tcp4", "rate", 0.97, "TCP(10k)/TCP(10), 4 streams")
            ratio("C", "A", "tcp1", "rate", 0.95, "TCP(10k)/no-table, 1 stream")
            ratio("C", "A", "tcp4", "rate", 0.95, "TCP(10k)/no-table, 4 streams")
            ratio("C", "A", "udp", "rate", 0.8, "pps(10k)/no-table (received)")
            ratio("C", "D", "udp", "rate", 2, "pps(10k)/pps(iptables " nD ") (received)")
            ratio("B", "F", "udp", "rate", 0.97, "pps anti-spoofing on/off, 10 attachments (received)")
            ratio("C", "G", "udp", "rate", 0.97, "pps anti-spoofing on/off, 10k attachments (received)")
            ratio("H", "B", "tcp1", "rate", 0.97, "TCP internetGuard on/off, 1 stream")
            ratio("H", "B", "tcp4", "rate", 0.97, "TCP internetGuard on/off, 4 streams")
            ratio("H", "B", "udp", "rate", 0.9, "pps internetGuard on/off (received)")
        } else if (mode == "cpu") {
            print "| paired ratio of capacity at equal CPU | median | IQR | n | target | status | IQR clear of target |"
            print "|---|---|---|---|---|---|---|"
            ratio("C", "B", "tcp1", "cap_gb", 0.97, "TCP(10k)/TCP(10), 1 stream")
            ratio("C", "B", "tcp4", "cap_gb", 0.97, "TCP(10k)/TCP(10), 4 streams")
            ratio("C", "A", "tcp1", "cap_gb", 0.95, "TCP(10k)/no-table, 1 stream")
            ratio("C", "A", "tcp4", "cap_gb", 0.95, "TCP(10k)/no-table, 4 streams")
            ratio("C", "A", "udp", "cap_pkt", 0.8, "pps(10k)/no-table")
            ratio("B", "F", "udp", "cap_pkt", 0.97, "pps anti-spoofing on/off, 10 attachments")
            ratio("C", "G", "udp", "cap_pkt", 0.97, "pps anti-spoofing on/off, 10k attachments")
            ratio("H", "B", "tcp1", "cap_gb", 0.97, "TCP internetGuard on/off, 1 stream")
            ratio("H", "B", "udp", "cap_pkt", 0.9, "pps internetGuard on/off")
            ratio("C", "D", "udp", "cap_pkt", 2, "pps(10k)/pps(iptables " nD ")")
        } else {
            print "| other paired ratios (information) | median | IQR | n |"
            print "|---|---|---|---|"
            ratio("B", "A", "tcp1", "rate", "", "TCP(10)/no-table, 1 stream")
            ratio("B", "A", "tcp4", "rate", "", "TCP(10)/no-table, 4 streams")
            ratio("B", "A", "udp", "rate", "", "pps(10)/no-table")
            ratio("C", "B", "udp", "rate", "", "pps(10k)/pps(10)")
            ratio("C", "A", "udp", "fwd", "", "pps(10k)/no-table (forwarded by the node)")
            ratio("C", "D", "udp", "fwd", "", "pps(10k)/pps(iptables " nD ") (forwarded by the node)")
            ratio("B", "F", "udp", "fwd", "", "pps anti-spoofing on/off, 10 attachments (forwarded by the node)")
            ratio("C", "G", "udp", "fwd", "", "pps anti-spoofing on/off, 10k attachments (forwarded by the node)")
            ratio("C", "E", "udp", "rate", "", "pps(10k)/pps(iptables " nE ") (received)")
            ratio("E", "A", "udp", "rate", "", "pps(iptables " nE ")/no-table (received)")
            ratio("D", "A", "udp", "rate", "", "pps(iptables " nD ")/no-table (received)")
            ratio("C", "D", "tcp1", "rate", "", "TCP(10k)/TCP(iptables " nD "), 1 stream")
            ratio("C", "D", "tcp4", "rate", "", "TCP(10k)/TCP(iptables " nD "), 4 streams")
        }
    }' "$WORK/results"
}
report() {
    echo "## Tollgate accounting benchmark ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg at start $LOAD_START, ${ELAPSED}s)"
    echo
    echo "tollgate: \`$TG_BIN\` (sha256 $TG_SHA..., run from a snapshot copy), static pool, masquerade true, internalCIDRs 10.0.0.0/8."
    echo "Path: iperf3 client in a pod (veth made by the plugin) -> node netns (routing, nftables, masquerade) -> veth -> internet host netns (203.0.113.10, iperf3 server). One node per variant, identical but for its variant; $(iperf3 --version 2>/dev/null | head -1 | awk '{print $1, $2}'), ${SECS}s per run, $ROUNDS_DONE rounds, runs alternating $(printf '%s ' "${VARS[@]}")within each metric of a round, reversed every other round (variants E, F, G: UDP only)."
    echo "Variant C = 10 real attachments + $EXTRA synthetic elements in sets pods, masq, pod_src and the ns_* and spoofed_* maps (10 extra namespaces' counters). D/E: iptables-nft counting rules \`-A FORWARD -s IP/32\`, the pod's rule last; masquerade by \`table ip natonly\` in A/D/E. F/G: B/C with anti-spoofing and nodeAccess off (chains from_pod and spoofed deleted, prerouting_raw's mark rule as it is without them: \`ip saddr @pods ip daddr != @internal meta mark set ...\`), everything else the same."
    echo
    echo "Medians over rounds:"
    echo
    awk_report table
    echo
    echo "Targets on the measured rates, as specified (paired: each round's value of one variant divided by the same round's value of the other; median over rounds; IQR = 25th-75th percentile of those ratios):"
    echo
    awk_report targets
    echo
    echo "Same targets on CPU cost, i.e. capacity at equal CPU (TCP: bytes received per CPU-second of client+server+ksoftirqd; UDP: packets forwarded per CPU-second of the sending side, client+ksoftirqd, where the node's forwarding runs). Less sensitive to the CPU share a run happened to get on a shared machine:"
    echo
    awk_report cpu
    echo
    awk_report info
    if ((${#NOTES[@]})); then
        echo
        echo "Notes:"
        printf -- '- %s\n' "${NOTES[@]}"
    fi
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_ACCT_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_ACCT_REPORT"
if [[ -n ${BENCH_ACCT_RAW:-} ]]; then
    mkdir -p "$BENCH_ACCT_RAW" && cp -r "$WORK/results" "$WORK/failures" "$WORK/json" "$BENCH_ACCT_RAW/"
fi
bench_verdict "$WORK/report.md"
