// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's log: logfmt on stderr, one record per line, in the
 * agent's format (a collector parses both the same way).
 *
 *   2026-11-29T08:10:37.274Z level=warn msg="config not reloaded; the one in force stays" err="..."
 */
#include <stdarg.h>
#include <stdio.h>

#include "allocator/internal.h"
#include "lib/log.h"

static enum alloc_log_level log_level = ALLOC_LOG_INFO;

void alloc_log_set_level(enum alloc_log_level lvl)
{
	log_level = lvl;
}

void alloc_log(enum alloc_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info" };
	va_list ap;

	if (lvl > log_level)
		return;
	va_start(ap, fmt);
	log_record(names[lvl], fmt, ap);
	va_end(ap);
}
