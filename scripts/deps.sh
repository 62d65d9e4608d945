#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages Tollgate's build, lint, tests, demo and bench need.
# Runs apt-get only when something is missing, so repeated `make test` is quick.
set -eu
PKGS="build-essential pkg-config iproute2 nftables
iperf3 jq containernetworking-plugins valgrind procps iputils-ping iptables python3 python3-yaml
curl conntrack prometheus clang podman containerd runc busybox-static util-linux
cppcheck shellcheck etcd-server openssl buildah qemu-user-static crossbuild-essential-arm64"
# The libraries, for the host's architecture and for arm64 beside it (Debian
# multiarch: `make ARCH=arm64`, its tests under qemu-aarch64-static). Each is
# named with its architecture: a bare name matches either one's install.
LIBS="libnl-3-dev libnl-route-3-dev libnftnl-dev libmnl-dev libnetfilter-conntrack-dev
libjson-c-dev libxxhash-dev libmicrohttpd-dev libcurl4-openssl-dev libcmocka-dev libgmp-dev"
NATIVE=$(dpkg --print-architecture)
for p in $LIBS; do PKGS="$PKGS $p:$NATIVE $p:arm64"; done
# `kubectl kustomize` renders deploy/: Debian's kubernetes-client, unless the
# machine already has a kubectl of its own (the two packages clash on /usr/bin/kubectl).
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "deps: installing$missing"
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
apt-get install -y -qq --no-install-recommends $missing
