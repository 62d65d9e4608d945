// SPDX-License-Identifier: Apache-2.0
/* The plugin's operation counters and its pool-exhausted signal (lib/cniops.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/cniops.h"

#define MAGIC 0x54474f5053000001ull  /* "TGOPS", layout 1: the counts */
#define DMAGIC 0x54474f5044000001ull /* "TGOPD", layout 1: the durations */

/*
 * The file. Every release's plugin reads and writes the counts at the same
 * offsets; the durations follow them, stamped on their own. It stays within
 * one page: a mapping past the end of a file that a racing older plugin
 * grew only to the counts' size (ftruncate is "set", not "grow") reads zeros
 * and raises no SIGBUS.
 */
struct ops_file {
	uint64_t magic;
	uint64_t n[CNIOPS_CMDS][CNIOPS_CODES];
	uint64_t dmagic;
	uint64_t bucket[CNIOPS_CMDS][CNIOPS_BUCKETS];
	uint64_t sum_ns[CNIOPS_CMDS];
};
#define COUNTS_SIZE offsetof(struct ops_file, dmagic)
_Static_assert(COUNTS_SIZE == 608, "the counts' layout is every release's");
_Static_assert(sizeof(struct ops_file) <= 4096, "the file stays within a page");

const uint64_t cniops_bucket_ns[CNIOPS_BUCKETS - 1] = {
	5000000,   10000000,   25000000,   50000000,   100000000,   250000000,
	500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

static const char *const bucket_le[CNIOPS_BUCKETS] = {
	"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf",
};

unsigned cniops_bucket_slot(int64_t duration_ns)
{
	unsigned k = 0;

	while (k < CNIOPS_BUCKETS - 1 && duration_ns > (int64_t)cniops_bucket_ns[k])
		k++;
	return k;
}

const char *cniops_bucket_le(unsigned slot)
{
	return slot < CNIOPS_BUCKETS ? bucket_le[slot] : "+Inf";
}

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

/* The first writer stamps a part; a part of another layout is left alone. */
static bool stamped(uint64_t *magic, uint64_t want)
{
	uint64_t expect = 0;

	__atomic_compare_exchange_n(magic, &expect, want, false, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
	return __atomic_load_n(magic, __ATOMIC_RELAXED) == want;
}

void cniops_record(const char *dir, enum cni_cmd cmd, int code, int64_t duration_ns)
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
	/*
	 * A new file, or an older plugin's (the counts alone), is grown to size
	 * once; growing is idempotent between racing plugins.
	 */
	if (fstat(fd, &sb) < 0 ||
	    (sb.st_size < (off_t)sizeof(*f) && ftruncate(fd, (off_t)sizeof(*f)) < 0)) {
		close(fd);
		return;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return;
	/* The durations are read by the counts' layout: a file of another is left whole. */
	if (stamped(&f->magic, MAGIC))
		__atomic_fetch_add(&f->n[cmd][cniops_code_slot(code)], 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&f->magic, __ATOMIC_RELAXED) == MAGIC && stamped(&f->dmagic, DMAGIC)) {
		uint64_t ns = duration_ns > 0 ? (uint64_t)duration_ns : 0;

		__atomic_fetch_add(&f->bucket[cmd][cniops_bucket_slot(duration_ns)], 1,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&f->sum_ns[cmd], ns, __ATOMIC_RELAXED);
	}
	munmap(f, sizeof(*f));
}

int cniops_read(const char *dir, struct cniops_counts *ret)
{
	char path[4200];
	struct ops_file *f;
	struct stat sb;
	size_t len;
	int fd, r = 0;

	memset(ret, 0, sizeof(*ret));
	if (path_of(dir, CNIOPS_FILE, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || sb.st_size < (off_t)COUNTS_SIZE) {
		close(fd);
		return -EBADMSG;
	}
	/* An older plugin's file ends after the counts. */
	len = sb.st_size >= (off_t)sizeof(*f) ? sizeof(*f) : COUNTS_SIZE;
	f = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return -errno;
	/* Each counter read whole while plugins add to it. */
	if (__atomic_load_n(&f->magic, __ATOMIC_RELAXED) != MAGIC)
		r = -EBADMSG;
	for (unsigned c = 0; r == 0 && c < CNIOPS_CMDS; c++)
		for (unsigned k = 0; k < CNIOPS_CODES; k++)
			ret->n[c][k] = __atomic_load_n(&f->n[c][k], __ATOMIC_RELAXED);
	if (r == 0 && len == sizeof(*f) &&
	    __atomic_load_n(&f->dmagic, __ATOMIC_RELAXED) == DMAGIC) {
		ret->has_durations = true;
		for (unsigned c = 0; c < CNIOPS_CMDS; c++) {
			for (unsigned k = 0; k < CNIOPS_BUCKETS; k++)
				ret->bucket[c][k] =
					__atomic_load_n(&f->bucket[c][k], __ATOMIC_RELAXED);
			ret->sum_ns[c] = __atomic_load_n(&f->sum_ns[c], __ATOMIC_RELAXED);
		}
	}
	munmap(f, len);
	if (r < 0)
		memset(ret, 0, sizeof(*ret));
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
