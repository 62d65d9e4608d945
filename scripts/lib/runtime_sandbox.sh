# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# The private mounts a container runtime (podman, containerd) runs under when
# `make image` or a test starts one: fresh tmpfs over every host directory
# where a runtime or its CNI backend keeps configuration, locks, caches,
# state or temporary files, so nothing it writes reaches the host (podman's
# CNI backend creates /etc/cni/net.d/cni.lock, its image copy cache
# /var/lib/containers/cache, its build temp files in /var/tmp).
#
# Sourced by scripts/image/build.sh and tests/integration/test_runtimes.sh;
# call runtime_sandbox_mounts only inside a private mount namespace
# (unshare --mount --propagation private).

# Parents, not leaves: a runtime that creates /opt/cni or /var/lib/cni
# creates it in the tmpfs. /etc itself stays (passwd, resolv.conf, hosts).
RUNTIME_SANDBOX_DIRS="/run /var/lib /var/tmp /var/cache /opt /etc/cni /etc/containers /etc/containerd"

runtime_sandbox_mounts() {
	if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
		echo "runtime_sandbox_mounts: not in a private mount namespace" >&2
		return 1
	fi
	local d
	for d in $RUNTIME_SANDBOX_DIRS; do
		# /etc/cni and /etc/containerd come with the runtimes' packages; a
		# runtime told where its configuration is does not create them
		[ -d "$d" ] || continue
		mount -t tmpfs -o mode=0755 tmpfs "$d" || return 1
	done
}
