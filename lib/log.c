// SPDX-License-Identifier: Apache-2.0
/* The daemons' logfmt records (lib/log.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"
#include "lib/util.h"

static const char *const level_names[] = { "error", "warn", "info" };
static enum tg_log_level log_level = TG_LOG_INFO;

int tg_log_level_parse(const char *s, enum tg_log_level *ret)
{
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (strcmp(s, level_names[i]) == 0) {
			*ret = (enum tg_log_level)i;
			return 0;
		}
	return -EINVAL;
}

void tg_log_set_level(enum tg_log_level lvl)
{
	log_level = lvl;
}

void tg_log(enum tg_log_level lvl, const char *fmt, ...)
{
	char ts[32], msg[1536];
	int64_t now;
	time_t sec;
	struct tm tm;
	va_list ap;

	if (lvl > log_level)
		return;
	now = time_now_ms();
	sec = (time_t)(now / 1000);
	gmtime_r(&sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03dZ level=%s %s\n", ts, (int)(now % 1000), level_names[lvl], msg);
}
