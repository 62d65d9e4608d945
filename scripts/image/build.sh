#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make image`: the node agent's OCI image, built offline from the build
# directory's binaries (no registry, no base image: FROM scratch), written as
# an OCI archive.
#
#   scripts/image/build.sh [BUILD_DIR [OUT [ARCH=DIR...]]]
#       (defaults: build, BUILD_DIR/tollgate-image.tar)
#   podman load -i build/tollgate-image.tar  |  ctr images import build/tollgate-image.tar
#
# With only BUILD_DIR the archive holds one image, for the host's
# architecture. Each ARCH=DIR (`make image`: arm64=build-arm64) adds that
# architecture's image from DIR's binaries, and the archive then holds an
# image index (a manifest list) with one image per architecture: FROM
# scratch runs nothing, so no foreign binary is executed to build it.
#
# The rootfs holds /usr/bin/tollgate-agent, /usr/bin/tollgate-ipam,
# /usr/bin/tollgate-allocator, /usr/lib/tollgate/tollgate and the shared
# libraries the dynamic loader finds for them (glibc, libmnl, libcurl and its
# dependencies, libmicrohttpd), at the paths it names: ldd for the host's
# architecture, arm64's own loader (--list, under qemu-aarch64-static) for
# arm64. Layers and config carry timestamp 0: the same binaries give the
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
EXTRA=("${@:3}")
VERSION=${VERSION:-0.1.0}
TAG=localhost/tollgate:$VERSION
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

die() { echo "image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (a private mount namespace for podman)"
command -v podman >/dev/null || die "podman not installed (make deps)"
HOST_ARCH=$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')
ARCHES=("$HOST_ARCH") DIRS=("$BUILD")
for a in "${EXTRA[@]}"; do
	arch=${a%%=*} dir=${a#*=}
	if [ "$arch" != arm64 ] || [ "$arch" = "$HOST_ARCH" ]; then
		die "$a: only arm64=DIR is added to the host's image"
	fi
	case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
	ARCHES+=("$arch") DIRS+=("$dir")
done
for d in "${DIRS[@]}"; do
	for b in tollgate tollgate-ipam tollgate-agent tollgate-allocator; do
		[ -x "$d/$b" ] || die "$d/$b not found (make all, make ARCH=arm64 bins)"
	done
done

if [ -z "${TG_IMAGE_PRIVATE_NS:-}" ]; then
	exec unshare --mount --propagation private env TG_IMAGE_PRIVATE_NS=1 "$0" "$BUILD" "$OUT" "${EXTRA[@]}"
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

# The shared libraries BINARY... load, one absolute path per line: the
# loader's own list (ldd, or arm64's loader under qemu: the multiarch
# libraries beside the host's, Debian's arm64 -dev packages).
list_libs() { # ARCH BINARY...
	local arch=$1 out b
	shift
	for b in "$@"; do
		if [ "$arch" = "$HOST_ARCH" ]; then
			out=$(ldd "$b") || die "ldd $b failed"
		else
			out=$(qemu-aarch64-static /lib/ld-linux-aarch64.so.1 --list "$b") ||
				die "arm64 loader --list $b failed (qemu-user-static and libc6:arm64: make deps)"
		fi
		if grep -q 'not found' <<<"$out"; then
			die "$b: unresolved libraries: $(grep 'not found' <<<"$out" | sort -u | tr '\n' ' ')"
		fi
		awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' <<<"$out"
	done | sort -u
}

# rootfs for one architecture: the binaries and what the dynamic loader needs for them
make_rootfs() { # ARCH BUILD_DIR ROOTFS
	local arch=$1 dir=$2 R=$3 lib f
	install -D -m 0755 "$dir/tollgate-agent" "$R/usr/bin/tollgate-agent"
	install -D -m 0755 "$dir/tollgate-ipam" "$R/usr/bin/tollgate-ipam"
	install -D -m 0755 "$dir/tollgate-allocator" "$R/usr/bin/tollgate-allocator"
	install -D -m 0755 "$dir/tollgate" "$R/usr/lib/tollgate/tollgate"
	for lib in $(list_libs "$arch" "$dir/tollgate-agent" "$dir/tollgate-ipam" "$dir/tollgate-allocator" "$dir/tollgate"); do
		# their own modes: the dynamic loader must be executable (an exec opens it as one)
		f=$(readlink -f "$lib")
		install -D -m "$(stat -c %a "$f")" "$f" "$R$lib"
	done
	# mount points of the DaemonSet (the rootfs runs read-only)
	mkdir -p "$R/etc/tollgate" "$R/host/opt/cni/bin" "$R/host/etc/cni/net.d" "$R/run/tollgate" \
		"$R/var/run/netns" "$R/tmp" "$R/proc" "$R/sys" "$R/dev"
}

mkdir -p "$(dirname "$OUT")"
rm -f "$OUT.tmp"
if [ "${#ARCHES[@]}" = 1 ]; then
	make_rootfs "$HOST_ARCH" "$BUILD" "$WORK/ctx/rootfs"
	cp "$ROOT/scripts/image/Containerfile" "$WORK/ctx/Containerfile"
	podman build --quiet --pull=never --network=none --timestamp 0 --label "org.opencontainers.image.version=$VERSION" \
		-f "$WORK/ctx/Containerfile" -t "$TAG" "$WORK/ctx" >/dev/null
	podman save --quiet --format oci-archive -o "$OUT.tmp" "$TAG"
	mv -f "$OUT.tmp" "$OUT"
	echo "image: $TAG -> $OUT ($(du -h "$OUT" | cut -f1), $(podman image inspect --format '{{.Digest}}' "$TAG"))"
	exit 0
fi

podman manifest create "$TAG" >/dev/null
for i in "${!ARCHES[@]}"; do
	arch=${ARCHES[$i]} ctx=$WORK/ctx-${ARCHES[$i]}
	make_rootfs "$arch" "${DIRS[$i]}" "$ctx/rootfs"
	cp "$ROOT/scripts/image/Containerfile" "$ctx/Containerfile"
	podman build --quiet --pull=never --network=none --timestamp 0 --platform "linux/$arch" \
		--label "org.opencontainers.image.version=$VERSION" \
		-f "$ctx/Containerfile" --manifest "$TAG" "$ctx" >/dev/null
done
podman manifest push --quiet --all "$TAG" "oci-archive:$OUT.tmp" >/dev/null

# The archive as a runtime reads it: one index, one image per architecture,
# each one's config naming it, and each rootfs alone running its binaries
# (chroot: nothing of the host's is found; arm64's under qemu-aarch64-static
# copied into it, which needs no library).
X=$WORK/check
mkdir -p "$X"
tar -xf "$OUT.tmp" -C "$X"
blob() { printf '%s/blobs/sha256/%s' "$X" "${1#sha256:}"; }
index=$(jq -r '.manifests[0].digest' "$X/index.json")
[ "$(jq -r '.manifests | length' "$(blob "$index")")" = "${#ARCHES[@]}" ] ||
	die "the archive's index does not hold ${#ARCHES[*]} images"
for arch in "${ARCHES[@]}"; do
	m=$(jq -r --arg a "$arch" '.manifests[] | select(.platform.architecture == $a and .platform.os == "linux") | .digest' "$(blob "$index")")
	[ -n "$m" ] || die "the index has no linux/$arch image"
	cfg=$(jq -r .config.digest "$(blob "$m")")
	[ "$(jq -r .architecture "$(blob "$cfg")")" = "$arch" ] || die "the $arch image's config names another architecture"
	fs=$X/rootfs-$arch
	mkdir -p "$fs"
	for l in $(jq -r '.layers[].digest' "$(blob "$m")"); do tar -xf "$(blob "$l")" -C "$fs"; done
	run=()
	if [ "$arch" != "$HOST_ARCH" ]; then
		cp "$(command -v qemu-aarch64-static)" "$fs/qemu"
		run=(/qemu)
	fi
	for b in /usr/bin/tollgate-agent /usr/bin/tollgate-ipam /usr/bin/tollgate-allocator /usr/lib/tollgate/tollgate; do
		v=$(chroot "$fs" "${run[@]}" "$b" --version 2>&1) || die "$arch image: $b --version failed: $v"
		case $arch:$v in
		amd64:*x86_64-linux-gnu*|arm64:*aarch64-linux-gnu*) ;;
		*) die "$arch image: $b says: $v" ;;
		esac
	done
done
mv -f "$OUT.tmp" "$OUT"
echo "image: $TAG (${ARCHES[*]}, each run from its own rootfs) -> $OUT ($(du -h "$OUT" | cut -f1))"
