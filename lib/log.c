// SPDX-License-Identifier: Apache-2.0
/* The daemons' logfmt records (lib/log.h). */
#include <stdio.h>
#include <time.h>

#include "lib/log.h"
#include "lib/util.h"

void log_record(const char *level, const char *fmt, va_list ap)
{
	char ts[32], msg[1536];
	int64_t now = time_now_ms();
	time_t sec = (time_t)(now / 1000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03dZ level=%s %s\n", ts, (int)(now % 1000), level, msg);
}
