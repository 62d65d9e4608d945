/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_AGENT_SCHED_H
#define TG_AGENT_SCHED_H

/*
 * When each of the agent's periodic tasks runs next: a period with jitter
 * (so that a fleet of nodes started together does not call IMDS in step),
 * exponential back-off after failures, and "soon" for an event (the pool ran
 * out, the config changed) without ever running a task more often than its
 * minimum gap. Pure: time and randomness come in as arguments.
 */

#include <stdbool.h>
#include <stdint.h>

struct sched_task {
	const char *name;
	int64_t period_ms;	  /* after a success */
	unsigned jitter_pct;	  /* +- this much of the period, uniformly */
	int64_t min_gap_ms;	  /* never two starts closer than this */
	int64_t backoff_first_ms; /* after the first failure; doubled per failure */
	int64_t backoff_max_ms;
	/* state */
	int64_t next_ms;       /* due at */
	int64_t last_start_ms; /* -1: never ran */
	unsigned failures;     /* in a row */
};

/* Due at once (the first run at start-up). */
void sched_init(struct sched_task *t, int64_t now_ms);
bool sched_due(const struct sched_task *t, int64_t now_ms);
void sched_started(struct sched_task *t, int64_t now_ms);
/* rnd: uniform in [0, 1) (the caller's random source). */
void sched_succeeded(struct sched_task *t, int64_t now_ms, double rnd);
void sched_failed(struct sched_task *t, int64_t now_ms);
/*
 * sched_failed, its back-off held within [min_ms, max_ms] (a peer's
 * Retry-After; a failure known to pass soon, as IMDS's 410 while the VM
 * starts), still never closer than the minimum gap.
 */
void sched_failed_within(struct sched_task *t, int64_t now_ms, int64_t min_ms, int64_t max_ms);
/* Runs within delay_ms if it would run later, keeping the minimum gap since the last start. */
void sched_soon(struct sched_task *t, int64_t now_ms, int64_t delay_ms);
/* The earliest next_ms of the tasks. */
int64_t sched_next(const struct sched_task *const *tasks, unsigned n);

#endif
