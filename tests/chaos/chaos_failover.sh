#!/usr/bin/env bash
# Chaos: cluster budgets served by three tollgate-allocator replicas elected
# on a real 3-member etcd, on real traffic, while replicas, etcd members and
# the network fail. The budget must hold throughout and no two replicas may
# ever grant in one term.
#
# The world (tests/bench/budgets_lib.sh, as tests/bench/budgets_traffic.sh):
# six nodes on a simulated cloud fabric, each with its tollgate-agent
# --node-name nodeN and one pod of namespace "datasets" ADDed through the
# node's installed plugin; B = 120M for datasets (the replicas' policy
# file, --policy), fallback 10M, reportSeconds 1, leaseSeconds 4; nodes 1
# and 4 heavy (8 TCP streams each), nodes 2, 3, 5 and 6 light (3 Mbit/s of
# UDP): demand exceeds B throughout. The internet
# host counts what each node's pods send it every 100 ms. Six nodes, not
# seven: with three etcd members, three allocators, the meter and the
# senders, two cores carry six agents and still answer every probe on time.
# Plus:
#   - etcd (tests/integration/etcd_lib.sh): members 10.0.0.11-13 on the fabric;
#   - allocator replicas 1-3 at 10.0.0.21-23, each in a namespace of its
#     own, --etcd (the three members) --advertise http://10.0.0.2K:9618
#     --election-ttl 3. The TTL: a SIGKILLed leader's key outlives it by at
#     most 3 s, a follower reads the key every second and the nodes report
#     every second, so a failover takes about 3-5 s, within leaseSeconds + 3
#     (7 s); the default 5 would take up to 7 s or more. A leader grants
#     until TTL - margin past its last renewal: 2.4 s with 3, which rides
#     out most etcd leader elections here (1-2.5 s); with 2 it would be
#     1.5 s, and the leader would step down at nearly every one;
#   - the Service: the agents' budgets.allocator is http://10.0.0.200:9618,
#     an address of the fabric itself (so that the fabric answers ARP for it)
#     DNATed by table ip tgsvc (numgen inc mod N over the live endpoints),
#     as kube-proxy does it; a SIGKILLed replica leaves the endpoints, and
#     comes back once restarted and serving;
#   - table ip tgcut in the fabric: nodes cut from every allocator (set
#     nodes_cut), allocators cut from the etcd members (set allocs_cut).
#
#   node1..node6 10.0.0.1-6 (agents :9617)       etcd 10.0.0.11-13 :2379
#        |                                              |
#   +----+----------- fabric ($TG_ID-fab) -------------+--------------+
#   |  10.0.0.200 (the Service, on lo): DNAT -> 10.0.0.21-23:9618      |
#   |  tgcut: nodes_cut <-/-> allocators, allocs_cut <-/-> etcd        |
#   +----+--------------------+------------------------+-------------+
#        |                    |                        |
#   allocator 1 10.0.0.21  allocator 2 10.0.0.22  allocator 3 10.0.0.23
#   (and the internet host 203.0.113.10 behind the fabric's inet0)
#
# Chaos, each repeated (CHAOS_ROUNDS scales the counts: 12, the plain
# build's default, gives the counts below; the sanitizer build defaults to 4,
# a third of them):
#   1. the leading allocator SIGKILLed 20 times, restarted after each
#      failover: failover time (the kill to the first report the new leader
#      answers with grants, polled every 100 ms), p50 and p99 <= lease + 3 s;
#   2. etcd's raft leader SIGKILLed (3 times), restarted after lease + 3 s
#      at least: the replicas keep one leader with every node granted, or
#      every node is granted in the next term within lease + 3 s of etcd's
#      next raft leader (no replica can lead while etcd has none);
#   3. two etcd members stopped (no quorum; twice): the leading replica stops
#      granting within its TTL (its metric and its "stopped leading" record),
#      every node falls to lease-expired at min(grant, safe share), the safe
#      shares within 0.9 B; the members restarted: a leader grants again;
#   4. the leading replica cut from etcd but not from the agents (3 times):
#      it stops granting before its lease could have expired (before the
#      key goes, and within TTL - margin of the cut), another replica leads,
#      the agents are redirected to it; healed, the cut one follows;
#   5. nodes 1-3 cut from every allocator and the Service (twice): their
#      leases run out (lease-expired at min(grant, safe share)), nodes 4-6
#      keep their grants; healed, every node is granted again within
#      lease + 3 s.
# In every phase the aggregate at the internet host over 1 s windows stays
# <= 1.05 B (max and p99, per phase and overall). Over the whole run: no two
# replicas granted in the same term, from the replicas' own records (every
# "leading" line, every "stopped leading" line with its first and last
# grant, and the time of each SIGKILL): epochs are unique, and each term's
# last grant comes before any later term's first grant; a sampler reads
# every replica's and every agent's metrics every 0.5 s: never two replicas
# leading at once, and every agent's tollgate_budget_epoch only grows. The
# control: the replicas restarted with a budget of 30G, the same pods send
# more than 1.2 B. Every figure is a TAP diag line; every failure is a
# "failure:" diag line too (a check's not-ok line holds its first four).
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/chaos/chaos_failover.sh
# (make chaos runs it once per build). Env: CHAOS_ROUNDS (see above).
# shellcheck disable=SC2016,SC1091,SC2153,SC2034,SC2015  # jq filters with $vars; lib.sh globals; a && b || t_fail
set -u
export LC_NUMERIC=C # EPOCHREALTIME with a decimal point
. "$(dirname "$0")/../integration/lib.sh"
. "$TG_LIB_DIR/etcd_lib.sh"
. "$TG_ROOT/tests/bench/budgets_lib.sh"
tg_require
budgets_require
etcd_require
T0=$SECONDS

case ${TOLLGATE_BIN_DIR%/} in *san*) SAN=1 ;; *) SAN=0 ;; esac
if [ "$SAN" = 1 ]; then ROUNDS=${CHAOS_ROUNDS:-4}; else ROUNDS=${CHAOS_ROUNDS:-12}; fi
[ "$ROUNDS" -ge 1 ] 2>/dev/null || ROUNDS=1
KILLS=$(((20 * ROUNDS + 11) / 12))  # 20 at 12 rounds, 7 at 4
ETCD_KILLS=$(((ROUNDS + 3) / 4))    # 3, 1
NOQUORUM=$(((ROUNDS + 5) / 6))      # 2, 1
ALLOC_CUTS=$(((ROUNDS + 3) / 4))    # 3, 1
NODE_CUTS=$(((ROUNDS + 5) / 6))     # 2, 1
ELECTION_TTL=3
MARGIN_MS=$((ELECTION_TTL * 200 > 500 ? ELECTION_TTL * 200 : 500)) # max(500 ms, TTL / 5)
FAILOVER_S=$((LEASE_S + 3))
# a deadline's own latency: the loop wakes, logs (more under ASan)
if [ "$SAN" = 1 ]; then SLACK_MS=300; else SLACK_MS=150; fi
ELECTION_KEY=/tollgate/allocator/leader
NODES_ALL="1 2 3 4 5 6"
CUT_NODES="1 2 3" KEEP_NODES="4 5 6"
declare -A WANT=([1]=heavy [2]=light [3]=light [4]=heavy [5]=light [6]=light)
B105=$((B_BITS * 105 / 100))
diag "budget B = $B_CONF for datasets, fallback $FALLBACK_CONF, reportSeconds $REPORT_S, leaseSeconds $LEASE_S; nodes 1 and 4 heavy ($HEAVY_STREAMS TCP streams), 2, 3, 5, 6 light ($(mbit "$LIGHT_BITS") Mbit/s UDP); 3 replicas with --election-ttl $ELECTION_TTL (margin $MARGIN_MS ms); rounds $ROUNDS: $KILLS leader kills, $ETCD_KILLS etcd leader kills, $NOQUORUM quorum losses, $ALLOC_CUTS leader-etcd cuts, $NODE_CUTS node cuts"

declare -a A_IP=() A_NS=() A_PID=() A_LOG=() A_RUNS=() A_EP=()
for k in 1 2 3; do A_IP[k]=10.0.0.2$k A_NS[k]=$TG_ID-a$k A_PID[k]="" A_RUNS[k]=0 A_EP[k]=""; done
tg_traps

# ---------------------------------------------------------------- helpers
# ms_now: REPLY = the wall clock in ms (the allocators' *_unix_ms clock)
ms_now() { local t=${EPOCHREALTIME/./}; REPLY=$((t / 1000)); }
# secs MS: "S.ss"; ts MS: the meter's time ("S.mmm")
secs() { if [ "$1" -lt 0 ]; then printf -- '-%d.%02d' $((-$1 / 1000)) $((-$1 % 1000 / 10)); else printf '%d.%02d' $(($1 / 1000)) $(($1 % 1000 / 10)); fi; }
ts() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
# pctl Q V...: the nearest-rank Q-quantile (0 < Q <= 1) of the numbers
pctl() { local q=$1; shift; printf '%s\n' "$@" | sort -n | awk -v q="$q" '{ v[NR] = $1 } END { k = int(q * NR); if (k < q * NR) k++; if (k < 1) k = 1; print v[k] }'; }
# poll MS CMD...: CMD every 0.1 s until it succeeds (0) or MS pass (1);
# POLL_MS: how long it took
poll() {
	local lim=$1 t0
	shift
	ms_now
	t0=$REPLY
	while :; do
		if "$@"; then ms_now; POLL_MS=$((REPLY - t0)); return 0; fi
		ms_now
		POLL_MS=$((REPLY - t0))
		[ "$POLL_MS" -ge "$lim" ] && return 1
		sleep 0.1
	done
}
event() { ms_now; echo "$REPLY $*" >>"$TG_TMP/events"; }
# tf REASON: t_fail for the group's first 4 failures, a diag line for every
# one ("failure: ..."); te: t_end, saying how many more there were
TF_N=0
tf() {
	TF_N=$((TF_N + 1))
	diag "failure: $*"
	[ "$TF_N" -le 4 ] && t_fail "$@"
	return 0
}
te() {
	[ "$TF_N" -le 4 ] || t_fail "... $((TF_N - 4)) more (the \"failure:\" diag lines)"
	TF_N=0
	t_end
}

# alloc_scrape [all]: the replicas' /metrics at once, from the fabric (which
# no cut stops): AM_LEADER[k] AM_EPOCH[k] AM_OK[k] (reports answered with
# grants) AM_ETCD[k] ("-" when it did not answer); LEAD: the one replica
# whose leader gauge is 1 ("" when none, "many" when more). Only the running
# replicas, or all three. (Polled every 100 ms: few processes, and no
# process substitution: bash 5.2 can lose a foreground child's exit to a
# process substitution's recorded PID once PIDs wrap, and hang in wait.)
declare -a AM_LEADER=() AM_EPOCH=() AM_OK=() AM_ETCD=()
alloc_scrape() {
	local k n=0 args=() files=() f=$TG_TMP/am$BASHPID out l e o u
	for k in 1 2 3; do
		: >"$f.$k"
		files+=("$f.$k")
		[ -n "${A_PID[k]}" ] || [ "${1:-}" = all ] && args+=(-o "$f.$k" "http://${A_IP[k]}:$ALLOC_PORT/metrics")
	done
	[ ${#args[@]} -eq 0 ] || timeout -k 1 5 ip netns exec "$FAB" curl -s -Z --no-progress-meter --max-time 1 "${args[@]}" 2>/dev/null
	out=$(awk '
		$1 == "tollgate_allocator_leader" { l[FILENAME] = $2 }
		$1 == "tollgate_allocator_epoch" { e[FILENAME] = $2 }
		$1 == "tollgate_allocator_reports_total{result=\"ok\"}" { o[FILENAME] = $2 }
		$1 == "tollgate_allocator_etcd_up" { u[FILENAME] = $2 }
		END {
			for (i = 1; i < ARGC; i++) {
				f = ARGV[i]
				print (f in l ? l[f] : "-"), (f in e ? e[f] : "-"), (f in o ? o[f] : "-"), (f in u ? u[f] : "-")
			}
		}' "${files[@]}")
	LEAD="" k=0
	while read -r l e o u; do
		k=$((k + 1))
		AM_LEADER[k]=$l AM_EPOCH[k]=$e AM_OK[k]=$o AM_ETCD[k]=$u
		[ "$l" = 1 ] && { n=$((n + 1)); LEAD=$k; }
	done <<<"$out"
	[ "$n" -le 1 ] || LEAD=many
}
lead_known() { alloc_scrape; [ -n "$LEAD" ] && [ "$LEAD" != many ]; }
alloc_line() {
	local k out=""
	for k in 1 2 3; do out+="replica $k leader ${AM_LEADER[k]} epoch ${AM_EPOCH[k]} etcd_up ${AM_ETCD[k]} ok ${AM_OK[k]}; "; done
	echo "${out%; }"
}

# agents_scrape: every agent's /metrics at once, from the fabric: AG_STATE[i]
# (granted, lease-expired, fallback; "-" when no answer) AG_EPOCH[i]
# AG_GRANT[i] AG_CEIL[i] (bytes/s) AG_REDIR[i] AG_STALE[i] AG_ROK[i]
# AG_RERR[i] (reports counted redirected, stale, ok, error)
declare -a AG_STATE=() AG_EPOCH=() AG_GRANT=() AG_CEIL=() AG_REDIR=() AG_STALE=() AG_ROK=() AG_RERR=()
agents_scrape() {
	local i j ids args=() files=() f=$TG_TMP/ag$BASHPID out st e g c r sl ok er
	for i in $NODES_ALL; do
		: >"$f.$i"
		files+=("$f.$i")
		args+=(-o "$f.$i" "http://10.0.0.$i:9617/metrics")
	done
	timeout -k 1 5 ip netns exec "$FAB" curl -s -Z --no-progress-meter --max-time 1 "${args[@]}" 2>/dev/null
	out=$(awk -v g="$GRANT" -v c="$CEIL" '
		index($1, "tollgate_budget_state{namespace=\"datasets\",direction=\"egress\",state=\"") == 1 && $2 == 1 { x = $1; sub(/.*state="/, "", x); sub(/".*/, "", x); s[FILENAME] = x }
		$1 == "tollgate_budget_epoch" { e[FILENAME] = $2 }
		$1 == g { gr[FILENAME] = $2 }
		$1 == c { ce[FILENAME] = $2 }
		$1 == "tollgate_budget_reports_total{result=\"redirected\"}" { r[FILENAME] = $2 }
		$1 == "tollgate_budget_reports_total{result=\"stale\"}" { sl[FILENAME] = $2 }
		$1 == "tollgate_budget_reports_total{result=\"ok\"}" { ok[FILENAME] = $2 }
		$1 == "tollgate_budget_reports_total{result=\"error\"}" { er[FILENAME] = $2 }
		END {
			for (i = 1; i < ARGC; i++) {
				f = ARGV[i]
				if (!(f in e)) { print "- - 0 0 0 0 0 0"; continue }
				print (f in s ? s[f] : "none"), e[f], gr[f] + 0, ce[f] + 0, r[f] + 0, sl[f] + 0, ok[f] + 0, er[f] + 0
			}
		}' "${files[@]}")
	read -ra ids <<<"$NODES_ALL"
	j=0
	while read -r st e g c r sl ok er; do
		i=${ids[j]}
		j=$((j + 1))
		AG_STATE[i]=$st AG_EPOCH[i]=$e AG_GRANT[i]=$g AG_CEIL[i]=$c AG_REDIR[i]=$r AG_STALE[i]=$sl AG_ROK[i]=$ok AG_RERR[i]=$er
	done <<<"$out"
}
# agents_on E [NODES]: those nodes (default all) granted, in term E
agents_on() {
	local i
	agents_scrape
	for i in ${2:-$NODES_ALL}; do [ "${AG_STATE[i]}" = granted ] && [ "${AG_EPOCH[i]}" = "$1" ] || return 1; done
}
# agents_state S "NODES": those nodes in state S
agents_state() {
	local i
	agents_scrape
	for i in $2; do [ "${AG_STATE[i]}" = "$1" ] || return 1; done
}
agents_line() {
	local i out=""
	for i in $NODES_ALL; do out+="node$i ${AG_STATE[i]} e${AG_EPOCH[i]} grant $(mbit $((AG_GRANT[i] * 8))) ceil $(mbit $((AG_CEIL[i] * 8))); "; done
	echo "${out%; } (Mbit/s)"
}
# stuck_line E: the nodes not granted in term E, what their agents counted
# and where the fabric's conntrack sends their kept-alive connection to the
# Service (for a failure's message)
stuck_line() {
	local i out="" pins
	pins=$(timeout -k 1 5 ip netns exec "$FAB" conntrack -L -p tcp --orig-dst "$ALLOC_IP" --dport "$ALLOC_PORT" 2>/dev/null |
		awk '/ESTABLISHED/ { n = 0; for (f = 1; f <= NF; f++) if ($f ~ /^src=/) { n++; v[n] = substr($f, 5) } print v[1], v[2] }')
	for i in $NODES_ALL; do
		[ "${AG_STATE[i]}" = granted ] && [ "${AG_EPOCH[i]}" = "$1" ] && continue
		out+="node$i ${AG_STATE[i]} in term ${AG_EPOCH[i]}, reports ok ${AG_ROK[i]} error ${AG_RERR[i]} redirected ${AG_REDIR[i]} stale ${AG_STALE[i]}, Service connection to $(awk -v n="10.0.0.$i" '$1 == n { printf "%s ", $2 }' <<<"$pins"); "
	done
	echo "${out%; }"
}
redirects_sum() { local i n=0; for i in $NODES_ALL; do n=$((n + AG_REDIR[i])); done; echo "$n"; }
stale_sum() { local i n=0; for i in $NODES_ALL; do n=$((n + AG_STALE[i])); done; echo "$n"; }
# expired_ok I: node I is lease-expired at min(grant, safe share), as its
# budgets.json holds them (EXP_SAFE: that safe share, bytes/s); else
# status 1 and EXP_WHY
expired_ok() {
	local jg js jn want
	EXP_SAFE=0
	[ "${AG_STATE[$1]}" = lease-expired ] || { EXP_WHY="node $1 state ${AG_STATE[$1]}, expected lease-expired"; return 1; }
	read -r jg js jn <<<"$(jq -r '.namespaces[] | select(.namespace == "datasets") | "\(.grant) \(.safeShare) \(.nodes)"' \
		"$TG_TMP/n$1/data/tollgate/budgets.json" 2>/dev/null)"
	EXP_SAFE=${js:-0}
	want=$((${jg:-0} < ${js:-0} ? ${jg:-0} : ${js:-0}))
	[ "${AG_CEIL[$1]}" = "$want" ] || { EXP_WHY="node $1 ceil ${AG_CEIL[$1]}, expected min(grant ${jg:-?}, safe share ${js:-?}) = $want"; return 1; }
}

# the Service's endpoints (A_EP[k] set: replica k is one), written as
# kube-proxy would: DNAT to numgen inc mod N over them, in one batch
svc_set() {
	local k n=0 map=""
	for k in 1 2 3; do
		[ -n "${A_EP[k]}" ] || continue
		map+="${map:+, }$n : ${A_IP[k]}"
		n=$((n + 1))
	done
	{
		echo "flush chain ip tgsvc prerouting"
		[ "$n" -eq 0 ] || echo "add rule ip tgsvc prerouting ip daddr $ALLOC_IP tcp dport $ALLOC_PORT dnat to numgen inc mod $n map { $map }"
	} | ip netns exec "$FAB" nft -f -
}
# nft_cut SET ADDR... / nft_heal SET ADDR...: table ip tgcut's sets
nft_cut() { local s=$1; shift; ip netns exec "$FAB" nft add element ip tgcut "$s" "{ $(IFS=,; echo "$*") }"; }
nft_heal() { local s=$1; shift; ip netns exec "$FAB" nft delete element ip tgcut "$s" "{ $(IFS=,; echo "$*") }"; }

# alloc_start K [POLICY]: replica K (a log of its own per run, listed in
# alloc.runs), serving /readyz within 10 s; then back in the Service
alloc_start() {
	local k=$1 policy=${2:-$TG_TMP/allocator-policy.json}
	A_RUNS[k]=$((A_RUNS[k] + 1))
	A_LOG[k]=$TG_TMP/alloc$k.run${A_RUNS[k]}.log
	echo "$k ${A_LOG[k]}" >>"$TG_TMP/alloc.runs"
	daemon "${A_NS[k]}" "$ALLOC" --policy "$policy" --insecure-no-auth --listen "${A_IP[k]}:$ALLOC_PORT" --etcd "$ETCD_URLS" \
		--advertise "http://${A_IP[k]}:$ALLOC_PORT" --election-ttl "$ELECTION_TTL" 2>"${A_LOG[k]}"
	A_PID[k]=$!
	event "start replica $k"
	wait_for 10 alloc_ready "$k" || return 1
	A_EP[k]=1
	svc_set
}
alloc_ready() { [ "$(timeout -k 1 5 ip netns exec "$FAB" curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://${A_IP[$1]}:$ALLOC_PORT/readyz")" = 200 ]; }
# alloc_kill K [SIGNAL]: SIGKILL (or SIGNAL) replica K, reap it, take it out
# of the Service; KILL_MS: when it was signalled. alloc.kills gets "LOG
# SIGNALLED_MS REAPED_MS" (its last grant came before the latter)
alloc_kill() {
	local k=$1 sig=${2:-KILL}
	ms_now
	KILL_MS=$REPLY
	stop_pid "${A_PID[k]}" "$sig"
	ms_now
	[ "$sig" = KILL ] && echo "${A_LOG[k]} $KILL_MS $REPLY" >>"$TG_TMP/alloc.kills"
	event "$sig replica $k"
	A_PID[k]="" A_EP[k]=""
	svc_set
}
# alloc_follows K E: replica K runs, follows term E and reaches etcd
alloc_follows() { alloc_scrape; [ "${AM_LEADER[$1]}" = 0 ] && [ "${AM_EPOCH[$1]}" = "$2" ] && [ "${AM_ETCD[$1]}" = 1 ]; }
# stopped_line K E: the "stopped leading" record of term E in replica K's log
stopped_line() { grep -F "msg=\"stopped leading\" epoch=$2 " "${A_LOG[$1]}" | tail -n 1; }
field() { sed -nE "s/.* $1=(\"[^\"]*\"|[^ ]*).*/\1/p" <<<"$2"; }
# log_ms LINE: the record's time (ms)
log_ms() { date -u -d "$(cut -c1-23 <<<"$1")" +%s%3N 2>/dev/null; }

# traffic: the meter and the demand run for TRAFFIC_S at most (inet_meter.py
# takes 600 at most); traffic_ensure S restarts both when less than S are left
TRAFFIC_S=590
LOAD_SECONDS=$TRAFFIC_S LOAD_UNTIL=0
loads_start() {
	local i
	for i in $NODES_ALL; do demand "$i" "${WANT[$i]}"; done
	LOAD_UNTIL=$((SECONDS + LOAD_SECONDS))
}
traffic_start() {
	meter_start "$TRAFFIC_S" || return 1
	loads_start
}
traffic_stop() {
	local i
	for i in $NODES_ALL; do demand "$i" none; done
	stop_pid "$METER_PID"
}
traffic_ensure() {
	local until=$((METER_UNTIL < LOAD_UNTIL ? METER_UNTIL : LOAD_UNTIL))
	[ $((until - SECONDS)) -ge "$1" ] && return 0
	diag "traffic restarted (the meter and the loads run $TRAFFIC_S s at most)"
	traffic_stop
	traffic_start || tf "the meter did not restart: $(tail -3 "$TG_TMP/meter.err")"
}

# phase_stats NAME T0_MS T1_MS: the aggregate over the phase, diag'ed and
# checked (max <= 1.05 B; p99 too)
phase_stats() {
	settle
	stats "$(ts "$2")" "$(ts "$3")"
	diag "$1: aggregate $(stats_line) (B $(mbit "$B_BITS"), 1.05 B $(mbit "$B105"))"
	sh_le "$ST_P99" "$B105" || tf "$1: aggregate p99 $(mbit "$ST_P99") Mbit/s > 1.05 B"
	sh_le "$ST_MAX" "$B105" || tf "$1: aggregate max $(mbit "$ST_MAX") Mbit/s > 1.05 B"
}
# steady WHAT: a leader (LEAD, LEAD_E) and every node granted in its term,
# within lease + 3 s; t_fails saying what it saw otherwise, status 1 when
# no replica leads (the round cannot go on)
steady() {
	if ! poll $((FAILOVER_S * 1000)) lead_known; then
		tf "$1: no single leader within $FAILOVER_S s ($(alloc_line))"
		return 1
	fi
	LEAD_E=${AM_EPOCH[LEAD]}
	poll $((FAILOVER_S * 1000)) agents_on "$LEAD_E" ||
		tf "$1: not every node granted in term $LEAD_E within $FAILOVER_S s ($(stuck_line "$LEAD_E"))"
	return 0
}

# sampler: every 0.5 s, every replica's leader gauge and epoch and every
# agent's epoch and state, one line "MS a1=L/E a2=.. a3=.. n1=E/STATE ..." in
# $TG_TMP/samples, while $TG_TMP/sampling exists (at most 30 min)
sampler() {
	local k i line end=$((SECONDS + 1800))
	while [ -e "$TG_TMP/sampling" ] && [ "$SECONDS" -lt "$end" ]; do
		alloc_scrape all
		agents_scrape
		ms_now
		line=$REPLY
		for k in 1 2 3; do line+=" a$k=${AM_LEADER[k]}/${AM_EPOCH[k]}"; done
		for i in $NODES_ALL; do line+=" n$i=${AG_EPOCH[i]}/${AG_STATE[i]}"; done
		echo "$line" >>"$TG_TMP/samples"
		sleep 0.5
	done
}

# ---------------------------------------------------------------- topology
t_begin "topology: six nodes, three allocator replicas, a 3-member etcd, the allocators' Service and an internet host on a simulated cloud fabric"
TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || tap_bail "mktemp"
chmod 755 "$TG_TMP"
METER_OUT=$TG_TMP/meter.txt
topo() {
	local k
	topo_fabric_nodes || return 1
	for k in 1 2 3; do
		_tg_netns_add "${A_NS[k]}" || return 1
		fabric_link "va$k" "${A_NS[k]}" "${A_IP[k]}" || return 1
	done
	topo_inet || return 1
	# the Service's address is the fabric's own: it answers ARP for it, DNAT
	# sends it on (with no endpoint, the fabric refuses the connection)
	ip -n "$FAB" addr add "$ALLOC_IP/32" dev lo || return 1
	ip netns exec "$FAB" nft -f - <<-EOF || return 1
		table ip tgsvc {
			chain prerouting { type nat hook prerouting priority dstnat; policy accept; }
		}
	EOF
	topo_reach "${A_IP[1]}" "allocator replica 1" && topo_reach "${A_IP[3]}" "allocator replica 3"
}
# (not in a subshell: the namespaces it makes are recorded for the cleanup)
topo >"$TG_TMP/topo.err" 2>&1 || tap_bail "could not build the topology: $(tail -3 "$TG_TMP/topo.err")"
# etcd_up in this shell (its members are its children)
etcd_up "$FAB" 10.0.0 2>"$TG_TMP/etcd_up.err" || tap_bail "etcd did not come up: $(tail -5 "$TG_TMP/etcd_up.err")"
ip netns exec "$FAB" nft -f - <<EOF || tap_bail "cannot make table ip tgcut"
table ip tgcut {
	set nodes_cut { type ipv4_addr; }
	set allocs_cut { type ipv4_addr; }
	set allocs { type ipv4_addr; elements = { ${A_IP[1]}, ${A_IP[2]}, ${A_IP[3]} }; }
	set etcd { type ipv4_addr; elements = { ${ETCD_IPS// /, } }; }
	chain forward {
		type filter hook forward priority 0; policy accept;
		ip saddr @nodes_cut ip daddr @allocs drop
		ip saddr @allocs ip daddr @nodes_cut drop
		ip saddr @allocs_cut ip daddr @etcd drop
		ip saddr @etcd ip daddr @allocs_cut drop
	}
	chain input { type filter hook input priority 0; policy accept; ip saddr @nodes_cut ip daddr $ALLOC_IP drop; }
}
EOF
diag "etcd members at $ETCD_IPS, client URLs $ETCD_URLS; replicas at ${A_IP[*]}; Service $ALLOC_URL"
te

t_begin "the internet host: a sink for TCP and UDP, its counters read every 100 ms"
meter_start "$TRAFFIC_S" || tap_bail "inet_meter.py serve did not start: $(cat "$TG_TMP/meter.err")"
wait_for 5 test -s "$METER_OUT" || tf "no counter read within 5 s: $(cat "$TG_TMP/meter.err")"
te

# ---------------------------------------------------------------- agents, pods
t_begin "six agents turn ready, a pod of namespace datasets on each, ADDed through the node's installed plugin"
for i in $NODES_ALL; do agent_start "$i" || tap_bail "cannot derive node $i's conflist from $CONFLIST"; done
for i in $NODES_ALL; do
	wait_for 20 agent_ready "$i" || tf "node $i's agent not ready within 20 s: $(tail -3 "$TG_TMP/n$i/agent.log")"
	[ -x "$TG_TMP/n$i/bin/tollgate" ] || tf "node $i: plugin not installed"
done
for i in $NODES_ALL; do kill -0 "${AGENT_PID[$i]}" 2>/dev/null || tap_bail "node $i's agent exited: $(tail -5 "$TG_TMP/n$i/agent.log")"; done
for i in $NODES_ALL; do pod_up "$i"; done
for i in $NODES_ALL; do [ -n "${POD_IP[d$i]:-}" ] || tap_bail "cannot continue without pod d$i: $T_ERRS"; done
te

# ---------------------------------------------------------------- replicas
policy_put "$TG_TMP/allocator-policy.json" "$B_CONF" || tap_bail "cannot write the replicas' policy"
policy_put "$TG_TMP/allocator-policy-control.json" "$CONTROL_CONF" || tap_bail "cannot write the control policy"
: >"$TG_TMP/alloc.runs"
: >"$TG_TMP/alloc.kills"
touch "$TG_TMP/sampling"
sampler &
SAMPLER_PID=$!
TG_PIDS+=("$SAMPLER_PID")

t_begin "three replicas start on etcd, heavy demand on nodes 1 and 4: one leads, the others follow it, every node granted in its term within lease + 3 s"
loads_start
ms_now
W_T0=$REPLY
for k in 1 2 3; do alloc_start "$k" || tf "replica $k did not serve within 10 s: $(tail -3 "${A_LOG[k]}")"; done
if steady "start"; then
	diag "start: replica $LEAD leads term $LEAD_E, every node granted $(secs "$POLL_MS") s after it was known to lead"
	for k in 1 2 3; do
		[ "$k" = "$LEAD" ] && continue
		poll 5000 alloc_follows "$k" "$LEAD_E" || tf "replica $k does not follow term $LEAD_E ($(alloc_line))"
	done
fi
sleep $((LEASE_S + 3)) # past the first term's learning: grants by demand
agents_scrape
diag "start: $(agents_line)"
ms_now
phase_stats "start" "$W_T0" "$REPLY"
te
RUN_T0=$W_T0

# ---------------------------------------------------------------- 1. leader SIGKILLed
t_begin "the leading replica SIGKILLed $KILLS times (out of the Service, restarted after each failover): a new leader grants within lease + 3 s (p50 and p99), every node granted in its term"
ms_now
P_T0=$REPLY
FO=()
declare -a BASE_OK=()
granted_by_new() { # L: another replica leads and has answered a report with grants since the kill
	local k
	alloc_scrape
	for k in 1 2 3; do
		[ "$k" = "$1" ] && continue
		[ "${AM_LEADER[k]}" = 1 ] && [ "${AM_OK[k]}" != - ] && [ "${AM_OK[k]}" -gt "${BASE_OK[k]}" ] && { NEW=$k; return 0; }
	done
	return 1
}
for ((r = 1; r <= KILLS; r++)); do
	traffic_ensure 30
	steady "kill $r, before" || continue
	L=$LEAD E=$LEAD_E
	for k in 1 2 3; do BASE_OK[k]=${AM_OK[k]/-/0}; done
	alloc_kill "$L"
	NEW=""
	if poll 15000 granted_by_new "$L"; then
		FO+=("$POLL_MS")
		E2=${AM_EPOCH[NEW]}
		diag "kill $r: replica $L (term $E) SIGKILLed; replica $NEW leads term $E2 and granted after $(secs "$POLL_MS") s"
		[ "$E2" -gt "$E" ] || tf "kill $r: the new term $E2 is not above the killed one's $E"
	else
		FO+=(99999)
		tf "kill $r: no other replica granted within 15 s of the kill ($(alloc_line))"
	fi
	alloc_start "$L" || tf "kill $r: replica $L did not serve within 10 s of its restart: $(tail -3 "${A_LOG[L]}")"
	if [ -n "$NEW" ]; then
		poll 5000 alloc_follows "$L" "$E2" || tf "kill $r: the restarted replica $L does not follow term $E2 ($(alloc_line))"
		# the agents: every node granted in the new term within lease + 3 s of the kill
		ms_now
		left=$((FAILOVER_S * 1000 - (REPLY - KILL_MS)))
		poll $((left > 0 ? left : 0)) agents_on "$E2" ||
			tf "kill $r: not every node granted in term $E2 within $FAILOVER_S s of the kill ($(stuck_line "$E2"))"
	fi
	sleep "0.$((RANDOM % 9 + 1))"
done
ms_now
P1_T1=$REPLY
if [ ${#FO[@]} -gt 0 ]; then
	FO_P50=$(pctl 0.5 "${FO[@]}") FO_P99=$(pctl 0.99 "${FO[@]}") FO_MAX=$(pctl 1 "${FO[@]}")
	diag "leader SIGKILLed ${#FO[@]} times: failover (the kill to the new leader's first grant) p50 $(secs "$FO_P50") s, p99 $(secs "$FO_P99") s, max $(secs "$FO_MAX") s (bound $FAILOVER_S s)"
	[ "$FO_P50" -le $((FAILOVER_S * 1000)) ] || tf "failover p50 $(secs "$FO_P50") s > $FAILOVER_S s"
	[ "$FO_P99" -le $((FAILOVER_S * 1000)) ] || tf "failover p99 $(secs "$FO_P99") s > $FAILOVER_S s"
fi
agents_scrape
diag "leader kills: agents counted $(redirects_sum) reports redirected and $(stale_sum) stale answers so far"
phase_stats "leader kills" "$P_T0" "$P1_T1"
te

# ---------------------------------------------------------------- 2. etcd leader SIGKILLed
t_begin "etcd's raft leader SIGKILLed $ETCD_KILLS times (restarted after lease + 3 s at least): the replicas keep one leader, or every node is granted in the next term within lease + 3 s of etcd's next raft leader"
ms_now
P_T0=$REPLY
for ((r = 1; r <= ETCD_KILLS; r++)); do
	traffic_ensure 40
	steady "etcd kill $r, before" || continue
	L=$LEAD E=$LEAD_E
	etcd_leader >"$TG_TMP/etcd.leader" || { tf "etcd kill $r: no raft leader"; break; }
	m=$(cat "$TG_TMP/etcd.leader")
	ms_now
	K_MS=$REPLY
	etcd_stop "$m"
	event "etcd member $m SIGKILLed (raft leader)"
	# watched for lease + 3 s at least, then until a replica leads with every
	# node granted in its term (at most 20 s): who leads, when etcd has a
	# raft leader again (EB_MS), when the cluster was last not in order
	# (BAD_MS: no single leader, or a node not granted in its term) and when
	# it was next (OK_MS)
	seen="" gaps=0 EB_MS="" BAD_MS="" OK_MS=""
	while :; do
		alloc_scrape
		[ -n "$LEAD" ] && [ "$LEAD" != many ] && seen+=" ${LEAD}:${AM_EPOCH[LEAD]}"
		[ -z "$LEAD" ] && gaps=$((gaps + 1))
		[ "$LEAD" = many ] && tf "etcd kill $r: two replicas lead at once ($(alloc_line))"
		# (the survivors name the killed leader until they notice it is gone)
		if [ -z "$EB_MS" ] && etcd_leader >"$TG_TMP/etcd.leader" && [ "$(cat "$TG_TMP/etcd.leader")" != "$m" ]; then
			ms_now
			EB_MS=$REPLY
		fi
		ms_now
		if [ -n "$LEAD" ] && [ "$LEAD" != many ] && agents_on "${AM_EPOCH[LEAD]}"; then
			[ -n "$OK_MS" ] || OK_MS=$REPLY
		else
			BAD_MS=$REPLY OK_MS=""
		fi
		[ $((REPLY - K_MS)) -ge $((FAILOVER_S * 1000)) ] && [ -n "$EB_MS" ] && [ -n "$OK_MS" ] && break
		[ $((REPLY - K_MS)) -ge 20000 ] && break
		sleep 0.1
	done
	terms=$(tr ' ' '\n' <<<"$seen" | awk 'NF && !s[$0]++' | tr '\n' ' ')
	if [ -z "$OK_MS" ]; then
		tf "etcd kill $r: 20 s after member $m's kill, no single leader with every node granted in its term ($(alloc_line); $(stuck_line "${AM_EPOCH[LEAD]:-0}"))"
	elif [ -z "$BAD_MS" ]; then
		diag "etcd kill $r: member $m (raft leader) SIGKILLed, etcd led again after $(secs $((${EB_MS:-0} - K_MS))) s; replica $L kept leading term $E, every node granted throughout (replica:term seen: ${terms:-none})"
	else
		back=$((OK_MS - ${EB_MS:-$K_MS}))
		diag "etcd kill $r: member $m (raft leader) SIGKILLed, etcd led again after $(secs $((${EB_MS:-0} - K_MS))) s; from replica $L term $E to replica $LEAD term ${AM_EPOCH[LEAD]}: every node granted in it $(secs $((OK_MS - K_MS))) s after the kill, $(secs "$back") s after etcd led again (replica:term seen: ${terms:-none}; $gaps polls with no leader)"
		[ "$back" -le $((FAILOVER_S * 1000)) ] ||
			tf "etcd kill $r: every node granted in the next term only $(secs "$back") s after etcd led again (bound $FAILOVER_S s)"
	fi
	etcd_start "$m" 2>>"$TG_TMP/etcd_up.err" || tf "etcd kill $r: member $m did not restart: $(tail -2 "$TG_TMP/etcd_up.err")"
	etcd_wait_healthy 3 20 || tf "etcd kill $r: the cluster not healthy within 20 s of member $m's restart"
	event "etcd member $m restarted"
	steady "etcd kill $r, after the restart" && diag "etcd kill $r: after member $m's restart replica $LEAD leads term $LEAD_E"
done
ms_now
phase_stats "etcd leader kills" "$P_T0" "$REPLY"
te

# ---------------------------------------------------------------- 3. no quorum
t_begin "two etcd members stopped $NOQUORUM times (no quorum): the leader stops granting within its TTL, every node falls to lease-expired at min(grant, safe share); restarted, a leader grants again"
ms_now
P_T0=$REPLY
for ((r = 1; r <= NOQUORUM; r++)); do
	traffic_ensure 60
	steady "quorum loss $r, before" || continue
	L=$LEAD E=$LEAD_E
	etcd_leader >"$TG_TMP/etcd.leader" || { tf "quorum loss $r: no raft leader"; break; }
	m=$(cat "$TG_TMP/etcd.leader")
	# odd rounds: the raft leader and a follower; even rounds: both followers
	if [ $((r % 2)) = 1 ]; then s1=$m s2=$((m % 3 + 1)); else s1=$((m % 3 + 1)) s2=$(((m + 1) % 3 + 1)); fi
	ms_now
	Q_MS=$REPLY
	etcd_stop "$s1"
	etcd_stop "$s2"
	event "etcd members $s1 and $s2 SIGKILLed (no quorum)"
	stepped() { alloc_scrape; [ "${AM_LEADER[$1]}" = 0 ]; }
	if poll $(((ELECTION_TTL + 2) * 1000)) stepped "$L"; then
		SD=$POLL_MS
		sl=$(stopped_line "$L" "$E")
		last=$(field last_grant_unix_ms "$sl")
		sd_log=$(log_ms "$sl")
		lastg="no grant in the term"
		[ "${last:-0}" = 0 ] || lastg="last grant $(secs $((last - Q_MS))) s after the stop"
		diag "quorum loss $r: members $s1 and $s2 stopped; replica $L (term $E) stopped leading $(secs "$SD") s later (its record: $(secs $((${sd_log:-0} - Q_MS))) s, $lastg; why=$(field why "$sl"))"
		[ "$SD" -le $((ELECTION_TTL * 1000)) ] || tf "quorum loss $r: replica $L stopped leading $(secs "$SD") s after the quorum went (TTL $ELECTION_TTL s)"
		[ -n "$sl" ] || tf "quorum loss $r: no \"stopped leading\" record of term $E in replica $L's log"
		[ -n "$last" ] && [ $((last - Q_MS)) -le $((ELECTION_TTL * 1000)) ] ||
			tf "quorum loss $r: term $E's last grant $(secs $((${last:-0} - Q_MS))) s after the quorum went (TTL $ELECTION_TTL s)"
	else
		tf "quorum loss $r: replica $L still leads $((ELECTION_TTL + 2)) s after the quorum went ($(alloc_line))"
	fi
	# every node's lease runs out: lease-expired at min(grant, safe share)
	if poll $(((LEASE_S + ELECTION_TTL + 1) * 1000)) agents_state lease-expired "$NODES_ALL"; then
		ms_now
		diag "quorum loss $r: every node lease-expired $(secs $((REPLY - Q_MS))) s after the quorum went"
	else
		tf "quorum loss $r: not every node lease-expired within $((LEASE_S + ELECTION_TTL + 1)) s ($(agents_line))"
	fi
	sleep 1
	agents_scrape
	safe_sum=0
	for i in $NODES_ALL; do
		expired_ok "$i" || tf "quorum loss $r: $EXP_WHY"
		safe_sum=$((safe_sum + EXP_SAFE))
	done
	diag "quorum loss $r: $(agents_line); safe shares $(mbit $((safe_sum * 8))) Mbit/s together"
	sh_le $((safe_sum * 8)) $((B_BITS * 9 / 10 + 100)) || tf "quorum loss $r: the safe shares add up to $(mbit $((safe_sum * 8))) Mbit/s > 0.9 B"
	alloc_scrape
	[ -z "$LEAD" ] || tf "quorum loss $r: replica $LEAD leads without a quorum ($(alloc_line))"
	etcd_start "$s1" 2>>"$TG_TMP/etcd_up.err" && etcd_start "$s2" 2>>"$TG_TMP/etcd_up.err" ||
		tf "quorum loss $r: a member did not restart: $(tail -2 "$TG_TMP/etcd_up.err")"
	ms_now
	R_MS=$REPLY
	event "etcd members $s1 and $s2 restarted"
	etcd_wait_healthy 3 20 || tf "quorum loss $r: the cluster not healthy within 20 s of the restart"
	ms_now
	H_MS=$REPLY
	if poll 30000 lead_known && poll $((FAILOVER_S * 1000)) agents_on "${AM_EPOCH[LEAD]}"; then
		ms_now
		diag "quorum loss $r: members restarted, etcd healthy after $(secs $((H_MS - R_MS))) s; replica $LEAD leads term ${AM_EPOCH[LEAD]}, every node granted in it $(secs $((REPLY - R_MS))) s after the restart"
	else
		tf "quorum loss $r: no leader granting every node within 30 s of etcd's recovery ($(alloc_line); $(agents_line))"
	fi
done
ms_now
phase_stats "quorum losses" "$P_T0" "$REPLY"
te

# ---------------------------------------------------------------- 4. leader cut from etcd
t_begin "the leading replica cut from etcd, not from the agents, $ALLOC_CUTS times: it stops granting within TTL - margin of the cut, before its key goes; another leads, the agents are redirected to it; healed, the cut one follows"
ms_now
P_T0=$REPLY
key_b64=$(etcd_b64 "$ELECTION_KEY")
# key_rev: the election key's create_revision in etcd ("" when it is gone; "?" when no member answered)
key_rev() {
	etcd_post /v3/kv/range "{\"key\":\"$key_b64\"}" >"$TG_TMP/key.json" 2>/dev/null || { KEY_REV="?"; return; }
	KEY_REV=$(jq -r '.kvs[0].create_revision // ""' "$TG_TMP/key.json" 2>/dev/null)
}
for ((r = 1; r <= ALLOC_CUTS; r++)); do
	traffic_ensure 40
	steady "cut $r, before" || continue
	L=$LEAD E=$LEAD_E
	redir0=$(redirects_sum)
	ms_now
	C_MS=$REPLY
	nft_cut allocs_cut "${A_IP[L]}" || { tf "cut $r: cannot cut replica $L from etcd"; break; }
	event "replica $L cut from etcd"
	SD_MS="" GONE_MS="" NEW_MS="" NEW="" E2=""
	while :; do
		alloc_scrape
		ms_now
		[ -z "$SD_MS" ] && [ "${AM_LEADER[L]}" != 1 ] && SD_MS=$REPLY
		[ "$LEAD" = many ] && tf "cut $r: two replicas lead at once ($(alloc_line))"
		if [ -z "$NEW_MS" ] && [ -n "$LEAD" ] && [ "$LEAD" != many ] && [ "$LEAD" != "$L" ]; then
			NEW_MS=$REPLY NEW=$LEAD E2=${AM_EPOCH[LEAD]}
		fi
		if [ -z "$GONE_MS" ]; then
			key_rev
			ms_now
			[ "$KEY_REV" != "?" ] && [ "$KEY_REV" != "$E" ] && GONE_MS=$REPLY
		fi
		[ -n "$SD_MS" ] && [ -n "$GONE_MS" ] && [ -n "$NEW_MS" ] && break
		[ $((REPLY - C_MS)) -ge 15000 ] && break
		sleep 0.1
	done
	sl=$(stopped_line "$L" "$E")
	last=$(field last_grant_unix_ms "$sl")
	sd_log=$(log_ms "$sl")
	if [ -z "$SD_MS" ] || [ -z "$sl" ]; then
		tf "cut $r: replica $L did not stop leading within 15 s of its cut ($(alloc_line))"
	else
		lastg="no grant in the term"
		[ "${last:-0}" = 0 ] || lastg="last grant $(secs $((last - C_MS))) s"
		diag "cut $r: replica $L (term $E) cut from etcd; it stopped granting $(secs $((sd_log - C_MS))) s after the cut ($lastg; bound TTL - margin = $(secs $((ELECTION_TTL * 1000 - MARGIN_MS))) s), its key went after $(secs $((${GONE_MS:-0} - C_MS))) s (polled), replica ${NEW:-none} leads term ${E2:-none} after $(secs $((${NEW_MS:-0} - C_MS))) s"
		[ $((sd_log - C_MS)) -le $((ELECTION_TTL * 1000 - MARGIN_MS + SLACK_MS)) ] ||
			tf "cut $r: replica $L stopped leading $(secs $((sd_log - C_MS))) s after its cut (TTL - margin: $(secs $((ELECTION_TTL * 1000 - MARGIN_MS))) s)"
		if [ -n "$GONE_MS" ]; then
			[ "$sd_log" -lt "$GONE_MS" ] || tf "cut $r: replica $L stopped leading after its key was gone"
			[ -z "$last" ] || [ "$last" -lt "$GONE_MS" ] || tf "cut $r: replica $L granted after its key was gone"
		fi
	fi
	[ -n "$GONE_MS" ] || tf "cut $r: the election key of term $E still in etcd 15 s after the cut"
	if [ -z "$NEW" ]; then
		tf "cut $r: no other replica leads within 15 s of the cut ($(alloc_line))"
	else
		[ "$NEW" != "$L" ] || tf "cut $r: the cut replica leads again"
		ms_now
		left=$((FAILOVER_S * 1000 - (REPLY - NEW_MS)))
		poll $((left > 0 ? left : 0)) agents_on "$E2" ||
			tf "cut $r: not every node granted in term $E2 within $FAILOVER_S s of its start ($(stuck_line "$E2"))"
		redir1=$(redirects_sum)
		diag "cut $r: agents counted $((redir1 - redir0)) reports redirected meanwhile; $(agents_line)"
		[ "$redir1" -gt "$redir0" ] || tf "cut $r: no agent was redirected to the new leader"
	fi
	nft_heal allocs_cut "${A_IP[L]}" || tf "cut $r: cannot heal replica $L"
	event "replica $L healed"
	if [ -n "$E2" ]; then
		poll 10000 alloc_follows "$L" "$E2" || tf "cut $r: replica $L does not follow term $E2 within 10 s of the heal ($(alloc_line))"
	fi
done
ms_now
phase_stats "leader cut from etcd" "$P_T0" "$REPLY"
te

# ---------------------------------------------------------------- 5. half the nodes cut
t_begin "nodes 1-3 cut from every replica and the Service $NODE_CUTS times: their leases run out to min(grant, safe share), nodes 4-6 keep their grants; healed, every node granted again within lease + 3 s"
ms_now
P_T0=$REPLY
CUT_IPS=()
for i in $CUT_NODES; do CUT_IPS+=("$(node_ip "$i")"); done
for ((r = 1; r <= NODE_CUTS; r++)); do
	traffic_ensure 40
	steady "node cut $r, before" || continue
	L=$LEAD E=$LEAD_E
	ms_now
	N_MS=$REPLY
	nft_cut nodes_cut "${CUT_IPS[@]}" || { tf "node cut $r: cannot cut nodes $CUT_NODES"; break; }
	event "nodes $CUT_NODES cut from the replicas"
	if poll $(((LEASE_S + 2) * 1000)) agents_state lease-expired "$CUT_NODES"; then
		diag "node cut $r: nodes $CUT_NODES lease-expired $(secs "$POLL_MS") s after the cut"
	else
		tf "node cut $r: nodes $CUT_NODES not all lease-expired within $((LEASE_S + 2)) s ($(agents_line))"
	fi
	sleep 1
	agents_scrape
	for i in $CUT_NODES; do expired_ok "$i" || tf "node cut $r: $EXP_WHY"; done
	for i in $KEEP_NODES; do
		[ "${AG_STATE[i]}" = granted ] && [ "${AG_EPOCH[i]}" = "$E" ] ||
			tf "node cut $r: node $i (not cut) is ${AG_STATE[i]} in term ${AG_EPOCH[i]}, expected granted in term $E"
	done
	alloc_scrape
	[ "$LEAD" = "$L" ] || tf "node cut $r: the lead moved from replica $L to '${LEAD}' ($(alloc_line))"
	diag "node cut $r: $(agents_line)"
	nft_heal nodes_cut "${CUT_IPS[@]}" || tf "node cut $r: cannot heal"
	event "nodes $CUT_NODES healed"
	if poll $(((LEASE_S + 3) * 1000)) agents_on "$E"; then
		diag "node cut $r: healed, every node granted again after $(secs "$POLL_MS") s"
	else
		tf "node cut $r: not every node granted again within $((LEASE_S + 3)) s of the heal ($(stuck_line "$E"))"
	fi
done
ms_now
phase_stats "nodes cut" "$P_T0" "$REPLY"
RUN_T1=$REPLY
te

t_begin "over the whole chaos run: the aggregate over 1 s windows <= 1.05 B (max and p99)"
phase_stats "whole run" "$RUN_T0" "$RUN_T1"
te

# ---------------------------------------------------------------- control
t_begin "control: the replicas restarted with a budget of $CONTROL_CONF, the same pods send more than 1.2 B"
traffic_ensure 60
for k in 1 2 3; do alloc_kill "$k" TERM; done
for k in 1 2 3; do alloc_start "$k" "$TG_TMP/allocator-policy-control.json" || tf "replica $k did not serve within 10 s"; done
ms_now
C_T0=$REPLY
over() { stats "$(ts "$C_T0")" "$EPOCHREALTIME"; sh_ge "$ST_MAX" "$((B_BITS * 12 / 10))" || { sleep 0.5; return 1; }; }
wait_for $((LEASE_S + 20)) over
settle
stats "$(ts "$C_T0")" "$EPOCHREALTIME"
diag "control (budget $CONTROL_CONF): aggregate $(stats_line)"
sh_ge "$ST_MAX" "$((B_BITS * 12 / 10))" || tf "aggregate max $(mbit "$ST_MAX") Mbit/s <= 1.2 B: the traffic cannot show the budget holding"
for k in 1 2 3; do alloc_kill "$k" TERM; done
te
traffic_stop
rm -f "$TG_TMP/sampling"
stop_pid "$SAMPLER_PID"

# ---------------------------------------------------------------- the records
t_begin "no two replicas granted in the same term (their own records: epochs unique, each term's last grant before any later term's first), never two leading at once, every agent's epoch only grows"
"$PY" - "$TG_TMP/alloc.runs" "$TG_TMP/alloc.kills" "$TG_TMP/samples" >"$TG_TMP/terms.out" 2>&1 <<'EOF'
import re, sys
from datetime import datetime, timezone

runs_f, kills_f, samples_f = sys.argv[1:4]
kills = {}
for line in open(kills_f):
    log, signalled, reaped = line.split()
    kills[log] = (int(signalled), int(reaped))
lead_re = re.compile(r'msg="leading: granting from now" epoch=(\d+)')
stop_re = re.compile(r'msg="stopped leading" epoch=(\d+) why=("[^"]*"|\S+) answers=(\d+) '
                     r'first_grant_unix_ms=(-?\d+) last_grant_unix_ms=(-?\d+)')

def log_ms(line):
    t = datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
    return int(round(t.timestamp() * 1000))

fails, terms = [], []
for line in open(runs_f):
    k, log = line.split()
    open_terms = {}
    for rec in open(log, errors="replace"):
        m = lead_re.search(rec)
        if m:
            t = dict(replica=int(k), log=log, epoch=int(m[1]), lead=log_ms(rec), end="running")
            terms.append(t)
            open_terms[t["epoch"]] = t
            continue
        m = stop_re.search(rec)
        if m:
            e = int(m[1])
            t = open_terms.pop(e, None)
            if t is None:
                fails.append("replica %s: a \"stopped leading\" record of term %d it never led (%s)" % (k, e, log))
                continue
            t.update(end=m[2].strip('"'), stop=log_ms(rec), answers=int(m[3]), first=int(m[4]), last=int(m[5]))
    for t in open_terms.values():
        if log in kills:
            t.update(end="SIGKILL", stop=kills[log][1])
        else:
            fails.append("replica %s: term %d has no end (no record, no kill: %s)" % (k, t["epoch"], log))
terms.sort(key=lambda t: t["epoch"])
seen = {}
for t in terms:
    if t["epoch"] in seen:
        o = seen[t["epoch"]]
        fails.append("term %d led twice: replica %d (%s) and replica %d (%s)" % (t["epoch"], o["replica"], o["log"], t["replica"], t["log"]))
    seen[t["epoch"]] = t

def grants(t):
    """(first, last) ms of the term's grants: first no earlier than its
    "leading" line; last no later than its record's last grant, or than its
    kill when it was SIGKILLed; None when it granted nothing."""
    if t["end"] == "SIGKILL":
        return t["lead"], t["stop"]
    if t["end"] == "running" or t.get("answers", 0) == 0:
        return None
    return t["first"], t["last"]

gaps, checked = [], 0
for i, a in enumerate(terms):
    ga = grants(a)
    if ga is None:
        continue
    for b in terms[i + 1:]:
        gb = grants(b)
        if gb is None:
            continue
        checked += 1
        if not ga[1] < gb[0]:
            fails.append("term %d (replica %d, %s) granted until %d, term %d (replica %d) from %d: they overlap"
                         % (a["epoch"], a["replica"], a["end"], ga[1], b["epoch"], b["replica"], gb[0]))
    nxt = [b for b in terms[i + 1:] if grants(b)]
    if nxt:
        gaps.append((grants(nxt[0])[0] - ga[1], a, nxt[0]))
ends = {}
for t in terms:
    ends[t["end"]] = ends.get(t["end"], 0) + 1
print("diag: %d terms by %d replica runs; ends: %s; %d pairs of terms with grants checked"
      % (len(terms), sum(1 for _ in open(runs_f)), ", ".join("%s %d" % kv for kv in sorted(ends.items())), checked))
if gaps:
    g = min(gaps, key=lambda x: x[0])
    print("diag: the shortest time between a term's last grant and the next term's first: %.3f s (term %d, %s, to term %d); median %.3f s"
          % (g[0] / 1000, g[1]["epoch"], g[1]["end"], g[2]["epoch"], sorted(x[0] for x in gaps)[len(gaps) // 2] / 1000))
# the sampler's view
lead_pairs = 0
last_epoch = {}
agent_epochs = set()
n = 0
for line in open(samples_f):
    p = line.split()
    if not p:
        continue
    n += 1
    leaders = [x for x in p[1:] if x.startswith("a") and x.split("=")[1].startswith("1/")]
    if len(leaders) > 1:
        lead_pairs += 1
        fails.append("sample at %s: two replicas lead at once: %s" % (p[0], " ".join(leaders)))
    for x in p[1:]:
        if not x.startswith("n"):
            continue
        node, v = x.split("=")
        e = v.split("/")[0]
        if e in ("-", ""):
            continue
        e = int(e)
        if e:
            agent_epochs.add(e)
        if e < last_epoch.get(node, 0):
            fails.append("%s's epoch fell from %d to %d (sample at %s)" % (node, last_epoch[node], e, p[0]))
        last_epoch[node] = max(e, last_epoch.get(node, 0))
unknown = sorted(agent_epochs - set(seen))
if unknown:
    fails.append("agents saw terms no replica's record has: %s" % unknown)
print("diag: %d samples of every replica and agent (every 0.5 s): %d with two leaders; agents saw %d terms, their epochs never fell (last: %s)"
      % (n, lead_pairs, len(agent_epochs), " ".join("%s=%d" % kv for kv in sorted(last_epoch.items()))))
for f in fails[:20]:
    print("fail: " + f)
if len(fails) > 20:
    print("fail: ... and %d more" % (len(fails) - 20))
EOF
while IFS= read -r l; do
	case $l in
	diag:*) diag "${l#diag: }" ;;
	fail:*) tf "${l#fail: }" ;;
	*) tf "the records' check: $l" ;;
	esac
done <"$TG_TMP/terms.out"
agents_scrape
diag "agents: $(redirects_sum) reports redirected, $(stale_sum) stale answers not applied, over the run"
te

t_begin "every agent still runs"
for i in $NODES_ALL; do kill -0 "${AGENT_PID[$i]}" 2>/dev/null || tf "node $i's agent died: $(tail -3 "$TG_TMP/n$i/agent.log")"; done
t_expect "bytes from elsewhere than a node's address" "$(ip netns exec "$INET" nft -j list counter inet tgmeter other | jq '.nftables[] | .counter.bytes // empty')" 0
te

diag "test took $((SECONDS - T0)) s"
tap_done
