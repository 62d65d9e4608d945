// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's log: logfmt on stderr, one record per line, written by the
 * binary's own layer only (setup and the loop); the tasks return what they
 * have to say.
 *
 *   2026-11-29T08:10:37.274Z level=warn msg="node-wide state repaired" objects=2
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "agent/internal.h"

static enum agent_log_level log_level = AGENT_LOG_INFO;

void agent_log_set_level(enum agent_log_level lvl)
{
	log_level = lvl;
}

void agent_log(enum agent_log_level lvl, const char *fmt, ...)
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

void agent_log_notes(struct agent_notes *n)
{
	for (size_t i = 0; i < n->n; i++)
		agent_log(AGENT_LOG_WARN, "%s", n->line[i]);
	if (n->dropped)
		agent_log(AGENT_LOG_WARN, "msg=\"more notes of the task left out\" notes=%zu",
			  n->dropped);
	agent_notes_clear(n);
}
