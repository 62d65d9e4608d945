#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make image`: the node agent's OCI image, built offline from the build
# directory's binaries (no registry, no base image: FROM scratch), written as
# an OCI archive.
#
#   scripts/image/build.sh [BUILD_DIR [OUT]]   (defaults: build, BUILD_DIR/tollgate-image.tar)
#   podman load -i build/tollgate-image.tar  |  ctr images import build/tollgate-image.tar
#
# The rootfs holds /usr/bin/tollgate-agent, /usr/bin/tollgate-ipam,
# /usr/lib/tollgate/tollgate and the shared libraries ldd finds for them
# (glibc, libmnl, libcurl and its dependencies, libmicrohttpd), at the paths
# ldd names. Layers and config carry timestamp 0: the same binaries give the
# same image digest.
#
# podman runs in a private mount namespace with tmpfs over every directory a
# runtime writes (scripts/lib/runtime_sandbox.sh: /run, /var/lib, /var/tmp,
# /etc/cni, /etc/containers, ...) and its storage in a temp directory: the
# host's container storage, CNI configuration and caches are neither read
# nor written (tests/host_dirs.sh lists them; `make test` compares).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-build}
OUT=${2:-$BUILD/tollgate-image.tar}
VERSION=${VERSION:-0.1.0}
TAG=localhost/tollgate:$VERSION
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

die() { echo "image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (a private mount namespace for podman)"
command -v podman >/dev/null || die "podman not installed (make deps)"
for b in tollgate tollgate-ipam tollgate-agent; do
	[ -x "$BUILD/$b" ] || die "$BUILD/$b not found (make all)"
done

if [ -z "${TG_IMAGE_PRIVATE_NS:-}" ]; then
	exec unshare --mount --propagation private env TG_IMAGE_PRIVATE_NS=1 "$0" "$BUILD" "$OUT"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-image.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=scripts/lib/runtime_sandbox.sh
. "$ROOT/scripts/lib/runtime_sandbox.sh"
runtime_sandbox_mounts || die "cannot mount the runtime's private directories"
[ -d /etc/containers ] || die "/etc/containers missing (podman not installed? make deps)"
mkdir -p "$WORK/cni/net.d" "$WORK/tmp"
export TMPDIR=$WORK/tmp
cat >/etc/containers/storage.conf <<EOC
[storage]
driver = "vfs"
graphroot = "$WORK/storage"
runroot = "/run/containers/storage"
EOC
# the CNI backend's configuration and lock live in the work directory, even
# where the host has no /etc/cni to mount over
cat >/etc/containers/containers.conf <<EOC
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
image_copy_tmp_dir = "$WORK/tmp"
[network]
network_config_dir = "$WORK/cni/net.d"
EOC
# nothing is pulled (--pull=never, FROM scratch); save copies from local storage
echo '{"default": [{"type": "insecureAcceptAnything"}]}' >/etc/containers/policy.json
: >/etc/containers/registries.conf

# rootfs: the binaries and what the dynamic loader needs for them
R=$WORK/ctx/rootfs
install -D -m 0755 "$BUILD/tollgate-agent" "$R/usr/bin/tollgate-agent"
install -D -m 0755 "$BUILD/tollgate-ipam" "$R/usr/bin/tollgate-ipam"
install -D -m 0755 "$BUILD/tollgate" "$R/usr/lib/tollgate/tollgate"
libs=$(ldd "$BUILD/tollgate-agent" "$BUILD/tollgate-ipam" "$BUILD/tollgate") || die "ldd failed"
if grep -q 'not found' <<<"$libs"; then
	die "unresolved libraries: $(grep 'not found' <<<"$libs" | sort -u | tr '\n' ' ')"
fi
# shellcheck disable=SC2013 # paths without blanks
for lib in $(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' <<<"$libs" | sort -u); do
	# their own modes: the dynamic loader must be executable (an exec opens it as one)
	f=$(readlink -f "$lib")
	install -D -m "$(stat -c %a "$f")" "$f" "$R$lib"
done
# mount points of the DaemonSet (the rootfs runs read-only)
mkdir -p "$R/etc/tollgate" "$R/host/opt/cni/bin" "$R/host/etc/cni/net.d" "$R/run/tollgate" \
	"$R/var/run/netns" "$R/tmp" "$R/proc" "$R/sys" "$R/dev"
cp "$ROOT/scripts/image/Containerfile" "$WORK/ctx/Containerfile"

podman build --quiet --pull=never --network=none --timestamp 0 --label "org.opencontainers.image.version=$VERSION" \
	-f "$WORK/ctx/Containerfile" -t "$TAG" "$WORK/ctx" >/dev/null
mkdir -p "$(dirname "$OUT")"
rm -f "$OUT.tmp"
podman save --quiet --format oci-archive -o "$OUT.tmp" "$TAG"
mv -f "$OUT.tmp" "$OUT"
echo "image: $TAG -> $OUT ($(du -h "$OUT" | cut -f1), $(podman image inspect --format '{{.Digest}}' "$TAG"))"
