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

#include "agent/internal.h"
#include "lib/log.h"

static enum agent_log_level log_level = AGENT_LOG_INFO;

void agent_log_set_level(enum agent_log_level lvl)
{
	log_level = lvl;
}

void agent_log(enum agent_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info" };
	va_list ap;

	if (lvl > log_level)
		return;
	va_start(ap, fmt);
	log_record(names[lvl], fmt, ap);
	va_end(ap);
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
