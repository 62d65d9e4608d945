/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_ROOTFS_H
#define TG_LIB_ROOTFS_H

/*
 * Files of another root filesystem mounted in ours (the host's, under the
 * node agent's container): a path is resolved as that root's own processes
 * would resolve it, so that its absolute symlinks (/lib64/ld-linux-x86-64.so.2
 * -> /lib/x86_64-linux-gnu/..., /lib -> usr/lib) name its files, never ours.
 */

/*
 * Opens path (taken from the root whether it starts with '/' or not) under
 * the directory root_fd as if root_fd were "/": symlinks are followed, and
 * an absolute target and ".." stop at the root, as openat2's RESOLVE_IN_ROOT
 * does (written out: the agent also runs on kernels before 5.6). At most 40
 * symlinks (-ELOOP). flags: open(2)'s; the file is opened O_NOFOLLOW |
 * O_CLOEXEC. A negative errno, or 0 and *ret_fd.
 */
int rootfs_open(int root_fd, const char *path, int flags, int *ret_fd);

#endif
