#!/usr/bin/env bash
# deploy/ is a kustomize base (deploy/base, rendered by `kubectl kustomize
# deploy/`) with an example overlay (deploy/overlays/example), the budgets
# component (deploy/components/budgets) and two etcd components; every check
# below reads what kustomize renders.
#
# The base, the base with components/budgets and the overlay render without
# a word on stderr; the agents' ConfigMap is generated from the conflist
# (tollgate-<hash>, immutable) and the DaemonSet mounts it by that name; a
# changed conflist gets another name and the DaemonSet follows it (a copy of
# deploy/ rendered with an edited conflist). Without components/budgets
# there is no allocator, no policy, no rule or alert on its or the budgets'
# series, no budgets block and no budget panel on deploy/dashboard.json; the
# component's conflist is the base's plus its budgets block, which holds how
# to reach the allocator and no budget. The DaemonSet: ClusterFirstWithHostNet on
# the host network, --node-name=$(NODE_NAME) from spec.nodeName, a bounded
# share of the nodes at a time. With components/budgets the agents' credentials:
# their ServiceAccount bound to nothing, the projected token of audience
# tollgate-allocator where budgets.tokenFile points, the allocator's CA from a
# ConfigMap where budgets.caFile points, no Secret. The allocator's
# StatefulSet (three replicas electing on etcd, no capability; HTTPS from the
# Secret tollgate-allocator-tls, the reports' tokens checked against the API
# server's JWKS read with its own token under the issuer's discovery alone,
# its own name under the headless Service advertised, etcd over https with a
# client certificate; its policy a ConfigMap of its own,
# tollgate-allocator-policy, one name and not immutable, mounted as a
# directory where --policy points, never the agents' ConfigMap; the policy's
# reportSeconds the conflist's) and its Service,
# which budgets.allocator names; components/etcd's members (TLS, client and
# peer certificates required, probes on the metrics port), and
# components/etcd-tls over the base with budgets (https, certificates in a
# Secret, the rest the component's); components/cert-manager's Certificates
# (every Secret mounted issued, the serving one naming the Service and every
# replica, two CAs, etcd's server certificate clientAuth too). The PodMonitors and the PrometheusRule:
# the release label kube-prometheus-stack selects by, the
# tollgate="agent|allocator" label on `up` that the down alerts select by (no
# rule matches on job), every alert's runbook_url and its heading in
# docs/runbook.md, the hourly-increase billing rule. The overlay's conflist,
# budgets, Prometheus label and runbook base show in its rendering; every
# conflist is one the plugin takes, every policy one the allocator takes
# (--check). The rules pass `promtool check rules` and
# `promtool test rules` (deploy/tests/rules_test.yaml: bills through a
# scale-in and a reboot, and the raw sum that drops); every query of both
# dashboards parses; every metric the rules and the dashboards read is one
# the agent or the allocator serves. Each check is shown refusing a broken
# copy.
#
# Then the rendered containers run as kubelet would run them (the command
# with $(VAR) expanded from the env, the env's fieldRefs given values, the
# resolv.conf the pod's dnsPolicy gives bind-mounted on /etc/resolv.conf, the
# ConfigMap mounted with kubelet's ..data link; only host paths and the IMDS
# address mapped into the test's), in throwaway namespaces: a node, and a
# peer standing for the rest of the cluster (the allocator's pod, its etcd,
# the cluster DNS and the node's own resolver, a small DNS server of
# deploy_check.py's). The base's agent under the runtime's confinement
# (CAP_NET_ADMIN alone, no_new_privs, root filesystem and /proc/sys
# read-only, in a private mount namespace): ready without
# deploy/90-tollgate.conf's sysctls, saying once that it left each (the
# plugin on the host raises ip_forward; a new namespace's
# conf.default.accept_source_route is 1, off its pinned 0), and with them
# set, silent about it; the installed conflist at 1.0.0, the plugin alone,
# forwards a host port into a pod (runtimeConfig.portMappings, as the
# runtime passes it for the capability the conflist declares). Then the
# example overlay's (components/budgets): its Secrets, ConfigMaps and tokens
# made as their issuers would (openssl from the overlay's Certificates, tokens
# signed as the API server signs them, its JWKS served by a stand-in API
# server to the allocator's own token); its allocator as nobody with no
# capability, its policy's ConfigMap mounted as kubelet mounts it (a
# directory, the ..data link), finding etcd (TLS, client certificates) by its
# members' names through the cluster DNS and leading; reports refused without
# a valid token (401) or for another node (403), counted; HTTPS for the
# Service's and the replica's own name, refused for another name or CA; an
# election key written without etcd's certificate refused; a report answered with the policy's budgets
# (the answer's "policy", bytes/s) and, once it names that policy, without
# them; the ConfigMap edited as kubelet applies an edit (..data swapped): the
# next answer carries the new budget, the same process; an invalid edit
# refused and counted, the policy in force kept; a pod of the budgeted
# namespace on the node; the agent of a copy without dnsPolicy (the node's
# resolv.conf) never resolves budgets.allocator and is never answered (the
# control), the namespace held at the join rate (no policy heard); the
# overlay's agent resolves it through the cluster DNS and is, over TLS with its
# projected token: the namespace "granted" on its /metrics, the allocator
# counting the report and the node, the Service's name in the handshake and
# no report readable on the wire, the policy heard kept in budgets.json.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_deploy.sh
# shellcheck disable=SC2016,SC1091,SC2034  # TG_BIN: read by lib.sh
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

DEPLOY=$TG_ROOT/deploy
OVERLAY=$DEPLOY/overlays/example
RUNBOOK=$TG_ROOT/docs/runbook.md
CHECK=$TG_LIB_DIR/deploy_check.py
AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
IPAM=$TOLLGATE_BIN_DIR/tollgate-ipam
FIX=$TG_ROOT/tests/fixtures/imds
IMDS_PORT=18084
HOSTPORT=18080

ALLOCATOR=$TOLLGATE_BIN_DIR/tollgate-allocator
for t in "$AGENT" "$ALLOCATOR" "$IPAM" "$(command -v promtool)" "$(command -v setpriv)" "$(command -v unshare)"; do
	if [ ! -x "$t" ]; then
		echo "not ok - preconditions: ${t:-promtool, setpriv or unshare} not found (make deps; make)"
		exit 1
	fi
done
# the interpreter itself, once: a version manager's shim in front of it costs
# a second or more a call on a busy machine, and the checks make many
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PY=python3
"$PY" -c 'import yaml' 2>/dev/null || {
	echo "not ok - preconditions: python3-yaml not installed (make deps)"
	exit 1
}
# deploy/ is a kustomize base: kubectl's kustomize renders it
if ! KUBECTL=$(command -v kubectl); then
	echo "not ok - preconditions: kubectl not found: deploy/ is rendered with 'kubectl kustomize' (make deps installs kubernetes-client where no kubectl is)"
	exit 1
fi
kv=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9][0-9]*\)\..*/\1/p')
if [ "${kv:-0}" -lt 5 ]; then
	kvs=${kv:+v$kv}
	echo "not ok - preconditions: $KUBECTL embeds kustomize ${kvs:-older than v5 (kubectl 1.20 has v2.0.3)}; deploy/'s overlay and components need kustomize v5 (kubectl 1.27 or later)"
	exit 1
fi
# no network namespace yet: a scratch directory (tg_cleanup removes it) until topo_up
TG_TMP=$(mktemp -d /dev/shm/tollgate-deploy.XXXXXX) || exit 1

render() { # DIR OUT: kubectl kustomize DIR into OUT, which must say nothing on stderr
	local err
	if ! err=$(kubectl kustomize "$1" 2>&1 >"$2"); then
		t_fail "kubectl kustomize $1: $err"
		return 1
	fi
	[ -z "$err" ] || t_fail "kubectl kustomize $1 warns: $err"
}
BASE=$TG_TMP/base.yaml
OVR=$TG_TMP/overlay.yaml
check() { "$PY" "$CHECK" --deploy "$DEPLOY" "$BASE" "$@"; }
checkr() { "$PY" "$CHECK" --deploy "$DEPLOY" "$@"; } # RENDERED CHECK ...
# A copy of deploy/ to break: copy_edit FILE SED-EXPR [overlay|budgets] renders
# the copy's base into $TG_TMP/copy.yaml when FILE is the base's, its example
# overlay into $TG_TMP/copy-overlay.yaml when FILE is a component's or
# `overlay` is given, and with `budgets` its base with components/budgets
# alone into $TG_TMP/copy-bud.yaml (the overlay replaces that component's
# conflist and policy with its own) (FILE relative to deploy/; every call
# starts from a fresh copy).
copy_edit() {
	rm -rf "$TG_TMP/copy"
	cp -a "$DEPLOY" "$TG_TMP/copy"
	sed -i "$2" "$TG_TMP/copy/$1"
	cmp -s "$DEPLOY/$1" "$TG_TMP/copy/$1" && t_fail "teeth: '$2' changed nothing in $1"
	case $1 in base/*) render "$TG_TMP/copy" "$TG_TMP/copy.yaml" ;; esac
	case $1:${3:-} in
	base/*:) ;;
	*:budgets)
		overlay_of "$TG_TMP/copy/overlays/bud" "$TG_TMP/copy/base" "$TG_TMP/copy/components/budgets"
		render "$TG_TMP/copy/overlays/bud" "$TG_TMP/copy-bud.yaml"
		;;
	*) render "$TG_TMP/copy/overlays/example" "$TG_TMP/copy-overlay.yaml" ;;
	esac
}
refused() { # WHAT RENDERED CHECK [ARGS]: the check must refuse RENDERED
	local what=$1
	shift
	checkr "$@" >/dev/null 2>&1 && t_fail "the $2 check took $what"
	return 0
}
# tooth WHAT RENDERED SED-EXPR CHECK [ARGS]: a copy of RENDERED broken by
# SED-EXPR, which CHECK must refuse: a check's teeth where the break is one
# of the rendering itself (no render each); teeth_judge has every tooth since
# the last judged in one process (deploy_check.py teeth)
TEETH=()
tooth() {
	local what=$1 r=$2 expr=$3 f
	shift 3
	f=$TG_TMP/bad-${#TEETH[@]}.yaml
	sed "$expr" "$r" >"$f"
	cmp -s "$r" "$f" && t_fail "teeth: '$expr' changed nothing in $(basename "$r")"
	TEETH+=("$what	$f	$*")
}
teeth_judge() {
	local what verdict n=0
	while IFS=$'\t' read -r what verdict; do
		n=$((n + 1))
		[ "$verdict" = refused ] || t_fail "the check took $what"
	done < <(printf '%s\n' "${TEETH[@]}" | "$PY" "$CHECK" teeth -)
	t_expect "teeth judged" "$n" "${#TEETH[@]}"
	TEETH=()
}
overlay_of() { # DIR BASE COMPONENT...: a kustomization in DIR of BASE and the components (paths relative, as kustomize wants)
	local dir=$1 base=$2 c
	shift 2
	mkdir -p "$dir"
	{
		echo "resources:"
		echo "  - $(realpath --relative-to="$dir" "$base")"
		echo "components:"
		for c; do echo "  - $(realpath --relative-to="$dir" "$c")"; done
	} >"$dir/kustomization.yaml"
}

# ============================================================ the manifests, rendered
BUD=$TG_TMP/budgets.yaml
t_begin "kubectl kustomize renders the base, the base with components/budgets and the overlay: every object whole; the base without allocator or etcd, the overlay with both; JSON files parse"
render "$DEPLOY" "$BASE"
render "$OVERLAY" "$OVR"
# the base and the budgets component alone, as an overlay listing only it
overlay_of "$TG_TMP/bud" "$DEPLOY/base" "$DEPLOY/components/budgets"
render "$TG_TMP/bud" "$BUD"
out=$(check parse 2>&1) || t_fail "$out"
for want in "DaemonSet/tollgate" "PodMonitor/tollgate" "PrometheusRule/tollgate"; do
	grep -qxF "$want" <<<"$out" || t_fail "the base has no $want"
done
grep -qxE 'ConfigMap/tollgate-[a-z0-9]{10}' <<<"$out" || t_fail "the base has no generated ConfigMap tollgate-<hash>"
grep -q "tollgate-etcd" <<<"$out" && t_fail "the base holds etcd (components/etcd is optional)"
grep -q "tollgate-allocator" <<<"$out" && t_fail "the base holds the allocator (components/budgets is optional)"
base_objs=$(grep -vE '^ConfigMap/' <<<"$out")
bud_objs="StatefulSet/tollgate-allocator Service/tollgate-allocator Service/tollgate-allocator-peers PodMonitor/tollgate-allocator
PodDisruptionBudget/tollgate-allocator ServiceAccount/tollgate ServiceAccount/tollgate-allocator
ClusterRoleBinding/tollgate-allocator-issuer-discovery"
out=$(checkr "$BUD" parse 2>&1) || t_fail "base and budgets: $out"
for want in $base_objs $bud_objs; do
	grep -qxF "$want" <<<"$out" || t_fail "the base with components/budgets has no $want"
done
out=$(checkr "$OVR" parse 2>&1) || t_fail "overlay: $out"
for want in $base_objs $bud_objs "StatefulSet/tollgate-etcd" "Service/tollgate-etcd" \
	"PodDisruptionBudget/tollgate-etcd" "NetworkPolicy/tollgate-etcd" Issuer/tollgate-selfsigned \
	Certificate/tollgate-allocator-ca Issuer/tollgate-allocator-ca Certificate/tollgate-allocator-tls \
	Certificate/tollgate-etcd-ca Issuer/tollgate-etcd-ca Certificate/tollgate-etcd-server \
	Certificate/tollgate-etcd-peer Certificate/tollgate-etcd-client; do
	grep -qxF "$want" <<<"$out" || t_fail "the overlay has no $want"
done
for f in "$DEPLOY/dashboard.json" "$DEPLOY/components/budgets/dashboard.json" "$DEPLOY/base/10-tollgate.conflist" \
	"$DEPLOY/components/budgets/10-tollgate.conflist" "$OVERLAY/10-tollgate.conflist" \
	"$DEPLOY/components/budgets/policy.json" "$OVERLAY/policy.json"; do
	jq -e . "$f" >/dev/null 2>&1 || t_fail "$f is not JSON"
done
# the overlay's files at its top are links into its components
for f in 10-tollgate.conflist:conflist policy.json:policy; do
	{ [ -L "$OVERLAY/${f%%:*}" ] && [ "$OVERLAY/${f%%:*}" -ef "$OVERLAY/${f#*:}/${f%%:*}" ]; } ||
		t_fail "overlays/example/${f%%:*} is not a link to ${f#*:}/${f%%:*}"
done
# the old paths are links to the files, never copies that could drift
for f in daemonset.yaml podmonitor.yaml prometheusrule.yaml 10-tollgate.conflist allocator.yaml; do
	d=base
	[ "$f" = allocator.yaml ] && d=components/budgets
	{ [ -L "$DEPLOY/$f" ] && [ "$DEPLOY/$f" -ef "$DEPLOY/$d/$f" ]; } || t_fail "deploy/$f is not a link to deploy/$d/$f"
done
t_end

t_begin "without components/budgets: no allocator, no alert or rule on the allocator's or the budgets' series, no budgets block, no budget panel; components/budgets' conflist is the base's with its budgets block"
out=$(check no-budgets 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
refused "the base with components/budgets" "$BUD" no-budgets
refused "the overlay" "$OVR" no-budgets
copy_edit base/prometheusrule.yaml 's/expr: tollgate_collector_up == 0/expr: tollgate_collector_up == 0 or tollgate_budget_state == 2/'
refused "an alert on the budgets' series in the base" "$TG_TMP/copy.yaml" no-budgets
# the component's conflist drifts from the base's nowhere but in its budgets block
t_expect "components/budgets' conflist without its budgets block" \
	"$(jq -S 'del(.plugins[].budgets)' "$DEPLOY/components/budgets/10-tollgate.conflist")" "$(jq -S . "$DEPLOY/base/10-tollgate.conflist")"
# how to reach the allocator, and no budget: those are the allocator's policy
t_expect "components/budgets' budgets block" \
	"$(checkr "$BUD" conflist | jq -c '.plugins[] | select(.type == "tollgate") | .budgets | {allocator, keys: keys}')" \
	'{"allocator":"https://tollgate-allocator.kube-system.svc:9618","keys":["allocator","caFile","fallback","leaseSeconds","reportSeconds","tokenFile"]}'
t_expect "components/budgets' policy" "$(checkr "$BUD" policy | jq -c '{version, namespaces}')" \
	'{"version":1,"namespaces":{"datasets":{"internetEgress":"20G"}}}'
t_end

t_begin "the agents' ConfigMap: generated from the conflist (tollgate-<hash>, immutable), mounted by that name by the DaemonSet (the allocator mounts its policy's alone); another conflist, another name, the DaemonSet following"
CM_NAME=$(check generated 2>&1) || t_fail "$(tr '\n' ';' <<<"$CM_NAME")"
CM_NAME=$(head -1 <<<"$CM_NAME")
check conflist | cmp -s - "$DEPLOY/base/10-tollgate.conflist" || t_fail "the ConfigMap's conflist is not deploy/base/10-tollgate.conflist"
# the name is the contents': the same bytes elsewhere, the same name ...
cp -a "$DEPLOY" "$TG_TMP/copy"
render "$TG_TMP/copy" "$TG_TMP/copy.yaml"
t_expect "an unedited copy's ConfigMap" "$(checkr "$TG_TMP/copy.yaml" generated 2>&1 | head -1)" "$CM_NAME"
# ... an edited conflist (a static pool), another name, and the DaemonSet on it
jq '(.plugins[] | select(.type == "tollgate") | .ipam) |= {source: "static", addresses: ["10.1.0.10-10.1.0.40"], exclude: ["10.1.0.11"]}' \
	"$DEPLOY/base/10-tollgate.conflist" >"$TG_TMP/copy/base/10-tollgate.conflist"
render "$TG_TMP/copy" "$TG_TMP/copy.yaml"
name2=$(checkr "$TG_TMP/copy.yaml" generated 2>&1) || t_fail "the edited copy: $(tr '\n' ';' <<<"$name2")"
name2=$(head -1 <<<"$name2")
[ "$name2" != "$CM_NAME" ] || t_fail "an edited conflist kept the ConfigMap's name $CM_NAME: no rollout"
[[ $name2 =~ ^tollgate-[a-z0-9]{10}$ ]] || t_fail "the edited copy's ConfigMap is '$name2'"
t_expect "the edited copy's pool source" "$(checkr "$TG_TMP/copy.yaml" conflist | jq -r '.plugins[0].ipam.source')" static
# with components/budgets: its own ConfigMap, the DaemonSet on it, the allocator on its policy's
out=$(checkr "$BUD" generated 2>&1) || t_fail "base and budgets: $(tr '\n' ';' <<<"$out")"
[ "$(head -1 <<<"$out")" != "$CM_NAME" ] || t_fail "components/budgets left the base's ConfigMap"
# the check has teeth: a DaemonSet naming a ConfigMap the generator does not make,
# an allocator on the agents' ConfigMap (every conflist edit would roll it)
copy_edit base/daemonset.yaml 's/configMap: { name: tollgate }/configMap: { name: tollgate-conf }/'
refused "a DaemonSet mounting another ConfigMap" "$TG_TMP/copy.yaml" generated
copy_edit components/budgets/allocator.yaml 's/configMap: { name: tollgate-allocator-policy }/configMap: { name: tollgate }/'
refused "an allocator mounting the agents' ConfigMap" "$TG_TMP/copy-overlay.yaml" generated
t_end

t_begin "the DaemonSet: hostNetwork with ClusterFirstWithHostNet, --node-name from spec.nodeName, system-node-critical, every taint, linux; mounts, probes, resources; NET_ADMIN alone; a rollout a tenth of the nodes at a time, no surge"
out=$(check daemonset 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
t_expect "maxUnavailable" "$("$PY" -c 'import sys, yaml
print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "DaemonSet")["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"])' "$BASE")" 10%
copy_edit base/daemonset.yaml 's/maxUnavailable: 10%/maxUnavailable: 100%/'
refused "every node's agent at once" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml 's/maxSurge: 0 }/maxSurge: 1 }/'
refused "a surge (two agents on one port)" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml 's/add: \[NET_ADMIN\]/add: [NET_ADMIN, SYS_ADMIN]/'
refused "a second capability" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml 's|{ name: host-root, mountPath: /host/root, readOnly: true }|{ name: host-root, mountPath: /host/root }|'
refused "the host's / mounted writable" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml 's|--host-root=/host/root|--host-root=/host|'
refused "--host-root where the host's / is not" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml '/dnsPolicy: ClusterFirstWithHostNet/d'
refused "the host network without ClusterFirstWithHostNet" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml '/- --node-name=/d'
refused "no --node-name" "$TG_TMP/copy.yaml" daemonset
copy_edit base/daemonset.yaml 's/fieldPath: spec.nodeName/fieldPath: metadata.name/'
refused "--node-name from the pod's name" "$TG_TMP/copy.yaml" daemonset
t_end

t_begin "the agents' credentials for the allocator (components/budgets): the ServiceAccount tollgate, bound to nothing; the projected token of audience tollgate-allocator where budgets.tokenFile points; the allocator's CA from a ConfigMap where budgets.caFile points; no Secret; none of it without budgets"
for r in "$BUD" "$OVR"; do
	out=$(checkr "$r" daemonset 2>&1) || t_fail "$(basename "$r"): $(tr '\n' ';' <<<"$out")"
done
t_expect "the overlay's agent mounts (PATH KIND NAME KEY)" "$(checkr "$OVR" kubelet-mounts DaemonSet/tollgate agent | grep /var/run/secrets/)" \
	"/var/run/secrets/tollgate/ca.crt configMap tollgate-allocator-ca ca.crt
/var/run/secrets/tollgate/token token tollgate-allocator -"
t_expect "the base's agent mounts no credentials" "$(check kubelet-mounts DaemonSet/tollgate agent | grep -c /var/run/secrets/)" 0
# the check has teeth: the API server's audience (an API credential), the
# token elsewhere than tokenFile, the CA from a Secret (every node could read
# it whole) or another ConfigMap, the ServiceAccount bound to a role or not
# named, the allocator reached over plain HTTP, caFile outside the mounts
tooth "a token of the API server's audience" "$OVR" 's/audience: tollgate-allocator$/audience: https:\/\/kubernetes.default.svc.cluster.local/' daemonset
tooth "a token where tokenFile does not point" "$OVR" '/audience: tollgate-allocator$/,/path: token$/s/path: token$/path: sa-token/' daemonset
tooth "the CA from a Secret" "$OVR" '/audience: tollgate-allocator$/,/name: tollgate-allocator-ca$/s/- configMap:/- secret:/' daemonset
tooth "the CA from another ConfigMap" "$OVR" '/audience: tollgate-allocator$/,/name: tollgate-allocator-ca$/s/name: tollgate-allocator-ca$/name: tollgate-allocator-tls/' daemonset
tooth "the default ServiceAccount" "$OVR" '/serviceAccountName: tollgate$/d' daemonset
tooth "the agents' ServiceAccount bound to a role" "$OVR" '$a ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: { name: tollgate-view }\nroleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view }\nsubjects: [{ kind: ServiceAccount, name: tollgate, namespace: kube-system }]' daemonset
tooth "the allocator over plain HTTP" "$OVR" 's/"allocator": "https:/"allocator": "http:/' daemonset
tooth "caFile outside the agent's mounts" "$OVR" 's/"caFile": "\/var\/run\/secrets\/tollgate\/ca.crt"/"caFile": "\/etc\/ssl\/certs\/ca-certificates.crt"/' daemonset
teeth_judge
t_end

t_begin "the DaemonSet's flags are the agent's own"
while IFS= read -r w; do
	case $w in --*) ;; *) continue ;; esac
	f=${w%%=*}
	"$AGENT" --help | grep -qE -- "(^|[[ ])$f([] =]|\$)" || t_fail "tollgate-agent --help does not know $f"
done < <(check agent-args)
# and the agent serves the probes' paths
"$AGENT" --help | grep -q 'endpoints: /metrics, /healthz, /readyz' || t_fail "the agent does not list /healthz and /readyz"
t_end

t_begin "the allocator: three replicas electing on etcd, a node each, a PodDisruptionBudget; nobody, no capability, probes; its Service is budgets.allocator; its policy a ConfigMap of its own, edited in place, mounted as a directory where --policy points; the conflist's budgets block how to reach it alone"
out=$(checkr "$BUD" allocator 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
t_expect "the allocator's --policy" "$(checkr "$BUD" allocator-args | grep -- '^--policy')" --policy=/etc/tollgate-allocator/policy.json
t_expect "its ConfigMap mounts (MOUNTPATH NAME SUBPATH)" \
	"$(checkr "$BUD" kubelet-configmaps StatefulSet/tollgate-allocator allocator)" "/etc/tollgate-allocator tollgate-allocator-policy -"
# the policy's checks have teeth: a subPath mount (kubelet never updates it),
# --policy outside the mount, the conflist again, a hashed or immutable
# ConfigMap (an edit would need a rollout, or never reach the pods), a budget
# back in the conflist, a policy whose period is not the nodes', one the
# allocator would refuse
copy_edit components/budgets/allocator.yaml \
	's|{ name: policy, mountPath: /etc/tollgate-allocator, readOnly: true }|{ name: policy, mountPath: /etc/tollgate-allocator/policy.json, subPath: policy.json, readOnly: true }|'
refused "the policy mounted with subPath" "$TG_TMP/copy-overlay.yaml" allocator
copy_edit components/budgets/allocator.yaml 's|--policy=/etc/tollgate-allocator/policy.json|--policy=/etc/tollgate/policy.json|'
refused "--policy outside the policy's mount" "$TG_TMP/copy-overlay.yaml" allocator
copy_edit components/budgets/allocator.yaml 's|--policy=/etc/tollgate-allocator/policy.json|--config=/etc/tollgate/10-tollgate.conflist|'
refused "--config instead of --policy" "$TG_TMP/copy-overlay.yaml" allocator
copy_edit components/budgets/kustomization.yaml '/disableNameSuffixHash: true/d' budgets
refused "a policy ConfigMap with a hash suffix" "$TG_TMP/copy-bud.yaml" allocator
copy_edit components/budgets/kustomization.yaml 's/^\( *\)disableNameSuffixHash: true/&\n\1immutable: true/' budgets
refused "an immutable policy ConfigMap" "$TG_TMP/copy-bud.yaml" allocator
copy_edit components/budgets/10-tollgate.conflist 's/"fallback": "10M"/"fallback": "10M", "internetEgress": {}/' budgets
refused "budgets.internetEgress in the conflist" "$TG_TMP/copy-bud.yaml" allocator
copy_edit components/budgets/policy.json 's/"reportSeconds": 1,/"reportSeconds": 2,/' budgets
refused "a policy assuming another report period" "$TG_TMP/copy-bud.yaml" allocator
copy_edit components/budgets/policy.json 's/"internetEgress"/"internetEgres"/' budgets
refused "a policy of a key the allocator does not know" "$TG_TMP/copy-bud.yaml" allocator
# the checker has teeth: replicas without the election, two on one node, or a capability, are refused
copy_edit components/budgets/allocator.yaml '/- --etcd=/d'
refused "three replicas without --etcd" "$TG_TMP/copy-overlay.yaml" allocator
copy_edit components/budgets/allocator.yaml 's/topologyKey: kubernetes.io\/hostname/topologyKey: kubernetes.io\/os/'
refused "replicas sharing a node" "$TG_TMP/copy-overlay.yaml" allocator
copy_edit components/budgets/allocator.yaml 's/capabilities: { drop: \[ALL\] }/capabilities: { drop: [ALL], add: [NET_ADMIN] }/'
refused "a capability" "$TG_TMP/copy-overlay.yaml" allocator
copy_edit components/budgets/allocator.yaml 's/maxUnavailable: 1$/maxUnavailable: 3/'
refused "a disruption budget of every replica" "$TG_TMP/copy-overlay.yaml" allocator
# trust: HTTPS with the Secret's certificate, reports checked against the
# API server's keys read with the pod's own token by an account that may read
# nothing else and taken from the agents' account alone, the replica's own
# name advertised, etcd over https with the client certificate; each shown
# refused when broken (in the rendering: no render each)
tooth "--insecure-no-auth instead of --jwks" "$OVR" 's/- --jwks=.*/- --insecure-no-auth/' allocator
tooth "a serving key outside the Secret" "$OVR" 's|--tls-key=/etc/tollgate-allocator-tls/tls.key|--tls-key=/tmp/tls.key|' allocator
tooth "the certificate mounted with subPath (no renewal reaches it)" "$OVR" 's|mountPath: /etc/tollgate-allocator-tls$|mountPath: /etc/tollgate-allocator-tls/tls.crt\n          subPath: tls.crt|' allocator
tooth "the pod's IP advertised" "$OVR" 's|--advertise=https://$(POD_NAME).tollgate-allocator-peers.kube-system.svc:9618|--advertise=https://$(POD_IP):9618|' allocator
tooth "replica names published only when ready" "$OVR" '/^  name: tollgate-allocator-peers$/,/publishNotReadyAddresses/s/publishNotReadyAddresses: true/publishNotReadyAddresses: false/' allocator
tooth "probes over plain HTTP" "$OVR" 's/scheme: HTTPS$/scheme: HTTP/' allocator
tooth "the JWKS verified with the allocator's own CA" "$OVR" 's|--jwks-ca=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt|--jwks-ca=/etc/tollgate-allocator-tls/ca.crt|' allocator
tooth "another account than the agents'" "$OVR" 's/--agent-account=kube-system:tollgate$/--agent-account=kube-system:default/' allocator
tooth "the allocator's account bound to cluster-admin" "$OVR" 's/name: system:service-account-issuer-discovery$/name: cluster-admin/' allocator
tooth "etcd over plain HTTP" "$OVR" 's|--etcd=https:|--etcd=http:|' allocator
tooth "etcd's client key from the serving Secret" "$OVR" 's|--etcd-key=/etc/tollgate-etcd/tls.key|--etcd-key=/etc/tollgate-allocator-tls/tls.key|' allocator
teeth_judge
t_end

TLS=$TG_TMP/tls.yaml
t_begin "components/etcd: three members on three nodes, a quorum kept through drains, the allocator's --etcd names them; components/etcd-tls over the base is whole"
out=$(checkr "$OVR" etcd 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
copy_edit components/etcd/etcd.yaml 's/tollgate-etcd-2=https:\/\/tollgate-etcd-2/tollgate-etcd-2=https:\/\/tollgate-etcd-9/'
refused "a wrong --initial-cluster" "$TG_TMP/copy-overlay.yaml" etcd
tooth "members taking clients without a certificate" "$OVR" '/- --client-cert-auth$/d' etcd
tooth "members taking peers without a certificate" "$OVR" '/- --peer-client-cert-auth$/d' etcd
tooth "members serving plain HTTP" "$OVR" 's|--listen-client-urls=https://|--listen-client-urls=http://|' etcd
tooth "probes on the client port (kubelet has no certificate)" "$OVR" 's/^\( *\)port: 2381$/\1port: 2379/' etcd
# an overlay of the base with the TLS component, as a cluster's own would be
overlay_of "$TG_TMP/tls" "$DEPLOY/base" "$DEPLOY/components/budgets" "$DEPLOY/components/etcd-tls"
render "$TG_TMP/tls" "$TLS"
out=$(checkr "$TLS" etcd-tls "$BUD" 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
out=$(checkr "$TLS" allocator 2>&1) || t_fail "the patched allocator: $(tr '\n' ';' <<<"$out")"
copy_edit components/etcd-tls/allocator-etcd-tls.yaml 's/--etcd-key=\/etc\/tollgate-etcd/--etcd-key=\/tmp/'
overlay_of "$TG_TMP/copy/overlays/tls" "$TG_TMP/copy/base" "$TG_TMP/copy/components/budgets" "$TG_TMP/copy/components/etcd-tls"
render "$TG_TMP/copy/overlays/tls" "$TG_TMP/copy-tls.yaml"
refused "a key outside the Secret" "$TG_TMP/copy-tls.yaml" etcd-tls "$BUD"
refused "the overlay's own etcd for a cluster's" "$OVR" etcd-tls "$BUD"
# every flag of the members is one Debian's etcd knows
if [ -x /usr/bin/etcd ]; then
	while IFS= read -r w; do
		case $w in --*) ;; *) continue ;; esac
		/usr/bin/etcd --help 2>&1 | grep -qE -- "^[[:space:]]*${w%%=*}( |$)" || t_fail "etcd --help does not know ${w%%=*}"
	done < <(checkr "$OVR" etcd-args)
else
	t_fail "/usr/bin/etcd missing (make deps: etcd-server)"
fi
teeth_judge
t_end

t_begin "the StatefulSet's flags are the allocator's own (and components/etcd-tls's)"
while IFS= read -r w; do
	case $w in --*) ;; *) continue ;; esac
	"$ALLOCATOR" --help | grep -qE -- "(^|[[ ])${w%%=*}([] =]|\$)" || t_fail "tollgate-allocator --help does not know ${w%%=*}"
done < <(checkr "$BUD" allocator-args)
n=0
while IFS= read -r w; do
	case $w in --*) ;; *) continue ;; esac
	n=$((n + 1))
	"$ALLOCATOR" --help | grep -qE -- "(^|[[ ])${w%%=*}([] =]|\$)" || t_fail "tollgate-allocator --help does not know ${w%%=*} (components/etcd-tls)"
done < <(checkr "$TLS" allocator-args)
[ "$n" -ge 8 ] || t_fail "only $n flags in the TLS rendering's command"
"$ALLOCATOR" --help | grep -q 'endpoints: POST /v1/report, /metrics, /healthz, /readyz' || t_fail "the allocator does not list its endpoints"
t_end

t_begin "components/cert-manager: every Secret the allocator and etcd mount is a Certificate's; the serving one names the Service and every replica, no IP; the allocator's CA signs it alone; etcd's server certificate serves clientAuth and names the members"
out=$(checkr "$OVR" certificates 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
refused "components/budgets without components/cert-manager" "$BUD" certificates
# the serving certificate drops its wildcard in the source (the check reads
# the Certificate kustomize renders); the others in the rendering
copy_edit components/cert-manager/certificates.yaml '/- "\*.tollgate-allocator-peers.kube-system.svc"$/d'
refused "a serving certificate without the replicas' names" "$TG_TMP/copy-overlay.yaml" certificates
tooth "etcd's server certificate from the allocator's CA" "$OVR" '/^  name: tollgate-etcd-server$/,/^    name: tollgate-etcd-ca$/s/name: tollgate-etcd-ca$/name: tollgate-allocator-ca/' certificates
tooth "etcd's server certificate without clientAuth" "$OVR" '/^  name: tollgate-etcd-server$/,/^  - client auth$/{/^  - client auth$/d}' certificates
tooth "a ClusterIssuer" "$OVR" '/^  name: tollgate-allocator-tls$/,/kind: Issuer$/s/kind: Issuer$/kind: ClusterIssuer/' certificates
teeth_judge
t_end

t_begin "PodMonitors (honorLabels, node label, the target's namespace dropped, tollgate= on up alone; the allocator's), release labels, alerts (severity, summary, runbook_url, up selected without job), the billing rule"
out=$(check monitoring 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
out=$(checkr "$BUD" monitoring 2>&1) || t_fail "base and budgets: $(tr '\n' ';' <<<"$out")"
refused "the base's release label for another" "$BASE" monitoring --release prometheus
copy_edit components/budgets/podmonitor.yaml 's/replacement: allocator/replacement: node/'
refused "the allocator's targets without tollgate=allocator" "$TG_TMP/copy-overlay.yaml" monitoring --release prometheus --runbook-base https://runbooks.example.internal/tollgate
tooth "the allocator scraped over plain HTTP" "$OVR" '/scheme: https$/d' monitoring --release prometheus --runbook-base https://runbooks.example.internal/tollgate
tooth "the allocator's certificate not verified" "$OVR" 's/serverName: tollgate-allocator.kube-system.svc/insecureSkipVerify: true/' monitoring --release prometheus --runbook-base https://runbooks.example.internal/tollgate
copy_edit base/podmonitor.yaml '0,/replacement: agent/s//replacement: node/'
refused "agents' targets without tollgate=agent" "$TG_TMP/copy.yaml" monitoring
copy_edit base/podmonitor.yaml '0,/- regex: tollgate/s//- regex: tollgate_x/'
refused "tollgate= left on the page's samples" "$TG_TMP/copy.yaml" monitoring
copy_edit base/prometheusrule.yaml 's/expr: up{tollgate="agent"} == 0/expr: up{job="kube-system\/tollgate"} == 0/'
refused "an alert on the job's name" "$TG_TMP/copy.yaml" monitoring
copy_edit base/prometheusrule.yaml '0,/^ *runbook_url: .*/{//d}'
refused "an alert without runbook_url" "$TG_TMP/copy.yaml" monitoring
copy_edit base/prometheusrule.yaml 's/runbook.md#tollgatepoolexhausted/runbook.md#pool-exhausted/'
refused "a runbook_url of another anchor" "$TG_TMP/copy.yaml" monitoring
copy_edit base/prometheusrule.yaml 's/(increase(tollgate_namespace_bytes_total\[1h\]))$/(tollgate_namespace_bytes_total)/'
refused "bills from the raw counters' sum" "$TG_TMP/copy.yaml" monitoring
teeth_judge
t_end

t_begin "every alert's runbook_url anchor is a heading in docs/runbook.md"
out=$(check runbook "$RUNBOOK" 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
out=$(checkr "$BUD" runbook "$RUNBOOK" 2>&1) || t_fail "components/budgets: $(tr '\n' ';' <<<"$out")"
# the check has teeth: a runbook with every alert's heading is taken, one without one is not
check rules "$TG_TMP/alerts.yaml"
"$PY" -c 'import sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for r in g["rules"]:
        if "alert" in r: print("### %s\n\nWhat to do.\n" % r["alert"])' "$TG_TMP/alerts.yaml" >"$TG_TMP/runbook.md"
check runbook "$TG_TMP/runbook.md" >/dev/null 2>&1 || t_fail "the check refused a runbook with every heading"
sed -i '/^### TollgateAgentDown$/d' "$TG_TMP/runbook.md"
refused "a runbook without TollgateAgentDown's heading" "$BASE" runbook "$TG_TMP/runbook.md"
t_end

t_begin "the example overlay: its conflist (another ConfigMap, the DaemonSet on it), pool and budgets block; its policy (the allocator's ConfigMap); the Prometheus label; the runbook base; the base's checks hold"
name_ov=$(checkr "$OVR" generated 2>&1) || t_fail "$(tr '\n' ';' <<<"$name_ov")"
name_ov=$(head -1 <<<"$name_ov")
[ "$name_ov" != "$CM_NAME" ] || t_fail "the overlay's ConfigMap has the base's name"
checkr "$OVR" conflist >"$TG_TMP/overlay.conflist"
cmp -s "$TG_TMP/overlay.conflist" "$OVERLAY/10-tollgate.conflist" || t_fail "the overlay's ConfigMap is not its 10-tollgate.conflist"
TGE='.plugins[] | select(.type == "tollgate")'
t_expect "overlay ipam" "$(jq -c "$TGE | .ipam | {source, exclude}" "$TG_TMP/overlay.conflist")" '{"source":"imds","exclude":["10.1.0.250"]}'
t_expect "overlay budgets" "$(jq -c "$TGE | .budgets | {fallback, keys: keys}" "$TG_TMP/overlay.conflist")" \
	'{"fallback":"50M","keys":["allocator","caFile","fallback","leaseSeconds","reportSeconds","tokenFile"]}'
checkr "$OVR" policy | cmp -s - "$OVERLAY/policy.json" || t_fail "the overlay's tollgate-allocator-policy is not its policy.json"
t_expect "overlay policy" "$(checkr "$OVR" policy | jq -c .namespaces)" \
	'{"datasets":{"internetEgress":"20G"},"crawl":{"internetEgress":"2G"}}'
t_expect "overlay metricsNamespaces" "$(jq -c "$TGE | .nodeAccess.metricsNamespaces" "$TG_TMP/overlay.conflist")" '["prometheus"]'
# the rest is the base's: a copy drifting from it would hide a change of the base
strip="($TGE) |= (del(.ipam.exclude) | del(.budgets.fallback) | del(.nodeAccess.metricsNamespaces) | del(.nodeAccess.servicePorts[0].namespaces))"
[ "$(jq -S "$strip" "$TG_TMP/overlay.conflist")" = "$(checkr "$BUD" conflist | jq -S "$strip")" ] ||
	t_fail "the overlay's conflist differs from components/budgets' beyond its changes: $(diff <(checkr "$BUD" conflist | jq -S "$strip") <(jq -S "$strip" "$TG_TMP/overlay.conflist") | head -6 | tr '\n' ' ')"
OV_RB=https://runbooks.example.internal/tollgate
out=$(checkr "$OVR" monitoring --release prometheus --runbook-base "$OV_RB" 2>&1) || t_fail "$(tr '\n' ';' <<<"$out")"
refused "the overlay as the base (its release label and runbooks unchanged)" "$OVR" monitoring
for c in daemonset allocator; do
	out=$(checkr "$OVR" "$c" 2>&1) || t_fail "overlay, $c: $(tr '\n' ';' <<<"$out")"
done
t_end

t_begin "the plugin takes the rendered conflists (base, overlay, the static-pool copy); a wrong rate it refuses"
for r in "$BASE" "$BUD" "$OVR"; do
	checkr "$r" conflist >"$TG_TMP/v.conflist"
	out=$("$IPAM" validate "$TG_TMP/v.conflist" 2>&1) || t_fail "$(basename "$r"): $out"
done
jq '(.plugins[] | select(.type == "tollgate") | .ipam) |= {source: "static", addresses: ["10.1.0.10-10.1.0.40"], exclude: ["10.1.0.11"]}' \
	"$OVERLAY/10-tollgate.conflist" >"$TG_TMP/v.conflist"
out=$("$IPAM" validate "$TG_TMP/v.conflist" 2>&1) || t_fail "a static pool: $out"
jq "($TGE | .budgets.fallback) = \"10Mbps\"" "$OVERLAY/10-tollgate.conflist" >"$TG_TMP/v.conflist"
out=$("$IPAM" validate "$TG_TMP/v.conflist" 2>&1) && t_fail "validate took fallback 10Mbps: $out"
grep -q 'budgets.fallback' <<<"$out" || t_fail "the refusal does not name the key: $out"
# an overlay of an older release, its budgets still in the conflist: refused, pointing at the policy
jq "($TGE | .budgets.internetEgress) = {datasets: \"20G\"}" "$OVERLAY/10-tollgate.conflist" >"$TG_TMP/v.conflist"
out=$("$IPAM" validate "$TG_TMP/v.conflist" 2>&1) && t_fail "validate took budgets.internetEgress: $out"
{ grep -q 'internetEgress' <<<"$out" && grep -qi 'policy' <<<"$out"; } ||
	t_fail "the refusal of budgets.internetEgress does not point at the allocator's policy: $out"
t_end

t_begin "the allocator takes the rendered policies (components/budgets', the overlay's) as it would at a reload (--check); one it would refuse, it refuses"
for r in "$BUD" "$OVR"; do
	checkr "$r" policy >"$TG_TMP/p.json" || t_fail "no policy in $(basename "$r")"
	out=$("$ALLOCATOR" --check --policy "$TG_TMP/p.json" 2>&1) || t_fail "$(basename "$r"): $out"
	grep -q ': accepted (policy [0-9a-f]\{16\}, ' <<<"$out" || t_fail "$(basename "$r"): $out"
done
# a download budget beside the upload one is a policy too
checkr "$OVR" policy | jq '.namespaces.datasets.internetIngress = "1G"' >"$TG_TMP/p.json"
out=$("$ALLOCATOR" --check --policy "$TG_TMP/p.json" 2>&1) || t_fail "--check refused internetIngress: $out"
grep -q ': accepted (policy [0-9a-f]\{16\}, ' <<<"$out" || t_fail "internetIngress: $out"
checkr "$OVR" policy | jq '.destinations = {prefixLength: 24}' >"$TG_TMP/p.json"
out=$("$ALLOCATOR" --check --policy "$TG_TMP/p.json" 2>&1) && t_fail "--check took destinations: $out"
grep -q 'refused.*destinations' <<<"$out" || t_fail "the refusal does not name the key: $out"
t_end

t_begin "the ConfigMap's conflist says cniVersion 1.0.0, every plugin at it"
check conflist >"$TG_TMP/cm.conflist" || t_fail "no conflist in the ConfigMap"
t_expect cniVersion "$(jq -r .cniVersion "$TG_TMP/cm.conflist")" 1.0.0
t_expect "plugins" "$(jq -c '[.plugins[].type]' "$TG_TMP/cm.conflist")" '["tollgate"]'
t_expect "capabilities" "$(jq -c '.plugins[0].capabilities' "$TG_TMP/cm.conflist")" \
	'{"bandwidth":true,"portMappings":true,"io.kubernetes.cri.pod-annotations":true}'
t_expect "the overlay's cniVersion" "$(jq -r .cniVersion "$TG_TMP/overlay.conflist")" 1.0.0
t_end

# ============================================================ rules and dashboard
set_expr() { # IN OUT RULE EXPR: the rules file IN with RULE's (alert or record) expression replaced
	"$PY" -c 'import sys, yaml
src, dst, name, expr = sys.argv[1:]
r = yaml.safe_load(open(src))
n = 0
for g in r["groups"]:
    for x in g["rules"]:
        if name in (x.get("alert"), x.get("record")):
            x["expr"] = expr
            n += 1
assert n == 1, "%s: %d rules" % (name, n)
yaml.safe_dump(r, open(dst, "w"), sort_keys=False)' "$@"
}
t_begin "promtool check rules and promtool test rules on the PrometheusRule's spec (base, base with components/budgets, overlay); the tests refuse the raw sum and a job-bound agent alert"
mkdir -p "$TG_TMP/rules"
# the base's rules and components/budgets' (rules_test.yaml tests both)
checkr "$BUD" rules "$TG_TMP/rules/rules.yaml" || t_fail "cannot extract the rules"
check rules "$TG_TMP/rules/base.yaml" || t_fail "cannot extract the base's rules"
out=$(promtool check rules "$TG_TMP/rules/base.yaml" 2>&1) || t_fail "check rules (base): $out"
cp "$DEPLOY/tests/rules_test.yaml" "$TG_TMP/rules/"
out=$(cd "$TG_TMP/rules" && promtool check rules rules.yaml 2>&1) || t_fail "check rules: $out"
n=$("$PY" -c 'import sys, yaml; print(sum(len(g["rules"]) for g in yaml.safe_load(open(sys.argv[1]))["groups"]))' \
	"$TG_TMP/rules/rules.yaml")
grep -q "SUCCESS: $n rules found" <<<"$out" || t_fail "check rules: $out (expected $n rules)"
if out=$(cd "$TG_TMP/rules" && promtool test rules rules_test.yaml 2>&1); then
	grep -q SUCCESS <<<"$out" || t_fail "test rules: $out"
else
	t_fail "test rules: $(tail -20 <<<"$out")"
fi
checkr "$OVR" rules "$TG_TMP/rules/overlay.yaml" || t_fail "cannot extract the overlay's rules"
out=$(promtool check rules "$TG_TMP/rules/overlay.yaml" 2>&1) || t_fail "check rules (overlay): $out"
n=$("$PY" -c 'import sys, yaml; print(sum(len(g["rules"]) for g in yaml.safe_load(open(sys.argv[1]))["groups"]))' \
	"$TG_TMP/rules/overlay.yaml")
grep -q "SUCCESS: $n rules found" <<<"$out" || t_fail "check rules (overlay): $out (expected $n rules)"
grep -q 'name: tollgate.budgets' "$TG_TMP/rules/overlay.yaml" || t_fail "the overlay's rules have no budgets group"
# the checker has teeth: a broken expression and a wrong expectation fail
printf 'groups:\n- name: x\n  rules:\n  - record: a:b:c\n    expr: sum by (namespace (x)\n' >"$TG_TMP/rules/broken.yaml"
promtool check rules "$TG_TMP/rules/broken.yaml" >/dev/null 2>&1 && t_fail "promtool accepted a broken expression"
sed 's/value: 3000000$/value: 2000000/' "$DEPLOY/tests/rules_test.yaml" >"$TG_TMP/rules/wrong_test.yaml"
cmp -s "$DEPLOY/tests/rules_test.yaml" "$TG_TMP/rules/wrong_test.yaml" && t_fail "teeth: the wrong expectation changed nothing"
(cd "$TG_TMP/rules" && promtool test rules wrong_test.yaml >/dev/null 2>&1) && t_fail "promtool test rules passed a wrong expectation"
# the billing tests fail on the raw counters' sum, which drops at the scale-in and the reboot
ctl() { # RULE EXPR WHAT: rules_test.yaml must fail with RULE's expression so
	set_expr "$TG_TMP/rules/rules.yaml" "$TG_TMP/rules/ctl.yaml" "$1" "$2" || { t_fail "teeth: cannot set $1"; return; }
	sed 's/^rule_files: \[rules.yaml\]$/rule_files: [ctl.yaml]/' "$TG_TMP/rules/rules_test.yaml" >"$TG_TMP/rules/ctl_test.yaml"
	if out=$(cd "$TG_TMP/rules" && promtool test rules ctl_test.yaml 2>&1); then
		t_fail "promtool test rules passed $3"
	else
		grep -q "$4" <<<"$out" || t_fail "$3 failed elsewhere than $4: $(head -5 <<<"$out" | tr '\n' ' ')"
	fi
}
ctl namespace:tollgate_namespace_bytes:increase1h 'sum by (namespace, direction, traffic) (tollgate_namespace_bytes_total)' \
	"bills from the raw counters' sum" 'sum_over_time(namespace:tollgate_namespace_bytes:increase1h'
ctl TollgateAgentDown 'up{job="kube-system/tollgate"} == 0' "an agent-down alert on the job's name" 'alertname: TollgateAgentDown'
ctl TollgateAgentDown 'up == 0' "an agent-down alert on every target" 'alertname: TollgateAgentDown'
t_end

t_begin "every dashboard query parses (promtool, as recording rules); every recorded name it reads is recorded"
n=$(check dashboard-rules "$TG_TMP/rules/dashboard.yaml") || t_fail "cannot read the dashboard's queries"
[ "${n:-0}" -ge 10 ] || t_fail "only ${n:-0} queries found"
out=$(promtool check rules "$TG_TMP/rules/dashboard.yaml" 2>&1) || t_fail "$out"
grep -q "SUCCESS: $n rules found" <<<"$out" || t_fail "$out"
undefined=$(checkr "$OVR" undefined)
[ -z "$undefined" ] || t_fail "read but never recorded: $(tr '\n' ' ' <<<"$undefined")"
for f in "$DEPLOY/dashboard.json" "$DEPLOY/components/budgets/dashboard.json"; do
	jq -e '.panels | length > 0 and all(.[]; .type == "row" or (.targets | length > 0))' "$f" >/dev/null ||
		t_fail "$f: a panel without a query"
done
t_expect "the dashboards' uids" "$(jq -r .uid "$DEPLOY/dashboard.json" "$DEPLOY/components/budgets/dashboard.json" | sort -u | wc -l)" 2
t_end
rm -rf "$TG_TMP"
TG_TMP=""

# ============================================================ the containers, as kubelet runs them
# Every daemon runs the rendered container's command as kubelet would: $(VAR)
# expanded from its env, the env's fieldRefs from the values below, the
# resolv.conf its dnsPolicy gives, the ConfigMap's conflist as kubelet mounts
# it (only the host's paths and the IMDS address moved into the test's).
#
# The Secrets, ConfigMaps and tokens kubelet would mount are made here as
# their issuers make them: the certificates with openssl from what the
# overlay's cert-manager Certificates say (names, usages), the tokens signed
# as the API server signs a projected token (sa_token.py), the
# JWKS as it publishes its keys, served by a stand-in API server that wants
# the allocator's own token.
#
#   node netns (the node; hostNetwork)            peer netns (another node: pods and services)
#   eth0 10.0.0.1, 10.0.0.4 (status.hostIP)       10.2.0.5   the allocator's pod (status.podIP)
#   tollgate-agent $(NODE_IP):9617                10.2.0.6   its etcd (one member for the three names)
#   fake IMDS 127.0.0.1                           10.2.0.10  the cluster DNS: tollgate-allocator.kube-system
#   pods 10.1.0.x                                            .svc.cluster.local -> 10.2.0.5 (its Service,
#                                                            kube-proxy's work done), the replica's own name
#                                                            -> 10.2.0.5, the etcd names -> 10.2.0.6,
#                                                            kubernetes.default.svc.cluster.local -> 10.2.0.1
#                                                 10.2.0.1   the API server: /openid/v1/jwks on :443
#                                                 10.2.0.53  the node's own resolver (the cloud's): it knows
#                                                            no cluster name
NODE_NAME=aks-deploy-vmss000007 # spec.nodeName: not this host's name, so --node-name shows
CLUSTER_DNS=10.2.0.10 NODE_DNS=10.2.0.53 ETCD_IP=10.2.0.6 ALLOC_IP=$TG_PEER_POD_IP API_IP=10.2.0.1
AGENT_FIELDS=(--field spec.nodeName="$NODE_NAME" --field status.hostIP=10.0.0.4 --field status.podIP=10.0.0.4
	--field metadata.namespace=kube-system --field metadata.name=tollgate-x7k2p)
ALLOC_FIELDS=(--field spec.nodeName=aks-deploy-vmss000001 --field status.hostIP=10.0.1.1
	--field status.podIP="$ALLOC_IP" --field metadata.namespace=kube-system --field metadata.name=tollgate-allocator-0)
SVC=tollgate-allocator.kube-system.svc.cluster.local
# the replica's own name, as --advertise names it
PEER_NAME=tollgate-allocator-0.tollgate-allocator-peers.kube-system.svc
t_begin topology
topo_up || tap_bail "could not build the namespace topology"
BASE=$TG_TMP/base.yaml OVR=$TG_TMP/overlay.yaml
render "$DEPLOY" "$BASE" || tap_bail "kubectl kustomize $DEPLOY failed"
render "$OVERLAY" "$OVR" || tap_bail "kubectl kustomize $OVERLAY failed"
ip -n "$TG_NODE" link set eth0 address 00:0d:3a:f8:06:ec || tap_bail "cannot set the MAC"
ip -n "$TG_NODE" addr add 10.0.0.4/24 dev eth0 || tap_bail "cannot add 10.0.0.4"
# the fabric learnt the node's old MAC in topo_up
ip -n "$TG_FABRIC" neigh flush dev node0
ILOG=$TG_TMP/imds.log
: >"$ILOG"
tg_imds_start "$TG_NODE" "$IMDS_PORT" --fixture "$FIX/one_nic.json" --log "$ILOG"
for a in "$ETCD_IP" "$CLUSTER_DNS" "$NODE_DNS" "$API_IP"; do
	ip -n "$TG_PEER" addr add "$a/32" dev lo || tap_bail "cannot add $a to the peer"
done
DNSLOG=$TG_TMP/dns.log
: >"$DNSLOG"
zone="$SVC:$ALLOC_IP,$PEER_NAME.cluster.local:$ALLOC_IP,kubernetes.default.svc.cluster.local:$API_IP"
for i in 0 1 2; do zone+=",tollgate-etcd-$i.tollgate-etcd.kube-system.svc.cluster.local:$ETCD_IP"; done
ip netns exec "$TG_PEER" "$PY" "$CHECK" dns-serve "$DNSLOG" "$CLUSTER_DNS=$zone" "$NODE_DNS=" 2>"$TG_TMP/dns.err" &
TG_PIDS+=("$!")
wait_for 10 grep -q '^# serving$' "$DNSLOG" || tap_bail "the DNS server did not start: $(cat "$TG_TMP/dns.err")"
# the node's /etc/resolv.conf, as a cloud's DHCP writes it
printf 'nameserver %s\nsearch internal.cloudapp.net\n' "$NODE_DNS" >"$TG_TMP/node-resolv.conf"
t_end

NETD=$TG_TMP/net.d CNIBIN=$TG_TMP/cni-bin ALOG=$TG_TMP/agent.log
mkdir -p "$NETD" "$CNIBIN"
mount_conflist() { # RENDERED DIR: the rendering's ConfigMap as kubelet mounts it in DIR (..data link)
	mkdir -p "$2/..v1"
	# the agent's credentials (budgets.tokenFile, caFile) where the test's
	# kubelet mounts them: under $AGENT_ROOT
	checkr "$1" conflist | jq --arg dd "$TG_TMP/data" --arg lf "$TG_TMP/tollgate.log" \
		--arg u "http://127.0.0.1:$IMDS_PORT" --arg r "$TG_TMP/root-agent" \
		'(.plugins[] | select(.type == "tollgate")) |= (.dataDir = $dd | .logFile = $lf | .ipam.imdsURL = $u
		| if .budgets then .budgets.tokenFile |= $r + . | .budgets.caFile |= $r + . else . end)' \
		>"$2/..v1/10-tollgate.conflist"
	ln -sfn ..v1 "$2/..data"
	ln -sfn ..data/10-tollgate.conflist "$2/10-tollgate.conflist"
}
CM=$TG_TMP/etc-tollgate
mount_conflist "$BASE" "$CM"
NET=$(jq -r .name "$CM/10-tollgate.conflist")

# agent_args RENDERED: the DaemonSet's agent command as kubelet runs it (ARGS),
# its paths mapped, and the resolv.conf its dnsPolicy gives ($TG_TMP/agent-resolv.conf)
ARGS=()
agent_args() {
	local w
	ARGS=()
	while IFS= read -r w; do
		case $w in
		tollgate-agent) w=$AGENT ;;
		--config=/etc/tollgate/*) w=--config=$CM/${w#--config=/etc/tollgate/} ;;
		--cni-conf-dir=/host/etc/cni/net.d) w=--cni-conf-dir=$NETD ;;
		--cni-bin-dir=/host/opt/cni/bin) w=--cni-bin-dir=$CNIBIN ;;
		--plugin=*) w=--plugin=$TOLLGATE_BIN_DIR/tollgate ;;
		--host-root=/host/root) w=--host-root=/ ;; # this machine is the host
		*'$('*) tap_bail "the DaemonSet's argument '$w' names a variable its env does not set" ;;
		*/*) tap_bail "the DaemonSet's argument '$w' has a path this test does not map" ;;
		esac
		ARGS+=("$w")
	done < <(checkr "$1" kubelet-command DaemonSet/tollgate agent "${AGENT_FIELDS[@]}")
	[ "${#ARGS[@]}" -ge 5 ] || tap_bail "no agent command in $1"
	checkr "$1" kubelet-resolv DaemonSet/tollgate kube-system "$CLUSTER_DNS" "$TG_TMP/node-resolv.conf" \
		>"$TG_TMP/agent-resolv.conf" || tap_bail "no resolv.conf for $1's DaemonSet"
}
agent_args "$BASE"

# The runtime's confinement: a mount namespace of its own whose root and
# /proc/sys are read-only (the test's directories are on /dev/shm, as the
# DaemonSet's are host mounts) and whose /etc/resolv.conf is the pod's, the
# bounding set CAP_NET_ADMIN alone, no_new_privs (allowPrivilegeEscalation: false).
AGENT_PID=""
agent_start() {
	ip netns exec "$TG_NODE" unshare -m --propagation private sh -c '
		mount --bind "$1" /etc/resolv.conf && shift &&
		mount -o remount,bind,ro / &&
		mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys &&
		exec setpriv --bounding-set -all,+net_admin --inh-caps -all --no-new-privs "$@"' \
		agent "$TG_TMP/agent-resolv.conf" "${ARGS[@]}" 2>>"$ALOG" &
	AGENT_PID=$!
	TG_PIDS+=("$AGENT_PID")
}
agent_stop() {
	kill -TERM "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
}
# the agent listens where the DaemonSet says: $(NODE_IP):9617
http_get() { ip netns exec "$TG_NODE" curl -s -o "$TG_TMP/http.out" -w '%{http_code}' --max-time 2 "http://10.0.0.4:9617$1"; }
ready() { [ "$(http_get /readyz)" = 200 ]; }
up() { [ "$(http_get /healthz)" = 200 ]; }

t_begin "under the DaemonSet's confinement, without the node's sysctls: ready, the read-only ones left and said so once"
root_opts=$(findmnt -n -o OPTIONS /)
ip netns exec "$TG_NODE" sysctl -qw net.ipv4.ip_forward=0
agent_start
wait_for 10 up || t_fail "/healthz does not answer: $(tail -3 "$ALOG")"
wait_for 40 ready || t_fail "not ready within 40 s: $(tail -3 "$ALOG")"
t_expect "read-only sysctl warnings" "$(grep -c 'below its floor and /proc/sys is read-only' "$ALOG")" 1
t_expect "read-only pinned sysctl warnings" "$(grep -c 'off its pinned value and /proc/sys is read-only' "$ALOG")" 1
# /readyz names them, and this machine's libraries are the plugin's: nothing else
http_get /readyz >/dev/null
t_expect "/readyz body" "$(cat "$TG_TMP/http.out")" "ready
net.ipv4.ip_forward is 0, below 1, and the agent cannot raise it (/proc/sys is read-only here): the plugin raises it at its next ADD on the host; set it at boot with deploy/90-tollgate.conf in /etc/sysctl.d
net.ipv4.conf.default.accept_source_route is 1, not 0, and the agent cannot set it (/proc/sys is read-only here): nothing sets it (the node forwards source-routed packets where their sender says); set it at boot with deploy/90-tollgate.conf in /etc/sysctl.d"
t_expect "library checks" "$(grep -c 'cannot load on this host\|host.s root cannot be read' "$ALOG")" 0
t_expect "ip_forward (left to the plugin)" "$(ip netns exec "$TG_NODE" sysctl -n net.ipv4.ip_forward)" 0
cmp -s "$NETD/10-tollgate.conflist" "$CM/10-tollgate.conflist" || t_fail "the conflist was not installed as given"
cmp -s "$CNIBIN/tollgate" "$TOLLGATE_BIN_DIR/tollgate" || t_fail "the plugin was not installed"
# the confinement is the agent's alone
t_expect "the host's / options" "$(findmnt -n -o OPTIONS /)" "$root_opts"
awk '$5 == "/" { print $6 }' "/proc/$AGENT_PID/mountinfo" | grep -q '^ro\b' || t_fail "the agent's / is not read-only"
grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$AGENT_PID/status" || t_fail "no_new_privs not set"
t_expect "bounding set" "$(awk '/^CapBnd/ {print $2}' "/proc/$AGENT_PID/status")" 0000000000001000
t_end

t_begin "deploy/90-tollgate.conf on the node: the agent, restarted, has nothing to leave"
ip netns exec "$TG_NODE" sysctl -q -e -p "$DEPLOY/90-tollgate.conf" 2>/dev/null
t_expect "ip_forward" "$(ip netns exec "$TG_NODE" sysctl -n net.ipv4.ip_forward)" 1
kill -TERM "$AGENT_PID" 2>/dev/null
wait "$AGENT_PID" 2>/dev/null
: >"$ALOG"
agent_start
wait_for 40 ready || t_fail "not ready within 40 s: $(tail -3 "$ALOG")"
t_expect "read-only sysctl warnings" "$(grep -c 'below its floor\|off its pinned value' "$ALOG")" 0
http_get /readyz >/dev/null
t_expect "/readyz body" "$(cat "$TG_TMP/http.out")" ready
t_end

# ------------------------------------------------------------ the installed conflist at 1.0.0
TG_BIN=$CNIBIN/tollgate
entry() { # INDEX: the list's entry as a runtime hands it to the plugin
	jq -c --argjson i "$1" '.plugins[$i] + {name: .name, cniVersion: .cniVersion}' "$NETD/10-tollgate.conflist"
}
WEB_CONF=$(entry 0 | jq -c --argjson p "$HOSTPORT" '. + {runtimeConfig: {portMappings: [{hostPort: $p, containerPort: 80, protocol: "tcp"}]}}')

t_begin "the installed conflist at 1.0.0, the plugin alone: a host port reaches the pod"
pod_add web team-a "$WEB_CONF" || t_fail "tollgate ADD rc=$TG_RC $TG_OUT"
t_expect "result cniVersion" "$(jq -r .cniVersion <<<"$TG_OUT")" 1.0.0
# a one-line HTTP answer (http.server would look the address up in DNS first)
ip netns exec "$TG_ID-web" "$PY" -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 80))
s.listen(8)
while True:
    c, _ = s.accept()
    try:
        c.settimeout(2)
        if c.recv(4096):
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nweb\n")
    except OSError:
        pass
    c.close()' "${POD_IP[web]:-0.0.0.0}" >"$TG_TMP/web.log" 2>&1 &
TG_PIDS+=($!)
served() { ip netns exec "$TG_ID-web" bash -c "exec 3<>/dev/tcp/${POD_IP[web]}/80" 2>/dev/null; }
wait_for 10 served || t_fail "the pod's server did not start: $(tail -3 "$TG_TMP/web.log")"
# from the peer node to this node's port: Tollgate's DNAT to the pod
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://$TG_NODE_IP:$HOSTPORT/")
t_expect "peer -> node:$HOSTPORT -> pod:80" "$code" 200
[ "$code" = 200 ] || diag "$(ip netns exec "$TG_NODE" nft list map inet tollgate hostport 2>&1)"
t_end

t_begin "DEL leaves neither a mapping nor an attachment"
pod_del web "$WEB_CONF" || t_fail "tollgate DEL rc=$TG_RC $TG_OUT"
t_expect "mappings" "$(ip netns exec "$TG_NODE" nft -j list map inet tollgate hostport | jq '[.nftables[] | .map // empty][0].elem // [] | length')" 0
t_expect "attachments" "$(jq '.attachments | length' "$TG_TMP/data/$NET/state.json")" 0
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://$TG_NODE_IP:$HOSTPORT/")
t_expect "peer -> node:$HOSTPORT after DEL" "$code" 000
t_end

t_begin "the plugin's parser checks the shipped entry: a wrong value in it is error 7"
pod_add bad team-a "$(entry 0 | jq -c '.internalCIDRs = ["10.0.0.0/33"]')"
r=$(cni_error_problem 7)
[ -z "$r" ] || t_fail "$r"
t_end

# ------------------------------------------------------------ budgets: the example overlay (components/budgets)
# The overlay's ConfigMap, mounted for the agents; its budgets block as
# written (budgets.allocator the Service). The allocator mounts its policy's.
CM=$TG_TMP/etc-tollgate-budgets
mount_conflist "$OVR" "$CM"
t_expect "the overlay's budgets.allocator" "$(jq -r '.plugins[] | select(.type == "tollgate") | .budgets.allocator' "$CM/10-tollgate.conflist")" \
	"https://tollgate-allocator.kube-system.svc:9618"

# ------------------------------------------------------------ what the cluster's issuers would make
# The certificates, as cert-manager would issue them from the overlay's
# Certificates (their dnsNames, ipAddresses and usages; a CA each for the
# allocator and etcd), the API server's own CA and serving certificate, the
# service-account signing key and its JWKS, and the tokens kubelet would
# project. Each Secret and ConfigMap is a directory of its keys in $STORE.
PKI=$TG_TMP/pki STORE=$TG_TMP/store
mkdir -p "$PKI" "$STORE"
pki() { openssl "$@" >>"$PKI/openssl.log" 2>&1; }
mkca() { # NAME: a CA (P-256, as the Certificates' privateKey says)
	pki req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.crt" \
		-days 2 -subj "/CN=$1" -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
mkcert() { # CA SECRET SPEC-JSON: SECRET's tls.crt, tls.key, ca.crt, signed by CA as SPEC says
	local ext san eku
	san=$(jq -r '[(.dnsNames // [])[] | "DNS:" + .] + [(.ipAddresses // [])[] | "IP:" + .] | join(",")' <<<"$3")
	eku=$(jq -r '[(.usages // [])[] | {"server auth": "serverAuth", "client auth": "clientAuth"}[.] // empty] | join(",")' <<<"$3")
	ext="basicConstraints=CA:FALSE${san:+
subjectAltName=$san}${eku:+
extendedKeyUsage=$eku}"
	mkdir -p "$STORE/secret/$2"
	pki req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$STORE/secret/$2/tls.key" \
		-out "$PKI/$2.csr" -subj "/CN=$(jq -r '.commonName // "x"' <<<"$3")" &&
		pki x509 -req -in "$PKI/$2.csr" -CA "$PKI/$1.crt" -CAkey "$PKI/$1.key" -CAcreateserial -days 1 \
			-extfile <(printf '%s\n' "$ext") -out "$STORE/secret/$2/tls.crt" &&
		cp "$PKI/$1.crt" "$STORE/secret/$2/ca.crt"
}
spec_of() { checkr "$OVR" cert-spec "$1" || tap_bail "no Certificate for $1 in the overlay"; }
if ! { mkca allocator-ca && mkca etcd-ca && mkca cluster-ca &&
	mkcert allocator-ca tollgate-allocator-tls "$(spec_of tollgate-allocator-tls)" &&
	mkcert etcd-ca tollgate-etcd-server "$(spec_of tollgate-etcd-server)" &&
	mkcert etcd-ca tollgate-etcd-client "$(spec_of tollgate-etcd-client)" &&
	mkcert cluster-ca apiserver '{"commonName": "kube-apiserver", "usages": ["server auth"],
		"dnsNames": ["kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"]}'; }; then
	tap_bail "openssl: $(tail -3 "$PKI/openssl.log")"
fi
# the ConfigMaps: the cluster's CA (kube-root-ca.crt, in every namespace) and
# the agents' copy of the allocator's CA (docs/budgets.md, "Deploying")
mkdir -p "$STORE/configMap/kube-root-ca.crt" "$STORE/configMap/tollgate-allocator-ca"
cp "$PKI/cluster-ca.crt" "$STORE/configMap/kube-root-ca.crt/ca.crt"
cp "$PKI/allocator-ca.crt" "$STORE/configMap/tollgate-allocator-ca/ca.crt"
# the service-account issuer: its key, its JWKS; the issuer URL the allocator is given
SA_TOKEN=$TG_LIB_DIR/sa_token.py
"$SA_TOKEN" keygen "$PKI/sa" || tap_bail "cannot make the service-account key"
ISSUER=$(checkr "$OVR" kubelet-command StatefulSet/tollgate-allocator allocator "${ALLOC_FIELDS[@]}" | sed -n 's/^--issuer=//p')
[ -n "$ISSUER" ] || tap_bail "the allocator's rendered command has no --issuer"
mint() { "$SA_TOKEN" mint "$PKI/sa" --iss "$ISSUER" "$@"; }
# tokens as kubelet would project them: the agent's (audience tollgate-allocator,
# its node), the allocator's own for the API server (its audience), and a
# report prober's of a node holding no budget
if ! { mint --node "$NODE_NAME" --pod tollgate-x7k2p >"$PKI/agent.token" &&
	mint --aud "$ISSUER" --account tollgate-allocator --pod tollgate-allocator-0 --node aks-deploy-vmss000001 >"$PKI/allocator.token" &&
	mint --node deploy-probe --pod tollgate-probe >"$PKI/probe.token"; }; then
	tap_bail "cannot mint the tokens"
fi
# root-WORKLOAD: the files kubelet would mount in the container, at their paths
# under it (as the rendering's volumes and mounts say); chgrp nobody, 0440:
# the pod's fsGroup and defaultMode
kubelet_root() { # RENDERED KIND/NAME CONTAINER ROOT TOKEN...: TOKEN is AUDIENCE=FILE ("-" the API server's)
	local rendered=$1 ref=$2 ctr=$3 root=$4 path kind name key src t
	shift 4
	while read -r path kind name key; do
		case $kind in
		token)
			src=""
			for t; do [ "${t%%=*}" = "$name" ] && src=${t#*=}; done
			[ -n "$src" ] || tap_bail "$ref: no token of audience $name here"
			;;
		configMap | secret)
			src=$STORE/$kind/$name
			[ "$key" = - ] || src=$src/$key
			[ "$name" = tollgate-allocator-policy ] && continue # mount_policy's
			[[ $name =~ ^tollgate-[a-z0-9]{10}$ ]] && continue # the conflist: mount_conflist's
			;;
		esac
		[ -e "$src" ] || tap_bail "$ref mounts $kind $name $key at $path: the test has no such thing"
		mkdir -p "$(dirname "$root$path")"
		if [ -d "$src" ]; then cp -rT "$src" "$root$path"; else cp "$src" "$root$path"; fi
	done < <(checkr "$rendered" kubelet-mounts "$ref" "$ctr")
	chgrp -R 65534 "$root" && chmod -R g+rX,o-rwx "$root"
}
kubelet_root "$OVR" DaemonSet/tollgate agent "$TG_TMP/root-agent" "tollgate-allocator=$PKI/agent.token"
kubelet_root "$OVR" StatefulSet/tollgate-allocator allocator "$TG_TMP/root-allocator" "-=$PKI/allocator.token"
t_expect "the agent's credentials" "$(cd "$TG_TMP/root-agent" && find . -type f | sort | tr '\n' ' ')" \
	"./var/run/secrets/tollgate/ca.crt ./var/run/secrets/tollgate/token "
# the API server: the JWKS to whoever brings the allocator's token
APILOG=$TG_TMP/api.log
: >"$APILOG"
ip netns exec "$TG_PEER" "$PY" "$CHECK" api-serve "$API_IP:443" "$STORE/secret/apiserver/tls.crt" \
	"$STORE/secret/apiserver/tls.key" "$PKI/allocator.token" "$PKI/sa/jwks.json" "$APILOG" 2>"$TG_TMP/api.err" &
TG_PIDS+=("$!")
wait_for 10 grep -q '^# serving$' "$APILOG" || tap_bail "the API server did not start: $(cat "$TG_TMP/api.err")"
# The allocator's policy ConfigMap as kubelet mounts a directory: the files
# in ..<stamp>/, ..data a link to it, policy.json a link into ..data. An edit
# of the ConfigMap is a new ..<stamp>/, ..data swapped to it by rename, the
# old one removed (kubelet's atomic writer): mount_policy STAMP FILE.
PCM=$TG_TMP/etc-tollgate-allocator
mount_policy() {
	local old
	old=$(readlink "$PCM/..data" 2>/dev/null)
	mkdir -p "$PCM/..$1"
	cp "$2" "$PCM/..$1/policy.json" && chmod 644 "$PCM/..$1/policy.json"
	ln -sfn "..$1" "$PCM/..data_tmp" && mv -T "$PCM/..data_tmp" "$PCM/..data"
	[ -L "$PCM/policy.json" ] || ln -s ..data/policy.json "$PCM/policy.json"
	[ -z "$old" ] || rm -rf "${PCM:?}/$old"
}
checkr "$OVR" policy >"$TG_TMP/policy-v1.json" || tap_bail "no policy in the overlay's rendering"
mount_policy v1 "$TG_TMP/policy-v1.json"
# where the StatefulSet mounts it: a directory (kubelet updates no subPath mount)
read -r PMOUNT pname psub < <(checkr "$OVR" kubelet-configmaps StatefulSet/tollgate-allocator allocator)
{ [ "$pname" = tollgate-allocator-policy ] && [ "$psub" = - ]; } ||
	tap_bail "the allocator does not mount tollgate-allocator-policy as a directory: $PMOUNT $pname $psub"

# Its etcd: one member standing for the three the allocator names (the cluster
# DNS answers their names with its address), serving TLS with the server
# certificate and taking a client only with a certificate of etcd's CA, as
# components/etcd's members do (its peer port, unused by one member, on
# loopback).
ES=$STORE/secret/tollgate-etcd-server
ip netns exec "$TG_PEER" env -i PATH="$TG_PATH" /usr/bin/etcd --name deploy-test \
	--data-dir "$TG_TMP/etcd.data" --listen-client-urls "https://$ETCD_IP:2379" \
	--advertise-client-urls "https://$ETCD_IP:2379" --listen-peer-urls "http://127.0.0.1:2380" \
	--initial-advertise-peer-urls "http://127.0.0.1:2380" --initial-cluster "deploy-test=http://127.0.0.1:2380" \
	--client-cert-auth --trusted-ca-file "$ES/ca.crt" --cert-file "$ES/tls.crt" --key-file "$ES/tls.key" \
	>"$TG_TMP/etcd.log" 2>&1 &
TG_PIDS+=("$!")
# The StatefulSet's command as kubelet runs it, its mounts' paths mapped
# under root-allocator (the policy's to mount_policy's directory): it serves
# HTTPS on the pod's :9618, finds etcd by the members' names, reads the JWKS
# from the API server and advertises its own name.
AROOT=$TG_TMP/root-allocator
AARGS=()
while IFS= read -r w; do
	case $w in
	tollgate-allocator) w=$ALLOCATOR ;;
	--policy="$PMOUNT"/*) w=--policy=$PCM/${w#--policy="$PMOUNT"/} ;;
	--etcd=* | --advertise=* | --election-key=* | --jwks=https://* | --issuer=* | --agent-account=*) ;; # URLs, a key, an account
	*'$('*) tap_bail "the StatefulSet's argument '$w' names a variable its env does not set" ;;
	--*=/*)
		[ -e "$AROOT/${w#*=}" ] || tap_bail "the StatefulSet's argument '$w' names a file none of its mounts holds"
		w=${w%%=*}=$AROOT/${w#*=}
		;;
	*/*) tap_bail "the StatefulSet's argument '$w' has a path this test does not map" ;;
	esac
	AARGS+=("$w")
done < <(checkr "$OVR" kubelet-command StatefulSet/tollgate-allocator allocator "${ALLOC_FIELDS[@]}")
checkr "$OVR" kubelet-resolv StatefulSet/tollgate-allocator kube-system "$CLUSTER_DNS" "$TG_TMP/node-resolv.conf" \
	>"$TG_TMP/alloc-resolv.conf" || tap_bail "no resolv.conf for the allocator"
printf '%s\n' "${AARGS[@]}" | grep -qxF -- "--policy=$PCM/policy.json" ||
	tap_bail "the StatefulSet's --policy is not policy.json in its ConfigMap's mount ($PMOUNT): ${AARGS[*]}"
ALLOC_LOG=$TG_TMP/allocator.log
# the allocator over HTTPS, by its Service's name (which kube-proxy would
# send to the pod), its certificate verified with the agents' CA
ASVC=tollgate-allocator.kube-system.svc
acurl() { ip netns exec "$TG_PEER" curl -s --max-time 2 --cacert "$PKI/allocator-ca.crt" --resolve "$ASVC:9618:$ALLOC_IP" --resolve "$PEER_NAME:9618:$ALLOC_IP" "$@"; }
alloc_get() { acurl -o "$TG_TMP/alloc.out" -w '%{http_code}' "https://$ASVC:9618$1"; }
alloc_ready() { [ "$(alloc_get /readyz)" = 200 ]; }
alloc_leads() { [ "$(alloc_get /metrics)" = 200 ] && grep -q '^tollgate_allocator_leader 1$' "$TG_TMP/alloc.out"; }
# metric_in FILE NAME{LABELS}: the sample's value ("" when absent)
metric_in() { awk -v m="$2" '$1 == m { print $2; exit }' "$1"; }
t_begin "the overlay's allocator as kubelet runs the StatefulSet's container: nobody, no capability, etcd found by its members' names through the cluster DNS, leading"
t_expect "the allocator's resolv.conf (ClusterFirst)" "$(cat "$TG_TMP/alloc-resolv.conf")" "search kube-system.svc.cluster.local svc.cluster.local cluster.local internal.cloudapp.net
nameserver $CLUSTER_DNS
options ndots:5"
ip netns exec "$TG_PEER" unshare -m --propagation private sh -c '
	mount --bind "$1" /etc/resolv.conf && shift &&
	mount -o remount,bind,ro / &&
	exec setpriv --reuid 65534 --regid 65534 --clear-groups --bounding-set -all --inh-caps -all \
		--no-new-privs "$@"' allocator "$TG_TMP/alloc-resolv.conf" "${AARGS[@]}" 2>>"$ALLOC_LOG" &
ALLOC_PID=$!
TG_PIDS+=("$ALLOC_PID")
wait_for 10 alloc_ready || t_fail "not ready within 10 s: $(tail -3 "$ALLOC_LOG")"
t_expect "uid" "$(awk '/^Uid:/ { print $2 }' "/proc/$ALLOC_PID/status" 2>/dev/null)" 65534
t_expect "CapEff" "$(awk '/^CapEff/ { print $2 }' "/proc/$ALLOC_PID/status" 2>/dev/null)" 0000000000000000
t_expect "CapBnd" "$(awk '/^CapBnd/ { print $2 }' "/proc/$ALLOC_PID/status" 2>/dev/null)" 0000000000000000
grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$ALLOC_PID/status" || t_fail "no_new_privs not set"
grep -q 'msg="starting"' "$ALLOC_LOG" || t_fail "no start-up record: $(tail -3 "$ALLOC_LOG")"
wait_for 15 alloc_leads || t_fail "tollgate_allocator_leader is not 1: $(grep 'msg="etcd' "$ALLOC_LOG" | tail -2)"
grep -q "^$CLUSTER_DNS tollgate-etcd-0.tollgate-etcd.kube-system.svc.cluster.local 1 NOERROR$" "$DNSLOG" ||
	t_fail "the allocator did not look its etcd up in the cluster DNS: $(tail -3 "$DNSLOG")"
t_end

# probe [POLICY-ID]: a report of a node holding no budget ("deploy-probe"),
# naming POLICY-ID as the policy it last heard, with deploy-probe's token
# (PTOKEN: another file, PNODE: another node reported, "" for no token); the
# status printed, the answer in $TG_TMP/answer
PSEQ=0
probe() {
	local tok=${PTOKEN-$PKI/probe.token}
	PSEQ=$((PSEQ + 1))
	jq -nc --arg id "${1:-}" --argjson s "$PSEQ" --arg n "${PNODE:-deploy-probe}" \
		'{version: 1, node: $n, seq: $s, budgets: []} + (if $id == "" then {} else {policy: $id} end)' \
		>"$TG_TMP/probe.json"
	acurl -o "$TG_TMP/answer" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Expect:' \
		${tok:+-H "Authorization: Bearer $(cat "$tok")"} --data-binary "@$TG_TMP/probe.json" "https://$ASVC:9618/v1/report"
}
# the answer's policy, namespaces sorted: {"id":..,"namespaces":[..]} ("null": none)
answer_policy() { jq -c '.policy | if . == null then null else .namespaces |= sort_by(.namespace) end' "$TG_TMP/answer" 2>/dev/null || echo "not JSON"; }
answer_ns() { jq -c '[.policy.namespaces // [] | sort_by(.namespace)[] | {(.namespace): .internetEgress}] | add' "$TG_TMP/answer" 2>/dev/null; }
reloads() { [ "$(alloc_get /metrics)" = 200 ] && metric_in "$TG_TMP/alloc.out" "tollgate_allocator_policy_reloads_total{result=\"$1\"}"; }
alive() { [ -r "/proc/$ALLOC_PID/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$ALLOC_PID/status"; }
results() { [ "$(alloc_get /metrics)" = 200 ] && metric_in "$TG_TMP/alloc.out" "tollgate_allocator_reports_total{result=\"$1\"}"; }

t_begin "reports are taken with a token the API server would sign for that node alone: none, a forged key, another issuer or audience, an expired one refused (401); another node's (403); each counted, the JWKS read from the API server with the pod's own token"
unauth0=$(results unauthenticated) forb0=$(results forbidden)
t_expect "a report with deploy-probe's token" "$(probe)" 200
grep -q '^GET /openid/v1/jwks 200$' "$APILOG" || t_fail "the allocator did not read the JWKS with its token: $(tail -3 "$APILOG") $(grep -i jwks "$ALLOC_LOG" | tail -2)"
# the control: the API server refuses a client without the allocator's token
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$PKI/cluster-ca.crt" \
	--resolve "kubernetes.default.svc:443:$API_IP" https://kubernetes.default.svc/openid/v1/jwks)
t_expect "the JWKS without the allocator's token" "$code" 401
"$SA_TOKEN" keygen "$PKI/forged" || t_fail "cannot make a second key"
"$SA_TOKEN" mint "$PKI/forged" --iss "$ISSUER" --node deploy-probe >"$PKI/forged.token"
mint --node deploy-probe --iss https://kubernetes.default.svc.other >"$PKI/issuer.token"
mint --node deploy-probe --aud "$ISSUER" >"$PKI/audience.token"
mint --node deploy-probe --skew -7200 >"$PKI/expired.token"
t_expect "no token" "$(PTOKEN="" probe)" 401
for t in forged issuer audience expired; do
	t_expect "a token of $t" "$(PTOKEN=$PKI/$t.token probe)" 401
done
t_expect "deploy-probe's token reporting for $NODE_NAME" "$(PNODE=$NODE_NAME probe)" 403
t_expect "refusals counted unauthenticated" "$(results unauthenticated)" $((${unauth0:-0} + 5))
t_expect "refusals counted forbidden" "$(results forbidden)" $((${forb0:-0} + 1))
t_end

t_begin "the allocator serves HTTPS alone, with a certificate the agents' CA vouches for, for the Service's name and the replica's own (--advertise); a name it does not hold, or another CA, refused"
t_expect "--advertise" "$(printf '%s\n' "${AARGS[@]}" | grep -- '^--advertise=')" "--advertise=https://$PEER_NAME:9618"
acurl -o /dev/null -w '%{http_code}' "https://$PEER_NAME:9618/readyz" >"$TG_TMP/code"
t_expect "the advertised name, verified" "$(cat "$TG_TMP/code")" 200
acurl -o /dev/null --resolve "tollgate-allocator-0.elsewhere.kube-system.svc:9618:$ALLOC_IP" \
	"https://tollgate-allocator-0.elsewhere.kube-system.svc:9618/readyz"
t_expect "curl's status for a name the certificate does not hold" "$?" 60
ip netns exec "$TG_PEER" curl -s -o /dev/null --max-time 2 --cacert "$PKI/etcd-ca.crt" --resolve "$ASVC:9618:$ALLOC_IP" "https://$ASVC:9618/readyz"
t_expect "curl's status trusting etcd's CA" "$?" 60
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$ALLOC_IP:9618/readyz")
case $code in 000 | 400) ;; *) t_fail "plain HTTP on the port is answered $code" ;; esac
t_end

t_begin "etcd takes a client with a certificate of its CA alone: an election key written without one is refused, the leader's stays"
EC=$STORE/secret/tollgate-etcd-client
b64() { printf '%s' "$1" | base64 -w0; }
ekey=$(b64 /tollgate/allocator/leader)
ecurl() { ip netns exec "$TG_PEER" curl -s --max-time 2 --cacert "$PKI/etcd-ca.crt" --resolve "tollgate-etcd-0.tollgate-etcd.kube-system.svc:2379:$ETCD_IP" "$@"; }
ecurl -o /dev/null -X POST -d "{\"key\": \"$ekey\", \"value\": \"$(b64 https://10.9.9.9:9618)\"}" \
	https://tollgate-etcd-0.tollgate-etcd.kube-system.svc:2379/v3/kv/put
rc=$?
[ "$rc" != 0 ] || t_fail "etcd took a put without a client certificate"
leader_urls() { # every value under the election key, decoded
	ecurl --cert "$EC/tls.crt" --key "$EC/tls.key" -X POST \
		-d "{\"key\": \"$ekey\", \"range_end\": \"$(b64 /tollgate/allocator/leades)\"}" \
		https://tollgate-etcd-0.tollgate-etcd.kube-system.svc:2379/v3/kv/range | jq -r '.kvs[]?.value | @base64d'
}
held=$(leader_urls)
grep -qF "https://$PEER_NAME:9618" <<<"$held" || t_fail "the election key does not hold the leader's advertised name: $held"
grep -qF 10.9.9.9 <<<"$held" && t_fail "the forged election key is in etcd: $held"
t_expect "the allocator leads" "$(alloc_leads && echo yes)" yes
t_end

POLICY_ID=""
t_begin "the allocator answers a report with the mounted policy's budgets (bytes/s), and leaves them out once the report names that policy"
t_expect "report" "$(probe)" 200
t_expect "the answer's budgets (20G, 2G)" "$(answer_ns)" '{"crawl":250000000,"datasets":2500000000}'
POLICY_ID=$(jq -r '.policy.id // empty' "$TG_TMP/answer" 2>/dev/null)
[[ $POLICY_ID =~ ^[0-9a-f]{16}$ ]] || t_fail "the answer's policy id is '$POLICY_ID': $(head -c 300 "$TG_TMP/answer")"
t_expect "report naming policy $POLICY_ID" "$(probe "$POLICY_ID")" 200
t_expect "the answer's policy, the node holding it" "$(answer_policy)" null
# the control: another id is answered with the policy again
t_expect "report naming policy 0000000000000000" "$(probe 0000000000000000)" 200
t_expect "the answer's policy id" "$(jq -r '.policy.id' "$TG_TMP/answer" 2>/dev/null)" "$POLICY_ID"
t_end

t_begin "the policy's ConfigMap edited (kubelet swaps ..data): datasets 20G -> 10G in the next answers, the same allocator process; an invalid edit refused and counted, the policy in force kept"
ok0=$(reloads ok) err0=$(reloads error)
{ [ -n "$ok0" ] && [ -n "$err0" ]; } || t_fail "no tollgate_allocator_policy_reloads_total{result=ok|error}: $(grep reloads "$TG_TMP/alloc.out")"
jq '.namespaces.datasets.internetEgress = "10G"' "$TG_TMP/policy-v1.json" >"$TG_TMP/policy-v2.json"
mount_policy v2 "$TG_TMP/policy-v2.json"
{ [ ! -e "$PCM/..v1" ] && [ "$(readlink "$PCM/..data")" = ..v2 ]; } || t_fail "the mount was not swapped as kubelet swaps it: $(ls -a "$PCM")"
new_policy() { [ "$(probe "$POLICY_ID")" = 200 ] && [ "$(answer_ns)" = '{"crawl":250000000,"datasets":1250000000}' ]; }
wait_for 10 new_policy || t_fail "no answer with datasets at 10G (1250000000 B/s) within 10 s: $(answer_policy)"
ID2=$(jq -r '.policy.id // empty' "$TG_TMP/answer" 2>/dev/null)
{ [[ $ID2 =~ ^[0-9a-f]{16}$ ]] && [ "$ID2" != "$POLICY_ID" ]; } || t_fail "the new policy's id is '$ID2' (was $POLICY_ID)"
alive || t_fail "the allocator (PID $ALLOC_PID) is gone"
t_expect "policy reloads ok" "$(reloads ok)" $((ok0 + 1))
t_expect "the policy in force (tollgate_allocator_policy_info)" \
	"$(metric_in "$TG_TMP/alloc.out" "tollgate_allocator_policy_info{policy=\"$ID2\",budgets=\"2\"}")" 1
grep -qi 'policy' <(tail -5 "$ALLOC_LOG") || t_fail "the allocator does not log the new policy: $(tail -3 "$ALLOC_LOG")"
# an invalid edit (a key this version does not take): refused whole, counted, 10G stays
jq '.destinations = {prefixLength: 24}' "$TG_TMP/policy-v2.json" >"$TG_TMP/policy-v3.json"
mount_policy v3 "$TG_TMP/policy-v3.json"
refused_once() { [ "$(reloads error)" = $((err0 + 1)) ]; }
wait_for 10 refused_once || t_fail "tollgate_allocator_policy_reloads_total{result=\"error\"} is $(reloads error), not $((err0 + 1))"
grep -q 'destinations' "$ALLOC_LOG" || t_fail "the refusal does not name destinations: $(tail -3 "$ALLOC_LOG")"
t_expect "report" "$(probe)" 200
t_expect "the policy in force (10G)" "$(answer_ns)" '{"crawl":250000000,"datasets":1250000000}'
t_expect "its id" "$(jq -r '.policy.id' "$TG_TMP/answer" 2>/dev/null)" "$ID2"
t_expect "policy reloads ok" "$(reloads ok)" $((ok0 + 1))
alive || t_fail "the allocator (PID $ALLOC_PID) is gone"
# the rendered policy again, for the agents below
mount_policy v4 "$TG_TMP/policy-v1.json"
back() { [ "$(probe "$ID2")" = 200 ] && [ "$(answer_ns)" = '{"crawl":250000000,"datasets":2500000000}' ]; }
wait_for 10 back || t_fail "the rendered policy was not taken again: $(answer_policy)"
t_end

# A pod of the budgeted namespace on the node, ADDed with the conflist the
# agent installed (what the runtime hands the plugin).
agent_metric() { [ "$(http_get /metrics)" = 200 ] && metric_in "$TG_TMP/http.out" "$1"; }
GRANTED='tollgate_budget_state{namespace="datasets",direction="egress",state="granted"}'
REP_ERR='tollgate_budget_reports_total{result="error"}'
reports_failing() { [ "$(agent_metric "$REP_ERR")" -ge 2 ] 2>/dev/null; }
alloc_ok() { [ "$(alloc_get /metrics)" = 200 ] && metric_in "$TG_TMP/alloc.out" 'tollgate_allocator_reports_total{result="ok"}'; }
installed() { cmp -s "$NETD/10-tollgate.conflist" "$CM/10-tollgate.conflist"; }

t_begin "control: the DaemonSet without dnsPolicy (ClusterFirst: on the host network, the node's resolv.conf) cannot resolve budgets.allocator; the namespace is never granted"
agent_stop
copy_edit base/daemonset.yaml '/dnsPolicy: ClusterFirstWithHostNet/d' overlay
agent_args "$TG_TMP/copy-overlay.yaml"
cmp -s "$TG_TMP/agent-resolv.conf" "$TG_TMP/node-resolv.conf" || t_fail "the copy's resolv.conf is not the node's: $(cat "$TG_TMP/agent-resolv.conf")"
ALOG=$TG_TMP/agent-nodns.log
ok0=$(alloc_ok) # the reports above, the probes'
agent_start
wait_for 40 ready || t_fail "not ready within 40 s: $(tail -3 "$ALOG")"
wait_for 5 installed || t_fail "the overlay's conflist was not installed"
pod_add ds1 datasets "$(jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$NETD/10-tollgate.conflist")" ||
	t_fail "ADD ds1: rc=$TG_RC $TG_OUT"
wait_for 10 reports_failing || t_fail "no failed report: $(grep -i budget "$ALOG" | tail -2)"
grep -qi 'msg="budget: the allocator did not answer.* err=".*resolv' "$ALOG" ||
	t_fail "the agent does not say it could not resolve the allocator: $(grep -i budget "$ALOG" | tail -2)"
grep -q "^$NODE_DNS tollgate-allocator.kube-system.svc[.a-z]* 1 NXDOMAIN$" "$DNSLOG" ||
	t_fail "the node's resolver was not asked for the Service: $(tail -3 "$DNSLOG")"
grep -q "^$CLUSTER_DNS tollgate-allocator" "$DNSLOG" && t_fail "the cluster DNS was asked for the Service"
t_expect "datasets granted" "$(agent_metric "$GRANTED")" 0
# a node that has heard no policy cannot tell budgeted namespaces: held at the join rate
join_rate() { [ "$(agent_metric 'tollgate_budget_ceil_bytes_per_second{namespace="datasets",direction="egress"}')" = 1250 ]; }
wait_for 10 join_rate ||
	t_fail "datasets' ceil with no policy heard is $(agent_metric 'tollgate_budget_ceil_bytes_per_second{namespace="datasets",direction="egress"}'), not the join rate 1250: $(grep -i budget "$ALOG" | tail -2)"
t_expect "the policy the node holds" "$(agent_metric 'tollgate_budget_policy_info{policy="",budgets="0"}')" 1
t_expect "reports the allocator answered" "$(alloc_ok)" "$ok0"
agent_stop
t_end

t_begin "the overlay's DaemonSet as kubelet runs it: budgets.allocator resolved through the cluster DNS, reached over TLS (its name in the handshake, no report readable on the wire), the report taken with the projected token: datasets granted on $NODE_NAME"
agent_args "$OVR"
t_expect "the agent's resolv.conf (ClusterFirstWithHostNet)" "$(cat "$TG_TMP/agent-resolv.conf")" "search kube-system.svc.cluster.local svc.cluster.local cluster.local internal.cloudapp.net
nameserver $CLUSTER_DNS
options ndots:5"
printf '%s\n' "${ARGS[@]}" | grep -qxF -- "--node-name=$NODE_NAME" || t_fail "no --node-name=$NODE_NAME in: ${ARGS[*]}"
printf '%s\n' "${ARGS[@]}" | grep -qxF -- "--listen=10.0.0.4:9617" || t_fail "no --listen=\$(NODE_IP):9617 in: ${ARGS[*]}"
# the reports on the wire, as they reach the allocator's node: the Service's
# name in the TLS handshake (SNI), and no report in clear (the control: the
# same sniffer finds the name)
# (the handshake is once a kept-alive connection: both sniff before the agent starts)
ip netns exec "$TG_PEER" "$PY" "$CHECK" sniff eth0 20 '(tollgate-allocator\.kube-system\.svc)' \
	>"$TG_TMP/sniff-sni.out" 2>"$TG_TMP/sniff-sni.err" &
SNIFF_PID=$!
ip netns exec "$TG_PEER" "$PY" "$CHECK" sniff eth0 20 '"node" ?: ?"([^"]*)"' >"$TG_TMP/sniff.out" 2>"$TG_TMP/sniff.err" &
SNIFF2_PID=$!
TG_PIDS+=("$SNIFF_PID" "$SNIFF2_PID")
wait_for 10 grep -q '^# sniffing$' "$TG_TMP/sniff-sni.err" || t_fail "the sniffer did not start: $(cat "$TG_TMP/sniff-sni.err")"
wait_for 10 grep -q '^# sniffing$' "$TG_TMP/sniff.err" || t_fail "the sniffer did not start: $(cat "$TG_TMP/sniff.err")"
ALOG=$TG_TMP/agent-budgets.log
agent_start
granted() { [ "$(agent_metric "$GRANTED")" = 1 ]; }
wait_for 20 granted || t_fail "datasets not granted: $(grep '^tollgate_budget_state{namespace="datasets"' "$TG_TMP/http.out" | tr '\n' ' ') $(grep -i budget "$ALOG" | tail -2)"
[ "$(alloc_ok)" -gt "$ok0" ] 2>/dev/null || t_fail "the allocator answered no report"
t_expect "the allocator's nodes holding datasets" "$(metric_in "$TG_TMP/alloc.out" 'tollgate_allocator_nodes{namespace="datasets",direction="egress"}')" 1
grep -q "^$CLUSTER_DNS $SVC 1 NOERROR$" "$DNSLOG" || t_fail "the cluster DNS did not answer $SVC: $(tail -3 "$DNSLOG")"
wait "$SNIFF_PID" "$SNIFF2_PID"
t_expect "the name in the handshake" "$(cat "$TG_TMP/sniff-sni.out")" tollgate-allocator.kube-system.svc
t_expect "reports readable on the wire" "$(cat "$TG_TMP/sniff.out")" ""
t_expect "the allocator's reports refused since the probes" "$(results unauthenticated) $(results forbidden)" \
	"$((${unauth0:-0} + 5)) $((${forb0:-0} + 1))"
t_expect "the node budgets.json keeps" "$(jq -r .node "$TG_TMP/data/$NET/budgets.json" 2>/dev/null)" "$NODE_NAME"
# and the policy it heard: the overlay's, as the allocator answered it
t_expect "the policy the node holds" "$(agent_metric "tollgate_budget_policy_info{policy=\"$POLICY_ID\",budgets=\"2\"}")" 1
t_expect "the policy budgets.json keeps" \
	"$(jq -c '.policy | {id, namespaces: (.namespaces | sort_by(.namespace))}' "$TG_TMP/data/$NET/budgets.json" 2>/dev/null)" \
	"{\"id\":\"$POLICY_ID\",\"namespaces\":[{\"namespace\":\"crawl\",\"internetEgress\":250000000},{\"namespace\":\"datasets\",\"internetEgress\":2500000000}]}"
t_end

t_begin "every metric the rules and the dashboards read is served by the agent or the allocator"
[ "$(http_get /metrics)" = 200 ] || t_fail "/metrics: $(cat "$TG_TMP/http.out")"
awk '$1 == "#" && $2 == "TYPE" { print $3 }' "$TG_TMP/http.out" | sort -u >"$TG_TMP/served"
[ "$(wc -l <"$TG_TMP/served")" -ge 40 ] || t_fail "only $(wc -l <"$TG_TMP/served") families served"
[ "$(alloc_get /metrics)" = 200 ] || t_fail "the allocator's /metrics: $(cat "$TG_TMP/alloc.out")"
awk '$1 == "#" && $2 == "TYPE" { print $3 }' "$TG_TMP/alloc.out" | sort -u >"$TG_TMP/alloc.served"
[ "$(wc -l <"$TG_TMP/alloc.served")" -ge 10 ] || t_fail "the allocator serves only $(wc -l <"$TG_TMP/alloc.served") families"
n=0
while IFS= read -r m; do
	n=$((n + 1))
	[ "$m" = up ] && continue # Prometheus's own, per target
	grep -qxF "$m" "$TG_TMP/served" && continue
	grep -qxF "$m" "$TG_TMP/alloc.served" && continue
	# served once internetGuard is set: tests/integration/test_guard.sh reads it
	[ "$m" = tollgate_namespace_connections_refused_total ] && continue
	t_fail "$m is not served"
done < <(checkr "$OVR" names)
[ "$n" -ge 10 ] || t_fail "only $n names read by the rules and the dashboards"
grep -q '^tollgate_collector_up{collector="nftables"} 1$' "$TG_TMP/http.out" || t_fail "nftables collector down"
grep -q '^tollgate_agent_ready 1$' "$TG_TMP/http.out" || t_fail "tollgate_agent_ready is not 1"
t_end

t_begin "every binary says its build (--version: version, commit, kind), and tollgate_build_info carries the same"
COMMIT=$(git -C "$TG_ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
for b in tollgate tollgate-ipam tollgate-agent tollgate-allocator; do
	out=$("$TOLLGATE_BIN_DIR/$b" --version 2>&1)
	t_expect "$b --version's exit status" "$?" 0
	[[ $out =~ ^$b\ ([0-9][0-9.]*)\ \(commit\ ([0-9a-f]+|unknown)\;\ .+\)$ ]] || { t_fail "$b --version: $out"; continue; }
	VER=${BASH_REMATCH[1]}
	# a build from an older checkout would say another commit (make rebuilds lib/version.o when it moves)
	t_expect "$b's commit" "${BASH_REMATCH[2]}" "$COMMIT"
done
grep -qxF "tollgate_build_info{version=\"$VER\",commit=\"$COMMIT\"} 1" "$TG_TMP/http.out" ||
	t_fail "the agent's build_info: $(grep '^tollgate_build_info' "$TG_TMP/http.out")"
grep -qxF "tollgate_build_info{version=\"$VER\",commit=\"$COMMIT\"} 1" "$TG_TMP/alloc.out" ||
	t_fail "the allocator's build_info: $(grep '^tollgate_build_info' "$TG_TMP/alloc.out")"
t_end

t_begin "SIGTERM: the agent and the allocator exit 0"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID"
t_expect "the agent's exit status" "$?" 0
kill -TERM "$ALLOC_PID"
wait "$ALLOC_PID"
t_expect "the allocator's exit status" "$?" 0
t_end

tap_done
