// SPDX-License-Identifier: Apache-2.0
/* The agent's task schedule (agent/sched.h). */
#include <stddef.h>

#include "agent/sched.h"
#include "lib/util.h"

static int64_t not_before_gap(const struct sched_task *t, int64_t at)
{
	if (t->last_start_ms >= 0 && at < t->last_start_ms + t->min_gap_ms)
		return t->last_start_ms + t->min_gap_ms;
	return at;
}

void sched_init(struct sched_task *t, int64_t now_ms)
{
	t->next_ms = now_ms;
	t->last_start_ms = -1;
	t->failures = 0;
}

bool sched_due(const struct sched_task *t, int64_t now_ms)
{
	return now_ms >= t->next_ms;
}

void sched_started(struct sched_task *t, int64_t now_ms)
{
	t->last_start_ms = now_ms;
}

void sched_succeeded(struct sched_task *t, int64_t now_ms, double rnd)
{
	int64_t span = t->period_ms * (int64_t)t->jitter_pct / 100;
	/* uniform in [period - span, period + span] */
	int64_t delay = t->period_ms - span + (int64_t)(rnd * (double)(2 * span + 1));

	if (delay > t->period_ms + span)
		delay = t->period_ms + span;
	t->failures = 0;
	t->next_ms = not_before_gap(t, now_ms + delay);
}

void sched_failed(struct sched_task *t, int64_t now_ms)
{
	sched_failed_within(t, now_ms, 0, INT64_MAX);
}

void sched_failed_within(struct sched_task *t, int64_t now_ms, int64_t min_ms, int64_t max_ms)
{
	int64_t delay = backoff_ms(t->backoff_first_ms, t->backoff_max_ms, t->failures);

	if (delay > max_ms)
		delay = max_ms;
	if (delay < min_ms)
		delay = min_ms;
	if (t->failures < 64)
		t->failures++;
	t->next_ms = not_before_gap(t, now_ms + delay);
}

void sched_soon(struct sched_task *t, int64_t now_ms, int64_t delay_ms)
{
	int64_t at = not_before_gap(t, now_ms + delay_ms);

	if (at < t->next_ms)
		t->next_ms = at;
}

int64_t sched_next(const struct sched_task *const *tasks, unsigned n)
{
	int64_t next = INT64_MAX;

	for (unsigned i = 0; i < n; i++)
		if (tasks[i] && tasks[i]->next_ms < next)
			next = tasks[i]->next_ms;
	return next;
}
