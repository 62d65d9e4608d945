/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_REPLACE_H
#define TG_LIB_REPLACE_H

/*
 * A file replaced whole or not at all (the store's state.json, the node
 * daemon's budgets.json): its bytes go to one fixed temp name beside it,
 * "<name>.tmp", which is flushed, renamed over the file, and then the
 * directory is flushed so that the rename lasts too.
 *
 * One writer at a time (the store's flock; the one agent of a node for
 * budgets.json): a writer SIGKILLed before its rename leaves at most that
 * one temp file, and the next write removes it first, so a crash storm
 * leaves no more than one behind. On tmpfs the flushes buy nothing (the
 * file dies with the boot) and are skipped.
 */

#include <stdbool.h>
#include <stddef.h>

#define TG_REPLACE_SUFFIX ".tmp"

/* Whether dir is on a filesystem that outlives the boot (not tmpfs, not ramfs). */
bool tg_dir_durable(const char *dir);
/*
 * The end of a replacement: buf written to fd (the temp file tmp, open for
 * writing), flushed when durable, closed and renamed over path; on failure
 * tmp is removed. 0 or a negative errno. Callers flush the directory.
 */
int tg_file_commit(int fd, const char *tmp, const char *path, const void *buf, size_t len,
		   bool durable);
/*
 * dir/name replaced with buf (mode 0600). durable: fsync of the temp file
 * before the rename and of dir after it. 0 or a negative errno; on failure
 * dir/name is as it was and the temp file is gone.
 */
int tg_file_replace(const char *dir, const char *name, const void *buf, size_t len, bool durable);

#endif
