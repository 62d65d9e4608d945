#!/usr/bin/env bash
# No tenant can steer the budgets: the real allocator with --jwks (the
# issuer's keys, a file) and TLS, a real agent reporting with its projected
# token (budgets.tokenFile) over TLS it verifies (budgets.caFile). Tokens
# are minted as the API server mints them (sa_token.py: RS256, kid the key's
# SHA-256, the kubernetes.io claims); certificates as a CA signs them.
#   - the agent's reports are taken; its token is verified once, not per
#     report; a rotated token is verified once more
#   - reports without a token, with garbage, with a token of another
#     issuer's key, of a tenant's service account, and a valid token of one
#     node speaking for another: 401/403, counted, and no node's grant nor
#     the budget's aggregate moves (the control: node-b's own token is
#     taken, and the node count moves)
#   - from a pod and from a host of the node network alike
#   - a node whose token is not taken says so (result="refused", its log)
#   - plain HTTP to the TLS port gets no answer
#   - a replica that redirects to an impostor (a certificate of another
#     CA): the agent never completes TLS with it, so the impostor never sees
#     a report or a token (the control: the impostor with the right CA's
#     certificate is reported to); a redirect from https to http:// is
#     refused
#   - --jwks a URL (the API server's /openid/v1/jwks, with --jwks-ca and
#     --jwks-token): the keys fetched with the allocator's own token; a
#     token of a key the issuer added since (a rotation) is refused once,
#     fetches the set again, and is taken at the next report; a key gone
#     from the set takes its tokens with it
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_budget_trust.sh
# shellcheck disable=SC2016,SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_require_tools openssl curl jq python3
tg_traps

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
ALLOC=$TOLLGATE_BIN_DIR/tollgate-allocator
MINT=$(dirname "$0")/sa_token.py
# Debian's python3-jwt and python3-cryptography: the system's interpreter
PY=/usr/bin/python3
FAKE=$(dirname "$0")/fake_allocator.py
PORT=19651  # the agent's metrics
APORT=19652 # the allocator
FPORT=19653 # a replica that redirects (fake)
IPORT=19654 # the impostor (fake)
for b in "$AGENT" "$ALLOC"; do
	[ -x "$b" ] || { echo "not ok - preconditions: $b not found (run make)"; exit 1; }
done

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
t_end

PKI=$TG_TMP/pki
mkdir -p "$PKI"
pki() { openssl "$@" >>"$PKI/openssl.log" 2>&1; }
# CA NAME: a CA; cert CA NAME: a serving certificate of CA for the node's addresses
ca() { pki req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.crt" -days 1 -subj "/CN=$1"; }
cert() {
	pki req -newkey rsa:2048 -nodes -keyout "$PKI/$2.key" -out "$PKI/$2.csr" -subj "/CN=$2" &&
		pki x509 -req -in "$PKI/$2.csr" -CA "$PKI/$1.crt" -CAkey "$PKI/$1.key" -CAcreateserial -days 1 \
			-extfile <(printf 'subjectAltName=IP:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' "$TG_NODE_IP") \
			-out "$PKI/$2.crt"
}
t_begin "a CA and the allocator's certificate; another CA and an impostor's; the issuer's signing key and its JWKS"
{ ca ca && cert ca allocator && ca other-ca && cert other-ca impostor && cert ca replica; } ||
	tap_bail "openssl: $(tail -3 "$PKI/openssl.log")"
ISS=$TG_TMP/issuer OTHER=$TG_TMP/other-issuer
{ "$PY" "$MINT" keygen "$ISS" && "$PY" "$MINT" keygen "$OTHER"; } || tap_bail "sa_token.py keygen"
mint() { "$PY" "$MINT" mint "$ISS" "$@"; }
TOKDIR=$TG_TMP/token
mkdir -p "$TOKDIR"
mint --node node-a >"$TOKDIR/token"
t_expect "the JWKS lists one RS256 key" "$(jq -r '.keys | map(.kty + "/" + .alg) | join(",")' "$ISS/jwks.json")" RSA/RS256
t_end

# the allocator: datasets has a budget of 120M
POLICY=$TG_TMP/policy.json
echo '{"version": 1, "reportSeconds": 1, "leaseSeconds": 4, "namespaces": {"datasets": {"internetEgress": "120M"}}}' >"$POLICY"
ALOG=$TG_TMP/allocator.log
ip netns exec "$TG_NODE" "$ALLOC" --policy "$POLICY" --listen "$TG_NODE_IP:$APORT" --jwks "$ISS/jwks.json" \
	--tls-cert "$PKI/allocator.crt" --tls-key "$PKI/allocator.key" 2>>"$ALOG" &
TG_PIDS+=("$!")
AURL=https://$TG_NODE_IP:$APORT
ACURL() { ip netns exec "$TG_NODE" curl -s --max-time 3 --cacert "$PKI/ca.crt" "$@"; }
a_metric() { ACURL "$AURL/metrics" | awk -v n="$1" '$1 == n { print $2; exit }'; }
a_serves() { ACURL -o /dev/null "$AURL/healthz"; }
wait_for 10 a_serves || tap_bail "the allocator does not serve over TLS: $(tail -3 "$ALOG")"

# the agent, reporting as node-a with its token over TLS
CM=$TG_TMP/cm
mkdir -p "$CM"
pconf() { # ALLOCATOR-URL: the plugin's config
	tg_conf '.budgets={allocator: $url, reportSeconds: 1, leaseSeconds: 4, fallback: "10M",
	                   tokenFile: $tok, caFile: $ca}' --arg url "$1" --arg tok "$TOKDIR/token" \
		--arg ca "$PKI/ca.crt"
}
conf() { pconf "$1" | jq -c '{cniVersion, name, plugins: [.]}'; } # the conflist
conf "$AURL" >"$CM/tollgate.conflist"
GLOG=$TG_TMP/agent.log
ip netns exec "$TG_NODE" "$AGENT" --config "$CM/tollgate.conflist" --listen "127.0.0.1:$PORT" \
	--node-name node-a --declare-interval 1 --gc-interval 60 --sync-interval 300 --page-cache-ms 0 2>>"$GLOG" &
TG_PIDS+=("$!")
g_metric() { # NAME LABELS-REGEX -> value
	ip netns exec "$TG_NODE" curl -s --max-time 2 "http://127.0.0.1:$PORT/metrics" |
		awk -v n="$1" -v l="$2" '$1 ~ ("^" n) && $1 ~ l { print $2; exit }'
}
at_least() { local v; v=$("${@:1:$#-1}"); [ "${v:-0}" -ge "${*: -1}" ]; }

t_begin "the agent's reports are taken over TLS with its token, verified once and not per report"
wait_for 15 at_least g_metric tollgate_budget_reports_total 'result="ok"' 4 ||
	t_fail "the agent's reports: $(g_metric tollgate_budget_reports_total 'result="error"') errors; $(tail -3 "$GLOG")"
t_expect "tokens verified" "$(a_metric tollgate_allocator_auth_verifications_total)" 1
t_expect "tokens remembered" "$(a_metric tollgate_allocator_auth_tokens)" 1
ok=$(a_metric 'tollgate_allocator_reports_total{result="ok"}')
[ "${ok:-0}" -ge 4 ] || t_fail "the allocator took $ok reports"
t_end

t_begin "a rotated token (kubelet writes a new one in place) is verified once more, and taken"
mint --node node-a >"$TOKDIR/token.new" && mv "$TOKDIR/token.new" "$TOKDIR/token"
wait_for 5 at_least a_metric tollgate_allocator_auth_verifications_total 2 || t_fail "the new token was not verified"
n=$(g_metric tollgate_budget_reports_total 'result="ok"')
wait_for 5 at_least g_metric tollgate_budget_reports_total 'result="ok"' $((n + 2)) || t_fail "reports stopped"
t_expect "tokens verified" "$(a_metric tollgate_allocator_auth_verifications_total)" 2
t_end

# forged reports: node-b's big demand for datasets, as the wire has it
REPORT='{"version":1,"node":"NODE","seq":1,"budgets":[{"namespace":"datasets","sentBytes":90000000,"intervalMs":1000,"saturated":true,"applied":15000000,"limit":0,"state":"fallback","pods":4,"safeShare":0,"nodes":0}]}'
report() { jq -c --arg n "$1" '.node = $n' <<<"$REPORT"; }
# post FROM-NS NODE [CURL-ARGS...] -> the HTTP status (000: no answer)
post() {
	local ns=$1 node=$2
	shift 2
	ip netns exec "$ns" curl -s -o "$TG_TMP/post.out" -w '%{http_code}' --max-time 3 --cacert "$PKI/ca.crt" \
		-X POST -H 'Content-Type: application/json' --data "$(report "$node")" "$@" "$AURL/v1/report"
}
nodes() { ACURL "$AURL/metrics" | awk '$1 == "tollgate_allocator_nodes{namespace=\"datasets\",direction=\"egress\"}" { print $2 }'; }
demand() { ACURL "$AURL/metrics" | awk '$1 == "tollgate_allocator_demand_bytes_per_second{namespace=\"datasets\",direction=\"egress\"}" { print $2 }'; }

t_begin "forged reports from a host of the node network: refused (401/403), counted, and nothing moves"
nodes0=$(nodes) demand0=$(demand) un0=$(a_metric 'tollgate_allocator_reports_total{result="unauthenticated"}')
t_expect "no token" "$(post "$TG_PEER" node-b)" 401
grep -q 'error="invalid_token"' <(ip netns exec "$TG_PEER" curl -s -D - -o /dev/null --cacert "$PKI/ca.crt" -X POST --data x "$AURL/v1/report") ||
	t_fail "a 401 without WWW-Authenticate: Bearer ... invalid_token"
t_expect "garbage" "$(post "$TG_PEER" node-b -H 'Authorization: Bearer not.a.token')" 401
t_expect "another issuer's key" "$(post "$TG_PEER" node-b -H "Authorization: Bearer $("$PY" "$MINT" mint "$OTHER" --node node-b)")" 401
t_expect "another key under the issuer's key id" \
	"$(post "$TG_PEER" node-b -H "Authorization: Bearer $("$PY" "$MINT" mint "$OTHER" --node node-b --kid "$(jq -r '.keys[0].kid' "$ISS/jwks.json")")")" 401
t_expect "a tenant's service account (its pod on node-b)" \
	"$(post "$TG_PEER" node-b -H "Authorization: Bearer $(mint --node node-b --namespace team-a --account default)")" 401
t_expect "the audience of the API server" \
	"$(post "$TG_PEER" node-b -H "Authorization: Bearer $(mint --node node-b --aud https://kubernetes.default.svc)")" 401
t_expect "expired" "$(post "$TG_PEER" node-b -H "Authorization: Bearer $(mint --node node-b --skew -7200)")" 401
t_expect "node-a's valid token speaking for node-b" "$(post "$TG_PEER" node-b -H "Authorization: Bearer $(cat "$TOKDIR/token")")" 403
grep -q 'the token is node "node-a"' "$TG_TMP/post.out" || t_fail "the 403 does not say why: $(cat "$TG_TMP/post.out")"
sleep 1.5 # a round or more
t_expect "nodes holding datasets' grants" "$(nodes)" "$nodes0"
t_expect "datasets' demand" "$(demand)" "$demand0"
t_expect "unauthenticated, counted" "$(a_metric 'tollgate_allocator_reports_total{result="unauthenticated"}')" $((un0 + 8))
t_expect "forbidden, counted" "$(a_metric 'tollgate_allocator_reports_total{result="forbidden"}')" 1
for r in subject audience expired signature unknown-key malformed; do
	v=$(a_metric "tollgate_allocator_auth_refusals_total{reason=\"$r\"}")
	[ "${v:-0}" -ge 1 ] || t_fail "no refusal counted for $r"
done
# control: node-b's own token is taken, and moves the count
t_expect "node-b's own token (control)" "$(post "$TG_PEER" node-b -H "Authorization: Bearer $(mint --node node-b)")" 200
sleep 1.5
t_expect "nodes holding datasets' grants once node-b is genuine" "$(nodes)" $((nodes0 + 1))
t_end

t_begin "a pod reaching the allocator's port without the node's token is refused like any stranger"
# shellcheck disable=SC2034  # the POD_* arrays are pod_add's
declare -A POD_CID POD_IP POD_NETNS POD_RESULT POD_VETH
pod_add p1 datasets "$(pconf "$AURL")" || t_fail "pod_add: $TG_OUT"
t_expect "from a pod" "$(ip netns exec "$TG_ID-p1" curl -s -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$PKI/ca.crt" -X POST --data "$(report node-a)" "$AURL/v1/report")" 401
t_end

t_begin "plain HTTP to the TLS port gets no answer"
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 3 -X POST --data "$(report node-b)" "http://$TG_NODE_IP:$APORT/v1/report")
t_expect "HTTP status" "$code" 000
t_end

t_begin "a node whose token is not taken says so: result=\"refused\" and one log line"
cp "$TOKDIR/token" "$TOKDIR/token.good"
mint --node node-z >"$TOKDIR/token.new" && mv "$TOKDIR/token.new" "$TOKDIR/token"
wait_for 5 at_least g_metric tollgate_budget_reports_total 'result="refused"' 2 || t_fail "not counted refused"
t_expect "log lines" "$(grep -c 'the allocator refused this node' "$GLOG")" 1
mv "$TOKDIR/token.good" "$TOKDIR/token"
n=$(g_metric tollgate_budget_reports_total 'result="ok"')
wait_for 5 at_least g_metric tollgate_budget_reports_total 'result="ok"' $((n + 1)) || t_fail "reports not taken again"
t_end

# a replica (fake, with the allocator CA's certificate) that redirects
declare -A FAKE_PID
fake() { # NAME PORT CERT: a fake allocator on the node's address
	ip netns exec "$TG_NODE" python3 "$FAKE" --bind "$TG_NODE_IP" --port "$2" --log "$TG_TMP/$1.log" \
		--control "$TG_TMP/$1.control" --tls-cert "$PKI/$3.crt" --tls-key "$PKI/$3.key" >/dev/null 2>&1 &
	TG_PIDS+=("$!")
	FAKE_PID[$1]=$!
}
printf '{"mode": "redirect", "leader": "https://%s:%s", "epoch": 99}\n' "$TG_NODE_IP" "$IPORT" >"$TG_TMP/replica.control"
echo '{"mode": "grant"}' >"$TG_TMP/impostor.control"
fake replica "$FPORT" replica
fake impostor "$IPORT" impostor
port_up() { ip netns exec "$TG_NODE" ss -Hltn "sport = :$1" | grep -q .; }
{ wait_for 20 port_up "$FPORT" && wait_for 20 port_up "$IPORT"; } || tap_bail "the fakes do not listen"

t_begin "a redirect to an impostor (another CA's certificate): no report and no token ever reach it"
conf "https://$TG_NODE_IP:$FPORT" >"$CM/tollgate.conflist.new" && mv "$CM/tollgate.conflist.new" "$CM/tollgate.conflist"
replica_seen() { [ "$(grep -c . "$TG_TMP/replica.log" 2>/dev/null)" -ge "$1" ]; }
wait_for 10 replica_seen 4 || t_fail "the agent does not report to the replica: $(tail -3 "$GLOG")"
t_expect "the replica got the token (it holds the CA's certificate)" \
	"$(jq -r 'select(.authorization != null) | .authorization | startswith("Bearer ")' "$TG_TMP/replica.log" | sort -u)" true
t_expect "reports that reached the impostor" "$(grep -c . "$TG_TMP/impostor.log")" 0
t_end

t_begin "control: the same impostor with a certificate of the right CA is reported to (the check above can fail)"
kill "${FAKE_PID[impostor]}" && wait "${FAKE_PID[impostor]}" 2>/dev/null
fake impostor "$IPORT" allocator
imp_seen() { [ "$(grep -c . "$TG_TMP/impostor.log")" -ge 1 ]; }
wait_for 10 imp_seen || t_fail "the agent never reported to a replica it can verify"
t_end

t_begin "a redirect from https:// to an http:// leader is refused"
kill "${FAKE_PID[impostor]}" && wait "${FAKE_PID[impostor]}" 2>/dev/null # the agent goes back to the replica
printf '{"mode": "redirect", "leader": "http://%s:%s", "epoch": 100}\n' "$TG_NODE_IP" "$IPORT" >"$TG_TMP/replica.control"
wait_for 5 grep -q 'a redirect to a leader without TLS was refused' "$GLOG" || t_fail "not refused: $(tail -2 "$GLOG")"
t_end

# ---------------------------------------------------------------- --jwks URL
IPORT2=19655 APORT2=19656
echo "the-allocators-own-token" >"$TG_TMP/alloc-sa-token"
cp "$ISS/jwks.json" "$TG_TMP/served-jwks.json"
ip netns exec "$TG_NODE" "$PY" "$(dirname "$0")/issuer_serve.py" --bind "$TG_NODE_IP" --port "$IPORT2" \
	--jwks "$TG_TMP/served-jwks.json" --token "$TG_TMP/alloc-sa-token" --cert "$PKI/replica.crt" \
	--key "$PKI/replica.key" --log "$TG_TMP/issuer.log" >/dev/null 2>&1 &
TG_PIDS+=("$!")
wait_for 20 port_up "$IPORT2" || tap_bail "the issuer does not listen"
ip netns exec "$TG_NODE" "$ALLOC" --policy "$POLICY" --listen "$TG_NODE_IP:$APORT2" \
	--jwks "https://$TG_NODE_IP:$IPORT2/openid/v1/jwks" --jwks-ca "$PKI/ca.crt" \
	--jwks-token "$TG_TMP/alloc-sa-token" --tls-cert "$PKI/allocator.crt" --tls-key "$PKI/allocator.key" 2>>"$TG_TMP/allocator2.log" &
ALLOC2_PID=$!
TG_PIDS+=("$!")
AURL2=https://$TG_NODE_IP:$APORT2
a2_metric() { ACURL "$AURL2/metrics" | awk -v n="$1" '$1 == n { print $2; exit }'; }
post2() { # NODE TOKEN -> the HTTP status
	ip netns exec "$TG_PEER" curl -s -o "$TG_TMP/post.out" -w '%{http_code}' --max-time 3 --cacert "$PKI/ca.crt" \
		-X POST --data "$(report "$1")" -H "Authorization: Bearer $2" "$AURL2/v1/report"
}
keys_are() { [ "$(a2_metric tollgate_allocator_auth_keys)" = "$1" ]; }

t_begin "--jwks URL: the issuer's keys fetched with the allocator's own token, and a node's token taken"
wait_for 10 keys_are 1 || t_fail "no keys fetched: $(tail -3 "$TG_TMP/allocator2.log")"
t_expect "fetches, all with the allocator's token" "$(jq -r .authorized "$TG_TMP/issuer.log" | sort -u)" true
t_expect "node-c's report" "$(post2 node-c "$(mint --node node-c)")" 200
t_end

t_begin "the issuer rotates: a token of its new key is refused once, the set fetched again, then taken"
ROT=$TG_TMP/rotated
"$PY" "$MINT" keygen "$ROT" --also "$ISS" || t_fail "keygen"
cp "$ROT/jwks.json" "$TG_TMP/served-jwks.json"
fetches=$(grep -c . "$TG_TMP/issuer.log")
tok=$("$PY" "$MINT" mint "$ROT" --node node-c)
t_expect "the first report with the new key's token" "$(post2 node-c "$tok")" 401
grep -q 'unknown-key' "$TG_TMP/post.out" || t_fail "not refused for its key: $(cat "$TG_TMP/post.out")"
fetched_again() { [ "$(grep -c . "$TG_TMP/issuer.log")" -gt "$fetches" ] && keys_are 2; }
wait_for 5 fetched_again || t_fail "the set was not fetched again"
t_expect "the next report" "$(post2 node-c "$tok")" 200
t_end

t_begin "a key gone from the set takes its tokens with it: SIGHUP fetches the set at once"
old=$(mint --node node-d)
t_expect "node-d with the old key, still listed" "$(post2 node-d "$old")" 200
"$PY" "$MINT" keygen "$TG_TMP/rotated2" || t_fail "keygen"
cp "$TG_TMP/rotated2/jwks.json" "$TG_TMP/served-jwks.json"
# (a key it does not know fetches the set at most once per 10 s: the operator's SIGHUP now)
kill -HUP "$ALLOC2_PID"
wait_for 5 keys_are 1 || t_fail "the new set was not taken"
t_expect "node-d's old-key token, verified and remembered before" "$(post2 node-d "$old")" 401
t_expect "a token of the new key" "$(post2 node-d "$("$PY" "$MINT" mint "$TG_TMP/rotated2" --node node-d)")" 200
t_end

tap_done
