// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's task schedule: jitter within its bounds and spread over them,
 * back-off doubling to its cap and reset by a success, "soon" for events
 * (the pool ran out) never closer than the minimum gap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "agent/sched.h"

/* IMDS sync as the agent runs it: 5 min +- 10 %, back-off 1 s .. 5 min, at most 1/s. */
static struct sched_task sync_task(void)
{
	struct sched_task t = { .name = "sync",
				.period_ms = 300000,
				.jitter_pct = 10,
				.min_gap_ms = 1000,
				.backoff_first_ms = 1000,
				.backoff_max_ms = 300000 };

	sched_init(&t, 0);
	return t;
}

static void t_first_run_is_due_at_once(void **state)
{
	struct sched_task t = sync_task();

	assert_true(sched_due(&t, 0));
}

static void t_jitter_within_bounds_and_spread(void **state)
{
	struct sched_task t = sync_task();
	int64_t lo = INT64_MAX, hi = 0;
	unsigned buckets[10] = { 0 };

	for (int i = 0; i < 1000; i++) {
		double rnd = (double)i / 1000.0;
		int64_t delay;

		sched_started(&t, 0);
		sched_succeeded(&t, 0, rnd);
		delay = t.next_ms;
		assert_in_range(delay, 270000, 330000);
		lo = delay < lo ? delay : lo;
		hi = delay > hi ? delay : hi;
		buckets[(delay - 270000) * 10 / 60001]++;
	}
	/* the whole range is used, evenly: no node keeps its neighbours' phase */
	assert_true(lo <= 270100);
	assert_true(hi >= 329900);
	for (int b = 0; b < 10; b++)
		assert_in_range(buckets[b], 80, 120);
	/* the top of the range, even for rnd just under 1 */
	sched_succeeded(&t, 0, 0.999999999);
	assert_int_equal(t.next_ms, 330000);
}

static void t_backoff_doubles_to_its_cap_and_resets(void **state)
{
	struct sched_task t = sync_task();
	int64_t now = 0, want = 1000;

	for (int i = 0; i < 12; i++) {
		sched_started(&t, now);
		sched_failed(&t, now);
		assert_int_equal(t.next_ms - now, want);
		now = t.next_ms;
		want = want * 2 > 300000 ? 300000 : want * 2;
	}
	assert_int_equal(t.failures, 12);
	sched_started(&t, now);
	sched_succeeded(&t, now, 0.5);
	assert_int_equal(t.failures, 0);
	assert_int_equal(t.next_ms - now, 300000);
	sched_failed(&t, now);
	assert_int_equal(t.next_ms - now, 1000);
}

/* The pool ran out: the sync comes within the delay, never within the minimum gap. */
static void t_soon_keeps_the_minimum_gap(void **state)
{
	struct sched_task t = sync_task();

	sched_started(&t, 10000);
	sched_succeeded(&t, 10000, 0.5); /* next in ~5 min */
	sched_soon(&t, 10200, 0);
	assert_int_equal(t.next_ms, 11000); /* the last start + 1 s */
	sched_soon(&t, 20000, 2000);
	assert_int_equal(t.next_ms, 11000); /* already sooner: unchanged */
	sched_started(&t, 11000);
	sched_failed(&t, 11000); /* back-off 1 s */
	sched_soon(&t, 11100, 0);
	assert_int_equal(t.next_ms, 12000);
	/* a flood of events: never more than one start a second */
	{
		int64_t now = 12000, starts = 0;

		for (int i = 0; i < 100; i++, now += 100) {
			sched_soon(&t, now, 0);
			if (sched_due(&t, now)) {
				starts++;
				sched_started(&t, now);
				sched_failed(&t, now);
			}
		}
		assert_in_range(starts, 1, 10);
	}
}

static void t_next_is_the_earliest(void **state)
{
	struct sched_task a = sync_task(), b = sync_task();
	const struct sched_task *all[] = { &a, &b, NULL };

	a.next_ms = 5000;
	b.next_ms = 3000;
	assert_int_equal(sched_next(all, 3), 3000);
	assert_int_equal(sched_next(all, 0), INT64_MAX);
}

/*
 * IMDS's Retry-After holds the back-off up; its 410 (not ready yet) holds it
 * down to a second; never two starts closer than the minimum gap.
 */
static void t_failed_within_bounds(void **state)
{
	struct sched_task t = sync_task();
	int64_t now = 0;

	/* Retry-After 30 s on the first failure (back-off 1 s): 30 s */
	sched_started(&t, now);
	sched_failed_within(&t, now, 30000, INT64_MAX);
	assert_int_equal(t.next_ms, 30000);
	/* 410 six times on end: 1 s each, though the back-off has doubled to 64 s */
	for (int i = 0; i < 6; i++) {
		now = t.next_ms;
		sched_started(&t, now);
		sched_failed_within(&t, now, 0, 1000);
		assert_int_equal(t.next_ms, now + 1000);
	}
	assert_int_equal(t.failures, 7);
	/* a bound under the minimum gap still keeps the gap */
	now = t.next_ms;
	sched_started(&t, now);
	sched_failed_within(&t, now + 10, 0, 0);
	assert_int_equal(t.next_ms, now + 1000);
	/* unbounded: the doubled back-off (1 s << 8), as sched_failed */
	now = t.next_ms;
	sched_started(&t, now);
	sched_failed_within(&t, now, 0, INT64_MAX);
	assert_int_equal(t.next_ms, now + 256000);
}

int main(void)
{
	ADD(t_first_run_is_due_at_once);
	ADD(t_jitter_within_bounds_and_spread);
	ADD(t_backoff_doubles_to_its_cap_and_resets);
	ADD(t_soon_keeps_the_minimum_gap);
	ADD(t_next_is_the_earliest);
	ADD(t_failed_within_bounds);
	return run_group("sched");
}
