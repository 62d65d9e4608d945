#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages Tollgate's build, lint, tests, demo and bench need.
# Runs apt-get only when something is missing, so repeated `make test` is quick.
set -eu
PKGS="build-essential pkg-config iproute2 nftables
iperf3 jq containernetworking-plugins valgrind procps iputils-ping iptables python3 python3-yaml
curl conntrack prometheus clang podman containerd runc busybox-static util-linux
cppcheck shellcheck clang-format etcd-server openssl buildah qemu-user-static crossbuild-essential-arm64
python3-grpcio python3-grpc-tools python3-jwt python3-cryptography
qemu-system-arm cpio"
# The libraries, for the host's architecture and for arm64 beside it (Debian
# multiarch: `make ARCH=arm64`, its tests under qemu-aarch64-static). Each is
# named with its architecture: a bare name matches either one's install.
LIBS="libnl-3-dev libnl-route-3-dev libnftnl-dev libmnl-dev libnetfilter-conntrack-dev
libjson-c-dev libxxhash-dev libmicrohttpd-dev libcurl4-openssl-dev libcmocka-dev libgmp-dev
libjansson-dev libssl-dev"
NATIVE=$(dpkg --print-architecture)
for p in $LIBS; do PKGS="$PKGS $p:$NATIVE $p:arm64"; done
# libcjose-dev is one architecture's at a time (no Multi-Arch): the host's;
# arm64 links its runtime library (libcjose0) with the host's headers.
PKGS="$PKGS libcjose-dev:$NATIVE libcjose0:arm64"
# `kubectl kustomize` renders deploy/: Debian's kubernetes-client, unless the
# machine already has a kubectl of its own (the two packages clash on /usr/bin/kubectl).
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
# The arm64 machine of tests/integration/test_arm64_vm.sh boots Debian's arm64
# kernel with an arm64 busybox: both fetched, never installed (an arm64
# kernel's package would run the host's initramfs and boot-loader hooks).
VM_CACHE=${TG_ARM64_VM_CACHE:-/var/cache/tollgate/arm64-vm}
vm_debs() {
	ls "$VM_CACHE"/linux-image-*_arm64.deb "$VM_CACHE"/busybox-static_*_arm64.deb >/dev/null 2>&1
}
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && vm_debs && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "deps: installing:${missing:- nothing new}; fetching the arm64 machine's kernel if missing"
export DEBIAN_FRONTEND=noninteractive
# Packages such as prometheus and containerd start a service on install; the tests start their
# own servers inside network namespaces (the runtime e2e its own containerd and
# podman, in a private mount namespace), so nothing may start on the host.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod +x "$policy"
	trap 'rm -f "$policy"' EXIT
fi
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq
# shellcheck disable=SC2086  # one word per package: the list is split on purpose
[ -z "$missing" ] || apt-get install -y -qq --no-install-recommends $missing
if ! vm_debs; then
	kernel=$(apt-cache depends linux-image-arm64:arm64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { sub(/:arm64$/, "", $2); print $2; exit }')
	[ -n "$kernel" ] || { echo "deps: no arm64 kernel package found (linux-image-arm64:arm64)" >&2; exit 1; }
	mkdir -p "$VM_CACHE"
	(cd "$VM_CACHE" && apt-get download -qq "$kernel:arm64" busybox-static:arm64)
fi
