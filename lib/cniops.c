// SPDX-License-Identifier: Apache-2.0
/* The plugin's operation counters and its pool-exhausted signal (lib/cniops.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/cniops.h"

#define MAGIC 0x54474f5053000001ull /* "TGOPS", layout 1 */

struct ops_file {
	uint64_t magic;
	struct cniops_counts c;
};

unsigned cniops_code_slot(int code)
{
	if (code >= 0 && code <= 11)
		return (unsigned)code;
	return code == 50 ? 12 : code == 100 ? 13 : 14;
}

const char *cniops_code_name(unsigned slot, char buf[8])
{
	if (slot <= 11)
		snprintf(buf, 8, "%u", slot);
	else
		snprintf(buf, 8, "%s", slot == 12 ? "50" : slot == 13 ? "100" : "other");
	return buf;
}

static int path_of(const char *dir, const char *name, char *buf, size_t size)
{
	return (size_t)snprintf(buf, size, "%s/%s", dir, name) < size ? 0 : -ENAMETOOLONG;
}

void cniops_record(const char *dir, enum cni_cmd cmd, int code)
{
	char path[4200];
	struct ops_file *f;
	struct stat sb;
	int fd;

	if (cmd >= CNIOPS_CMDS || path_of(dir, CNIOPS_FILE, path, sizeof(path)) < 0)
		return;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	/* A new file is grown to size once; growing is idempotent between racing plugins. */
	if (fstat(fd, &sb) < 0 || (sb.st_size < (off_t)sizeof(*f) &&
				   ftruncate(fd, (off_t)sizeof(*f)) < 0)) {
		close(fd);
		return;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return;
	{
		uint64_t expect = 0;

		/* The first writer stamps the layout; a file of another layout is left alone. */
		__atomic_compare_exchange_n(&f->magic, &expect, MAGIC, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
		if (__atomic_load_n(&f->magic, __ATOMIC_RELAXED) == MAGIC)
			__atomic_fetch_add(&f->c.n[cmd][cniops_code_slot(code)], 1,
					   __ATOMIC_RELAXED);
	}
	munmap(f, sizeof(*f));
}

int cniops_read(const char *dir, struct cniops_counts *ret)
{
	char path[4200];
	struct ops_file *f;
	struct stat sb;
	int fd, r = 0;

	memset(ret, 0, sizeof(*ret));
	if (path_of(dir, CNIOPS_FILE, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || sb.st_size < (off_t)sizeof(*f)) {
		close(fd);
		return -EBADMSG;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return -errno;
	/* Each counter read whole while plugins add to it. */
	if (__atomic_load_n(&f->magic, __ATOMIC_RELAXED) != MAGIC)
		r = -EBADMSG;
	for (unsigned c = 0; r == 0 && c < CNIOPS_CMDS; c++)
		for (unsigned k = 0; k < CNIOPS_CODES; k++)
			ret->n[c][k] = __atomic_load_n(&f->c.n[c][k], __ATOMIC_RELAXED);
	munmap(f, sizeof(*f));
	return r;
}

void cniops_signal_exhausted(const char *dir)
{
	char path[4200];
	int fd;

	if (path_of(dir, CNIOPS_EXHAUSTED_FILE, path, sizeof(path)) < 0)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (fd < 0)
		return;
	futimens(fd, NULL); /* an existing file: a new mtime, an inotify event */
	close(fd);
}
