#!/usr/bin/env bash
# tollgate-allocator under a flood, its reports authenticated: N genuine
# nodes (each with its own service-account token, tests/bench/alloc_load.c
# --tokens) report once a second while, from S other addresses, a flood
# (alloc_load --flood) sends at once, as fast as the allocator takes them:
#   spam  reports of invented nodes (random names), alternately without a
#         token and with a forged one (the issuer's key id, claims the
#         allocator would take, a random signature: each costs a signature
#         check, as no cache knows it)
#   slow  connections announcing a 64 KiB body that trickle a byte a second
#         or send nothing after their headers
#   big   128 KiB reports (twice the wire's limit), kept alive
# The allocator runs with --jwks and leader election on (a one-member etcd,
# Debian's etcd-server, --election-ttl 5). Three phases in one run, each
# WARMUP + SECS seconds of the genuine nodes: calm (no flood), flood, calm
# again (the control: how much grants move between two calm phases). Per
# phase: the genuine nodes' report p50/p99 and the share answered 200, the
# allocator's CPU, each node's last grant and each namespace's sum of them.
# Targets under the flood: genuine p99 <= 50 ms, >= 99 % answered 200,
# every namespace's sum of grants and every node's grant within 5 % of the
# calm phase's, the allocator's peak RSS (VmHWM, over the whole run) <=
# 200 MiB, and no leader change (terms_total and step_downs_total as they
# were, the election key's create_revision in etcd unchanged).
#
# Usage: tests/bench/bench_trust.sh [BIN_DIR]   (default $TOLLGATE_BIN_DIR or build)
#
# Namespaces <run>-* (<run> = tgf<hex>, unique to this run); the root
# namespace is never touched:
#   <run>-alloc  eth0 10.63.0.1/30 (nodes), eth1 10.63.1.1/30 (flood), eth2
#                10.63.2.1/30 (etcd); tollgate-allocator on :9618
#   <run>-gen    eth0 10.63.0.2/30; 10.64.0.0/16 local: node i reports from 10.64.0.1 + i
#   <run>-flood  eth0 10.63.1.2/30; 10.66.0.0/24 local: the flood's S addresses from 10.66.0.1
#   <run>-etcd   eth0 10.63.2.2/30; etcd on 10.63.2.2:2379
#
# Knobs (env):
#   BENCH_TRUST_NODES=1000    genuine nodes
#   BENCH_TRUST_SECONDS=15    measured seconds per phase
#   BENCH_TRUST_WARMUP=4      warm-up seconds per phase
#   BENCH_TRUST_SOURCES=50    the flood's source addresses
#   BENCH_TRUST_SPAM=8 BENCH_TRUST_SLOW=40 BENCH_TRUST_BIG=8
#                             the flood's connections of each kind per address
#   BENCH_TRUST_BUDGET=2G     each namespace's budget (2G: the nodes' demands
#                             exceed it, so that any claimant more moves grants)
#   BENCH_TRUST_AUTH=1        0: the allocator with --insecure-no-auth, the
#                             control that shows the grants' targets can fail
#                             (the flood's invented nodes are then taken)
#   BENCH_TRUST_NICE=0        the allocator's, etcd's, the nodes' and the flood's
#                             nice value (e.g. -5: these ahead of whatever else
#                             the machine runs, as on nodes of their own)
#   BENCH_TRUST_FLOOD_NICE=   the flood generator's alone (default: NICE + 5, at
#                             most 19). On a cluster the flood comes from other
#                             machines, never from the allocator's CPU: here its
#                             generator shares the allocator's 2 cores, and
#                             behind it the generator's own work does not take
#                             the allocator's share (it still makes some 18,000
#                             connections a second). NICE: the generator beside
#                             the allocator, as a harsher case
#   BENCH_STRICT=1            exit 1 (after the report) when a stated target is missed; 0: report only
#   BENCH_REPORT=FILE         also write the markdown report to FILE
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"
bench_start "${1:-}"
ALLOC_BIN=$BIN_DIR/tollgate-allocator
LOAD_BIN=$BIN_DIR/alloc_load
SA_TOKEN=$ROOT/tests/integration/sa_token.py
ETCD_BIN=${TG_ETCD_BIN:-/usr/bin/etcd}
N=${BENCH_TRUST_NODES:-1000}
SECS=${BENCH_TRUST_SECONDS:-15}
WARMUP=${BENCH_TRUST_WARMUP:-4}
SOURCES=${BENCH_TRUST_SOURCES:-50}
SPAM=${BENCH_TRUST_SPAM:-8} SLOW=${BENCH_TRUST_SLOW:-40} BIG=${BENCH_TRUST_BIG:-8}
BUDGET=${BENCH_TRUST_BUDGET:-2G}
AUTH=${BENCH_TRUST_AUTH:-1}
NICE=${BENCH_TRUST_NICE:-0}
FLOOD_NICE=${BENCH_TRUST_FLOOD_NICE:-$((NICE + 5 > 19 ? 19 : NICE + 5))}
PORT=9618
KEY=/tollgate/allocator/leader

die() { printf 'bench_trust: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench_trust: %s\n' "$*" >&2; }

((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
[[ $(id -u) == 0 ]] || die "must run as root (creates network namespaces)"
[[ -x $ALLOC_BIN ]] || die "$ALLOC_BIN not found (run make first)"
[[ -x $LOAD_BIN ]] || die "$LOAD_BIN not found (run make first)"
[[ -x $ETCD_BIN ]] || die "$ETCD_BIN missing (make deps: etcd-server)"
for t in ip jq curl base64 setpriv; do command -v "$t" >/dev/null 2>&1 || die "'$t' missing (make deps)"; done
/usr/bin/python3 -c 'import jwt, cryptography' 2>/dev/null || die "python3-jwt and python3-cryptography missing (make deps)"
for v in "$N" "$SECS" "$WARMUP" "$SOURCES" "$SPAM" "$SLOW" "$BIG"; do
    [[ $v =~ ^[0-9]+$ ]] || die "bad knob value '$v'"
done
((N >= 10 && N <= 20000)) || die "BENCH_TRUST_NODES is 10 to 20000"
((SECS >= 3 && WARMUP >= 3)) || die "BENCH_TRUST_SECONDS and BENCH_TRUST_WARMUP are at least 3"
((SOURCES >= 1 && SOURCES <= 250)) || die "BENCH_TRUST_SOURCES is 1 to 250"
if ! [[ $NICE =~ ^-?[0-9]+$ ]] || ((NICE < -20 || NICE > 19)); then die "BENCH_TRUST_NICE is -20 to 19"; fi
if ! [[ $FLOOD_NICE =~ ^-?[0-9]+$ ]] || ((FLOOD_NICE < -20 || FLOOD_NICE > 19)); then die "BENCH_TRUST_FLOOD_NICE is -20 to 19"; fi

RUN=tgf$(printf '%04x%04x' "$(($$ & 0xffff))" "$RANDOM")
ANS=$RUN-alloc GEN=$RUN-gen FLD=$RUN-flood ETC=$RUN-etcd
WORK=$(mktemp -d /dev/shm/tollgate-bench-trust.XXXXXX 2>/dev/null || mktemp -d /tmp/tollgate-bench-trust.XXXXXX) || die "mktemp failed"
ALLOC_PID="" ETCD_PID="" FLOOD_PID=""
CLEANED=0

stop() { # PID: SIGTERM, reaped
    [[ -n $1 ]] || return 0
    kill -TERM "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
cleanup() {
    ((CLEANED)) && return; CLEANED=1
    stop "$FLOOD_PID"
    stop "$ALLOC_PID"
    stop "$ETCD_PID"
    netns_del_run
    [[ $WORK == */tollgate-bench-trust.* ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# ---------------------------------------------------------------- topology
log "run $RUN: the allocator's, the nodes', the flood's and etcd's namespaces"
netns_batch add "$ANS" "$GEN" "$FLD" "$ETC"
link() { # NS DEV K: a veth DEV in the allocator's namespace, eth0 in NS, 10.63.K.0/30
    ip -n "$ANS" link add "$2" type veth peer name eth0 netns "$1" || die "veth to $1 failed"
    ip -n "$ANS" addr add "10.63.$3.1/30" dev "$2"
    ip -n "$1" addr add "10.63.$3.2/30" dev eth0
    ip -n "$ANS" link set "$2" up
    ip -n "$1" link set lo up
    ip -n "$1" link set eth0 up
}
ip -n "$ANS" link set lo up
link "$GEN" eth0 0
link "$FLD" eth1 1
link "$ETC" eth2 2
ip -n "$ANS" route add 10.64.0.0/16 via 10.63.0.2 || die "route to the nodes failed"
ip -n "$ANS" route add 10.66.0.0/24 via 10.63.1.2 || die "route to the flood failed"
ip -n "$GEN" route add local 10.64.0.0/16 dev lo table local || die "the nodes' addresses failed"
ip -n "$FLD" route add local 10.66.0.0/24 dev lo table local || die "the flood's addresses failed"
ip netns exec "$ANS" sh -c 'echo 4096 > /proc/sys/net/core/somaxconn; echo 8192 > /proc/sys/net/ipv4/tcp_max_syn_backlog'
# the flood reconnects as fast as it is closed: its ports come back sooner
ip netns exec "$FLD" sh -c 'echo 1 > /proc/sys/net/ipv4/tcp_tw_reuse'

python3 -c '
import json, sys
ns = {"ns%03d" % i: {"internetEgress": sys.argv[1]} for i in range(100)}
print(json.dumps({"version": 1, "reportSeconds": 1, "leaseSeconds": 2, "namespaces": ns}))' "$BUDGET" >"$WORK/policy.json" || die "policy"

# the issuer's key and JWKS, and a token per node (node-00000 ..), as the API server makes them
log "minting $N service-account tokens"
/usr/bin/python3 "$SA_TOKEN" keygen "$WORK/issuer" || die "keygen failed"
/usr/bin/python3 "$SA_TOKEN" mint-many "$WORK/issuer" --count "$N" --format 'node-%05d' >"$WORK/tokens" ||
    die "mint-many failed"
KID=$(jq -r '.keys[0].kid' "$WORK/issuer/jwks.json")

# ---------------------------------------------------------------- etcd, the allocator
ip netns exec "$ETC" nice -n "$NICE" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin setpriv --pdeathsig TERM "$ETCD_BIN" \
    --name e1 --data-dir "$WORK/etcd.data" \
    --listen-client-urls http://10.63.2.2:2379 --advertise-client-urls http://10.63.2.2:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster e1=http://127.0.0.1:2380 --initial-cluster-token "$RUN" \
    --enable-v2=false --logger zap --log-outputs stderr >"$WORK/etcd.log" 2>&1 </dev/null &
ETCD_PID=$!
etcd_ok() { ip netns exec "$ANS" curl -sf --max-time 1 http://10.63.2.2:2379/health | grep -q true; }
for _ in $(seq 100); do etcd_ok && break; sleep 0.2; done
etcd_ok || die "etcd did not start: $(tail -c 400 "$WORK/etcd.log")"
# the election key's create_revision: a new one is a new leader
key_rev() {
    ip netns exec "$ANS" curl -sf --max-time 2 -H 'Content-Type: application/json' \
        --data-binary "{\"key\":\"$(printf '%s' "$KEY" | base64 -w0)\"}" http://10.63.2.2:2379/v3/kv/range |
        jq -r '.kvs[0].create_revision // "none"'
}

TRUST=(--jwks "$WORK/issuer/jwks.json")
((AUTH)) || TRUST=(--insecure-no-auth)
ip netns exec "$ANS" nice -n "$NICE" "$ALLOC_BIN" --policy "$WORK/policy.json" "${TRUST[@]}" \
    --listen ":$PORT" --etcd http://10.63.2.2:2379 --advertise "http://10.63.0.1:$PORT" \
    --election-ttl 5 --election-key "$KEY" 2>"$WORK/alloc.log" &
ALLOC_PID=$!
metrics() { ip netns exec "$ANS" curl -sf --max-time 3 "http://10.63.0.1:$PORT/metrics"; }
metric() { awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print "?" }' "$1"; }
leading() { metrics | awk '$1 == "tollgate_allocator_leader" && $2 == 1 { f = 1 } END { exit !f }'; }
for _ in $(seq 100); do leading && break; sleep 0.2; done
leading || die "the allocator does not lead: $(tail -3 "$WORK/alloc.log")"
REV0=$(key_rev)
metrics >"$WORK/metrics-start" || die "no /metrics"

# ---------------------------------------------------------------- the phases
declare -A R=()
genuine() { # PHASE: the genuine nodes' WARMUP + SECS seconds
    local s0 s1
    s0=$(head -1 /proc/stat)
    ip netns exec "$GEN" nice -n "$NICE" "$LOAD_BIN" --url "http://10.63.0.1:$PORT" --nodes "$N" \
        --seconds "$SECS" --warmup "$WARMUP" --namespaces 100 --per-node 3 --src-base 10.64.0.1 \
        --pid "$ALLOC_PID" --tokens "$WORK/tokens" --grants "$WORK/grants-$1" \
        >"$WORK/load-$1.out" 2>"$WORK/load-$1.err"
    local rc=$? line kv
    s1=$(head -1 /proc/stat)
    # the machine's idle share over the phase (idle + iowait of /proc/stat's cpu line)
    R[$1,idle_pct]=$(awk -v a="$s0" -v b="$s1" 'BEGIN {
        n = split(a, x, " "); split(b, y, " "); t = 0
        for (i = 2; i <= n; i++) t += y[i] - x[i]
        printf "%.0f", (t > 0) ? 100 * (y[5] - x[5] + y[6] - x[6]) / t : 0 }')
    cat "$WORK/load-$1.out" >&2
    line=$(grep '^result ' "$WORK/load-$1.out")
    [[ -n $line ]] || die "alloc_load printed no result in phase $1 (exit $rc): $(tail -3 "$WORK/load-$1.err")"
    for kv in ${line#result }; do R[$1,${kv%%=*}]=${kv#*=}; done
    metrics >"$WORK/metrics-$1" || log "no /metrics after phase $1"
}

log "phase calm: $N nodes, $WARMUP s warm-up, $SECS s measured"
genuine calm
log "phase flood: $SOURCES addresses x ($SPAM spam + $SLOW slow + $BIG big) connections"
ip netns exec "$FLD" nice -n "$FLOOD_NICE" "$LOAD_BIN" --flood --url "http://10.63.1.1:$PORT" --src-base 10.66.0.1 \
    --sources "$SOURCES" --spam "$SPAM" --slow "$SLOW" --big "$BIG" --kid "$KID" \
    --seconds $((WARMUP + SECS + 60)) >"$WORK/flood.out" 2>"$WORK/flood.err" &
FLOOD_PID=$!
sleep 2
kill -0 "$FLOOD_PID" 2>/dev/null || die "the flood exited: $(tail -3 "$WORK/flood.err")"
metrics >"$WORK/metrics-flood-start" || log "no /metrics as the flood starts"
# etcd's wait for a CPU over the flood phase (a leader that loses its term
# because etcd answered late is not the allocator's doing)
sched_wait() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ w += $2 } END { print w / 1e9 }'; }
EW0=$(sched_wait "$ETCD_PID") ET0=$EPOCHREALTIME
genuine flood
ETCD_WAIT=$(awk -v a="$EW0" -v b="$(sched_wait "$ETCD_PID")" -v t0="$ET0" -v t1="$EPOCHREALTIME" 'BEGIN { printf "%.3f", (b - a) / (t1 - t0) }')
stop "$FLOOD_PID"
FLOOD_PID=""
FLOOD_LINE=$(grep '^flood ' "$WORK/flood.out")
[[ -n $FLOOD_LINE ]] || die "the flood printed nothing: $(tail -3 "$WORK/flood.err")"
declare -A F=()
for kv in ${FLOOD_LINE#flood }; do F[${kv%%=*}]=${kv#*=}; done
log "phase calm2: the control (calm again)"
genuine calm2
REV1=$(key_rev)
HWM=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$ALLOC_PID/status")
metrics >"$WORK/metrics-end" || die "no /metrics at the end"
stop "$ALLOC_PID"
ARC=$?
ALLOC_PID=""

# ---------------------------------------------------------------- figures
# grants of phase B against phase A: "max_ns_dev_pct max_node_dev_pct nodes_within_pct"
# (a node's grant: each of its namespaces'; deviations relative to A's)
grants_dev() {
    awk 'FNR == NR { a[$1 " " $2] = $3; s[$2] += $3; next }
        { b[$1 " " $2] = $3; t[$2] += $3 }
        END {
            mn = 0; for (k in s) { d = s[k] ? 100 * (t[k] - s[k]) / s[k] : (t[k] ? 100 : 0); if (d < 0) d = -d; if (d > mn) mn = d }
            mk = 0; n = 0; w = 0
            for (k in a) { n++; d = a[k] ? 100 * (b[k] - a[k]) / a[k] : (b[k] ? 100 : 0); if (d < 0) d = -d; if (d > mk) mk = d; if (d <= 5) w++ }
            printf "%.2f %.2f %.2f\n", mn, mk, n ? 100 * w / n : 0
        }' "$WORK/grants-$1" "$WORK/grants-$2"
}
read -r G_NS G_NODE G_WITHIN < <(grants_dev calm flood)
read -r C_NS C_NODE C_WITHIN < <(grants_dev calm calm2)
# the namespaces' sum of grants, for the record: min and max over the 100
ns_sums() { awk '{ s[$2] += $3 } END { mn = -1; mx = 0; for (k in s) { if (mn < 0 || s[k] < mn) mn = s[k]; if (s[k] > mx) mx = s[k] } printf "%.1f to %.1f MB/s\n", mn / 1e6, mx / 1e6 }' "$WORK/grants-$1"; }
M0=$WORK/metrics-start M1=$WORK/metrics-end
TERMS0=$(metric "$M0" tollgate_allocator_terms_total) TERMS1=$(metric "$M1" tollgate_allocator_terms_total)
STEP0=$(metric "$M0" tollgate_allocator_step_downs_total) STEP1=$(metric "$M1" tollgate_allocator_step_downs_total)
delta() { # METRIC: its growth over the flood phase
    awk -v a="$(metric "$WORK/metrics-calm" "$1")" -v b="$(metric "$WORK/metrics-flood" "$1")" 'BEGIN { printf "%d", b - a }'
}
f1() { awk -v a="$1" 'BEGIN { printf "%.1f", a }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? 100 * a / b : 0 }'; }
chk() { awk "BEGIN { print (($1) ? \"PASS\" : \"MISS\") }"; }
ELAPSED=$(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
for p in calm flood calm2; do R[$p,ok_pct]=$(pct "${R[$p,reports]}" "${R[$p,expected]}"); done

report() {
    local p
    echo "## tollgate-allocator under a flood ($(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs, load avg $LOAD_START at start, $LOAD_END at end, ${ELAPSED}s)"
    echo
    echo "allocator: \`$ALLOC_BIN\` with ${TRUST[0]} ($( ((AUTH)) && echo "each report's token checked" || echo "THE CONTROL: every report taken for the node it names")) and leader election (one etcd member, --election-ttl 5); $N genuine nodes, each reporting 3 of 100 budgets ($BUDGET each) once a second with its own token; ${WARMUP} s warm-up, ${SECS} s measured per phase. The flood: $SOURCES addresses x ($SPAM spam + $SLOW slow + $BIG big) connections = $((SOURCES * (SPAM + SLOW + BIG))), all on the same CPUs as the allocator and the nodes; nice $NICE for the allocator, etcd and the nodes, $FLOOD_NICE for the flood."
    echo
    echo "| phase | genuine answered 200 / due | errors | not sent (the last still out) | p50 | p99 | p99 from the send | max | allocator CPU | allocator waiting for a CPU | generator CPU, lag, waiting for a CPU | machine idle |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for p in calm flood calm2; do
        printf '| %s | %s / %s (%s %%) | %s | %s | %s ms | %s ms | %s ms | %s ms | %s cores | %s s/s | %s cores, %s ms, %s s/s | %s %% |\n' "$p" \
            "${R[$p,reports]}" "${R[$p,expected]}" "${R[$p,ok_pct]}" "${R[$p,errors]}" "${R[$p,skipped]}" \
            "${R[$p,p50_ms]}" "${R[$p,p99_ms]}" "${R[$p,p99_sent_ms]}" "${R[$p,max_ms]}" "${R[$p,cpu_cores]}" "${R[$p,alloc_wait]}" \
            "${R[$p,generator_cores]}" "${R[$p,max_lag_ms]}" "${R[$p,generator_wait]}" "${R[$p,idle_pct]}"
    done
    echo
    echo "(p50, p99, max: from the moment a report was due, the target's measure; p99 from the send: from the moment the generator handed it to libcurl, without the generator's own lateness. Waiting for a CPU: seconds per second measured that the process was runnable and not running, /proc/PID/schedstat; a phase where it is high measured the machine's load as much as the allocator.)"
    echo
    echo "The flood ($(f1 "${F[seconds]}") s, from 2 s before the flood phase's warm-up to its end): ${F[connects]} connections made (${F[connect_errors]} failed, ${F[resets]} reset while sending); the flood's own CPU $(awk -v c="${F[cpu_seconds]}" -v s="${F[seconds]}" 'BEGIN { printf "%.2f", c / s }') cores."
    echo
    echo "| kind | requests sent | 200 | 401 | 403 | 408 | 413 | 431 | 503 | other | closed by the allocator |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for k in spam slow big; do
        echo "| $k | ${F[${k}_sent]} | ${F[${k}_200]} | ${F[${k}_401]} | ${F[${k}_403]} | ${F[${k}_408]} | ${F[${k}_413]} | ${F[${k}_431]} | ${F[${k}_503]} | ${F[${k}_other]} | ${F[${k}_closed]} |"
    done
    echo
    echo "The allocator's own count over the flood phase: reports ok +$(delta 'tollgate_allocator_reports_total{result="ok"}'), unauthenticated +$(delta 'tollgate_allocator_reports_total{result="unauthenticated"}'), busy +$(delta 'tollgate_allocator_reports_total{result="busy"}'), oversized +$(delta 'tollgate_allocator_reports_total{result="oversized"}'); signatures checked and held +$(delta tollgate_allocator_auth_verifications_total); tokens remembered at the end $(metric "$M1" tollgate_allocator_auth_tokens); connections closed at their deadline +$(delta tollgate_http_deadline_closed_total); tokens refused, by reason: $(awk -F'"' '/^tollgate_allocator_auth_refusals_total\{/ { split($3, v, " "); printf "%s%s %d", n++ ? ", " : "", $2, v[2] }' "$M1")."
    echo
    echo "Grants (each node's last, per namespace): the namespaces' sums $(ns_sums calm) calm, $(ns_sums flood) under the flood. Flood against calm: namespace sums within ${G_NS} %, node grants within ${G_NODE} % (${G_WITHIN} % of them within 5 %). The control, calm2 against calm: ${C_NS} %, ${C_NODE} % (${C_WITHIN} %)."
    awk -v a="$C_NS" -v b="$C_NODE" 'BEGIN { exit !(a > 5 || b > 5) }' &&
        echo "The control moved by more than 5 % too: the calm phase's grants were still converging (short phases, or budgets the nodes do not fill), and the grants' targets below say little about the flood."
    echo
    echo "etcd waited ${ETCD_WAIT} s per second for a CPU over the flood phase. The allocator's log on its terms: $(grep -c 'msg="leading' "$WORK/alloc.log") started, $(grep -c 'msg="stopped leading' "$WORK/alloc.log") ended$(grep -o 'msg="stopped leading".*why=\("[^"]*"\|[^ ]*\)' "$WORK/alloc.log" | sed 's/.*why=/; why: /' | head -3 | tr -d '\n')."
    echo
    echo "| target (under the flood) | measured | status |"
    echo "|---|---|---|"
    echo "| genuine report p99 <= 50 ms | ${R[flood,p99_ms]} ms (calm ${R[calm,p99_ms]} ms) | $(chk "${R[flood,p99_ms]} <= 50") |"
    echo "| genuine reports answered 200 >= 99 % | ${R[flood,ok_pct]} % (calm ${R[calm,ok_pct]} %) | $(chk "${R[flood,ok_pct]} >= 99") |"
    echo "| every namespace's sum of grants within 5 % of calm | ${G_NS} % at most | $(chk "${G_NS} <= 5") |"
    echo "| every node's grant within 5 % of calm | ${G_NODE} % at most | $(chk "${G_NODE} <= 5") |"
    echo "| allocator peak RSS (VmHWM, whole run) <= 200 MiB | $(f1 "$(awk -v k="$HWM" 'BEGIN { print k / 1024 }')") MiB | $(chk "${HWM:-0} > 0 && ${HWM:-0} <= 204800") |"
    echo "| no leader change (terms, step-downs, the key's create_revision) | terms $TERMS0 -> $TERMS1, step-downs $STEP0 -> $STEP1, revision $REV0 -> $REV1 | $(chk "\"$TERMS0\" == \"$TERMS1\" && \"$STEP0\" == \"$STEP1\" && \"$REV0\" == \"$REV1\" && \"$REV0\" != \"none\"") |"
    FLOODED=$((F[spam_401] + F[big_401] + F[big_413] + F[slow_closed]))
    echo "| the flood was a flood (its requests answered 401 or 413, or cut, >= 1,000) | $FLOODED | $(chk "$FLOODED >= 1000") |"
    echo "| the allocator exits 0 on SIGTERM | exit $ARC | $(chk "$ARC == 0") |"
}
report | tee "$WORK/report.md"
[[ -n ${BENCH_REPORT:-} ]] && cp "$WORK/report.md" "$BENCH_REPORT"
bench_verdict "$WORK/report.md"
