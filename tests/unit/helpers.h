/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_HELPERS_H
#define TG_TEST_HELPERS_H

/*
 * Small helpers every unit test shares: substring assertions, IPv4 literals,
 * scratch directories and files, and running a piece of a test in a child
 * process so that a crash (or a sanitizer abort) fails that test only.
 *
 * Everything here is a macro or a static inline function: a test file that
 * includes the header without using a helper gets no warning, and the header
 * compiles on its own.
 */

#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/ip4.h"
#include "lib/util.h"

/* ---- strings ---- */

/* Long haystacks (a metrics page) are shown by their first 400 bytes. */
#define assert_contains(hay, needle)                                                         \
	do {                                                                                 \
		const char *h_ = (hay), *n_ = (needle);                                      \
		if (!h_ || !strstr(h_, n_))                                                  \
			fail_msg("\"%.400s\"%s does not contain \"%s\"", h_ ? h_ : "(null)", \
				 h_ &&strlen(h_) > 400 ? " (cut)" : "", n_);                 \
	} while (0)

#define assert_not_contains(hay, needle)                                                          \
	do {                                                                                      \
		const char *h_ = (hay), *n_ = (needle), *at_;                                     \
		if (h_ && (at_ = strstr(h_, n_)))                                                 \
			fail_msg("contains \"%s\" at offset %td: \"%.200s\"", n_, at_ - h_, at_); \
	} while (0)

/* ---- IPv4 ---- */

/* A dotted-quad literal of a test, in host order; fails the test if malformed. */
static inline uint32_t ip(const char *s)
{
	uint32_t a = 0;

	if (ip4_parse(s, &a) != 0)
		fail_msg("ip4_parse(\"%s\") failed", s);
	return a;
}

/* Dotted form of an address, for messages; four calls may be live at once. */
static inline const char *ip_str(uint32_t a)
{
	static char buf[4][IP4_STRLEN];
	static unsigned k;

	k = (k + 1) % 4;
	return ip4_format(a, buf[k]);
}

/* ---- scratch directories and files ---- */

/* Makes a fresh directory <parent>/tg-unit-<tag>.XXXXXX, its path in buf. */
static inline bool tmpdir_make(char *buf, size_t size, const char *parent, const char *tag)
{
	int n = snprintf(buf, size, "%s/tg-unit-%s.XXXXXX", parent, tag);

	return n > 0 && (size_t)n < size && mkdtemp(buf) != NULL;
}

static inline int tmpdir_remove_one(const char *path, const struct stat *sb, int flag,
				    struct FTW *ftw)
{
	return remove(path);
}

/* Removes a directory tree, never following a symlink out of it; best effort. */
static inline void tmpdir_remove(const char *path)
{
	if (path && path[0])
		nftw(path, tmpdir_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes len bytes to path (created 0600, truncated). */
static inline void write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		fail_msg("cannot create %s", path);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

/* Reads a whole file, NUL-terminated, or fails the test; *len gets its size. Caller frees. */
static inline char *slurp(const char *path, size_t *len)
{
	struct stat sb;
	char *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		fail_msg("cannot open %s", path);
	assert_int_equal(fstat(fd, &sb), 0);
	buf = malloc((size_t)sb.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)sb.st_size), sb.st_size);
	buf[sb.st_size] = '\0';
	close(fd);
	*len = (size_t)sb.st_size;
	return buf;
}

/* ---- a piece of a test in a child process ---- */

typedef int (*child_fn)(void *arg);

/*
 * Starts fn(arg) in a child that exits with fn's return value. cmocka catches
 * SIGSEGV and friends to fail a test and go on: a crashing child must die
 * instead of running the rest of the suite, so the child gets the default
 * handlers back.
 */
static inline pid_t child_start(child_fn fn, void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		signal(SIGILL, SIG_DFL);
		signal(SIGFPE, SIG_DFL);
		signal(SIGSYS, SIG_DFL);
		_exit(fn(arg));
	}
	return pid;
}

/*
 * Reaps a child of child_start. Fails the test, naming `what`, when it died of
 * a signal; else returns its exit status (a sanitizer report exits 1).
 */
static inline int child_wait(pid_t pid, const char *what)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("%s crashed with signal %d", what, WTERMSIG(status));
	if (!WIFEXITED(status))
		fail_msg("%s: unexpected wait status 0x%x", what, status);
	return WEXITSTATUS(status);
}

/* child_start then child_wait. */
static inline int child_run(child_fn fn, void *arg, const char *what)
{
	return child_wait(child_start(fn, arg), what);
}

#endif
