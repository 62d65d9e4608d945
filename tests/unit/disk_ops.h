/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_DISK_OPS_H
#define TG_TEST_DISK_OPS_H

/*
 * What a write does to the disk, in order: the link step (-Wl,--wrap=fsync,
 * --wrap=rename, see the Makefile) records every fsync (of a file or of a
 * directory) and rename while a test arms it, and passes each call on.
 * disk_ops_arm() starts a record; disk_ops_text() ends it and spells it
 * out, as "fsync-file rename fsync-dir". The last rename's two paths are
 * kept (disk_ops.rename_from, .rename_to): which temp name a write used.
 */

#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

enum disk_op { OP_FSYNC_FILE, OP_FSYNC_DIR, OP_RENAME };
#define DISK_OPS_MAX 16

static struct {
	bool armed;
	size_t n;
	enum disk_op op[DISK_OPS_MAX];
	char rename_from[512], rename_to[512];
} disk_ops;

int __real_fsync(int fd);
int __wrap_fsync(int fd);
int __real_rename(const char *from, const char *to);
int __wrap_rename(const char *from, const char *to);

static inline void disk_op(enum disk_op op)
{
	if (disk_ops.armed && disk_ops.n < DISK_OPS_MAX)
		disk_ops.op[disk_ops.n++] = op;
}

int __wrap_fsync(int fd)
{
	struct stat sb;

	disk_op(fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode) ? OP_FSYNC_DIR : OP_FSYNC_FILE);
	return __real_fsync(fd);
}

int __wrap_rename(const char *from, const char *to)
{
	disk_op(OP_RENAME);
	if (disk_ops.armed) {
		snprintf(disk_ops.rename_from, sizeof(disk_ops.rename_from), "%s", from);
		snprintf(disk_ops.rename_to, sizeof(disk_ops.rename_to), "%s", to);
	}
	return __real_rename(from, to);
}

static inline void disk_ops_arm(void)
{
	disk_ops.n = 0;
	disk_ops.rename_from[0] = disk_ops.rename_to[0] = '\0';
	disk_ops.armed = true;
}

static inline void disk_ops_text(char *buf, size_t size)
{
	static const char *const names[] = { "fsync-file", "fsync-dir", "rename" };
	size_t len = 0;

	disk_ops.armed = false;
	buf[0] = '\0';
	for (size_t i = 0; i < disk_ops.n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "",
					names[disk_ops.op[i]]);
}

#endif
