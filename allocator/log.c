// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's log: logfmt on stderr, one record per line, in the
 * agent's format (a collector parses both the same way).
 *
 *   2026-11-29T08:10:37.274Z level=warn msg="config not reloaded; the one in force stays" err="..."
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "allocator/internal.h"

static enum alloc_log_level log_level = ALLOC_LOG_INFO;

void alloc_log_set_level(enum alloc_log_level lvl)
{
	log_level = lvl;
}

void alloc_log(enum alloc_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info" };
	char ts[32], msg[1536];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, names[lvl], msg);
}
