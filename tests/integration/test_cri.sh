#!/usr/bin/env bash
# Kubelet's path: containerd's CRI plugin runs Tollgate on RunPodSandbox.
#
# Debian's containerd (1.6) with its CRI plugin in runtime_lib.sh's
# throwaway node (its own root, state, socket, /etc/cni/net.d and
# /opt/cni/bin), driven through its CRI socket by cri/cri_client.py, a small
# client of the CRI v1 API (cri/cri.proto: the messages kubelet sends for a
# sandbox, python3-grpcio). The sandbox image is cri/pause.c, built static
# here and imported offline (`ctr -n k8s.io images import`). tollgate-agent
# runs in the node as the DaemonSet runs it and installs the plugin and the
# conflist (Tollgate alone, as shipped: it maps hostPorts itself).
#
#   - the runtime's Status says NetworkReady false until the agent installed
#     the conflist, true after (the control: the same call before);
#   - RunPodSandbox for pods in two Kubernetes namespaces: with
#     kubernetes.io/egress-bandwidth, with tollgate.io/internet-egress-bandwidth,
#     with a port mapping, and with none; PodSandboxStatus shows each one's
#     pool address, the one the store records for that namespace/pod;
#   - what containerd passed: the K8S_POD_* names (the store's namespace and
#     pod), runtimeConfig.bandwidth (the pod's egress rate), the pod
#     annotations (the internet cap the annotation set), portMappings (the
#     store records them, and a host port on the node reaches the pod);
#   - each pod's bytes land in its namespace's counters, to the byte (pings of
#     a known size);
#   - the caps hold, measured on the kernel's class counters (within 5 %);
#   - containerd restarted: the sandboxes are still READY with the same
#     addresses and still reach the peer;
#   - StopPodSandbox releases each address and removes the pod's objects; a
#     second StopPodSandbox is clean; RemovePodSandbox leaves the node as it
#     was before the first pod (links, routes, nft elements, tc, the store).
#
# Not against the sanitizer build (TG_SAN_EXCLUDE): the caps are measured.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_cri.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/shaping_lib.sh"
sh_require

# Debian's python3, where python3-grpcio and python3-grpc-tools live
PY=/usr/bin/python3
CRI_CLIENT=$TG_LIB_DIR/cri/cri_client.py
NET=tgcri
AGENT_PORT=9617
PAUSE=localhost/tollgate-pause:e2e
for t in containerd ctr runc podman nsenter unshare curl gcc; do
	command -v "$t" >/dev/null 2>&1 || { echo "not ok - preconditions: '$t' not installed (make deps)"; exit 1; }
done
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null ||
	{ echo "not ok - preconditions: python3-grpcio and python3-grpc-tools not installed (make deps)"; exit 1; }
[ -x /usr/lib/cni/loopback ] ||
	{ echo "not ok - preconditions: /usr/lib/cni/loopback missing (containernetworking-plugins)"; exit 1; }

declare -A SID=() PIP=() # pod -> sandbox ID, pod -> its address
ATTACHED=()               # $TG_ID-p-POD names bound to the sandboxes' netns (ip netns attach)
cri_cleanup() {
	local n
	sh_kill_all
	for n in "${ATTACHED[@]}"; do ip netns del "$n" 2>/dev/null; done
	rt_node_down
}
trap cri_cleanup EXIT
trap 'echo "# interrupted" >&2; exit 130' INT
trap 'echo "# terminated" >&2; exit 143' TERM

cri() { nx "$PY" "$CRI_CLIENT" --socket /run/containerd/containerd.sock --gen "$TG_TMP/cri-gen" --timeout 60 "$@"; }
network_ready() { cri status | jq -r '.conditions[] | select(.type == "NetworkReady") | .status'; }
http_get() { nx curl -s -o "$TG_TMP/http.out" -w '%{http_code}' --max-time 2 "http://$TG_NODE_IP:$AGENT_PORT$1"; }
metric() { http_get /metrics >/dev/null && awk -v m="$1" '$1 == m { print $2 }' "$TG_TMP/http.out"; }
ns_bytes() { # "NAMESPACE DIRECTION TRAFFIC"
	local v k
	read -r -a k <<<"$1"
	set -- "${k[@]}"
	v=$(metric "tollgate_namespace_bytes_total{namespace=\"$1\",direction=\"$2\",traffic=\"$3\"}")
	echo "${v:-0}"
}
attachment() { # NAMESPACE POD: its record in the store
	store | jq -c --arg n "$1" --arg p "$2" '.attachments // [] | map(select(.namespace == $n and .pod == $p)) | .[0] // empty'
}

# ------------------------------------------------------------------ setup
t_begin "setup: the node, the pause image, containerd with its CRI plugin"
rt_node_up || tap_bail "could not build the node"
rt_rootfs "$TG_TMP/pause"
mkdir -p "$TG_TMP/agent-config"
gcc -static -O2 -Wall -Wextra -Werror -o "$TG_TMP/pause/pause" "$TG_LIB_DIR/cri/pause.c" 2>"$TG_TMP/pause.err" ||
	tap_bail "pause: $(cat "$TG_TMP/pause.err")"
rt_image "$TG_TMP/pause" "$PAUSE" "$TG_TMP/pause-oci.tar" 'ENTRYPOINT ["/pause"]' 2>"$TG_TMP/image.err" ||
	tap_bail "pause image: $(cat "$TG_TMP/image.err")"
rt_containerd_config <<EOF
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
EOF
rt_containerd_start "$TG_TMP/containerd/config.toml" "$TG_TMP/containerd.log" ||
	tap_bail "containerd did not start: $(tail -3 "$TG_TMP/containerd.log")"
nx ctr -n k8s.io images import "$TG_TMP/pause-oci.tar" >/dev/null 2>"$TG_TMP/import.err" ||
	tap_bail "ctr -n k8s.io images import: $(cat "$TG_TMP/import.err")"
v=$(cri version) || tap_bail "CRI Version: $v"
diag "CRI: $v"
t_end

# ------------------------------------------------------------------ status
t_begin "the runtime's Status: NetworkReady false before the agent installed the conflist, true after"
t_expect "NetworkReady before the agent" "$(network_ready)" false
# the conflist as shipped, with this node's pool and caps
jq --arg net "$NET" '.name = $net | .plugins[0] += {
		uplink: "eth0", logFile: "/run/tollgate/tollgate.log",
		ipam: {source: "static", addresses: ["10.1.0.10-10.1.0.40"], cooldownSeconds: 0},
		shaping: {internetEgress: {podDefault: "50M"}}, accounting: {retainSeconds: 0}}' \
	"$TG_ROOT/deploy/base/10-tollgate.conflist" >"$TG_TMP/agent-config/10-tollgate.conflist" ||
	tap_bail "cannot write the conflist"
# containerd 1.6 brings every sandbox's lo up with the reference loopback plugin
nx cp /usr/lib/cni/loopback /opt/cni/bin/loopback
nx "$TOLLGATE_BIN_DIR/tollgate-agent" --config "$TG_TMP/agent-config/10-tollgate.conflist" \
	--listen "$TG_NODE_IP:$AGENT_PORT" --cni-conf-dir /etc/cni/net.d --cni-bin-dir /opt/cni/bin \
	--plugin "$TOLLGATE_BIN_DIR/tollgate" --host-root / --declare-interval 2 --gc-interval 1 --page-cache-ms 0 2>"$TG_TMP/agent.log" &
AGENT_PID=$!
TG_PIDS+=("$AGENT_PID")
SH_PIDS+=("$AGENT_PID")
agent_ready() { [ "$(http_get /readyz)" = 200 ]; }
wait_for 20 agent_ready || t_fail "agent not ready within 20 s: $(tail -5 "$TG_TMP/agent.log")"
cri_network_ready() { [ "$(network_ready)" = true ]; }
wait_for 20 cri_network_ready || t_fail "NetworkReady still $(network_ready) 20 s after the agent got ready"
nx test -f /etc/cni/net.d/10-tollgate.conflist || t_fail "NetworkReady without the conflist"
t_end
EMPTY_VIEW=$(node_view)

# ------------------------------------------------------------------ pods
# run POD NAMESPACE [cri_client run options]: RunPodSandbox, its address
run_pod() {
	local pod=$1 ns=$2 id
	shift 2
	id=$(cri run --name "$pod" --namespace "$ns" --uid "uid-$pod-$TG_ID" --cgroup-parent "/$RT_CG" "$@" 2>"$TG_TMP/run-$pod.err") ||
		{ t_fail "RunPodSandbox $ns/$pod: $(cat "$TG_TMP/run-$pod.err")"; return 1; }
	SID[$pod]=$id
}
t_begin "RunPodSandbox: pods in two namespaces, with and without annotations and port mappings"
run_pod web team-a --port TCP:18080:8080 --label app=web
run_pod capped team-a --annotation kubernetes.io/egress-bandwidth=10M
run_pod inet team-b --annotation tollgate.io/internet-egress-bandwidth=20M
run_pod plain team-b
t_end
[ "${#SID[@]}" = 4 ] || tap_bail "not every sandbox ran"

t_begin "PodSandboxStatus: READY with the pool address the store records for that namespace/pod"
declare -A seen=()
for pod in web capped inet plain; do
	[ -n "${SID[$pod]:-}" ] || { t_fail "$pod: no sandbox"; continue; }
	st=$(cri inspect "${SID[$pod]}") || { t_fail "$pod: PodSandboxStatus failed"; continue; }
	PIP[$pod]=$(jq -r .ip <<<"$st")
	ns=$(jq -r .metadata.namespace <<<"$st")
	t_expect "$pod state" "$(jq -r .state <<<"$st")" SANDBOX_READY
	if ! [[ ${PIP[$pod]} =~ ^10\.1\.0\.([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -lt 10 ] || [ "${BASH_REMATCH[1]}" -gt 40 ]; then
		t_fail "$pod: address '${PIP[$pod]}' is not from the pool 10.1.0.10-40"
	fi
	[ -z "${seen[${PIP[$pod]}]:-}" ] || t_fail "$pod and ${seen[${PIP[$pod]}]} share ${PIP[$pod]}"
	seen[${PIP[$pod]}]=$pod
	t_expect "$pod: the store's address for $ns/$pod" "$(attachment "$ns" "$pod" | jq -r '.ip // empty')" "${PIP[$pod]}"
	# the sandbox's network namespace, named on the host for the measurements
	pid=$(jq -r .pid <<<"$st")
	if ip netns attach "$TG_ID-p-$pod" "$pid" 2>"$TG_TMP/attach.err"; then
		ATTACHED+=("$TG_ID-p-$pod")
	else
		t_fail "$pod: ip netns attach $pid: $(cat "$TG_TMP/attach.err")"
	fi
done
t_end

t_begin "what containerd's CRI plugin passed: runtimeConfig.bandwidth, pod annotations, port mappings"
# libcni's cache holds the CNI_ARGS and capability arguments containerd passed
cached() { # POD: what the runtime passed for its sandbox
	nx cat "/var/lib/cni/results/$NET-${SID[$1]}-eth0" | jq -c '{cniArgs, capabilityArgs}'
}
for pod in web capped inet plain; do diag "$pod: $(cached "$pod")"; done
t_expect "web: CNI_ARGS" "$(cached web | jq -c '.cniArgs | map(select(.[0] != "K8S_POD_INFRA_CONTAINER_ID")) | sort')" \
	"$(jq -nc --arg u "uid-web-$TG_ID" '[["IgnoreUnknown","1"],["K8S_POD_NAME","web"],["K8S_POD_NAMESPACE","team-a"],["K8S_POD_UID",$u]]')"
t_expect "web: portMappings" "$(cached web | jq -c .capabilityArgs.portMappings)" \
	'[{"HostPort":8080,"ContainerPort":18080,"Protocol":"tcp","HostIP":""}]'
t_expect "capped: bandwidth" "$(cached capped | jq -c '.capabilityArgs.bandwidth | {EgressRate, IngressRate}')" \
	'{"EgressRate":10000000,"IngressRate":0}'
t_expect "inet: pod annotations" "$(cached inet | jq -c '.capabilityArgs["io.kubernetes.cri.pod-annotations"]')" \
	'{"tollgate.io/internet-egress-bandwidth":"20M"}'
# the control: a pod without annotations gets no bandwidth and null annotations
t_expect "plain: capability arguments" "$(cached plain | jq -c '.capabilityArgs')" '{"io.kubernetes.cri.pod-annotations":null}'
# the pod's own egress rate (kubernetes.io/egress-bandwidth through runtimeConfig.bandwidth)
t_expect "capped: egress rate in the store" "$(attachment team-a capped | jq -r '.shaping.egressRate // empty')" 10000000
# the internet cap the annotation set (pod annotations through io.kubernetes.cri.pod-annotations)
inet_cap() { # POD: its internet egress cap and what set it, as tollgate-ipam shows them
	nx "$TOLLGATE_BIN_DIR/tollgate-ipam" --config "$TG_TMP/agent-config/10-tollgate.conflist" --json \
		show "team-b/$1" 2>&1 | jq -r '"\(.shaping.internetEgress) \(.shaping.internetEgressFrom)"'
}
t_expect "inet: internet egress cap" "$(inet_cap inet)" "20000000 annotation"
# the plain pod (the control): no rate of its own, the config's podDefault
t_expect "plain: internet egress cap" "$(inet_cap plain)" "50000000 config"
t_expect "plain: egress rate" "$(attachment team-b plain | jq -r '.shaping.egressRate // 0')" 0
# the port mapping: recorded with the pod, Tollgate's DNAT from the node's address to it
t_expect "web: the store's ports" "$(attachment team-a web | jq -c .ports)" '[{"hostPort":8080,"containerPort":18080,"protocol":"tcp"}]'
ip netns exec "$TG_ID-p-web" timeout 15 "$PY" -m http.server 18080 --bind "${PIP[web]}" >/dev/null 2>&1 &
SRV=$!
SH_PIDS+=("$SRV")
srv_up() { ip netns exec "$TG_ID-p-web" ss -Hltn "sport = :18080" | grep -q .; }
wait_for 5 srv_up || t_fail "the web pod's server did not start"
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://$TG_NODE_IP:8080/")
t_expect "peer -> node:8080 (the pod's host port)" "$code" 200
code=$(ip netns exec "$TG_PEER" curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$TG_NODE_IP:8081/")
t_expect "peer -> node:8081 (no mapping: the control)" "$code" 000
kill "$SRV" 2>/dev/null
wait "$SRV" 2>/dev/null
sh_forget_pid "$SRV"
t_end

t_begin "each pod's bytes land in its namespace's counters, to the byte"
# 4 echoes of 100 bytes: 4 x 128 IP bytes each way
declare -A before=()
for k in "team-a egress internal" "team-a ingress internal" "team-b egress internet" "team-b ingress internet"; do
	before[$k]=$(ns_bytes "$k")
done
ip netns exec "$TG_ID-p-plain" ping -n -q -c 4 -i 0.2 -s 100 -W 1 "$TG_INET_IP" >/dev/null || t_fail "plain -> internet host: no reply"
ip netns exec "$TG_ID-p-web" ping -n -q -c 4 -i 0.2 -s 100 -W 1 "$TG_PEER_POD_IP" >/dev/null || t_fail "web -> peer: no reply"
for k in "team-a egress internal" "team-a ingress internal" "team-b egress internet" "team-b ingress internet"; do
	t_expect "$k bytes grew by" "$(($(ns_bytes "$k") - ${before[$k]}))" 512
done
t_end

t_begin "the caps hold: capped's egress rate at 10M, inet's internet egress at its annotation's 20M"
# the pod's IFB (egressRate) and its class under tollgate-inet (internet egress)
cap_ifb=$(sh_ifb "$(attachment team-a capped | jq -r .hostVeth)")
inet_cls=$(sh_hexcls "$(attachment team-b inet | jq -r '.shaping.podClass // 0')")
if [ -z "$inet_cls" ]; then
	t_fail "team-b/inet has no internet egress class"
else
	# a miss is measured once more (a TCP flow's loss recovery can leave a
	# window below its cap), as the shaping suites do; both attempts must miss to fail
	for attempt in 1 2; do
		sh_measure "tc/$cap_ifb/1:1 tc/tollgate-inet/$inet_cls" \
			"p-capped $TG_PEER $TG_PEER_POD_IP 5301" "p-inet $TG_INET $TG_INET_IP 5302" ||
			{ t_fail "iperf3 did not run"; break; }
		diag "capped: ${SH_RATE[0]} Mbit/s (cap 10), inet: ${SH_RATE[1]} Mbit/s (cap 20)"
		why=""
		sh_within "${SH_RATE[0]}" 10 0.05 || why="capped's egress ${SH_RATE[0]} Mbit/s, not within 5 % of 10"
		sh_within "${SH_RATE[1]}" 20 0.05 || why="${why:+$why; }inet's internet egress ${SH_RATE[1]} Mbit/s, not within 5 % of 20"
		[ -n "$why" ] || break
		[ "$attempt" = 2 ] && t_fail "$why (and on the first attempt)"
	done
fi
t_end

t_begin "containerd restarted: the sandboxes are READY with the same addresses and still reach the peer"
rt_containerd_stop
rt_containerd_start "$TG_TMP/containerd/config.toml" "$TG_TMP/containerd.log" ||
	t_fail "containerd did not come back: $(tail -3 "$TG_TMP/containerd.log")"
for pod in web capped inet plain; do
	st=$(cri inspect "${SID[$pod]}") || { t_fail "$pod: PodSandboxStatus after the restart failed"; continue; }
	t_expect "$pod state" "$(jq -r .state <<<"$st")" SANDBOX_READY
	t_expect "$pod address" "$(jq -r .ip <<<"$st")" "${PIP[$pod]}"
	pingq "$TG_ID-p-$pod" "$TG_PEER_POD_IP" || t_fail "$pod -> peer: no reply after the restart"
done
t_end

t_begin "StopPodSandbox releases each pod; a second one is clean; RemovePodSandbox leaves the node as before"
for pod in web capped inet plain; do
	for n in "${!ATTACHED[@]}"; do [ "${ATTACHED[n]}" = "$TG_ID-p-$pod" ] && ip netns del "$TG_ID-p-$pod" && unset 'ATTACHED[n]'; done
	cri stop "${SID[$pod]}" 2>"$TG_TMP/stop.err" || t_fail "$pod: StopPodSandbox: $(cat "$TG_TMP/stop.err")"
	[ -z "$(attachment "$(cri inspect "${SID[$pod]}" | jq -r .metadata.namespace)" "$pod")" ] ||
		t_fail "$pod: still in the store after StopPodSandbox"
	cri stop "${SID[$pod]}" 2>"$TG_TMP/stop.err" || t_fail "$pod: second StopPodSandbox: $(cat "$TG_TMP/stop.err")"
	cri remove "${SID[$pod]}" 2>"$TG_TMP/rm.err" || t_fail "$pod: RemovePodSandbox: $(cat "$TG_TMP/rm.err")"
done
t_expect "sandboxes left" "$(cri list | jq length)" 0
# the namespaces' uplink classes go with their counters (retainSeconds 0: at the next gc)
ns_classes_gone() { [ "$(nx tc class show dev tollgate-inet | grep -c 'parent 1:1')" = 0 ]; }
wait_for 10 ns_classes_gone || t_fail "namespace classes still under tollgate-inet 10 s after the last pod"
d=$(snap_diff "$EMPTY_VIEW" "$(node_view)")
[ -z "$d" ] || t_fail "left on the node: $(head -c 1500 <<<"$d")"
t_expect "agent errors logged" "$(grep -c 'level=error' "$TG_TMP/agent.log")" 0
host_untouched "by containerd's CRI plugin and the pods"
t_end

tap_done
