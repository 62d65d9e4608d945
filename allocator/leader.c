// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's side of the leader election (allocator/internal.h): the
 * machine's requests sent to etcd through httpc in the loop, its answers
 * taken, and a change of role applied. A new term starts a new allocation
 * state, learning for one lease (what a new leader must do: the nodes
 * still hold the last leader's grants); a term that ends drops it, so a
 * replica that leads again later learns again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator/internal.h"
#include "httpc/httpc.h"
#include "lib/util.h"

/* etcd's answers: a range of one small key, a lease, a transaction */
#define ETCD_ANSWER_MAX (16u << 10)

void alloc_elect_init(struct app *app)
{
	struct elect_config cfg = { .key = app->cli.election_key,
				    .advertise = app->cli.advertise,
				    .ttl_s = app->cli.election_ttl_s };
	const char *bad;
	size_t bad_len;

	app->elect_on = app->cli.etcd != NULL;
	app->etcd_said = -1;
	if (!app->elect_on)
		return;
	/* alloc_parse_options refused any list this would */
	elect_split_urls(app->cli.etcd, app->etcd_urls, &cfg.n_urls, &bad, &bad_len);
	for (size_t i = 0; i < cfg.n_urls; i++)
		cfg.urls[i] = app->etcd_urls[i];
	elect_init(&app->el, &cfg, time_mono_ms());
}

int alloc_elect_start(struct app *app, int epfd)
{
	const struct httpc_tls tls = { app->cli.etcd_ca, app->cli.etcd_cert, app->cli.etcd_key };
	int r;

	if (!app->elect_on)
		return 0;
	r = httpc_new(epfd, "tollgate-allocator/" TG_VERSION, ETCD_ANSWER_MAX, &app->etcd);
	if (r == 0)
		r = httpc_set_tls(app->etcd, &tls);
	return r;
}

bool alloc_leading(struct app *app)
{
	return !app->elect_on || elect_leading(&app->el, time_mono_ms());
}

void alloc_term_granted(struct app *app)
{
	int64_t now = time_now_ms();

	if (!app->term.answers++)
		app->term.first_grant_unix_ms = now;
	app->term.last_grant_unix_ms = now;
}

static void role_changed(struct app *app, int change, int64_t epoch)
{
	if (change == ELECT_WON) {
		app->term = (struct alloc_term){ .epoch = epoch };
		if (alloc_relearn(app) < 0)
			tg_log(TG_LOG_ERROR, "msg=\"out of memory for a new term's state\"");
		tg_log(TG_LOG_INFO,
		       "msg=\"leading: granting from now\" epoch=%lld "
		       "etcd=%s learning_ms=%lld",
		       (long long)epoch, LOGFMT_Q(app->el.cfg.urls[app->el.url]),
		       (long long)app->pol.lease_ms);
	} else if (change == ELECT_LOST) {
		/* the record the chaos test reads: no two terms may overlap */
		tg_log(TG_LOG_WARN,
		       "msg=\"stopped leading\" epoch=%lld why=%s answers=%llu "
		       "first_grant_unix_ms=%lld last_grant_unix_ms=%lld",
		       (long long)app->term.epoch, LOGFMT_Q(app->el.step_down_why),
		       (unsigned long long)app->term.answers,
		       (long long)app->term.first_grant_unix_ms,
		       (long long)app->term.last_grant_unix_ms);
		if (alloc_relearn(app) < 0)
			tg_log(TG_LOG_ERROR, "msg=\"out of memory for a new state\"");
	}
}

/* The answer to the request out, if it came. */
static void take(struct app *app)
{
	bool was_known = app->el.leader_known;
	int64_t epoch_before = app->el.leader_epoch;
	const char *body;
	char why[256];
	long status;
	size_t len;
	int r = httpc_take(app->etcd, &status, &body, &len, why, sizeof(why));
	int change;

	if (r == 0)
		return;
	if (r < 0 && status && len) {
		/* etcd's own error: its message says more than the status */
		size_t n = strlen(why);

		snprintf(why + n, sizeof(why) - n, ": %.*s", (int)(len > 120 ? 120 : len), body);
	}
	change = elect_answer(&app->el, time_mono_ms(),
			      r > 0	      ? 200
			      : status == 200 ? 0
					      : status,
			      body, len, why);
	role_changed(app, change, app->el.epoch);
	/* once per change (the first answer or failure says which it is) */
	if (app->etcd_said != 0 && !app->el.etcd_ok)
		tg_log(TG_LOG_WARN,
		       "msg=\"etcd does not answer; no grant until this replica "
		       "leads\" err=%s",
		       LOGFMT_Q(app->el.last_error));
	else if (app->etcd_said != 1 && app->el.etcd_ok)
		tg_log(TG_LOG_INFO, "msg=\"etcd answers\" etcd=%s",
		       LOGFMT_Q(app->el.cfg.urls[app->el.url]));
	app->etcd_said = app->el.etcd_ok;
	if (!app->el.leading && app->el.leader_known &&
	    (!was_known || epoch_before != app->el.leader_epoch))
		tg_log(TG_LOG_INFO, "msg=\"following\" leader=%s epoch=%lld",
		       LOGFMT_Q(app->el.leader), (long long)app->el.leader_epoch);
}

void alloc_elect_socket(struct app *app, int fd, uint32_t events)
{
	if (app->etcd)
		httpc_socket(app->etcd, fd, events);
}

void alloc_elect_run(struct app *app)
{
	struct elect_request req;
	int r;

	if (!app->etcd)
		return;
	httpc_run_timer(app->etcd);
	take(app);
	/* a request that outlived its timeout: libcurl's own timer ends it first */
	role_changed(app, elect_tick(&app->el, time_mono_ms()), 0);
	r = elect_due(&app->el, time_mono_ms(), &req);
	if (r <= 0)
		return;
	r = httpc_post(app->etcd, req.url, req.body, strlen(req.body), NULL, req.timeout_ms);
	free(req.body);
	if (r < 0)
		elect_answer(&app->el, time_mono_ms(), 0, NULL, 0, strerror(-r));
}

int alloc_elect_timeout_ms(const struct app *app)
{
	int64_t w;
	int c;

	if (!app->etcd)
		return -1;
	w = elect_next_ms(&app->el) - time_mono_ms();
	w = w < 0 ? 0 : w > 60000 ? 60000 : w;
	c = httpc_timeout_ms(app->etcd);
	return c >= 0 && c < w ? c : (int)w;
}

void alloc_elect_stop(struct app *app)
{
	struct elect_request req;
	int64_t epoch = app->el.epoch;

	if (!app->etcd)
		return;
	httpc_cancel(app->etcd);
	if (elect_resign(&app->el, time_mono_ms(), &req) > 0) {
		/* one blocking call on the way out: the loop is gone */
		struct httpc_tls tls = { app->cli.etcd_ca, app->cli.etcd_cert, app->cli.etcd_key };
		struct httpc_sync sync = {
			.url = req.url,
			.user_agent = "tollgate-allocator/" TG_VERSION,
			.body = req.body,
			.len = strlen(req.body),
			.tls = &tls,
			.timeout_ms = (int)req.timeout_ms,
			.max_body = ETCD_ANSWER_MAX,
		};
		struct httpc_answer a;

		if (httpc_request_sync(&sync, &a) == 0) {
			tg_log(TG_LOG_INFO,
			       "msg=\"stopped leading\" epoch=%lld why=shutdown "
			       "answers=%llu first_grant_unix_ms=%lld last_grant_unix_ms=%lld "
			       "revoke=%s",
			       (long long)epoch, (unsigned long long)app->term.answers,
			       (long long)app->term.first_grant_unix_ms,
			       (long long)app->term.last_grant_unix_ms, LOGFMT_Q(a.error));
			httpc_answer_free(&a);
		}
		free(req.body);
	}
	httpc_free(app->etcd);
	app->etcd = NULL;
}
