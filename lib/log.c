// SPDX-License-Identifier: Apache-2.0
/* The daemons' logfmt records (lib/log.h). */
#include <stdio.h>
#include <time.h>

#include "lib/log.h"

void log_record(const char *level, const char *fmt, va_list ap)
{
	char ts[32], msg[1536];
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, level, msg);
}
