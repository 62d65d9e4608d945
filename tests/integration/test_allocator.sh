#!/usr/bin/env bash
# tollgate-allocator, alone in a network namespace, fed reports as the
# agents send them (POST /v1/report, JSON, version 1), from curl:
#   - it starts confined (no capability, no_new_privs, the open-file soft
#     limit raised to the hard one), ready at once; the election's flags need --etcd;
#   - learning: right after its start a node is granted only what it
#     reports applied; one lease later a saturated node gets more;
#   - two nodes' reports split a budget (each granted, the sum within it,
#     the capacity one node gives up counted until it reports it applied);
#   - a namespace without a budget is left out of the answer;
#   - malformed JSON, a body over the wire's limit, version 2, wrong types
#     each get 400 saying why, are counted by reason, and change nothing;
#     a body far over it is 413 unread; other methods and paths 405 and 404;
#   - the config as kubelet mounts a ConfigMap (..data symlink): a new one
#     swapped in is taken without a signal; an edit it cannot see is taken
#     on SIGHUP, and a shrunken budget lowers the grants, within the new
#     budget; a bad one keeps the config in force, counted and logged;
#   - /metrics: every family, with the values the reports imply (usage is
#     the sum of what the nodes reported sending); many reports on one
#     kept-alive connection; SIGTERM exits 0.
#
#   +---------------------------------------------------------------+
#   | alloc ($TG_ID-alloc), lo only                                  |
#   |   tollgate-allocator --listen 127.0.0.1:9618                   |
#   |   the policy: $TG_TMP/cm/policy.json -> ..data/...              |
#   |   budgets: datasets 80M (10 MB/s), crawl 16M (2 MB/s);         |
#   |            reportSeconds 1, leaseSeconds 2                     |
#   |   "nodes" n1, n2, ...: curl in the same namespace               |
#   +---------------------------------------------------------------+
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_allocator.sh
# shellcheck disable=SC1091,SC2016,SC2015  # lib.sh found at run time; jq filters with $vars; A && B || t_fail checks
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
for t in curl jq; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
ALLOC=$TOLLGATE_BIN_DIR/tollgate-allocator
[ -x "$ALLOC" ] || { echo "not ok - preconditions: $ALLOC not found (run make)"; exit 1; }
NS=$TG_ID-alloc
URL=http://127.0.0.1:9618
DATASETS=10000000 # bytes/s: 80M
CRAWL=2000000     # 16M
LEASE_S=2

TG_TMP=$(mktemp -d /dev/shm/tollgate-alloc.XXXXXX) || { echo "not ok - preconditions: mktemp"; exit 1; }
CM=$TG_TMP/cm
LOG=$TG_TMP/alloc.log
ALLOC_PID=""

A() { ip netns exec "$NS" "$@"; }
# policy [JQ_FILTER]: the allocator's policy file, edited by the filter
policy() {
	jq -n '{version: 1, reportSeconds: 1, leaseSeconds: 2,
		namespaces: {datasets: {internetEgress: "80M"}, crawl: {internetEgress: "16M"}}}' |
		jq "${1:-.}"
}
# cm_swap NAME TEXT: a new ConfigMap version, swapped in through ..data as kubelet does
cm_swap() {
	mkdir -p "$CM/..$1"
	printf '%s\n' "$2" >"$CM/..$1/policy.json"
	ln -sfn "..$1" "$CM/..data_tmp"
	mv -T "$CM/..data_tmp" "$CM/..data"
}
mkdir -p "$CM"
cm_swap v1 "$(policy)"
ln -s ..data/policy.json "$CM/policy.json"

# entry NS SENT APPLIED SATURATED STATE [SAFE NODES]: one budget of a report (a
# second's worth); SAFE and NODES: what the node's last answer said (0: none)
entry() {
	jq -cn --arg ns "$1" --argjson sent "$2" --argjson applied "$3" --argjson sat "$4" --arg st "$5" \
		--argjson safe "${6:-0}" --argjson nodes "${7:-0}" \
		'{namespace: $ns, sentBytes: $sent, intervalMs: 1000, saturated: $sat, applied: $applied,
		  limit: 125000000, state: $st, pods: 3, safeShare: $safe, nodes: $nodes}'
}
# held_entry NODE NS SENT APPLIED: a saturated entry as the agent NODE writes it:
# fallback until it was answered a grant, then granted with the last answer's
# safe share and nodes (kept in $TG_TMP/held/NODE.NS)
held_entry() {
	local st=fallback safe=0 nodes=0
	[ -f "$TG_TMP/held/$1.$2" ] && read -r st safe nodes <"$TG_TMP/held/$1.$2"
	entry "$2" "$3" "$4" true "$st" "$safe" "$nodes"
}
# held_keep NODE NS: what the last answer said to NODE about NS, for its next report
held_keep() {
	mkdir -p "$TG_TMP/held"
	jq -r --arg ns "$2" '.grants[] | select(.namespace == $ns) | "granted \(.safeShare) \(.nodes)"' \
		"$TG_TMP/answer" >"$TG_TMP/held/$1.$2.new" 2>/dev/null
	if [ -s "$TG_TMP/held/$1.$2.new" ]; then mv "$TG_TMP/held/$1.$2.new" "$TG_TMP/held/$1.$2"; else rm -f "$TG_TMP/held/$1.$2.new"; fi
}
# report NODE SEQ ENTRY...: a report document
report() {
	local node=$1 seq=$2
	shift 2
	printf '%s\n' "$@" | jq -cs --arg n "$node" --argjson s "$seq" '{version: 1, node: $n, seq: $s, budgets: .}'
}
# post TEXT: POST /v1/report; prints the status, the answer in $TG_TMP/answer
post() {
	printf '%s' "$1" >"$TG_TMP/body"
	A curl -s -o "$TG_TMP/answer" -w '%{http_code}' --max-time 5 -H 'Content-Type: application/json' \
		-H 'Expect:' --data-binary "@$TG_TMP/body" "$URL/v1/report"
}
# grant NS: the grant of the last answer for NS ("none" when it has none)
grant() { jq -r --arg ns "$1" '[.grants[] | select(.namespace == $ns) | .grant][0] // "none"' "$TG_TMP/answer" 2>/dev/null || echo "not JSON"; }
answer_field() { jq -r "$1" "$TG_TMP/answer" 2>/dev/null || echo "not JSON"; }
metrics() { A curl -s --max-time 3 "$URL/metrics" >"$TG_TMP/metrics.prom"; }
# mval NAME: a sample's value from the last metrics() (NAME with its labels, as written)
mval() { awk -v k="$1" '$1 == k { print $2; found = 1; exit } END { if (!found) print "none" }' "$TG_TMP/metrics.prom"; }
# the state reports may change: every per-budget gauge and the report counters
gauges() { grep -E '^tollgate_allocator_(budget|granted|committed|demand|usage|safe_share)_bytes_per_second|^tollgate_allocator_nodes|^tollgate_allocator_reports_total\{result="ok"\}' "$TG_TMP/metrics.prom"; }
# node NODE SEQ NS SENT APPLIED: a saturated node's report of one budget, as an
# agent writes it (held_entry); prints the grant
node() {
	local code
	code=$(post "$(report "$1" "$2" "$(held_entry "$1" "$3" "$4" "$5")")")
	[ "$code" = 200 ] || { echo "HTTP $code: $(head -c 200 "$TG_TMP/answer")"; return; }
	held_keep "$1" "$3"
	grant "$3"
}
le() { [ "$1" -le "$2" ] 2>/dev/null; }
num() { [[ $1 =~ ^[0-9]+$ ]]; }

start_alloc() {
	# `ip netns exec` execs the allocator: $! is its PID
	ip netns exec "$NS" "$ALLOC" --policy "$CM/policy.json" --insecure-no-auth --listen 127.0.0.1:9618 2>>"$LOG" &
	ALLOC_PID=$!
	TG_PIDS+=("$ALLOC_PID")
}
ready() { [ "$(A curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$URL/readyz")" = 200 ]; }

# ============================================================ start
t_begin "the allocator starts in a namespace of its own: ready, no capability, no_new_privs, open files raised"
_tg_netns_add "$NS" || tap_bail "cannot create $NS"
T0=$SECONDS
start_alloc
wait_for 5 ready || t_fail "not ready within 5 s: $(tail -3 "$LOG")"
t_expect "/healthz" "$(A curl -s --max-time 1 "$URL/healthz")" ok
t_expect "CapEff" "$(awk '/^CapEff/ { print $2 }' "/proc/$ALLOC_PID/status")" 0000000000000000
t_expect "CapPrm" "$(awk '/^CapPrm/ { print $2 }' "/proc/$ALLOC_PID/status")" 0000000000000000
t_expect "NoNewPrivs" "$(awk '/^NoNewPrivs/ { print $2 }' "/proc/$ALLOC_PID/status")" 1
soft=$(awk '/^Max open files/ { print $4 }' "/proc/$ALLOC_PID/limits")
hard=$(awk '/^Max open files/ { print $5 }' "/proc/$ALLOC_PID/limits")
t_expect "open files: soft limit raised to the hard one" "$soft" "$hard"
grep -q 'msg="starting".* budgets=2 lease_ms=2000 round_ms=250' "$LOG" || t_fail "no start-up record: $(tail -2 "$LOG")"
t_end
kill -0 "$ALLOC_PID" 2>/dev/null || tap_bail "cannot continue without the allocator: $(tail -5 "$LOG")"

# ============================================================ learning
# Every report is a new cluster's: its nodes start in fallback, then say
# granted with what their last answer said (a node that said granted on its
# first report would mean an allocator before this one, whose other nodes
# may still hold their safe shares: this one would keep those back).
t_begin "learning: right after the start a node is granted only what it reports applied"
metrics
t_expect "tollgate_allocator_learning" "$(mval tollgate_allocator_learning)" 1
g=$(node n1 1 datasets 1000000 1000000)
t_expect "n1's grant (it applied 1000000, wants more)" "$g" 1000000
t_expect "lease" "$(answer_field .leaseMs)" $((LEASE_S * 1000))
g=$(node n2 1 datasets 500000 500000)
t_expect "n2's grant (it applied 500000)" "$g" 500000
# the learning is over only a lease after its first report
((SECONDS - T0 < LEASE_S)) || diag "note: the checks above ran $((SECONDS - T0)) s after the start"
t_end

t_begin "one lease later, saturated nodes get more, and two nodes' grants split the budget within it"
sleep $((LEASE_S + 1))
metrics
t_expect "tollgate_allocator_learning" "$(mval tollgate_allocator_learning)" 0
# a few report periods: each node applies what it was granted (decrease before increase)
a1=1000000 a2=500000
for seq in 2 3 4 5 6; do
	g1=$(node n1 "$seq" datasets "$a1" "$a1")
	g2=$(node n2 "$seq" datasets "$a2" "$a2")
	num "$g1" && num "$g2" || { t_fail "round $seq: n1 $g1, n2 $g2"; break; }
	a1=$g1 a2=$g2
	sleep 0.3
done
if num "$g1" && num "$g2"; then
	[ "$g1" -gt 1000000 ] || t_fail "n1's grant did not rise above what it applied while learning: $g1"
	[ "$g2" -gt 500000 ] || t_fail "n2's grant did not rise: $g2"
	le $((g1 + g2)) "$DATASETS" || t_fail "n1 $g1 + n2 $g2 = $((g1 + g2)) > the budget $DATASETS"
	# equal demand, equal weight: neither starves
	le $((DATASETS / 5)) "$g1" && le $((DATASETS / 5)) "$g2" || t_fail "an uneven split of equal demands: n1 $g1, n2 $g2"
	diag "datasets ($DATASETS B/s): n1 $g1, n2 $g2"
fi
metrics
t_expect "nodes holding datasets grants" "$(mval 'tollgate_allocator_nodes{namespace="datasets",direction="egress"}')" 2
c=$(mval 'tollgate_allocator_committed_bytes_per_second{namespace="datasets",direction="egress"}')
le "$c" "$DATASETS" || t_fail "committed $c > the budget $DATASETS"
gr=$(mval 'tollgate_allocator_granted_bytes_per_second{namespace="datasets",direction="egress"}')
t_expect "granted (the sum of the last grants)" "$gr" "$((g1 + g2))"
t_end

t_begin "a namespace without a budget is left out of the answer (and of the metrics)"
code=$(post "$(report n3 1 "$(entry other 5000 1250000 true fallback)" "$(entry crawl 100000 100000 false fallback)")")
t_expect "status" "$code" 200
t_expect "namespaces answered" "$(answer_field '[.grants[].namespace] | join(",")')" crawl
metrics
grep -q 'namespace="other"' "$TG_TMP/metrics.prom" && t_fail "a series for namespace other"
t_end

t_begin "an answer carries the policy whole when the report names another one (or none), not when it names the one in force"
code=$(post "$(report n3 2 "$(entry crawl 100000 100000 false fallback)")")
t_expect "status" "$code" 200
POLICY_ID=$(answer_field '.policy.id')
[[ $POLICY_ID =~ ^[0-9a-f]{16}$ ]] || t_fail "the policy's id: $POLICY_ID"
t_expect "its budgets, bytes/s" "$(answer_field '[.policy.namespaces[] | "\(.namespace)=\(.internetEgress)"] | join(",")')" \
	"crawl=$CRAWL,datasets=$DATASETS"
code=$(post "$(report n3 3 "$(entry crawl 100000 100000 false fallback)" | jq -c --arg p "$POLICY_ID" '.policy = $p')")
t_expect "the one in force named: none carried" "$(answer_field 'has("policy")')" false
code=$(post "$(report n3 4 "$(entry crawl 100000 100000 false fallback)" | jq -c '.policy = "0123456789abcdef"')")
t_expect "another named: carried" "$(answer_field '.policy.id')" "$POLICY_ID"
t_end

# ============================================================ bad reports
t_begin "malformed JSON, an oversized body, version 2 and wrong types get 400 saying why, counted, changing nothing"
# On an allocator of their own, whose leases (a minute) outlast the check:
# with 2 s leases a node's demand ages between the two snapshots on a slow
# machine, and "changing nothing" would be read against time, not the reports.
good=$(report mallory 1 "$(entry datasets 99000000 99000000 true granted)")
pad=$(head -c 170000 /dev/zero | tr '\0' ' ')
BAD_BODY=("${good:0:40}" "not json at all" "$(jq -c '.version = 2' <<<"$good")"
	"$(jq -c '.budgets[0].sentBytes = "lots"' <<<"$good")" "$(jq -c '.budgets[0].saturated = 1' <<<"$good")"
	"$(jq -c '.budgets[0].applied = -5' <<<"$good")" "$(jq -c '.node = "Mallory!"' <<<"$good")"
	"$(jq -c '.budgets = [.budgets[0], .budgets[0]]' <<<"$good")" "$(jq -c '.budgets' <<<"$good")"
	"${good%\}}${pad}}")
BAD_WHAT=("truncated JSON" "not JSON" "version 2" "sentBytes a string" "saturated a number" "applied negative"
	"a bad node name" "a namespace twice" "an array for a report" "a 170 kB body")
BAD_WHY=("json" "json" "version" "sentBytes" "saturated" "applied" "node" "datasets|twice" "." "163840")
head -c 1048576 /dev/zero | tr '\0' ' ' >"$TG_TMP/huge"
policy '.leaseSeconds = 60' >"$TG_TMP/long.json"
ip netns exec "$NS" "$ALLOC" --policy "$TG_TMP/long.json" --insecure-no-auth --listen 127.0.0.1:9619 2>>"$LOG" &
BAD_PID=$!
TG_PIDS+=("$BAD_PID")
MAIN_URL=$URL URL=http://127.0.0.1:9619
wait_for 5 ready || t_fail "the second allocator is not ready within 5 s"
code=$(post "$(report n9 1 "$(entry datasets 1000000 1000000 true fallback)" "$(entry crawl 100000 100000 false fallback)")")
t_expect "a good report first (the state the bad ones must leave as it is)" "$code" 200
sleep 0.3
metrics
gauges >"$TG_TMP/before.g"
bad0=$(mval 'tollgate_allocator_reports_total{result="malformed"}')
big0=$(mval 'tollgate_allocator_reports_total{result="oversized"}')
ver0=$(mval 'tollgate_allocator_reports_total{result="version"}')
codes=()
for i in "${!BAD_BODY[@]}"; do
	codes+=("$(post "${BAD_BODY[$i]}")")
	cp "$TG_TMP/answer" "$TG_TMP/answer.$i"
done
# far over the wire's 160 KiB: refused before it is read
code=$(A curl -s -o "$TG_TMP/answer" -w '%{http_code}' --max-time 5 --data-binary "@$TG_TMP/huge" "$URL/v1/report")
t_expect "a 1 MiB body" "$code" 413
sleep 0.1
metrics
gauges >"$TG_TMP/after.g"
# each refusal: 400, and the answer's one line says why
for i in "${!BAD_BODY[@]}"; do
	what=${BAD_WHAT[$i]}
	[ "${codes[$i]}" = 400 ] || { t_fail "$what: HTTP ${codes[$i]}, expected 400: $(head -c 200 "$TG_TMP/answer.$i")"; continue; }
	grep -qiE -- "${BAD_WHY[$i]}" "$TG_TMP/answer.$i" || t_fail "$what: the reason does not say '${BAD_WHY[$i]}': $(head -c 200 "$TG_TMP/answer.$i")"
	[ "$(wc -l <"$TG_TMP/answer.$i")" -eq 1 ] || t_fail "$what: the reason is not one line"
done
d=$(diff "$TG_TMP/before.g" "$TG_TMP/after.g") || t_fail "the refused reports changed the state: $d"
t_expect "reports_total{result=malformed}" "$(mval 'tollgate_allocator_reports_total{result="malformed"}')" $((bad0 + 8))
t_expect "reports_total{result=oversized}" "$(mval 'tollgate_allocator_reports_total{result="oversized"}')" $((big0 + 2))
t_expect "reports_total{result=version}" "$(mval 'tollgate_allocator_reports_total{result="version"}')" $((ver0 + 1))
grep -q 'msg="report refused" result=malformed' "$LOG" || t_fail "no log record of a refused report"
t_expect "nodes (the good report's only)" "$(mval 'tollgate_allocator_nodes{namespace="datasets",direction="egress"}')" 1
kill "$BAD_PID" 2>/dev/null
wait "$BAD_PID" 2>/dev/null
URL=$MAIN_URL
# the node whose reports were refused is unknown to the allocator: a good one now is its first
t_end

t_begin "other methods and paths: GET /v1/report 405 (Allow names POST), POST elsewhere 404, / lists the endpoints"
t_expect "GET /v1/report" "$(A curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/v1/report")" 405
A curl -s -D - -o /dev/null --max-time 2 -X PUT --data x "$URL/v1/report" | grep -qi '^Allow: GET, HEAD, POST' ||
	t_fail "PUT: no Allow: GET, HEAD, POST"
t_expect "POST /v2/report" "$(A curl -s -o /dev/null -w '%{http_code}' --max-time 2 --data '{}' "$URL/v2/report")" 404
t_expect "GET /nope" "$(A curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/nope")" 404
A curl -s --max-time 2 "$URL/" | grep -q '/v1/report' || t_fail "/ does not list /v1/report"
t_end

# ============================================================ metrics
t_begin "/metrics: every family, with the values the reports imply"
# n1 and n2 report once more: usage is what they said they sent
g1=$(node n1 7 datasets 3000000 "$g1")
g2=$(node n2 7 datasets 1500000 "$g2")
metrics
for f in tollgate_build_info tollgate_allocator_leader tollgate_allocator_learning \
	tollgate_allocator_budget_bytes_per_second tollgate_allocator_granted_bytes_per_second \
	tollgate_allocator_committed_bytes_per_second tollgate_allocator_demand_bytes_per_second \
	tollgate_allocator_usage_bytes_per_second tollgate_allocator_safe_share_bytes_per_second \
	tollgate_allocator_nodes tollgate_allocator_reports_total tollgate_allocator_rounds_total \
	tollgate_allocator_round_duration_seconds tollgate_allocator_policy_reloads_total \
	tollgate_allocator_policy_info \
	tollgate_http_connections; do
	grep -q "^# TYPE $f " "$TG_TMP/metrics.prom" || t_fail "no family $f"
done
t_expect "leader" "$(mval tollgate_allocator_leader)" 1
t_expect "the policy in force" "$(mval "tollgate_allocator_policy_info{policy=\"$POLICY_ID\",budgets=\"2\"}")" 1
t_expect "build_info" "$(grep -c '^tollgate_build_info{version="[^"]*",commit="[^"]*"} 1$' "$TG_TMP/metrics.prom")" 1
t_expect "budget datasets" "$(mval 'tollgate_allocator_budget_bytes_per_second{namespace="datasets",direction="egress"}')" "$DATASETS"
t_expect "budget crawl" "$(mval 'tollgate_allocator_budget_bytes_per_second{namespace="crawl",direction="egress"}')" "$CRAWL"
t_expect "usage datasets (3 MB + 1.5 MB in a second)" "$(mval 'tollgate_allocator_usage_bytes_per_second{namespace="datasets",direction="egress"}')" 4500000
t_expect "usage crawl (n3: 100 kB in a second)" "$(mval 'tollgate_allocator_usage_bytes_per_second{namespace="crawl",direction="egress"}')" 100000
t_expect "granted datasets" "$(mval 'tollgate_allocator_granted_bytes_per_second{namespace="datasets",direction="egress"}')" "$((g1 + g2))"
dm=$(mval 'tollgate_allocator_demand_bytes_per_second{namespace="datasets",direction="egress"}')
num "$dm" && [ "$dm" -gt 0 ] || t_fail "demand datasets: $dm"
ss=$(mval 'tollgate_allocator_safe_share_bytes_per_second{namespace="datasets",direction="egress"}')
t_expect "safe share datasets (budget x 0.9 / 2 nodes)" "$ss" $((DATASETS * 9 / 10 / 2))
t_expect "reports ok (2 + 10 + 1 + 3 + 2)" "$(mval 'tollgate_allocator_reports_total{result="ok"}')" 18
rd=$(mval tollgate_allocator_round_duration_seconds)
[[ $rd =~ ^[0-9.e+-]+$ ]] || t_fail "round duration: $rd"
[ "$(mval tollgate_allocator_rounds_total)" -gt 0 ] 2>/dev/null || t_fail "no round ran"
t_end

t_begin "many reports on one kept-alive connection: one connection, every one answered"
r=$(report n1 8 "$(held_entry n1 datasets 3000000 "$g1")")
printf '%s' "$r" >"$TG_TMP/body"
out=$(A curl -s --max-time 5 -H 'Expect:' -w '\n%{http_code} %{num_connects}\n' \
	--data-binary "@$TG_TMP/body" "$URL/v1/report" "$URL/v1/report" "$URL/v1/report" "$URL/v1/report")
t_expect "statuses and connections made" "$(grep -E '^[0-9]{3} [0-9]+$' <<<"$out" | tr '\n' ' ')" "200 1 200 0 200 0 200 0 "
t_end

# ============================================================ config
t_begin "a ConfigMap swapped in (..data) is taken without a signal; an edit it cannot see waits for SIGHUP"
metrics
r0=$(mval 'tollgate_allocator_policy_reloads_total{result="ok"}')
cm_swap v2 "$(policy '.namespaces.crawl.internetEgress = "24M"')"
wait_for 5 sh -c "ip netns exec $NS curl -s --max-time 1 $URL/metrics | grep -qx 'tollgate_allocator_budget_bytes_per_second{namespace=\"crawl\",direction=\"egress\"} 3000000'" ||
	t_fail "the swapped ConfigMap (crawl 24M) was not taken within 5 s"
metrics
t_expect "reloads ok" "$(mval 'tollgate_allocator_policy_reloads_total{result="ok"}')" $((r0 + 1))
grep -q 'msg="policy changed"' "$LOG" || t_fail "no log record of the change"
# a node that holds the old policy hears the new one in its next answer
code=$(post "$(report n3 5 "$(entry crawl 100000 100000 false fallback)" | jq -c --arg p "$POLICY_ID" '.policy = $p')")
t_expect "the edit carried" "$(answer_field '[.policy.namespaces[] | select(.namespace == "crawl") | .internetEgress][0]')" 3000000
[ "$(answer_field '.policy.id')" != "$POLICY_ID" ] || t_fail "the edited policy has the old id"
# in place, under ..v2: the watch on the ConfigMap's directory does not see it
policy '.namespaces.datasets.internetEgress = "16M" | .namespaces.crawl.internetEgress = "24M"' >"$CM/..v2/policy.json"
sleep 1
metrics
t_expect "budget datasets before SIGHUP" "$(mval 'tollgate_allocator_budget_bytes_per_second{namespace="datasets",direction="egress"}')" "$DATASETS"
t_end

t_begin "SIGHUP with a shrunken budget: the new budget in force, the nodes' grants lowered within it"
kill -HUP "$ALLOC_PID"
SMALL=2000000 # 16M
wait_for 5 sh -c "ip netns exec $NS curl -s --max-time 1 $URL/metrics | grep -qx 'tollgate_allocator_budget_bytes_per_second{namespace=\"datasets\",direction=\"egress\"} $SMALL'" ||
	t_fail "SIGHUP did not take the shrunken budget within 5 s"
h1=$(node n1 9 datasets 3000000 "$g1")
h2=$(node n2 8 datasets 1500000 "$g2")
if num "$h1" && num "$h2"; then
	[ "$h1" -lt "$g1" ] || t_fail "n1's grant did not go down: $g1 -> $h1"
	[ "$h2" -lt "$g2" ] || t_fail "n2's grant did not go down: $g2 -> $h2"
	le $((h1 + h2)) "$SMALL" || t_fail "n1 $h1 + n2 $h2 > the new budget $SMALL"
	diag "datasets 10 MB/s -> 2 MB/s: n1 $g1 -> $h1, n2 $g2 -> $h2"
else
	t_fail "answers: n1 $h1, n2 $h2"
fi
# until the nodes report the lower grants applied, what they gave up still counts
metrics
le "$(mval 'tollgate_allocator_committed_bytes_per_second{namespace="datasets",direction="egress"}')" $((g1 + g2)) ||
	t_fail "committed above what the nodes held before"
for seq in 10 11 12; do
	h1=$(node n1 "$seq" datasets "$h1" "$h1")
	h2=$(node n2 "$seq" datasets "$h2" "$h2")
done
metrics
c=$(mval 'tollgate_allocator_committed_bytes_per_second{namespace="datasets",direction="egress"}')
le "$c" "$SMALL" || t_fail "committed $c > the new budget $SMALL once the nodes applied their grants"
t_end

t_begin "a bad policy on reload keeps the one in force: counted, logged, the budgets unchanged"
metrics
e0=$(mval 'tollgate_allocator_policy_reloads_total{result="error"}')
ok0=$(mval 'tollgate_allocator_policy_reloads_total{result="ok"}')
cm_swap v3 "$(policy '.namespaces.datasets.internetEgress = "fast"')"
wait_for 5 sh -c "ip netns exec $NS curl -s --max-time 1 $URL/metrics | grep -qx 'tollgate_allocator_policy_reloads_total{result=\"error\"} $((e0 + 1))'" ||
	t_fail "the bad policy was not counted within 5 s"
kill -HUP "$ALLOC_PID" # the same bad bytes: not counted twice
cm_swap v4 '{"version": 1, "namespaces": {"datasets": {'
sleep 1
# a misspelt key is refused, never ignored
cm_swap v5 "$(policy '.namespaces.crawl = {internetEgres: "1M"}')"
sleep 1
metrics
t_expect "reload errors (the bad rate, bad JSON, the misspelt key)" "$(mval 'tollgate_allocator_policy_reloads_total{result="error"}')" $((e0 + 3))
t_expect "reloads ok" "$(mval 'tollgate_allocator_policy_reloads_total{result="ok"}')" "$ok0"
t_expect "budget datasets" "$(mval 'tollgate_allocator_budget_bytes_per_second{namespace="datasets",direction="egress"}')" "$SMALL"
t_expect "budget crawl" "$(mval 'tollgate_allocator_budget_bytes_per_second{namespace="crawl",direction="egress"}')" 3000000
[ "$(grep -c 'msg="policy refused; the one in force stays"' "$LOG")" -eq 3 ] ||
	t_fail "expected 3 log records of a refused policy: $(grep -c 'policy refused' "$LOG")"
grep 'policy refused' "$LOG" | head -1 | grep -q 'datasets' || t_fail "the record does not name the bad key"
grep 'policy refused' "$LOG" | tail -1 | grep -q 'internetEgres' || t_fail "the record does not name the misspelt key"
g=$(node n1 13 datasets "$h1" "$h1")
num "$g" || t_fail "reports are not answered after a bad config: $g"
t_end

t_begin "a download budget: its own budget, grants and series; a node that predates directions is sent the uploads alone"
cm_swap v6 "$(policy '.namespaces.datasets.internetEgress = "16M" | .namespaces.crawl.internetEgress = "24M" | .namespaces.datasets.internetIngress = "40M"')"
wait_for 5 sh -c "ip netns exec $NS curl -s --max-time 1 $URL/metrics | grep -qx 'tollgate_allocator_budget_bytes_per_second{namespace=\"datasets\",direction=\"ingress\"} 5000000'" ||
	t_fail "the download budget (40M) was not taken within 5 s"
metrics
t_expect "the uploads' budget beside it" "$(mval 'tollgate_allocator_budget_bytes_per_second{namespace="datasets",direction="egress"}')" "$SMALL"
# a report of both directions of datasets: a grant each, the download's marked
down=$(entry datasets 4000000 1250 true fallback | jq -c '.direction = "ingress"')
code=$(post "$(report n7 1 "$(entry datasets 100000 100000 false fallback)" "$down" | jq -c '.directions = true')")
t_expect "both directions' report" "$code" 200
t_expect "the grants' directions" "$(answer_field '[.grants[] | [.namespace, (.direction // "egress")]] | sort | tojson')" '[["datasets","egress"],["datasets","ingress"]]'
t_expect "the whole policy to a node that takes directions" "$(answer_field '[.policy.namespaces[] | select(.namespace == "datasets") | .internetIngress][0]')" 5000000
ID_ALL=$(answer_field '.policy.id')
# the same node as the previous version writes it: no "directions", no "direction"
code=$(post "$(report n8 1 "$(entry datasets 100000 100000 false fallback)")")
t_expect "an old node's report" "$code" 200
t_expect "its policy: the uploads alone" "$(answer_field '[.policy.namespaces[] | keys[]] | unique | tojson')" '["internetEgress","namespace"]'
ID_UP=$(answer_field '.policy.id')
[ "$ID_UP" != "$ID_ALL" ] || t_fail "the uploads' policy has the whole one's id ($ID_ALL)"
t_expect "its grants: the uploads'" "$(answer_field '[.grants[] | (.direction // "egress")] | tojson')" '["egress"]'
# holding that id it is sent no policy again; a node of this version holding it is sent the whole
post "$(report n8 2 "$(entry datasets 100000 100000 false fallback)" | jq -c --arg p "$ID_UP" '.policy = $p')" >/dev/null
t_expect "no policy again to the old node" "$(answer_field '.policy // "none"')" none
post "$(report n7 2 "$(entry datasets 100000 100000 false fallback)" | jq -c --arg p "$ID_UP" '.policy = $p | .directions = true')" >/dev/null
t_expect "the whole policy to a node of this version holding the uploads' id" "$(answer_field '.policy.id')" "$ID_ALL"
metrics
t_expect "nodes holding datasets' downloads" "$(mval 'tollgate_allocator_nodes{namespace="datasets",direction="ingress"}')" 1
t_end

# ============================================================ options, stop
t_begin "the election's flags without --etcd, no --policy, and the old --config: usage errors (exit 2); test_allocator_ha.sh runs the election"
for o in --election-key=/tollgate/leader --advertise=http://10.0.0.1:9618 --election-ttl=5; do
	out=$(A "$ALLOC" --policy "$CM/policy.json" --insecure-no-auth "$o" 2>&1)
	rc=$?
	t_expect "$o exit status" "$rc" 2
	grep -q "need --etcd" <<<"$out" || t_fail "$o: $out"
done
out=$(A "$ALLOC" --listen :9619 2>&1)
t_expect "without --policy" "$?" 2
grep -q -- "--policy is required" <<<"$out" || t_fail "without --policy: $out"
out=$(A "$ALLOC" --config "$CM/policy.json" 2>&1)
t_expect "--config" "$?" 2
grep -q -- "--policy FILE" <<<"$out" || t_fail "--config: $out"
t_end

t_begin "--check judges a policy file as the running allocator does: one line, exit 0 or 1"
policy >"$TG_TMP/good.json"
out=$(A "$ALLOC" --check --policy "$TG_TMP/good.json")
t_expect "accepted: exit" "$?" 0
grep -q "^$TG_TMP/good.json: accepted (policy [0-9a-f]\{16\}, 2 budgets, lease 2 s, reports every 1 s)$" <<<"$out" || t_fail "accepted: $out"
policy '.namespaces.crawl = {internetEgres: "1M"}' >"$TG_TMP/bad.json"
out=$(A "$ALLOC" --check --policy "$TG_TMP/bad.json")
t_expect "refused: exit" "$?" 1
t_expect "refused: the line" "$out" "$TG_TMP/bad.json: refused (error 7): namespaces[\"crawl\"].\"internetEgres\" is not a key of namespaces[\"crawl\"]"
t_end

t_begin "the allocator links no netlink library and none of the node's code: its policy parser pulls in no kernel code"
needed=$(readelf -d "$ALLOC" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
grep -qE 'libnl|libmnl|libnftnl|libnetfilter' <<<"$needed" && t_fail "it needs $needed"
grep -q 'libcurl' <<<"$needed" || t_fail "control: the libraries it needs were not read: $needed"
# json-c and libcjose's jansson share function names: each is reached only
# through its shared library's symbol versions, never a static copy that
# would take the other's calls
grep -q 'libjson-c' <<<"$needed" || t_fail "json-c is not linked as a shared library: $needed"
t_expect "json-c functions defined in the allocator itself" "$(nm "$ALLOC" | grep -cE ' T json_object_(get|put|new_object)$')" 0
node_syms=$(nm "$ALLOC" | grep -cE ' [TtDdBb] (node_config_|shaper_|acct_|plumb_|nl_|rtnl_|nftnl_)')
t_expect "node, shaper, accounting and netlink symbols" "$node_syms" 0
[ "$(nm "$ALLOC" | grep -cE ' T alloc_policy_load_text$')" = 1 ] || t_fail "control: the policy parser's symbol is not seen"
t_end

t_begin "SIGTERM: the allocator exits 0"
kill -TERM "$ALLOC_PID"
wait "$ALLOC_PID"
t_expect "exit status" "$?" 0
grep -q 'msg="shutting down" signal=15' "$LOG" || t_fail "no shutdown record"
t_end

tap_done
