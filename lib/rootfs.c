// SPDX-License-Identifier: Apache-2.0
/* Paths resolved inside another root (lib/rootfs.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/rootfs.h"

#define LINKS_MAX 40

/* Cuts the first component off *todo into comp ("" when *todo holds only slashes). */
static int next_component(char *todo, char *comp, size_t size)
{
	char *p = todo, *end;
	size_t n;

	while (*p == '/')
		p++;
	end = strchrnul(p, '/');
	n = (size_t)(end - p);
	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(comp, p, n);
	comp[n] = '\0';
	memmove(todo, end, strlen(end) + 1);
	return 0;
}

int rootfs_open(int root_fd, const char *path, int flags, int *ret_fd)
{
	char done[PATH_MAX] = "", todo[PATH_MAX], comp[NAME_MAX + 1];
	unsigned links = 0;
	int fd;

	if ((size_t)snprintf(todo, sizeof(todo), "%s", path) >= sizeof(todo))
		return -ENAMETOOLONG;
	for (;;) {
		char cand[PATH_MAX], target[PATH_MAX], rest[PATH_MAX];
		struct stat sb;
		ssize_t n;
		int r = next_component(todo, comp, sizeof(comp));

		if (r < 0)
			return r;
		if (!comp[0])
			break;
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			/* at the root, ".." is the root */
			char *slash = strrchr(done, '/');

			*(slash ? slash : done) = '\0';
			continue;
		}
		if ((size_t)snprintf(cand, sizeof(cand), "%s%s%s", done, done[0] ? "/" : "",
				     comp) >= sizeof(cand))
			return -ENAMETOOLONG;
		if (fstatat(root_fd, cand, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (!S_ISLNK(sb.st_mode)) {
			memcpy(done, cand, sizeof(done));
			continue;
		}
		if (++links > LINKS_MAX)
			return -ELOOP;
		n = readlinkat(root_fd, cand, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		/* the target, then what was left; an absolute one starts again at the root */
		if (target[0] == '/')
			done[0] = '\0';
		memcpy(rest, todo, sizeof(rest));
		if ((size_t)snprintf(todo, sizeof(todo), "%s/%s", target, rest) >= sizeof(todo))
			return -ENAMETOOLONG;
	}
	fd = openat(root_fd, done[0] ? done : ".", flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}
