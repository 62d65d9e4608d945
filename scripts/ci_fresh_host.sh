#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Before CI's tests: puts the host's runtime and CNI directories back to what
# a fresh Debian 12 machine with Tollgate's packages has, so that CI sees
# what a newcomer sees. Removes what earlier versions of the image build and
# the runtime tests left on the host (podman's CNI lock, its image copy
# cache) and names every other file there that no Debian package owns,
# without touching it.
#
#   scripts/ci_fresh_host.sh      (root; .ci/run)
set -u

LEFTOVERS=(
	/etc/cni/net.d/cni.lock
	/var/lib/containers/cache/blob-info-cache-v1.boltdb
)
for f in "${LEFTOVERS[@]}"; do
	[ -e "$f" ] || continue
	echo "fresh host: removing $f (left by an earlier image build or runtime test)"
	rm -f "$f"
done
# the directories those files made, once empty
for d in /var/lib/containers/cache /var/lib/containers; do
	[ -d "$d" ] && rmdir "$d" 2>/dev/null && echo "fresh host: removed empty $d"
done

# anything else no package owns
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/tests/host_dirs.sh" | awk '$1 != "absent" && $2 == "f" { print $1 }' | while read -r f; do
	dpkg -S "$f" >/dev/null 2>&1 || echo "fresh host: $f belongs to no Debian package (left as it is)"
done
exit 0
