// SPDX-License-Identifier: Apache-2.0
/* A file replaced whole or not at all (lib/replace.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/replace.h"
#include "lib/util.h"

bool tg_dir_durable(const char *dir)
{
	struct statfs sfs;

	return !(statfs(dir, &sfs) == 0 &&
		 (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC));
}

int tg_file_commit(int fd, const char *tmp, const char *path, const void *buf, size_t len,
		   bool durable)
{
	int r = write_all(fd, buf, len);

	if (r == 0 && durable && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

int tg_file_replace(const char *dir, const char *name, const void *buf, size_t len, bool durable)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	int fd, r = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s" TG_REPLACE_SUFFIX, path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	/*
	 * Removed first and created O_EXCL | O_NOFOLLOW, 0600: nothing left or
	 * planted under the name is reused. Where something there cannot be
	 * removed (a directory), a name of its own.
	 */
	if (unlink(tmp) == 0 || errno == ENOENT) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	} else {
		snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
		fd = mkostemp(tmp, O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	r = tg_file_commit(fd, tmp, path, buf, len, durable);
	if (r < 0)
		return r;
	if (durable) {
		_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		/* The file is in place either way; a directory that cannot sync says nothing more. */
		if (dfd >= 0)
			fsync(dfd);
	}
	return 0;
}
