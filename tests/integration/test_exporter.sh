#!/usr/bin/env bash
# tollgate-agent --metrics-only: /metrics is valid Prometheus text (promtool) in every
# state (no pods and no table, pods in many namespaces with perPod, table
# deleted, store corrupt), a real Prometheus server scrapes it and sees the
# exact bytes a pod sent, every value equals the kernel's counter
# (`nft -j list counters`), namespace counters survive DEL and a table rebuild,
# shaped pods' tollgate_shaper_* series equal `tc -s class show` of their
# classes (pod, namespace, node) and go with the pods, a pool with an
# address in every state whose states add up to the held total,
# HTTP robustness (200 concurrent requests, slow clients, garbage, a 100 KB
# header, wrong methods and paths, HEAD, idle connections) while scrapes keep
# answering within 1 s and memory stays bounded, only CAP_NET_ADMIN, SIGTERM.
#
#   pods a,a2 (research) b (datasets) c (kube-system) d (team-alpha)
#   e.x (ml-2) l (a 63-char namespace) n (no K8S args: namespace "")
#      | veth tg*
#   node 10.0.0.1  lo: tollgate-agent --metrics-only 127.0.0.1:9617, prometheus 127.0.0.1:9090
#      |
#   fabric --- peer 10.0.1.1 (+ remote pod 10.2.0.5, UDP sink)
#          \-- inet 203.0.113.10 (UDP sink)
#
# The exporter and Prometheus run inside the node namespace; every client
# (curl, promtool, tests/integration/exporter_tool.py) runs there too.
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_exporter.sh
# shellcheck disable=SC2016,SC2015,SC1091,SC2153,SC2004,SC2178  # jq filters with $vars; namerefs
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
for t in curl promtool python3; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
PROMETHEUS=${TG_PROMETHEUS:-/usr/bin/prometheus}
[ -x "$PROMETHEUS" ] || { echo "not ok - preconditions: $PROMETHEUS not installed (make deps: prometheus)"; exit 1; }
EXP_BIN=$TOLLGATE_BIN_DIR/tollgate-agent
[ -x "$EXP_BIN" ] || { echo "not ok - preconditions: $EXP_BIN not found (run make)"; exit 1; }
PY=$(python3 -c 'import sys; print(sys.executable)') # skip the pyenv shim on every run
TOOL=$TG_LIB_DIR/exporter_tool.py
EXP_PORT=9617
PROM_PORT=9090
SINK_PORT=5001
CLASSES="egress_internal egress_internet ingress_internal ingress_internet"
# Memory bound for the exporter; a sanitizer build carries shadow memory.
RSS_LIMIT_KB=20480
if ldd "$EXP_BIN" 2>/dev/null | grep -q 'libasan'; then RSS_LIMIT_KB=102400; fi
T0=$SECONDS

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
ip -n "$TG_NODE" link set lo up

# ---------------------------------------------------------------- helpers
N() { ip netns exec "$TG_NODE" "$@"; }
tool() { N "$PY" "$TOOL" --port "$EXP_PORT" "$@"; }

# scrape FILE [PATH]: GET into FILE, prints the HTTP status ("000" when none)
scrape() {
	N curl -s -o "$1" -w '%{http_code}' --max-time 3 "http://127.0.0.1:$EXP_PORT${2:-/metrics}" 2>/dev/null || true
}

# metrics NAME: scrape /metrics into $TG_TMP/NAME.prom and its samples into
# the associative array MV_NAME ("name{sorted labels}" -> value); fails unless 200.
metrics() {
	local code k v
	code=$(scrape "$TG_TMP/$1.prom")
	[ "$code" = 200 ] || { echo "GET /metrics answered $code" >&2; return 1; }
	declare -gA "MV_$1=()"
	local -n _mv="MV_$1"
	while IFS=$'\t' read -r k v; do _mv[$k]=$v; done < <("$PY" "$TOOL" parse --tsv "$TG_TMP/$1.prom")
}

# mval NAME KEY: value of one sample ("absent" when it is not there)
mval() {
	local -n _mv="MV_$1"
	echo "${_mv[$2]-absent}"
}
nskey() { # KIND NAMESPACE CLASS -> key of tollgate_namespace_KIND_total
	printf 'tollgate_namespace_%s_total{direction="%s",namespace="%s",traffic="%s"}' "$1" "${3%_*}" "$2" "${3#*_}"
}
podkey() { # KIND NAMESPACE POD CLASS
	printf 'tollgate_pod_%s_total{direction="%s",namespace="%s",pod="%s",traffic="%s"}' "$1" "${4%_*}" "$2" "$3" "${4#*_}"
}
upkey() { printf 'tollgate_collector_up{collector="%s"}' "$1"; }

# promtool_problem FILE: prints promtool's complaint (nothing when the page is valid)
promtool_problem() {
	local o
	o=$(promtool check metrics <"$1" 2>&1) || { echo "promtool: ${o:0:600}"; return; }
	[ -z "$o" ] || echo "promtool: ${o:0:600}"
}

# check_page NAME: 200 + valid page + every family has HELP and TYPE
check_page() {
	local p
	metrics "$1" || { t_fail "/metrics did not answer 200"; return 1; }
	p=$(promtool_problem "$TG_TMP/$1.prom")
	[ -z "$p" ] || t_fail "$p"
	# a histogram's samples are its family's name and _bucket, _sum or _count
	p=$(awk '/^# HELP /{h[$3]=1; next} /^# TYPE /{t[$3]=$4; next} /^#/{next}
		{ n=$1; sub(/\{.*/, "", n); b=n; sub(/_(bucket|sum|count)$/, "", b)
		  if (t[b] == "histogram") n=b; if (!(n in h) || !(n in t)) print n }' "$TG_TMP/$1.prom" | sort -u | head -5)
	[ -z "$p" ] || t_fail "samples without # HELP/# TYPE: $p"
	return 0
}

# prom_query QUERY: value of the first result of an instant query ("" when none)
prom_query() {
	N curl -s --max-time 2 -G --data-urlencode "query=$1" "http://127.0.0.1:$PROM_PORT/api/v1/query" 2>/dev/null |
		jq -r 'if .status == "success" and (.data.result | length) > 0 then .data.result[0].value[1] else "" end' 2>/dev/null
}

# nft_json FILE: the table's counters as nft lists them
nft_json() { N nft -j list counters table inet tollgate >"$1" 2>/dev/null; }

status_field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

# ---------------------------------------------------------------- start the exporter
t_begin "exporter starts inside the node namespace and answers /healthz"
# `ip netns exec` execs the exporter: $! is the exporter's own PID. Every
# page here is compared with the kernel at the moment of the request, so
# the page cache is off (--page-cache-ms 0); test_metrics_http.sh tests it.
ip netns exec "$TG_NODE" "$EXP_BIN" --metrics-only --listen "127.0.0.1:$EXP_PORT" --data-dir "$TG_TMP/data" \
	--network "$TG_NETNAME" --page-cache-ms 0 >"$TG_TMP/exporter.out" 2>"$TG_TMP/exporter.log" &
EXP_PID=$!
TG_PIDS+=("$EXP_PID")
wait_for 5 sh -c "[ \"\$(ip netns exec $TG_NODE curl -s --max-time 1 http://127.0.0.1:$EXP_PORT/healthz)\" = ok ]" ||
	t_fail "no 'ok' on /healthz within 5 s"
kill -0 "$EXP_PID" 2>/dev/null || t_fail "exporter exited: $(tail -n 5 "$TG_TMP/exporter.log")"
t_expect "PID $EXP_PID is" "$(readlink "/proc/$EXP_PID/exe")" "$(readlink -f "$EXP_BIN")"
# nothing listens in the root namespace
ss -ltnH "sport = :$EXP_PORT" 2>/dev/null | grep -q . && t_fail "something listens on :$EXP_PORT in the root namespace"
t_end
kill -0 "$EXP_PID" 2>/dev/null || tap_bail "cannot continue without the exporter"

# ---------------------------------------------------------------- Prometheus
# started now so that it is up by the time traffic is sent
mkdir -p "$TG_TMP/prom"
cat >"$TG_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tollgate
    static_configs:
      - targets: ['127.0.0.1:$EXP_PORT']
EOF
ip netns exec "$TG_NODE" "$PROMETHEUS" --config.file="$TG_TMP/prometheus.yml" --storage.tsdb.path="$TG_TMP/prom" \
	--web.listen-address="127.0.0.1:$PROM_PORT" --storage.tsdb.retention.time=1h --log.level=warn \
	>"$TG_TMP/prometheus.log" 2>&1 &
PROM_PID=$!
TG_PIDS+=("$PROM_PID")

# ---------------------------------------------------------------- capabilities
t_begin "capabilities: only CAP_NET_ADMIN (0x1000) held, in every thread, no_new_privs"
# (the bounding set stays the runtime's: narrowing it would need CAP_SETPCAP,
# which the manifest does not grant; test_agent.sh runs it under a bounding
# set of CAP_NET_ADMIN alone)
for task in /proc/"$EXP_PID"/task/*; do
	tid=${task##*/}
	t_expect "thread $tid CapEff" "$(awk '$1=="CapEff:"{print $2}' "$task/status")" 0000000000001000
	t_expect "thread $tid CapPrm" "$(awk '$1=="CapPrm:"{print $2}' "$task/status")" 0000000000001000
	t_expect "thread $tid CapInh" "$(awk '$1=="CapInh:"{print $2}' "$task/status")" 0000000000000000
	t_expect "thread $tid CapAmb" "$(awk '$1=="CapAmb:"{print $2}' "$task/status")" 0000000000000000
done
t_expect "NoNewPrivs" "$(status_field "$EXP_PID" NoNewPrivs)" 1
t_end

# ---------------------------------------------------------------- no pods
t_begin "no pods, no table: 200, promtool accepts, collector nftables 0, ipam 1"
if check_page empty; then
	t_expect "nftables collector" "$(mval empty "$(upkey nftables)")" 0
	t_expect "ipam collector" "$(mval empty "$(upkey ipam)")" 1
	grep -Eq '^tollgate_build_info\{version="[^"]+",commit="[^"]+"\} 1$' "$TG_TMP/empty.prom" || t_fail "no tollgate_build_info{version=...,commit=...} 1"
	t_expect "attachments" "$(mval empty tollgate_ipam_attachments)" 0
	grep -q '^tollgate_namespace_bytes_total{' "$TG_TMP/empty.prom" && t_fail "namespace samples without a table"
fi
t_end

# ---------------------------------------------------------------- pods in many namespaces
CONF=$(tg_conf '.accounting = {enabled: true, perPod: true}')
LONGNS=ns-$(printf 'x%.0s' {1..56})-end # 63 characters, the longest DNS label
declare -A NS_OF=([a]=research [a2]=research [b]=datasets [c]=kube-system [d]=team-alpha [e.x]=ml-2 [l]=$LONGNS)
PODS="a a2 b c d e.x l"
t_begin "ADD ${#NS_OF[@]} pods in 6 namespaces (perPod) and one without K8S args"
for p in $PODS; do
	pod_add "$p" "${NS_OF[$p]}" "$CONF" || { t_fail "ADD $p: rc=$TG_RC $TG_OUT"; tg_diag_last; }
done
pod_ns_add n
tg_run ADD "$(cid_for n)" eth0 "$(netns_path n)" "" <<<"$CONF" || t_fail "ADD n (no K8S args): rc=$TG_RC $TG_OUT"
t_end
[ -n "${POD_IP[a]:-}" ] && [ -n "${POD_IP[b]:-}" ] || tap_bail "cannot continue without pods a and b"

t_begin "pods in many namespaces: 200, promtool accepts, every namespace and pod with its labels"
if check_page pods; then
	t_expect "nftables collector" "$(mval pods "$(upkey nftables)")" 1
	t_expect "ipam collector" "$(mval pods "$(upkey ipam)")" 1
	t_expect "attachments" "$(mval pods tollgate_ipam_attachments)" 8
	t_expect "allocated" "$(mval pods 'tollgate_ipam_addresses{state="allocated"}')" 8
	for ns in research datasets kube-system team-alpha ml-2 "$LONGNS" ""; do
		for c in $CLASSES; do
			for k in bytes packets; do
				[ "$(mval pods "$(nskey "$k" "$ns" "$c")")" != absent ] || t_fail "no $(nskey "$k" "$ns" "$c")"
			done
		done
	done
	for p in $PODS; do
		for c in $CLASSES; do
			[ "$(mval pods "$(podkey bytes "${NS_OF[$p]}" "$p" "$c")")" != absent ] || t_fail "no $(podkey bytes "${NS_OF[$p]}" "$p" "$c")"
		done
	done
	[ "$(mval pods "$(podkey bytes "" "" egress_internal)")" != absent ] || t_fail "no pod series for the pod without K8S args"
	for c in $CLASSES; do
		[ "$(mval pods "tollgate_host_bytes_total{direction=\"${c%_*}\",traffic=\"${c#*_}\"}")" != absent ] || t_fail "no host $c"
	done
	t_expect "namespace series" "$(grep -c '^tollgate_namespace_bytes_total{' "$TG_TMP/pods.prom")" 28
	t_expect "pod series" "$(grep -c '^tollgate_pod_bytes_total{' "$TG_TMP/pods.prom")" 32
	ct=$(N curl -s -o /dev/null -w '%{content_type}' "http://127.0.0.1:$EXP_PORT/metrics")
	t_expect "Content-Type" "$ct" "text/plain; version=0.0.4; charset=utf-8"
fi
t_end

# ---------------------------------------------------------------- address states
# A pool with an address in every state: pod c's address leaves the pool
# (a static pool follows the config of each ADD and DEL; c keeps it:
# retired), r1 is ADDed and DELeted (its address cooling: the plugin's
# cool-down 30 s here, as the exporter without a config counts it), the
# rest free. The states add up to tollgate_ipam_held_addresses.
states_sum() { # NAME -> the sum of tollgate_ipam_addresses{state} on that page, and how many
	awk '/^tollgate_ipam_addresses\{state="/ { s += $2; n++ } END { printf "%d %d", s, n }' "$TG_TMP/$1.prom"
}
t_begin "addresses in every state: allocated, free, cooling, retired add up to the held total"
XC=${POD_IP[c]:-}
CONF_OUT=$(jq -c --arg x "$XC" '.ipam.exclude += [$x] | .ipam.cooldownSeconds = 30' <<<"$CONF")
pod_add r1 research "$CONF_OUT" || t_fail "ADD r1: rc=$TG_RC $TG_OUT"
pod_del r1 "$CONF_OUT" || t_fail "DEL r1: rc=$TG_RC $TG_OUT"
if check_page states; then
	# 44 addresses in the config (the /28 without its first and last), c's left: a
	# pool of 43; 8 pods, c's address retired
	t_expect "allocated" "$(mval states 'tollgate_ipam_addresses{state="allocated"}')" 7
	t_expect "cooling" "$(mval states 'tollgate_ipam_addresses{state="cooling"}')" 1
	t_expect "free" "$(mval states 'tollgate_ipam_addresses{state="free"}')" 35
	t_expect "retired" "$(mval states 'tollgate_ipam_addresses{state="retired"}')" 1
	t_expect "held" "$(mval states tollgate_ipam_held_addresses)" 44
	t_expect "the states' sum and count" "$(states_sum states)" "44 4"
	t_expect "no total state" "$(mval states 'tollgate_ipam_addresses{state="total"}')" absent
fi
# control: the pool as before (c's address back in it), nothing retired, the same sum
pod_add r2 research "$CONF" || t_fail "ADD r2: rc=$TG_RC $TG_OUT"
pod_del r2 "$CONF" || t_fail "DEL r2: rc=$TG_RC $TG_OUT"
if check_page states2; then
	t_expect "retired after" "$(mval states2 'tollgate_ipam_addresses{state="retired"}')" 0
	t_expect "allocated after" "$(mval states2 'tollgate_ipam_addresses{state="allocated"}')" 8
	t_expect "held after" "$(mval states2 tollgate_ipam_held_addresses)" 44
	t_expect "the states' sum after" "$(states_sum states2)" "44 4"
fi
pod_ns_del r1
pod_ns_del r2
t_end

# ---------------------------------------------------------------- traffic
# sinks: nothing comes back (no ICMP port unreachable)
for ns in "$TG_PEER" "$TG_INET"; do
	rm -f "$TG_TMP/sink.$ns"
	ip netns exec "$ns" "$PY" "$TOOL" sink --udp-port "$SINK_PORT" --ready "$TG_TMP/sink.$ns" --timeout 80 >/dev/null &
	TG_PIDS+=("$!")
done
for ns in "$TG_PEER" "$TG_INET"; do wait_for 5 test -s "$TG_TMP/sink.$ns" || tap_bail "UDP sink in $ns did not start"; done

COUNT=50 SIZE=500
EXPECT=$((COUNT * (SIZE + 28)))
t_begin "research pod sends $COUNT x $SIZE B UDP to the peer: exactly $EXPECT more IP bytes on /metrics"
metrics before || t_fail "scrape before"
ip netns exec "$TG_ID-a" "$PY" "$TOOL" send --dst "$TG_PEER_POD_IP" --udp-port "$SINK_PORT" --count "$COUNT" --size "$SIZE" >/dev/null ||
	t_fail "sender failed"
B0=$(mval before "$(nskey bytes research egress_internal)")
P0=$(mval before "$(nskey packets research egress_internal)")
PB0=$(mval before "$(podkey bytes research a egress_internal)")
want=$((B0 + EXPECT))
wait_for 3 sh -c "ip netns exec $TG_NODE nft list counter inet tollgate ns_research_egress_internal | grep -q 'bytes $want'"
metrics after || t_fail "scrape after"
t_expect "namespace bytes" "$(mval after "$(nskey bytes research egress_internal)")" "$want"
t_expect "namespace packets" "$(mval after "$(nskey packets research egress_internal)")" "$((P0 + COUNT))"
t_expect "pod a bytes" "$(mval after "$(podkey bytes research a egress_internal)")" "$((PB0 + EXPECT))"
t_expect "pod a2 bytes (sent nothing)" "$(mval after "$(podkey bytes research a2 egress_internal)")" "$(mval before "$(podkey bytes research a2 egress_internal)")"
t_expect "datasets bytes (sent nothing)" "$(mval after "$(nskey bytes datasets egress_internal)")" "$(mval before "$(nskey bytes datasets egress_internal)")"
t_end
RESEARCH_BYTES=$want

t_begin "Prometheus server (in the node netns) scrapes the exporter and its query shows $RESEARCH_BYTES"
Q='tollgate_namespace_bytes_total{namespace="research",direction="egress",traffic="internal"}'
got=""
deadline=$((SECONDS + 25))
while [ "$SECONDS" -lt "$deadline" ]; do
	got=$(prom_query "$Q")
	[ "$got" = "$RESEARCH_BYTES" ] && break
	sleep 0.3
done
t_expect "query $Q" "$got" "$RESEARCH_BYTES"
targets=$(N curl -s --max-time 2 "http://127.0.0.1:$PROM_PORT/api/v1/targets" 2>/dev/null)
t_expect "target health" "$(jq -r '.data.activeTargets[0].health' <<<"$targets" 2>/dev/null)" up
t_expect "target lastError" "$(jq -r '.data.activeTargets[0].lastError' <<<"$targets" 2>/dev/null)" ""
[ -z "$T_ERRS" ] || diag "$(tail -n 5 "$TG_TMP/prometheus.log")"
t_end

# more traffic in other classes, then compare everything with the kernel
ip netns exec "$TG_ID-b" "$PY" "$TOOL" send --dst "$TG_INET_IP" --udp-port "$SINK_PORT" --count 7 --size 300 >/dev/null
ip netns exec "$TG_ID-c" "$PY" "$TOOL" send --dst "${POD_IP[d]}" --udp-port "$SINK_PORT" --count 3 --size 100 >/dev/null
ip netns exec "$TG_ID-n" "$PY" "$TOOL" send --dst "$TG_PEER_POD_IP" --udp-port "$SINK_PORT" --count 2 --size 10 >/dev/null
N "$PY" "$TOOL" send --dst "$TG_PEER_POD_IP" --udp-port "$SINK_PORT" --count 4 --size 40 >/dev/null
N "$PY" "$TOOL" send --dst "$TG_INET_IP" --udp-port "$SINK_PORT" --count 5 --size 50 >/dev/null

t_begin "every value on /metrics equals nft -j list counters table inet tollgate"
res=""
for _ in 1 2 3 4 5; do
	nft_json "$TG_TMP/nft1.json"
	metrics cmp || t_fail "scrape"
	nft_json "$TG_TMP/nft2.json"
	# a quiet moment: the kernel's counters did not move around the scrape
	if cmp -s "$TG_TMP/nft1.json" "$TG_TMP/nft2.json"; then
		res=$("$PY" "$TOOL" compare --metrics "$TG_TMP/cmp.prom" --nft "$TG_TMP/nft1.json" --state "$(tg_state_file)")
		break
	fi
	sleep 0.2
done
if [ -z "$res" ]; then
	t_fail "the kernel's counters never stood still around a scrape"
else
	n=$(jq -r .compared <<<"$res")
	[ "$(jq -r .n_problems <<<"$res")" = 0 ] || t_fail "$(jq -r '.problems | join("; ")' <<<"$res")"
	# 6 namespaces and "", 8 pods, host: (7 + 8 + 1) x 4 classes x 2 kinds;
	# spoofed packets: (7 namespaces + the node) x 2 families; nodeAccess'
	# drops: 7 namespaces x 4 (metadata, metrics port, invalid, neighbour);
	# refusals: 7 namespaces x 1 (the ceiling)
	t_expect "samples compared" "$n" 179
	t_expect "host egress internet bytes" "$(mval cmp 'tollgate_host_bytes_total{direction="egress",traffic="internet"}')" \
		"$(jq '[.nftables[].counter | select(. != null and .name == "host_egress_internet") | .bytes][0]' "$TG_TMP/nft1.json")"
	[ "$(mval cmp "$(nskey bytes datasets egress_internet)")" -ge $((7 * 328)) ] 2>/dev/null || t_fail "datasets egress internet < $((7 * 328))"
	[ "$(mval cmp "$(nskey bytes team-alpha ingress_internal)")" -ge $((3 * 128)) ] 2>/dev/null || t_fail "team-alpha ingress internal < $((3 * 128))"
fi
t_end

# ---------------------------------------------------------------- DEL
t_begin "after DEL of pod a, research's counters keep their value and a's series go"
metrics beforedel || t_fail "scrape"
pod_del a "$CONF" || t_fail "DEL a: rc=$TG_RC $TG_OUT"
metrics afterdel || t_fail "scrape"
for c in $CLASSES; do
	for k in bytes packets; do
		b=$(mval beforedel "$(nskey "$k" research "$c")") a=$(mval afterdel "$(nskey "$k" research "$c")")
		[ "$a" != absent ] && [ "$a" -ge "$b" ] 2>/dev/null || t_fail "research $k $c: $b before DEL, $a after"
	done
done
t_expect "research egress internal bytes" "$(mval afterdel "$(nskey bytes research egress_internal)")" "$RESEARCH_BYTES"
grep -q '^tollgate_pod_bytes_total{namespace="research",pod="a",' "$TG_TMP/afterdel.prom" && t_fail "pod a still has series"
[ "$(mval afterdel "$(podkey bytes research a2 egress_internal)")" != absent ] || t_fail "pod a2's series went too"
t_expect "attachments" "$(mval afterdel tollgate_ipam_attachments)" 7
p=$(promtool_problem "$TG_TMP/afterdel.prom")
[ -z "$p" ] || t_fail "$p"
t_end

# ---------------------------------------------------------------- corrupt store
SF=$(tg_state_file)
t_begin "corrupt state.json: 200, promtool accepts, collector ipam 0, nftables 1"
cp -p "$SF" "$TG_TMP/state.good"
printf '{"version":1,"attachments":[{"containerId":' >"$SF.tmp" && mv "$SF.tmp" "$SF"
if check_page corrupt; then
	t_expect "ipam collector" "$(mval corrupt "$(upkey ipam)")" 0
	t_expect "nftables collector" "$(mval corrupt "$(upkey nftables)")" 1
	t_expect "research egress internal bytes" "$(mval corrupt "$(nskey bytes research egress_internal)")" "$RESEARCH_BYTES"
fi
# the same file rewritten in place, shorter: still 0
printf 'garbage' >"$SF"
check_page corrupt2 && t_expect "ipam collector (garbage in place)" "$(mval corrupt2 "$(upkey ipam)")" 0
cp -p "$TG_TMP/state.good" "$SF.tmp" && mv "$SF.tmp" "$SF"
check_page restored && t_expect "ipam collector after repair" "$(mval restored "$(upkey ipam)")" 1
t_end

# ---------------------------------------------------------------- table deleted
t_begin "after nft delete table inet tollgate: 200, promtool accepts, collector nftables 0"
T_DELETE=$(date +%s)
N nft delete table inet tollgate || t_fail "could not delete the table"
if check_page notable; then
	t_expect "nftables collector" "$(mval notable "$(upkey nftables)")" 0
	t_expect "ipam collector" "$(mval notable "$(upkey ipam)")" 1
	t_expect "attachments" "$(mval notable tollgate_ipam_attachments)" 7
fi
# Prometheus scrapes the table-less page too
prom_scraped_after() { # EPOCH: Prometheus has a scrape newer than EPOCH
	local ts
	ts=$(prom_query 'timestamp(tollgate_build_info)')
	[ -n "$ts" ] && [ "${ts%.*}" -gt "$1" ]
}
wait_for 5 prom_scraped_after "$T_DELETE" || t_fail "Prometheus did not scrape the table-less page"
t_end

t_begin "table rebuilt by the next ADD: namespace counters never go backwards"
T_REBUILD=$(date +%s)
pod_add r2 research "$CONF" || t_fail "ADD r2: rc=$TG_RC $TG_OUT"
N nft list table inet tollgate >/dev/null 2>&1 || t_fail "the table was not rebuilt"
if check_page rebuilt; then
	t_expect "nftables collector" "$(mval rebuilt "$(upkey nftables)")" 1
	for ns in research datasets kube-system; do
		for c in $CLASSES; do
			b=$(mval cmp "$(nskey bytes "$ns" "$c")") a=$(mval rebuilt "$(nskey bytes "$ns" "$c")")
			[ "$a" != absent ] && [ "$a" -ge "$b" ] 2>/dev/null || t_fail "$ns bytes $c: $b before the rebuild, $a after"
		done
	done
fi
# Prometheus: a scrape after the rebuild, then no counter reset in its history
wait_for 5 prom_scraped_after "$T_REBUILD" || t_fail "Prometheus did not scrape after the rebuild"
r=$(prom_query 'max(resets(tollgate_namespace_bytes_total[10m]))')
t_expect "Prometheus resets() of namespace bytes" "$r" 0
t_end

# ---------------------------------------------------------------- shaper
# s1: every kind of class (Kubernetes ingress/egress limits, internet ingress
# and egress caps); s2: internet egress only. Both in namespace "shaped".
SH_SHAPING='{"internetEgress": {"node": "300M", "namespaceDefault": "200M", "podDefault": "100M"}, "internetIngress": {"podDefault": "50M"}}'
CONF_S1=$(jq -c --argjson s "$SH_SHAPING" '.shaping = $s | .capabilities = {bandwidth: true}
	| .runtimeConfig = {bandwidth: {ingressRate: 40000000, egressRate: 30000000}}' <<<"$CONF")
CONF_S2=$(jq -c --argjson s "$SH_SHAPING" '.shaping = $s' <<<"$CONF")
t_begin "shaped pods: tollgate_shaper_* for pod, namespace and node classes, collector shaper 1"
pod_add s1 shaped "$CONF_S1" || t_fail "ADD s1: rc=$TG_RC $TG_OUT"
pod_add s2 shaped "$CONF_S2" || t_fail "ADD s2: rc=$TG_RC $TG_OUT"
SH_COUNT=40 SH_SIZE=700
ip netns exec "$TG_ID-s1" "$PY" "$TOOL" send --dst "$TG_INET_IP" --udp-port "$SINK_PORT" --count "$SH_COUNT" --size "$SH_SIZE" >/dev/null ||
	t_fail "s1 could not send"
if check_page shaped; then
	t_expect "shaper collector" "$(mval shaped "$(upkey shaper)")" 1
	shk() { # POD DIRECTION TRAFFIC [VALUE]
		printf 'tollgate_shaper_pod_%s{direction="%s",namespace="shaped",pod="%s",traffic="%s"}' "${4:-sent_bytes_total}" "$2" "$1" "$3"
	}
	for dt in "ingress all" "ingress internet" "ingress internal" "egress all" "egress internet"; do
		# shellcheck disable=SC2086  # $dt is two words on purpose
		[ "$(mval shaped "$(shk s1 $dt)")" != absent ] || t_fail "no $(shk s1 $dt)"
	done
	# s2: internet egress and internet ingress only
	t_expect "s2: pod series" "$(grep '^tollgate_shaper_pod_sent_bytes_total{.*pod="s2"' "$TG_TMP/shaped.prom" | grep -o 'direction="[a-z]*"' | sort | tr '\n' ' ')" 'direction="egress" direction="ingress" '

	t_expect "s1 internet egress limit" "$(mval shaped "$(shk s1 egress internet limit_bytes_per_second)")" 12500000
	t_expect "s1 egress limit" "$(mval shaped "$(shk s1 egress all limit_bytes_per_second)")" 3750000
	t_expect "s1 ingress limit" "$(mval shaped "$(shk s1 ingress all limit_bytes_per_second)")" 5000000
	t_expect "namespace limit" "$(mval shaped 'tollgate_shaper_namespace_limit_bytes_per_second{direction="egress",namespace="shaped"}')" 25000000
	t_expect "node limit" "$(mval shaped 'tollgate_shaper_node_limit_bytes_per_second{direction="egress"}')" 37500000
	t_expect "s1 internet ingress limit" "$(mval shaped "$(shk s1 ingress internet limit_bytes_per_second)")" 6250000
	t_expect "no download namespace limit (none configured)" "$(mval shaped 'tollgate_shaper_namespace_limit_bytes_per_second{direction="ingress",namespace="shaped"}')" absent
	got=$(mval shaped "$(shk s1 egress internet sent_packets_total)")
	[ "$got" -ge "$SH_COUNT" ] 2>/dev/null || t_fail "s1 internet egress class sent $got packets, expected >= $SH_COUNT"
	got=$(mval shaped "$(shk s1 egress internet)")
	[ "$got" -ge $((SH_COUNT * (SH_SIZE + 28))) ] 2>/dev/null || t_fail "s1 internet egress class sent $got bytes, expected >= $((SH_COUNT * (SH_SIZE + 28)))"
	# unshaped pods have no shaper series
	grep -q '^tollgate_shaper_pod_[a-z_]*{[^}]*pod="b"' "$TG_TMP/shaped.prom" && t_fail "unshaped pod b has shaper series"
fi
t_end

# tc_json DEV: the device's classes as `tc -s class show` lists them
tc_json() { N tc -s class show dev "$1" 2>/dev/null; }
# tc_compare NAME: scrape into NAME while the classes' counters stand still
# and compare every tollgate_shaper_* sample with tc; prints compare-tc's JSON
tc_compare() {
	local devs=(tollgate-inet tollgate-inetdl "${POD_VETH[s1]}" "ti${POD_VETH[s1]#tg}" "${POD_VETH[s2]}") d same
	local -A before=() after=()
	for _ in 1 2 3 4 5; do
		for d in "${devs[@]}"; do before[$d]=$(tc_json "$d"); done
		metrics "$1" || return 1
		same=1
		for d in "${devs[@]}"; do
			after[$d]=$(tc_json "$d")
			[ "${after[$d]}" = "${before[$d]}" ] || same=0
		done
		if [ "$same" = 1 ]; then
			# compared with what tc showed on both sides of the scrape, not read again
			local args=()
			for d in "${devs[@]}"; do args+=(--tc "$d=${after[$d]}"); done
			"$PY" "$TOOL" compare-tc --metrics "$TG_TMP/$1.prom" --state "$(tg_state_file)" "${args[@]}"
			return
		fi
		sleep 0.2
	done
}
# tc_check NAME: tc_compare, failing the test on any difference; expects 53 values:
# node + namespace on each of tollgate-inet and tollgate-inetdl, s1 (5 classes:
# veth 1:1, 1:3, its IFB's 1:1, one on each node IFB), s2 (2): 11 classes x 4
# counters, and 9 limits (no download cap is set for the node or namespace)
tc_check() {
	local res
	res=$(tc_compare "$1")
	if [ -z "$res" ]; then
		t_fail "the classes' counters never stood still around a scrape"
		return
	fi
	[ "$(jq -r .n_problems <<<"$res")" = 0 ] || t_fail "$(jq -r '.problems | join("; ")' <<<"$res")"
	t_expect "values compared" "$(jq -r .compared <<<"$res")" 53
}
t_begin "every tollgate_shaper_* value equals tc -s class show for the same class"
tc_check tccmp
t_end

t_begin "s1 deleted and added again (same device name, new device): its series follow the new classes"
pod_del s1 "$CONF_S1" || t_fail "DEL s1: rc=$TG_RC $TG_OUT"
pod_add s1 shaped "$CONF_S1" || t_fail "ADD s1 again: rc=$TG_RC $TG_OUT"
ip netns exec "$TG_ID-s1" "$PY" "$TOOL" send --dst "$TG_INET_IP" --udp-port "$SINK_PORT" --count 3 --size 100 >/dev/null
tc_check tcagain
metrics tcagain2 || t_fail "scrape" # (tc_check ran in a subshell: its samples are not here)
got=$(mval tcagain2 "$(shk s1 egress internet sent_packets_total)")
[ "$got" -ge 3 ] && [ "$got" -lt "$SH_COUNT" ] 2>/dev/null || t_fail "s1's new internet egress class: $got packets, expected 3 to $((SH_COUNT - 1))"
t_end

t_begin "after DEL of the shaped pods: no pod shaper series, collector shaper 1"
pod_del s1 "$CONF_S1" || t_fail "DEL s1: rc=$TG_RC $TG_OUT"
pod_del s2 "$CONF_S2" || t_fail "DEL s2: rc=$TG_RC $TG_OUT"
if check_page unshaped; then
	t_expect "shaper collector" "$(mval unshaped "$(upkey shaper)")" 1
	grep -q '^tollgate_shaper_pod_' "$TG_TMP/unshaped.prom" && t_fail "pod shaper series remain: $(grep -m2 '^tollgate_shaper_pod_' "$TG_TMP/unshaped.prom")"
fi
t_end

# ---------------------------------------------------------------- HTTP
# Garbage request lines first, in the background: some are only closed by the
# exporter's 10 s idle timeout; everything below runs while they are open.
# Misbehaving clients come from 127.0.0.2, the scrapes that must keep working
# from 127.0.0.1 (as Prometheus comes from another host than an attacker).
ip netns exec "$TG_NODE" "$PY" "$TOOL" --port "$EXP_PORT" garbage --timeout 12 --src 127.0.0.2 \
	>"$TG_TMP/garbage.json" 2>&1 & # not through a function: $! must be python's own PID
GARBAGE_PID=$!
TG_PIDS+=("$GARBAGE_PID")

t_begin "HTTP: methods, paths, HEAD, oversized requests"
probe=$(tool probe) || t_fail "probe failed"
pf() { jq -r "$1" <<<"$probe"; }
for m in post_metrics put_metrics delete_metrics options_metrics post_root; do
	t_expect "$m status" "$(pf ".$m.status // .$m.error")" 405
	t_expect "$m Allow" "$(pf ".$m.headers.allow // \"\"")" "GET, HEAD"
done
t_expect "unknown path" "$(pf '.unknown_path.status // .unknown_path.error')" 404
t_expect "/metrics/x" "$(pf '.metrics_subpath.status // .metrics_subpath.error')" 404
t_expect "GET /healthz" "$(pf '.get_healthz.status')" 200
t_expect "/healthz body" "$(pf '.get_healthz.body_head | @json')" '"ok\n"'
t_expect "GET /" "$(pf '.get_root.status')" 200
pf '.get_root.body_head' | grep -q 'href="metrics"' || pf '.get_root.body_head' | grep -q 'href="/metrics"' || t_fail "/ does not link /metrics"
t_expect "HEAD status" "$(pf '.head_metrics.status // .head_metrics.error')" 200
t_expect "HEAD body length" "$(pf '.head_metrics.body_len')" 0
t_expect "HEAD Content-Type" "$(pf '.head_metrics.headers["content-type"]')" "text/plain; version=0.0.4; charset=utf-8"
t_expect "HTTP/1.0 GET" "$(pf '.http10.status // .http10.error')" 200
s=$(pf '.big_header.status // .big_header.error')
[[ $s =~ ^4[0-9][0-9]$ ]] || t_fail "100 KB header: expected 4xx, got $s"
s=$(pf '.long_url.status // .long_url.error')
[[ $s =~ ^4[0-9][0-9]$ ]] || t_fail "40 KB URL: expected 4xx, got $s"
[ -z "$T_ERRS" ] || diag "$probe"
t_end

t_begin "robustness: 200 concurrent requests and 5 slow clients (a byte a second), garbage still open"
rob=$(tool robust --pid "$EXP_PID" --conns 200 --slow 5 --seconds 5 --limit 1.0 --src 127.0.0.2) || t_fail "robust run failed"
rj() { jq -r "$1" <<<"$rob"; }
# each answered 200, or refused/closed at once by a connection limit (a
# per-client limit may refuse most of one client's 200); never a timeout
[ "$(rj .storm.ok)" -ge 1 ] 2>/dev/null || t_fail "storm: none of 200 requests answered 200"
t_expect "storm: answers other than 200 or a refused connection" "$(rj '.storm.bad | join(", ")')" ""
t_expect "alive" "$(rj .alive)" true
t_expect "after: /metrics" "$(rj .after.status)" 200
[ -z "$T_ERRS" ] || diag "$(jq -c '{storm, slow}' <<<"$rob")"
t_end

t_begin "robustness: meanwhile every scrape answered within 1 s"
t_expect "failed scrapes" "$(rj .watch.n_failures)" 0
t_expect "scrapes over 1 s" "$(rj .watch.over_limit)" 0
[ "$(rj .watch.scrapes)" -ge 20 ] 2>/dev/null || t_fail "only $(rj .watch.scrapes) scrapes made"
[ -z "$T_ERRS" ] || diag "$(jq -c .watch <<<"$rob")"
t_end

t_begin "robustness: RSS stays under $((RSS_LIMIT_KB / 1024)) MB and the exporter lives"
rss=$(rj .rss_max_kb)
[ "$rss" -gt 0 ] 2>/dev/null && [ "$rss" -lt "$RSS_LIMIT_KB" ] || t_fail "peak VmRSS during the storm ${rss} kB"
kill -0 "$EXP_PID" 2>/dev/null || t_fail "exporter died"
diag "peak VmRSS during the storm: ${rss} kB; VmHWM: $(status_field "$EXP_PID" VmHWM) kB"
t_end

t_begin "robustness: garbage request lines get 4xx or are closed (within the 10 s idle timeout)"
wait_for 15 sh -c "! kill -0 $GARBAGE_PID 2>/dev/null" || t_fail "garbage clients still running"
wait "$GARBAGE_PID" 2>/dev/null
gar=$(cat "$TG_TMP/garbage.json")
t_expect "garbage requests with a result" "$(jq '[.garbage[] | select(. != null)] | length' <<<"$gar" 2>/dev/null)" "$(jq .sent <<<"$gar" 2>/dev/null)"
# 4xx (505 for an unknown HTTP version) or a closed connection; never 2xx/3xx or a server error
bad=$(jq -r '.garbage[] | select(.status != null and (.status < 400 or .status > 499) and .status != 505) | "\(.req|@json) -> \(.status)"' <<<"$gar" 2>/dev/null)
[ -z "$bad" ] || t_fail "garbage answered with $bad"
bad=$(jq -r '.garbage[] | select(.secs > 11.5) | "\(.req|@json) held \(.secs) s"' <<<"$gar" 2>/dev/null)
[ -z "$bad" ] || t_fail "garbage connection not closed in time: $bad"
jq -e '.sent > 10' <<<"$gar" >/dev/null 2>&1 || t_fail "no result: ${gar:0:300}"
kill -0 "$EXP_PID" 2>/dev/null || t_fail "exporter died"
[ -z "$T_ERRS" ] || diag "$(jq -c . <<<"$gar" 2>/dev/null || echo "$gar")"
t_end

t_begin "robustness: 200 idle connections from another address do not lock scrapes out"
hold=$(tool hold --pid "$EXP_PID" --conns 200 --src 127.0.0.2 --seconds 3 --limit 1.0) || t_fail "hold run failed"
t_expect "failed scrapes while held" "$(jq -r .watch.n_failures <<<"$hold")" 0
t_expect "scrapes over 1 s while held" "$(jq -r .watch.over_limit <<<"$hold")" 0
t_expect "alive" "$(jq -r .alive <<<"$hold")" true
t_expect "after release" "$(jq -r '.after_release.status // .after_release.error' <<<"$hold")" 200
[ -z "$T_ERRS" ] || diag "$(jq -c . <<<"$hold")"
t_end

t_begin "after all that: /metrics still valid, RSS bounded"
check_page final && t_expect "nftables collector" "$(mval final "$(upkey nftables)")" 1
rss=$(status_field "$EXP_PID" VmRSS)
[ "${rss:-0}" -gt 0 ] && [ "$rss" -lt "$RSS_LIMIT_KB" ] || t_fail "VmRSS ${rss:-?} kB"
t_end

# ---------------------------------------------------------------- SIGTERM
t_begin "SIGTERM: exits 0 within 3 s (no sanitizer report)"
kill -TERM "$EXP_PID"
wait_for 3 sh -c "! kill -0 $EXP_PID 2>/dev/null" || t_fail "still running 3 s after SIGTERM"
wait "$EXP_PID"
rc=$?
t_expect "exit status" "$rc" 0
[ "$rc" = 0 ] || diag "$(tail -n 30 "$TG_TMP/exporter.log")"
# sanitizer builds: no report in the log (a leak at exit also makes rc non-zero)
if grep -Eq 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' "$TG_TMP/exporter.log"; then
	t_fail "sanitizer report in the exporter's log"
	diag "$(grep -E -A12 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' "$TG_TMP/exporter.log" | head -n 30)"
fi
keep=()
for p in "${TG_PIDS[@]}"; do [ "$p" = "$EXP_PID" ] || keep+=("$p"); done
TG_PIDS=("${keep[@]}")
t_end

diag "elapsed $((SECONDS - T0)) s"
tap_done
