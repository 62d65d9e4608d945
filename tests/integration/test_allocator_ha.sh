#!/usr/bin/env bash
# tollgate-allocator's leader election on a real etcd: three replicas on a
# 3-member etcd cluster (Debian's etcd-server), each in a namespace of its
# own on a simulated fabric, and a client namespace that posts reports as
# the nodes do. What is checked is what the nodes see (who answers 200 with
# grants, who 307s to whom, who 503s) and what etcd holds, through every
# fault the election must survive: etcd unreachable at start, the leader
# SIGKILLed and SIGTERMed, the leader cut from etcd (it stops granting
# before its lease can have expired, and before another grants), etcd
# without a quorum, something that is not etcd answering; then, from every
# replica's own log, that no two terms share an epoch or overlap in time.
#
#   etcd e1 10.0.0.11   e2 .12   e3 .13     (etcd_lib.sh)
#   allocator a1 10.0.0.21   a2 .22   a3 .23   :9618, --election-ttl 3
#   client c 10.0.0.50: curl, and a fake "etcd" answering HTML on :2379
#       |  all on the fabric ($TG_ID-fab, ip_forward, proxy ARP;
#       |  table ip tgcut drops a1..a3 <-> etcd when asked)
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_allocator_ha.sh
# shellcheck disable=SC2016,SC1091,SC2153,SC2034  # jq filters; lib.sh globals
set -u
export LC_NUMERIC=C
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd_lib.sh"
tg_require
tg_traps
etcd_require
tg_require_tools curl python3 date openssl
ALLOC=$TOLLGATE_BIN_DIR/tollgate-allocator
[ -x "$ALLOC" ] || { echo "not ok - preconditions: $ALLOC not found (run make)"; exit 1; }
T0=$SECONDS
TTL=3 LEASE_S=4
FAB=$TG_ID-fab CLI=$TG_ID-c CLI_IP=10.0.0.50
KEY=/tollgate/allocator/leader
a_ns() { echo "$TG_ID-a$1"; }
a_ip() { echo "10.0.0.2$1"; }
a_url() { echo "http://$(a_ip "$1"):9618"; }
declare -a A_PID=()

t_begin "topology: a fabric, a 3-member etcd, three allocator namespaces and a client"
TG_TMP=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-it.XXXXXX") || tap_bail "no TG_TMP"
chmod 755 "$TG_TMP"
_tg_netns_add "$FAB" || tap_bail "fabric"
_tg_sysctl "$FAB" net.ipv4.ip_forward 1 || tap_bail "fabric forwarding"
etcd_up "$FAB" 10.0.0 2>"$TG_TMP/etcd_up.err" || tap_bail "etcd did not come up: $(cat "$TG_TMP/etcd_up.err")"
for i in 1 2 3; do fabric_attach "$FAB" "$(a_ns "$i")" "alloc$i" "$(a_ip "$i")" 10.0.0 || t_fail "allocator $i's link"; done
fabric_attach "$FAB" "$CLI" cli0 "$CLI_IP" 10.0.0 || t_fail "client link"
ip netns exec "$FAB" nft -f - <<'NFT' || t_fail "nft tgcut"
table ip tgcut {
	set cut { type ipv4_addr; }
	chain forward_cut {
		type filter hook forward priority -10; policy accept;
		ip saddr @cut ip daddr 10.0.0.11-10.0.0.13 drop
		ip daddr @cut ip saddr 10.0.0.11-10.0.0.13 drop
	}
}
NFT
diag "etcd: $ETCD_URLS"
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot continue without the topology"

# the replicas' policy file (--policy): datasets' budget, the nodes' period and lease
POLICY=$TG_TMP/policy.json
jq -n --argjson ls "$LEASE_S" '{version: 1, reportSeconds: 1, leaseSeconds: $ls,
	namespaces: {datasets: {internetEgress: "120M"}}}' >"$POLICY" || tap_bail "cannot write the policy"

C() { timeout -k 1 10 ip netns exec "$CLI" "$@"; }
alloc_start() { # I [ETCD_URLS]: replica I, its log appended to $TG_TMP/aI.log
	local i=$1 urls=${2:-$ETCD_URLS}
	echo "# --- start $(date -u +%FT%T.%3NZ)" >>"$TG_TMP/a$i.log"
	ip netns exec "$(a_ns "$i")" "$ALLOC" --policy "$POLICY" --insecure-no-auth --listen "$(a_ip "$i"):9618" \
		--etcd "$urls" --advertise "$(a_url "$i")" --election-ttl "$TTL" 2>>"$TG_TMP/a$i.log" &
	A_PID[i]=$!
	TG_PIDS+=("$!")
	wait_for 5 alloc_serves "$i"
}
alloc_serves() { [ -n "$(a_metrics "$1")" ]; }
forget_pid() {
	local p keep=()
	for p in "${TG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	TG_PIDS=("${keep[@]}")
}
alloc_stop() { # I SIGNAL
	kill "-$2" "${A_PID[$1]}" 2>/dev/null
	wait "${A_PID[$1]}" 2>/dev/null
	forget_pid "${A_PID[$1]}"
	A_PID[$1]=""
}
a_metrics() { C curl -s --max-time 2 "$(a_url "$1")/metrics"; }
a_metric() { a_metrics "$1" | awk -v m="$2" '$1 == m { print $2; exit }'; }
REPORT='{"version":1,"node":"n1","seq":1,"budgets":[{"namespace":"datasets","sentBytes":0,"intervalMs":0,"saturated":false,"applied":0,"limit":125000000,"state":"fallback","pods":1,"safeShare":0,"nodes":0}]}'
# post I: "STATUS BODY" of a report to replica I (000: no answer)
post() {
	local f=$TG_TMP/post.$BASHPID
	C curl -s --max-time 2 -o "$f" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "$REPORT" "$(a_url "$1")/v1/report" || true
	printf ' %s' "$(cat "$f" 2>/dev/null)"
	rm -f "$f"
}
code_of() { post "$1" | cut -d' ' -f1; }
code_is() { [ "$(code_of "$1")" = "$2" ]; }
leaders() { # the replicas that answer a report with grants
	local i out=""
	for i in 1 2 3; do [ -n "${A_PID[i]:-}" ] && [ "$(code_of "$i")" = 200 ] && out="$out$i"; done
	echo "$out"
}
one_leader() { [ "${#1}" = 1 ]; }
have_one_leader() { LEADER=$(leaders); one_leader "$LEADER"; }
ms_now() { date +%s%3N; }
key_kv() { # the election key as etcd holds it: "CREATE_REVISION VALUE"
	local out
	out=$(etcd_post /v3/kv/range "{\"key\":\"$(etcd_b64 "$KEY")\"}") || return 1
	jq -r '.kvs[0] // empty | "\(.create_revision) \(.value | @base64d)"' <<<"$out"
}
cut_from_etcd() { ip netns exec "$FAB" nft add element ip tgcut cut "{ $(a_ip "$1") }"; }
heal_from_etcd() { ip netns exec "$FAB" nft delete element ip tgcut cut "{ $(a_ip "$1") }"; }

# ---------------------------------------------------------------- the command line
t_begin "bad election flags are refused (exit 2, the flag named) before anything starts"
bad_flags() { # WANT-MESSAGE ARGS...
	local want=$1 out rc
	shift
	out=$(C "$ALLOC" --policy "$POLICY" --insecure-no-auth "$@" 2>&1); rc=$?
	[ "$rc" = 2 ] || t_fail "$* exited $rc"
	grep -qF -- "$want" <<<"$out" || t_fail "$*: no '$want' in: $out"
}
bad_flags "--etcd needs --advertise" --etcd http://10.0.0.11:2379
bad_flags "need --etcd" --advertise http://10.0.0.21:9618
bad_flags "is not an http:// or https:// URL" --etcd ftp://10.0.0.11 --advertise http://a:1
bad_flags "is not an http:// or https:// URL" --etcd "http://10.0.0.11:2379,,http://x" --advertise http://a:1
bad_flags "--advertise: \"10.0.0.21:9618\" is not" --etcd http://10.0.0.11:2379 --advertise 10.0.0.21:9618
bad_flags "--election-ttl is 2 to 60" --etcd http://e:1 --advertise http://a:1 --election-ttl 1
bad_flags "go together" --etcd http://e:1 --advertise http://a:1 --etcd-cert /c.pem
t_end

# ---------------------------------------------------------------- etcd unreachable at start
t_begin "etcd unreachable at start: no replica grants (503 no leader), each says so in its log and metrics"
for i in 1 2 3; do cut_from_etcd "$i"; done
for i in 1 2 3; do alloc_start "$i" || t_fail "replica $i does not serve: $(tail -3 "$TG_TMP/a$i.log")"; done
sleep $((TTL + 1))
for i in 1 2 3; do
	ans=$(post "$i")
	t_expect "replica $i's answer" "${ans%% *}" 503
	grep -q "no leader" <<<"$ans" || t_fail "replica $i: $ans"
	t_expect "replica $i leader" "$(a_metric "$i" tollgate_allocator_leader)" 0
	t_expect "replica $i etcd_up" "$(a_metric "$i" tollgate_allocator_etcd_up)" 0
	grep -q 'msg="etcd does not answer' "$TG_TMP/a$i.log" || t_fail "replica $i's log does not say etcd is unreachable"
	errs=$(a_metrics "$i" | awk '$1 ~ /^tollgate_allocator_etcd_requests_total/ && /result="error"/ { s += $2 } END { print s + 0 }')
	[ "$errs" -ge 2 ] || t_fail "replica $i counted $errs failed etcd requests"
	# a handful of requests a second, not a storm
	[ "$errs" -le $(((TTL + 2) * 4 + 2)) ] || t_fail "replica $i sent $errs requests in $((TTL + 1)) s"
done
t_end

t_begin "etcd back: exactly one replica grants within 3 s, the others redirect to it with its epoch within 3 s more"
for i in 1 2 3; do heal_from_etcd "$i"; done
wait_for 3 have_one_leader || t_fail "leaders: '$(leaders)'"
L=$LEADER
t_led=$(ms_now)
read -r rev val < <(key_kv)
diag "leader a$L, key $KEY = $val, create_revision $rev"
t_expect "the key's value" "$val" "$(a_url "$L")"
ans=$(post "$L")
t_expect "the leader's answer's epoch" "$(jq .epoch <<<"${ans#* }")" "$rev"
for i in 1 2 3; do
	[ "$i" = "$L" ] && continue
	# a follower learns the leader from its own campaign, or at its next
	# read of the key (a second apart; half a second after a failed one)
	wait_for 3 code_is "$i" 307 || t_fail "replica $i does not redirect 3 s after a$L leads"
	diag "replica $i redirects $(($(ms_now) - t_led)) ms after a$L was seen leading"
	hdr=$(C curl -s -D - -o /dev/null --max-time 2 --data-binary "$REPORT" "$(a_url "$i")/v1/report" | tr -d '\r')
	grep -q '^HTTP/1.1 307' <<<"$hdr" || t_fail "replica $i: $(head -1 <<<"$hdr")"
	grep -qi "^location: $(a_url "$L")$" <<<"$hdr" || t_fail "replica $i's Location: $(grep -i location <<<"$hdr")"
	ans=$(post "$i")
	t_expect "replica $i's redirect" "${ans#* }" "{\"version\":1,\"leader\":\"$(a_url "$L")\",\"epoch\":$rev}"
	t_expect "replica $i epoch" "$(a_metric "$i" tollgate_allocator_epoch)" "$rev"
done
t_expect "the leader learns first" "$(a_metric "$L" tollgate_allocator_learning)" 1
t_end

t_begin "etcd sees a handful of requests a second from the three replicas, however many reports the nodes send"
etcd_requests() { # the three replicas' requests to etcd so far
	local i n=0 v
	for i in 1 2 3; do
		v=$(a_metrics "$i" | awk '$1 ~ /^tollgate_allocator_etcd_requests_total/ { s += $2 } END { printf "%d", s }')
		n=$((n + v))
	done
	echo "$n"
}
r0=$(etcd_requests) s0=$(ms_now)
# 600 reports to the leader from 6 "nodes", as fast as curl sends them
urls=()
for j in $(seq 1 100); do urls+=("$(a_url "$L")/v1/report?$j"); done
senders=()
for k in 1 2 3 4 5 6; do
	# (-o names the first URL's output only; --parallel draws a meter even with -s)
	C curl -s -o /dev/null --max-time 10 --parallel --parallel-max 4 -H 'Content-Type: application/json' \
		--data-binary "${REPORT/\"n1\"/\"n$k\"}" "${urls[@]}" >/dev/null 2>&1 &
	senders+=("$!")
done
wait "${senders[@]}"
sleep_left=$((5000 - ($(ms_now) - s0)))
[ "$sleep_left" -gt 0 ] && sleep "$(awk -v m="$sleep_left" 'BEGIN { printf "%.3f", m / 1000 }')"
r1=$(etcd_requests) s1=$(ms_now)
rate=$(awk -v n=$((r1 - r0)) -v t=$((s1 - s0)) 'BEGIN { printf "%.1f", n * 1000 / t }')
diag "etcd: $((r1 - r0)) requests in $((s1 - s0)) ms from 3 replicas ($rate/s) while 600 reports came in"
awk -v r="$rate" 'BEGIN { exit !(r > 0.5 && r <= 5) }' || t_fail "$rate requests a second"
t_end

# ---------------------------------------------------------------- the leader killed
t_begin "the leader SIGKILLed: another grants within TTL + 2 s, with a newer epoch, learning first"
old=$L old_rev=$rev
t_kill=$(ms_now)
alloc_stop "$old" KILL
wait_for $((TTL + 2)) have_one_leader || t_fail "no new leader: '$(leaders)'"
t_new=$(ms_now)
diag "failover after SIGKILL: $((t_new - t_kill)) ms (election TTL $TTL s), a$old -> a$LEADER"
[ "$LEADER" != "$old" ] || t_fail "the dead replica leads?"
read -r rev val < <(key_kv)
[ "$rev" -gt "$old_rev" ] || t_fail "epoch $rev after $old_rev"
t_expect "learning" "$(a_metric "$LEADER" tollgate_allocator_learning)" 1
alloc_start "$old" || t_fail "restart a$old"
sleep 1.5
t_expect "the restarted replica redirects" "$(code_of "$old")" 307
L=$LEADER
t_end

t_begin "the leader SIGTERMed: it revokes its lease and another grants within 2 s"
old=$L old_rev=$rev
t_kill=$(ms_now)
alloc_stop "$old" TERM
grep -q "msg=\"stopped leading\" epoch=$old_rev why=shutdown" "$TG_TMP/a$old.log" || t_fail "no shutdown record in a$old's log"
wait_for 2 have_one_leader || t_fail "no new leader within 2 s: '$(leaders)'"
diag "failover after SIGTERM: $(($(ms_now) - t_kill)) ms"
read -r rev val < <(key_kv)
[ "$rev" -gt "$old_rev" ] || t_fail "epoch $rev after $old_rev"
alloc_start "$old" || t_fail "restart a$old"
L=$LEADER
t_end

t_begin "the leader's loop held for 8 s, as a flood of reports would hold it: its lease renewed on the election's own thread, nobody takes over, the same term goes on"
if ! TOLLGATE_FAILPOINT=list "$ALLOC" 2>/dev/null | grep -qx allocator.loop.stall; then
	t_fail "this build has no failpoints (the sanitizer build has): the loop cannot be held"
else
	for i in 1 2 3; do alloc_stop "$i" TERM; done
	# the 25th turn of the loop (a few seconds in: after it leads) sleeps 8 s
	export TOLLGATE_FAILPOINT=allocator.loop.stall@25
	alloc_start 1 || t_fail "a1 does not serve"
	unset TOLLGATE_FAILPOINT
	wait_for 5 code_is 1 200 || t_fail "a1 does not lead"
	read -r rev0 val0 < <(key_kv)
	for i in 2 3; do alloc_start "$i" || t_fail "a$i does not serve"; done
	wait_for 20 code_is 1 000 || t_fail "a1's loop was never held"
	t_held=$(ms_now)
	sleep $((TTL + 2)) # past the lease, had nobody renewed it
	read -r rev val < <(key_kv)
	t_expect "the key's term $((TTL + 2)) s into the hold" "$rev" "$rev0"
	t_expect "the key's holder" "$val" "$val0"
	for i in 2 3; do t_expect "a$i during the hold" "$(code_of "$i")" 307; done
	wait_for 8 code_is 1 200 || t_fail "a1 does not grant again after the hold"
	diag "a1's loop held for about $(($(ms_now) - t_held)) ms"
	t_expect "a1's epoch after the hold" "$(a_metric 1 tollgate_allocator_epoch)" "$rev0"
	grep -q 'msg="stopped leading"' <(sed -n '/--- start/h; //!H; ${x;p}' "$TG_TMP/a1.log") &&
		t_fail "a1 stopped leading: $(grep 'stopped leading' "$TG_TMP/a1.log" | tail -1)"
	read -r rev _ < <(key_kv)
	L=1
fi
t_end

# ---------------------------------------------------------------- the leader cut from etcd
t_begin "the leader cut from etcd (not from the nodes): it stops granting before its lease can expire, before another grants"
old=$L
# reports to it every 50 ms, as nodes that still reach it would send
( while :; do printf '%s %s\n' "$(ms_now)" "$(code_of "$old")"; sleep 0.05; done ) >"$TG_TMP/hammer" 2>/dev/null &
HAMMER=$!
TG_PIDS+=("$HAMMER")
sleep 0.5
t_cut=$(ms_now)
cut_from_etcd "$old"
metric_is() { [ "$(a_metric "$1" "$2")" = "$3" ]; }
wait_for $((TTL + 3)) metric_is "$old" tollgate_allocator_leader 0 ||
	t_fail "a$old still leads $((TTL + 3)) s after the cut"
t_down=$(ms_now)
wait_for 5 have_one_leader || t_fail "no new leader: '$(leaders)'"
kill "$HAMMER"; wait "$HAMMER" 2>/dev/null; forget_pid "$HAMMER"
last_200=$(awk '$2 == 200 { t = $1 } END { printf "%.0f\n", t }' "$TG_TMP/hammer")
rec=$(grep 'msg="stopped leading"' "$TG_TMP/a$old.log" | tail -1)
grep -q 'why="the etcd lease could not be renewed in time"' <<<"$rec" || t_fail "a$old's record: $rec"
last_grant=$(sed -nE 's/.*last_grant_unix_ms=([0-9]+).*/\1/p' <<<"$rec")
new_lead=$(grep 'msg="leading' "$TG_TMP/a$LEADER.log" | tail -1 | cut -d' ' -f1)
new_lead_ms=$(date -d "$new_lead" +%s%3N)
diag "cut at +0: a$old's last 200 at +$((last_200 - t_cut)) ms, its record's last grant +$((last_grant - t_cut)) ms, its metric 0 by +$((t_down - t_cut)) ms; a$LEADER leads from +$((new_lead_ms - t_cut)) ms"
[ "$last_grant" -lt "$new_lead_ms" ] || t_fail "a$old granted at $last_grant, after a$LEADER led at $new_lead_ms"
[ "$last_200" -le "$last_grant" ] || t_fail "a 200 at $last_200 after the record's last grant $last_grant"
# it stopped before the lease it last renewed could have run out: at most TTL after the cut
[ $((last_grant - t_cut)) -lt $((TTL * 1000)) ] || t_fail "granted $((last_grant - t_cut)) ms after the cut (TTL $TTL s)"
# control: it did grant after the cut was made (the bound above is not vacuous)
[ "$last_200" -gt "$t_cut" ] || diag "(no grant after the cut: the last renewal was just before it)"
t_expect "a$old now redirects (it still reaches no etcd, but knew nobody)" "$(code_of "$old")" 503
heal_from_etcd "$old"
wait_for $((TTL + 3)) code_is "$old" 307 || t_fail "a$old does not redirect after the heal: $(post "$old")"
L=$LEADER
t_end

# ---------------------------------------------------------------- no quorum
t_begin "etcd without a quorum: the leader stops granting within TTL; a leader grants again once etcd is back"
etcd_stop 1
etcd_stop 2
t_q=$(ms_now)
nobody_grants() { [ -z "$(leaders)" ]; }
wait_for $((TTL + 2)) nobody_grants || t_fail "still granting $((TTL + 2)) s after quorum loss: '$(leaders)'"
diag "no quorum: the last grant stopped within $(($(ms_now) - t_q)) ms (TTL $TTL s)"
sleep 1
t_expect "nobody grants" "$(leaders)" ""
etcd_start 1
etcd_start 2
etcd_wait_healthy 3 20 || t_fail "etcd not healthy again"
wait_for $((TTL + 5)) have_one_leader || t_fail "no leader after etcd came back: '$(leaders)'"
diag "etcd back: a$LEADER leads"
t_end

# ---------------------------------------------------------------- not etcd
t_begin "something that is not etcd answers at its address: that replica never grants, and says why"
ip netns exec "$CLI" python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b"<html><body>502 Bad Gateway</body></html>"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("10.0.0.50", 2379), H).serve_forever()' &
TG_PIDS+=("$!")
listens() { ip netns exec "$CLI" ss -Hltn 'sport = :2379' | grep -q .; }
wait_for 5 listens
fabric_attach "$FAB" "$(a_ns 4)" alloc4 "$(a_ip 4)" 10.0.0 || t_fail "a4's link"
alloc_start 4 "http://$CLI_IP:2379" || t_fail "a4 does not serve"
sleep 2
t_expect "a4 leader" "$(a_metric 4 tollgate_allocator_leader)" 0
t_expect "a4's answer" "$(code_of 4)" 503
grep -q 'not JSON' "$TG_TMP/a4.log" || t_fail "a4's log does not say what etcd answered: $(tail -2 "$TG_TMP/a4.log")"
alloc_stop 4 TERM
t_end

# ---------------------------------------------------------------- etcd with client certificates
t_begin "an etcd that wants client certificates (deploy/allocator-etcd-tls.yaml): with them a replica leads; without, it never does"
PKI=$TG_TMP/pki TLS_NS=$TG_ID-tls TLS_IP=10.0.0.60
mkdir -p "$PKI"
pki() { openssl "$@" >>"$PKI/openssl.log" 2>&1; }
# a CA, etcd's server certificate for its address, the allocator's client
# certificate. The server's serves client authentication too: etcd's JSON
# gateway is a client of its own gRPC server, with that certificate.
pki req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 1 -subj /CN=test-etcd-ca &&
	pki req -newkey rsa:2048 -nodes -keyout "$PKI/server.key" -out "$PKI/server.csr" -subj /CN=etcd &&
	pki x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 1 \
		-extfile <(printf 'subjectAltName=IP:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' "$TLS_IP") -out "$PKI/server.crt" &&
	pki req -newkey rsa:2048 -nodes -keyout "$PKI/tls.key" -out "$PKI/client.csr" -subj /CN=tollgate-allocator &&
	pki x509 -req -in "$PKI/client.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 1 \
		-extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$PKI/tls.crt"
[ -s "$PKI/tls.crt" ] || t_fail "openssl: $(tail -3 "$PKI/openssl.log")"
fabric_attach "$FAB" "$TLS_NS" etcdtls "$TLS_IP" 10.0.0 || t_fail "the TLS member's link"
ip netns exec "$TLS_NS" env -i PATH="$TG_PATH" /usr/bin/etcd --name tls --data-dir "$TG_TMP/etcd-tls.data" \
	--listen-client-urls "https://$TLS_IP:2379" --advertise-client-urls "https://$TLS_IP:2379" \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster tls=http://127.0.0.1:2380 --cert-file "$PKI/server.crt" --key-file "$PKI/server.key" \
	--trusted-ca-file "$PKI/ca.crt" --client-cert-auth >"$TG_TMP/etcd-tls.log" 2>&1 &
TG_PIDS+=("$!")
for i in 5 6; do fabric_attach "$FAB" "$(a_ns "$i")" "alloc$i" "$(a_ip "$i")" 10.0.0 || t_fail "a$i's link"; done
alloc_tls() { # I ARGS...: replica I on the TLS member
	local i=$1
	shift
	ip netns exec "$(a_ns "$i")" "$ALLOC" --policy "$POLICY" --insecure-no-auth --listen "$(a_ip "$i"):9618" \
		--etcd "https://$TLS_IP:2379" --advertise "$(a_url "$i")" --election-ttl "$TTL" "$@" 2>>"$TG_TMP/a$i.log" &
	A_PID[i]=$!
	TG_PIDS+=("$!")
	wait_for 5 alloc_serves "$i"
}
alloc_tls 5 --etcd-ca "$PKI/ca.crt" --etcd-cert "$PKI/tls.crt" --etcd-key "$PKI/tls.key" || t_fail "a5 does not serve"
wait_for 10 code_is 5 200 || t_fail "a5 does not lead on the TLS member: $(grep 'msg="etcd' "$TG_TMP/a5.log" | tail -2)"
# control: the CA alone (no client certificate) is refused by etcd
alloc_tls 6 --etcd-ca "$PKI/ca.crt" || t_fail "a6 does not serve"
sleep 2
t_expect "a6 without a client certificate" "$(a_metric 6 tollgate_allocator_etcd_up)" 0
grep -q 'msg="etcd does not answer' "$TG_TMP/a6.log" || t_fail "a6's log: $(tail -2 "$TG_TMP/a6.log")"
t_expect "a6 redirects to a5 (it never read the key) or knows none" "$(code_of 6)" 503
alloc_stop 5 TERM
alloc_stop 6 TERM
t_end

# ---------------------------------------------------------------- the records
t_begin "no two replicas ever led in the same epoch, and terms never overlapped (each replica's own log; a1-a3, on the one etcd)"
terms=$(for i in 1 2 3; do sed -nE "s/^([^ ]+) .*msg=\"leading: granting from now\" epoch=([0-9]+).*/\2 $i \1/p" "$TG_TMP/a$i.log"; done | sort -n)
diag "terms (epoch replica start): $(tr '\n' ';' <<<"$terms")"
n_terms=$(wc -l <<<"$terms")
[ "$n_terms" -ge 5 ] || t_fail "only $n_terms terms"
dups=$(awk '{ print $1 }' <<<"$terms" | uniq -d)
[ -z "$dups" ] || t_fail "epochs led twice: $dups"
# each stopped term's last grant came before the next term began
while read -r epoch replica _; do
	rec=$(grep "msg=\"stopped leading\" epoch=$epoch " "$TG_TMP/a$replica.log" | tail -1)
	[ -n "$rec" ] || continue # SIGKILLed: no record (its grants ended at the kill)
	last=$(sed -nE 's/.*last_grant_unix_ms=([0-9]+).*/\1/p' <<<"$rec")
	next=$(awk -v e="$epoch" '$1 > e { print $3; exit }' <<<"$terms")
	if [ -z "$next" ] || [ "$last" = 0 ]; then continue; fi
	[ "$last" -lt "$(date -d "$next" +%s%3N)" ] || t_fail "epoch $epoch (a$replica) granted at $last, after the next term began at $next"
done <<<"$terms"
t_end

diag "test_allocator_ha.sh: $((SECONDS - T0)) s"
tap_done
