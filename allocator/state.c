// SPDX-License-Identifier: Apache-2.0
/*
 * The allocation state under the policy in force (allocator/internal.h):
 * the policy file re-read and taken, a new state when the lease changes or a
 * term starts, the round's timer armed for the policy's period, and the
 * rounds themselves. Below the set-up, the loop and the election: it
 * calls none of them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>

#include "allocator/internal.h"
#include "config/config.h"
#include "lib/util.h"

/* A new allocation state (learning for one lease) for the policy's lease. */
static struct budget_alloc *new_state(const struct alloc_policy *pol, uint32_t max_nodes)
{
	struct budget_params p;

	budget_params_defaults(&p);
	p.max_nodes = max_nodes;
	p.lease_ms = pol->lease_ms;
	p.report_ms = pol->report_ms;
	/* a node is forgotten well after its lease ran out, never before */
	if (p.forget_ms < 3 * pol->lease_ms)
		p.forget_ms = 3 * pol->lease_ms;
	return budget_alloc_new(&p, time_mono_ms());
}

int alloc_relearn(struct app *app)
{
	struct budget_alloc *ba = new_state(&app->pol, app->cli.max_nodes);

	if (!ba || budget_alloc_set(ba, app->pol.budgets.d, app->pol.budgets.n) < 0) {
		budget_alloc_free(ba);
		return -ENOMEM;
	}
	budget_alloc_free(app->ba);
	app->ba = ba;
	return 0;
}

int64_t alloc_round_ms(const struct alloc_policy *p)
{
	int64_t ms = p->report_ms / 4;

	return ms < ALLOC_ROUND_MIN_MS ? ALLOC_ROUND_MIN_MS : ms;
}

int alloc_reload(struct app *app, bool first)
{
	struct alloc_policy pol;
	struct tg_err e = { 0 };
	struct budget_alloc *ba = NULL;
	struct budget_view *views;
	char *text = NULL;
	size_t len = 0;
	bool lease_changed;
	int r;

	r = read_file(app->cli.policy_path, NODE_CONFIG_MAX, &text, &len);
	if (r < 0) {
		tg_fail(&e, CNI_ERR_IO, r, "cannot read %s: %s", app->cli.policy_path,
			strerror(-r));
		goto refused;
	}
	if (app->tried_text && strcmp(app->tried_text, text) == 0) {
		free(text);
		return 0; /* what was read last time: taken then, or refused then */
	}
	free(app->tried_text);
	app->tried_text = text;
	r = alloc_policy_load_text(app->cli.policy_path, text, len, &pol, &e);
	if (r < 0)
		goto refused;
	views = realloc(app->views, (pol.budgets.n ? pol.budgets.n : 1) * sizeof(*views));
	if (!views) {
		alloc_policy_free(&pol);
		r = tg_fail(&e, CNI_ERR_IO, -ENOMEM, "out of memory");
		goto refused;
	}
	app->views = views;
	/*
	 * A new lease is a new state: it learns for one (new) lease what the
	 * nodes hold before it raises anything, as a new leader does.
	 */
	lease_changed = !app->ba || pol.lease_ms != app->pol.lease_ms;
	if (lease_changed) {
		ba = new_state(&pol, app->cli.max_nodes);
		if (!ba) {
			alloc_policy_free(&pol);
			r = tg_fail(&e, CNI_ERR_IO, -ENOMEM, "out of memory");
			goto refused;
		}
	}
	r = budget_alloc_set(ba ? ba : app->ba, pol.budgets.d, pol.budgets.n);
	if (r < 0) {
		budget_alloc_free(ba);
		alloc_policy_free(&pol);
		tg_fail(&e, CNI_ERR_CONFIG, r, "the budgets cannot be taken: %s", strerror(-r));
		goto refused;
	}
	if (ba) {
		budget_alloc_free(app->ba);
		app->ba = ba;
	}
	budget_alloc_set_report_ms(app->ba, pol.report_ms);
	if (!first) {
		app->stats.reloads++;
		tg_log(TG_LOG_INFO,
		       "msg=\"policy changed\" path=%s policy=%s was=%s budgets=%zu "
		       "lease_ms=%lld report_ms=%lld%s",
		       LOGFMT_Q(app->cli.policy_path), pol.budgets.id, app->pol.budgets.id,
		       pol.budgets.n, (long long)pol.lease_ms, (long long)pol.report_ms,
		       lease_changed ? " relearning" : "");
	}
	if (!pol.budgets.n)
		tg_log(TG_LOG_WARN, "msg=\"the policy has no budgets: nothing to allocate\"");
	alloc_policy_free(&app->pol);
	app->pol = pol;
	return 1;
refused:
	if (first) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot load the policy\" path=%s err=%s",
		       LOGFMT_Q(app->cli.policy_path), LOGFMT_Q(e.msg));
		return r;
	}
	app->stats.reloads++;
	app->stats.reload_errors++;
	tg_log(TG_LOG_ERROR, "msg=\"policy refused; the one in force stays\" path=%s err=%s",
	       LOGFMT_Q(app->cli.policy_path), LOGFMT_Q(e.msg));
	return r;
}

int alloc_arm_rounds(struct app *app)
{
	int64_t ms = alloc_round_ms(&app->pol);
	struct itimerspec its = {
		.it_interval = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 },
		.it_value = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 },
	};

	if (ms == app->round_ms)
		return 0;
	if (timerfd_settime(app->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	app->round_ms = ms;
	return 0;
}

void alloc_round(struct app *app)
{
	int64_t t0 = time_mono_ns();

	budget_alloc_round(app->ba, time_mono_ms());
	app->stats.rounds++;
	app->stats.round_seconds = (double)(time_mono_ns() - t0) / 1e9;
}
