#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make release VERSION=x.y.z`: what a release publishes, in dist/x.y.z/:
#
#   tollgate-x.y.z-linux-amd64.tar.gz   bin/ (tollgate-agent, tollgate-ipam,
#   tollgate-x.y.z-linux-arm64.tar.gz   tollgate-allocator), cni/tollgate (the
#                                       plugin), deploy/ (the kustomize base,
#                                       its image tag set to x.y.z), docs/,
#                                       README.md, CHANGELOG.md
#   tollgate-x.y.z-image.oci.tar        the image index (linux/amd64, linux/arm64)
#   SHA256SUMS                          of the three, as `sha256sum -c` reads it
#
# Both architectures are built afresh at x.y.z (every binary's --version says
# it, checked here; arm64's under qemu-aarch64-static) from the checkout as it
# is; CHANGELOG.md must have a section for x.y.z. The per-architecture
# archives are reproducible (sorted names, owner 0, the commit's time, gzip
# without a name): the same checkout gives the same SHA256SUMS lines for them.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VERSION=${1:-}
die() { echo "release: $*" >&2; exit 1; }
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION '$VERSION' is not x.y.z (make release VERSION=1.2.3)"
grep -q "^## \[$VERSION\]" CHANGELOG.md || die "CHANGELOG.md has no section '## [$VERSION]'"
command -v qemu-aarch64-static >/dev/null || die "qemu-aarch64-static not found (make deps)"

OUT=dist/$VERSION
rm -rf "$OUT"
mkdir -p "$OUT"
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-release.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
# the commit's time: the same checkout gives the same archives
EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)

declare -A DIR=([amd64]=$STAGE/build-amd64 [arm64]=$STAGE/build-arm64)
make -s VERSION="$VERSION" BUILD="${DIR[amd64]}" bins
make -s VERSION="$VERSION" ARCH=arm64 BUILD="${DIR[arm64]}" bins

for arch in amd64 arm64; do
	run=()
	[ "$arch" = arm64 ] && run=(qemu-aarch64-static)
	for b in tollgate tollgate-ipam tollgate-agent tollgate-allocator; do
		v=$("${run[@]}" "${DIR[$arch]}/$b" --version)
		case $v in "$b $VERSION "*) ;; *) die "$arch $b --version says '$v', not $VERSION" ;; esac
	done
	name=tollgate-$VERSION-linux-$arch
	d=$STAGE/$name
	install -D -m 0755 -t "$d/bin" "${DIR[$arch]}/tollgate-agent" "${DIR[$arch]}/tollgate-ipam" \
		"${DIR[$arch]}/tollgate-allocator"
	install -D -m 0755 -t "$d/cni" "${DIR[$arch]}/tollgate"
	cp -r deploy docs "$d/"
	cp README.md CHANGELOG.md "$d/"
	# the manifests run this release's image: every tollgate image they name
	find "$d/deploy" -name '*.yaml' -exec sed -i -E "s|^( *image: *tollgate):[^ ]+\$|\1:$VERSION|" {} +
	if [ -f "$d/deploy/kustomization.yaml" ]; then
		rendered=$(kubectl kustomize "$d/deploy") || die "kubectl kustomize of the release's deploy/ failed"
	else
		rendered=$(cat "$d"/deploy/*.yaml)
	fi
	grep -q "image: tollgate:$VERSION\$" <<<"$rendered" || die "the release's manifests do not run tollgate:$VERSION"
	if grep -E 'image: *tollgate:' <<<"$rendered" | grep -qv "tollgate:$VERSION\$"; then
		die "the release's manifests name another tollgate image: $(grep 'image: *tollgate:' <<<"$rendered" | sort -u | tr '\n' ' ')"
	fi
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" -C "$STAGE" -cf - "$name" |
		gzip -n -9 >"$OUT/$name.tar.gz"
done

export VERSION
scripts/image/build.sh "${DIR[amd64]}" "$OUT/tollgate-$VERSION-image.oci.tar" "arm64=${DIR[arm64]}"

(cd "$OUT" && sha256sum -- *.tar.gz *.oci.tar >SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
echo "release $VERSION: $OUT"
(cd "$OUT" && stat -c '  %s	%n' -- *)
