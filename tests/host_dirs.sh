#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prints a canonical listing of the host directories that CNI plugins,
# container runtimes and Tollgate itself write on a real node: one line per
# entry with its type, mode, owner, size and a SHA-256 of every regular
# file (the target of a symlink), so two listings are equal exactly when
# those trees are byte-identical. Tests and `make image` run their runtimes
# in private mount namespaces: nothing of theirs may show up here.
#
#   tests/host_dirs.sh > before; ...; tests/host_dirs.sh > after; diff before after
#
# A directory that does not exist prints `absent DIR`, so creating one shows.
set -u

HOST_DIRS=(
	/etc/cni /opt/cni /var/lib/cni /run/cni
	/etc/containers /var/lib/containers /run/containers
	/etc/containerd /var/lib/containerd /run/containerd
	/run/tollgate /var/log/tollgate.log
)

for d in "${HOST_DIRS[@]}"; do
	if [ ! -e "$d" ] && [ ! -L "$d" ]; then
		echo "absent $d"
		continue
	fi
	find "$d" -xdev -printf '%p\t%y %m %u:%g %s\0' 2>/dev/null | sort -z | while IFS=$'\t' read -r -d '' p e; do
		case $e in
		f*) echo "$p $e $(sha256sum <"$p" | cut -c1-64)" ;;
		l*) echo "$p $e -> $(readlink "$p")" ;;
		*) echo "$p $e" ;;
		esac
	done
done
