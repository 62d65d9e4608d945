// SPDX-License-Identifier: Apache-2.0
/* The failpoints of lib/failpoint.h: compiled only into test builds. */
#ifdef TG_FAILPOINTS
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/failpoint.h"

/* Bounds of the section every TG_FAILPOINT use puts its name in (the linker's). */
extern const char *const __start_tg_failpoints[] __attribute__((weak));
extern const char *const __stop_tg_failpoints[] __attribute__((weak));

static char armed[128];
static long armed_hit = 1; /* which hit fails */
static long hits;

static bool failpoint_known(const char *name)
{
	/* cppcheck-suppress comparePointers ; both bound the one tg_failpoints section */
	for (const char *const *p = __start_tg_failpoints; p && p < __stop_tg_failpoints; p++)
		if (strcmp(*p, name) == 0)
			return true;
	return false;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every name once, sorted. */
static void list_failpoints(void)
{
	/* cppcheck-suppress comparePointers ; both bound the one tg_failpoints section */
	size_t n = __start_tg_failpoints ? (size_t)(__stop_tg_failpoints - __start_tg_failpoints)
					 : 0;
	const char **all = calloc(n + 1, sizeof(*all));

	if (!all)
		_exit(1);
	memcpy(all, __start_tg_failpoints, n * sizeof(*all));
	qsort(all, n, sizeof(*all), by_name);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(all[i], all[i - 1]) != 0)
			printf("%s\n", all[i]);
	free(all);
	fflush(stdout);
	_exit(0);
}

__attribute__((constructor)) static void failpoint_arm(void)
{
	const char *v = getenv("TOLLGATE_FAILPOINT"), *at;
	char *end;

	if (!v || !*v)
		return;
	if (strcmp(v, "list") == 0)
		list_failpoints();
	at = strchr(v, '@');
	if ((size_t)(at ? at - v : (long)strlen(v)) >= sizeof(armed)) {
		fprintf(stderr, "TOLLGATE_FAILPOINT=%.64s: name too long\n", v);
		_exit(2);
	}
	snprintf(armed, sizeof(armed), "%.*s", (int)(at ? at - v : (long)strlen(v)), v);
	if (at) {
		errno = 0;
		armed_hit = strtol(at + 1, &end, 10);
		if (errno || *end || armed_hit < 1) {
			fprintf(stderr, "TOLLGATE_FAILPOINT=%s: @N wants a count from 1\n", v);
			_exit(2);
		}
	}
	if (!failpoint_known(armed)) {
		fprintf(stderr,
			"TOLLGATE_FAILPOINT=%s: this binary has no failpoint of that name "
			"(TOLLGATE_FAILPOINT=list lists them)\n",
			v);
		_exit(2);
	}
}

int tg_failpoint_fire(const char *name, struct tg_err *e)
{
	if (!armed[0] || strcmp(name, armed) != 0 || ++hits != armed_hit)
		return 0;
	return tg_fail(e, CNI_ERR_IO, -EIO, "failpoint %s: injected failure", name);
}
#endif
