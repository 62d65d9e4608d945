// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/util.h"

int64_t time_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t time_boot_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t time_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t time_mono_ms(void)
{
	return time_mono_ns() / 1000000;
}

int64_t backoff_ms(int64_t first_ms, int64_t max_ms, unsigned failures)
{
	int64_t delay = first_ms;

	for (unsigned i = 0; i < failures && delay < max_ms; i++)
		delay *= 2;
	return delay > max_ms ? max_ms : delay;
}

uint64_t hash_fnv1a64(const void *data, size_t len, uint64_t h)
{
	const unsigned char *p = data;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

bool array_grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first)
{
	void *arr, *grown;
	size_t want;

	if (n < *cap)
		return true;
	want = *cap ? *cap * 2 : first;
	memcpy(&arr, arrp, sizeof(arr));
	grown = realloc(arr, want * elem);
	if (!grown)
		return false;
	memcpy(arrp, &grown, sizeof(grown));
	*cap = want;
	/* cppcheck-suppress memleak ; grown was stored in *arrp by the memcpy */
	return true;
}

static bool safe_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

bool name_is_safe(const char *s, size_t max)
{
	size_t i;

	if (!s || !s[0] || !safe_char(s[0]) || s[0] == '_' || s[0] == '.' || s[0] == '-')
		return false;
	for (i = 0; s[i]; i++)
		if (i >= max || !safe_char(s[i]))
			return false;
	return true;
}

int read_line_file(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return (int)n;
}

int mkdir_p(const char *path, unsigned mode)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);
	char *p;

	if (len == 0 || len >= sizeof(tmp))
		return -ENAMETOOLONG;
	/* Nearly always there already: one call, not one per component. */
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	memcpy(tmp, path, len + 1);
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int read_stream(FILE *f, size_t max, char **ret, size_t *ret_len)
{
	struct buf b = { .first = 8192 };
	struct stat sb;
	off_t at;
	size_t n;
	int fd = fileno(f);

	/* A regular file is read into one buffer of its size (and one byte to see its end). */
	if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (at = ftello(f)) >= 0 &&
	    sb.st_size > at) {
		if ((uint64_t)(sb.st_size - at) > max)
			return -E2BIG;
		b.first = (size_t)(sb.st_size - at) + 2;
	}
	for (;;) {
		/* room to read into, and for the NUL */
		char *p = buf_reserve(&b, 1);

		if (!p) {
			buf_free(&b);
			return -ENOMEM;
		}
		n = fread(p, 1, b.cap - b.len - 1, f);
		b.len += n;
		if (b.len > max) {
			buf_free(&b);
			return -E2BIG;
		}
		if (ferror(f)) {
			int r = errno ? -errno : -EIO; /* what read(2) said */

			if (r != -EINTR) {
				buf_free(&b);
				return r;
			}
			clearerr(f); /* a signal, not the end */
		} else if (n == 0) {
			break;
		}
	}
	b.p[b.len] = '\0';
	*ret = buf_take(&b, ret_len);
	return 0;
}

int read_file_flags(const char *path, int flags, size_t max, char **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	FILE *f;
	int r;

	if (fd < 0)
		return -errno;
	f = fdopen(fd, "r");
	if (!f) {
		r = -errno;
		close(fd);
		return r;
	}
	r = read_stream(f, max, ret, ret_len);
	fclose(f);
	return r;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	return read_file_flags(path, 0, max, ret, ret_len);
}

const char *logfmt_quote(char *dst, size_t size, const char *src)
{
	size_t o = 0;

	if (size < 3)
		return size ? (dst[0] = '\0', dst) : dst;
	dst[o++] = '"';
	for (; src && *src && o + 3 < size; src++) {
		char c = *src;

		if (c == '"' || c == '\\') {
			dst[o++] = '\\';
			dst[o++] = c;
		} else if ((unsigned char)c < 0x20) {
			dst[o++] = ' ';
		} else {
			dst[o++] = c;
		}
	}
	dst[o++] = '"';
	dst[o] = '\0';
	return dst;
}

int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}
