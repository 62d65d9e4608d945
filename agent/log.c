// SPDX-License-Identifier: Apache-2.0
/*
 * The tasks' notes in the agent's log (lib/log.h): the tasks return what
 * they have to say, the loop writes it.
 */
#include "agent/internal.h"
#include "lib/log.h"

void agent_log_notes(struct agent_notes *n)
{
	for (size_t i = 0; i < n->n; i++)
		tg_log(TG_LOG_WARN, "%s", n->line[i]);
	if (n->dropped)
		tg_log(TG_LOG_WARN, "msg=\"more notes of the task left out\" notes=%zu",
		       n->dropped);
	agent_notes_clear(n);
}
