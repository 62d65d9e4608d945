# shellcheck shell=bash
# A throwaway node for real container runtimes, shared by test_runtimes.sh
# (podman, `ctr run --cni`) and test_cri.sh (containerd's CRI plugin).
#
# The node is lib.sh's $TG_NODE, entered through a holder process (nsenter
# --net=node unshare --mount --propagation private): its own mount namespace
# with tmpfs over every directory a runtime writes
# (scripts/lib/runtime_sandbox.sh: /run, /var/lib, /var/tmp, /opt,
# /etc/cni, /etc/containers, ...), a fresh sysfs (the node's
# /sys/class/net) and the host's cgroup hierarchies moved under it.
# /etc/cni/net.d, /opt/cni/bin, /var/lib/cni and /run there are never the
# host's; containerd and podman keep their storage in $TG_TMP and their
# containers' cgroups under $RT_CG, one parent per run.
#
# Sourced after lib.sh. Public: rt_node_up, rt_node_down (the trap's work),
# nx, rt_rootfs, rt_image, rt_containerd_config, rt_containerd_start, rt_containerd_stop, host_untouched,
# store, store_count, node_view (with $NET), private_pids, cg_dirs.

HOLDER=""
CTD_PID=""
RT_CG=tollgate-e2e-$TG_ID
RT_HOST_DIRS_BEFORE=$(bash "$TG_ROOT/tests/host_dirs.sh")

# host_untouched WHEN: the host's runtime directories as before the run
host_untouched() {
	local d
	d=$(snap_diff "$RT_HOST_DIRS_BEFORE" "$(bash "$TG_ROOT/tests/host_dirs.sh")")
	[ -z "$d" ] || t_fail "host runtime directories changed $1: $(head -c 1500 <<<"$d")"
}

# nx CMD...: run CMD in the node: its netns and the private mounts.
nx() {
	[ -n "$HOLDER" ] || { echo "nx: the node is not up" >&2; return 1; }
	nsenter -t "$HOLDER" -m -n -- "$@"
}
# pids of every process in the private mount namespace (all started by this run)
private_pids() {
	local m p
	m=$(readlink "/proc/$HOLDER/ns/mnt") || return 0
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$m" ] && echo "${p#/proc/}"
	done
}
cg_dirs() { find /sys/fs/cgroup/*/"$RT_CG" -depth -type d 2>/dev/null; }
rt_private_ns() {
	[ "$(readlink "/proc/$HOLDER/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] &&
		[ "$(cat "/proc/$HOLDER/comm")" = sleep ]
}

# rt_node_up: the topology, the holder and the node's private mounts, and
# podman's configuration there (vfs storage in $TG_TMP, cgroupfs, runc, CNI).
# Every path it writes is inside the private mounts (nx) or $TG_TMP.
rt_node_up() {
	topo_up || return 1
	nsenter --net="$TG_NETNS_DIR/$TG_NODE" unshare --mount --propagation private sleep 100000 \
		</dev/null >/dev/null 2>&1 &
	HOLDER=$!
	TG_PIDS+=("$HOLDER")
	wait_for 5 rt_private_ns || { echo "no private mount namespace" >&2; return 1; }
	mkdir -p "$TG_TMP/cg" "$TG_TMP/podman" "$TG_TMP/containerd"
	# a fresh sysfs shows the node's interfaces; the cgroup hierarchies move under it
	nx bash -ec "
		mount --rbind /sys/fs/cgroup '$TG_TMP/cg'
		mount -t sysfs sysfs /sys
		mount --move '$TG_TMP/cg' /sys/fs/cgroup
		. '$TG_ROOT/scripts/lib/runtime_sandbox.sh'
		runtime_sandbox_mounts
		mkdir -p /etc/cni/net.d /opt/cni/bin /var/lib/cni /run/netns /run/tollgate
	" || { echo "cannot build the private mounts" >&2; return 1; }
	# CAP_SYS_RESOURCE may be missing (a container host): no limits above ours;
	# runc (crun refuses hybrid cgroup v1/v2 hosts)
	local storage containers
	storage=$(printf '%s\n' '[storage]' 'driver = "vfs"' "graphroot = \"$TG_TMP/podman/root\"" \
		'runroot = "/run/containers/storage"')
	containers=$(printf '%s\n' '[containers]' 'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]' \
		'[engine]' 'cgroup_manager = "cgroupfs"' 'events_logger = "file"' 'runtime = "runc"' \
		'[network]' 'network_backend = "cni"' 'cni_plugin_dirs = ["/opt/cni/bin"]' \
		'network_config_dir = "/etc/cni/net.d"')
	if ! { nx tee /etc/containers/storage.conf <<<"$storage" >/dev/null &&
		nx tee /etc/containers/containers.conf <<<"$containers" >/dev/null &&
		nx tee /etc/containers/policy.json <<<'{"default": [{"type": "insecureAcceptAnything"}]}' >/dev/null &&
		nx truncate -s 0 /etc/containers/registries.conf; }; then
		echo "cannot write podman's configuration" >&2
		return 1
	fi
}

# rt_rootfs DIR: an image's root filesystem skeleton (the mount points a
# runtime needs), to put the image's files into
rt_rootfs() { mkdir -p "$1/bin" "$1/proc" "$1/sys" "$1/dev" "$1/etc" "$1/tmp"; }

# rt_image ROOTFS REF OUT [CHANGE...]: ROOTFS as a one-layer image REF in
# the node's podman (each CHANGE a Containerfile instruction), saved as the
# OCI archive OUT for containerd
rt_image() {
	local rootfs=$1 ref=$2 out=$3 c changes=()
	shift 3
	for c in "$@"; do changes+=(--change "$c"); done
	tar -C "$rootfs" -cf "$out.layer.tar" . &&
		nx podman import -q "${changes[@]}" "$out.layer.tar" "$ref" >/dev/null &&
		nx podman save -q --format oci-archive -o "$out" "$ref"
}

# rt_containerd_config [TOP-LEVEL-LINE...]: $TG_TMP/containerd/config.toml,
# containerd's root in $TG_TMP and its state and socket in the node's /run,
# the lines given before its sections, what stdin holds after them
rt_containerd_config() {
	{
		printf '%s\n' 'version = 2' "root = \"$TG_TMP/containerd/root\"" 'state = "/run/containerd"' "$@" \
			'[grpc]' '  address = "/run/containerd/containerd.sock"'
		cat
	} >"$TG_TMP/containerd/config.toml"
}

# rt_containerd_start CONFIG LOG: containerd in the node with CONFIG; true
# once it answers on /run/containerd/containerd.sock
rt_containerd_start() {
	nsenter -t "$HOLDER" -m -n -- containerd --config "$1" >>"$2" 2>&1 &
	CTD_PID=$!
	TG_PIDS+=("$CTD_PID")
	wait_for 15 nx ctr version >/dev/null 2>&1
}

# rt_containerd_stop: SIGTERM to the containerd this run started, and wait
rt_containerd_stop() {
	[ -n "$CTD_PID" ] || return 0
	kill "$CTD_PID" 2>/dev/null
	wait "$CTD_PID" 2>/dev/null
	CTD_PID=""
}

# rt_node_down: containers first (their DELs), then containerd, then every
# process left in the private mounts, the holder, the cgroups and the topology
rt_node_down() {
	if [ -n "$HOLDER" ] && [ -d "/proc/$HOLDER" ]; then
		nx podman rm -a -f -t 0 >/dev/null 2>&1
		local ns id p left=""
		for ns in $(nx ctr namespaces ls -q 2>/dev/null); do
			for id in $(nx ctr -n "$ns" task ls -q 2>/dev/null); do
				nx ctr -n "$ns" task kill -s KILL "$id" >/dev/null 2>&1
			done
		done
		sleep 0.5
		rt_containerd_stop
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			left=$(private_pids | grep -vx "$HOLDER")
			[ -z "$left" ] && break
			sleep 0.2
		done
		for p in $left; do kill -9 "$p" 2>/dev/null; done
		kill "$HOLDER" 2>/dev/null
		wait "$HOLDER" 2>/dev/null
	fi
	HOLDER=""
	local d
	for d in $(cg_dirs); do rmdir "$d" 2>/dev/null; done
	topo_down
}

store() { nx cat "/run/tollgate/$NET/state.json" 2>/dev/null || echo '{}'; }
store_count() { store | jq '.attachments // [] | length'; }

# node_view: what a pod leaves on the node and in the runtime's cache (the
# namespaces' named counters stay, by design, for retainSeconds)
node_view() {
	echo "# links"
	nx ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort
	echo "# routes"
	nx ip route show table all | grep -v '^local\|^broadcast\|^multicast\|fe80::\|ff00::' | sort
	echo "# nft sets and maps (not @nexthops: the next hops traffic added, each for a minute)"
	nx nft -j list ruleset | jq -c '.nftables[] | (.set // .map // empty) | select(.name != "nexthops") | {name, elem}'
	echo "# tc"
	local l
	for l in $(nx ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//'); do
		nx tc qdisc show dev "$l" | sed "s/^/$l /; s/ direct_packets_stat [0-9]*//"
		nx tc class show dev "$l" | sed "s/^/$l /"
		nx tc filter show dev "$l" | sed "s/^/$l /"
		nx tc filter show dev "$l" ingress 2>/dev/null | sed "s/^/$l ingress /"
	done
	echo "# store"
	store | jq -c '.attachments // []'
	echo "# libcni cache"
	nx find /var/lib/cni -type f | sort
}
