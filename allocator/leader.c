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
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

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
	app->el_ep = app->el_stop = app->el_pipe[0] = app->el_pipe[1] = -1;
	pthread_mutex_init(&app->el_mu, NULL);
	if (!app->elect_on)
		return;
	/* alloc_parse_options refused any list this would */
	elect_split_urls(app->cli.etcd, app->etcd_urls, &cfg.n_urls, &bad, &bad_len);
	for (size_t i = 0; i < cfg.n_urls; i++)
		cfg.urls[i] = app->etcd_urls[i];
	elect_init(&app->el, &cfg, time_mono_ms());
}

/* ---- what the election thread shows the loop ---- */

/* The machine's state as the loop may read it (under el_mu), after each step. */
static void publish(struct app *app)
{
	const struct elect *el = &app->el;

	pthread_mutex_lock(&app->el_mu);
	app->elv = (struct alloc_elect_view){
		.leading = el->leading,
		.lead_until_ms = el->lead_until_ms,
		.epoch = el->epoch,
		.leader_known = el->leader_known,
		.leader_epoch = el->leader_epoch,
		.etcd_ok = el->etcd_ok,
		.stats = el->stats,
	};
	snprintf(app->elv.leader, sizeof(app->elv.leader), "%s", el->leader);
	pthread_mutex_unlock(&app->el_mu);
}

void alloc_elect_view(struct app *app, struct alloc_elect_view *ret)
{
	pthread_mutex_lock(&app->el_mu);
	*ret = app->elv;
	pthread_mutex_unlock(&app->el_mu);
}

bool alloc_leading(struct app *app)
{
	bool ok;

	if (!app->elect_on)
		return true;
	/* the loop grants for the term it has taken up, and only before its deadline */
	pthread_mutex_lock(&app->el_mu);
	ok = app->elv.leading && time_mono_ms() < app->elv.lead_until_ms && app->term_on &&
	     app->elv.epoch == app->term.epoch;
	pthread_mutex_unlock(&app->el_mu);
	return ok;
}

void alloc_term_granted(struct app *app)
{
	int64_t now = time_now_ms();

	if (!app->term.answers++)
		app->term.first_grant_unix_ms = now;
	app->term.last_grant_unix_ms = now;
}

/* A change of role, from the election thread to the loop (alloc_elect_changes). */
struct role_change {
	int change;
	int64_t epoch;
	char why[96];
	char etcd[ELECT_URL_MAX + 1];
};

static void post_change(struct app *app, int change, int64_t epoch)
{
	struct role_change c = { .change = change, .epoch = epoch };

	if (!change)
		return;
	snprintf(c.why, sizeof(c.why), "%s", app->el.step_down_why);
	snprintf(c.etcd, sizeof(c.etcd), "%s", app->el.cfg.urls[app->el.url]);
	/* a pipe's write of this size is atomic; the loop reads them in order */
	if (write(app->el_pipe[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
		tg_log(TG_LOG_ERROR, "msg=\"the election could not tell the loop\" err=\"%m\"");
}

static void role_changed(struct app *app, const struct role_change *c)
{
	if (c->change == ELECT_WON) {
		app->term = (struct alloc_term){ .epoch = c->epoch };
		if (alloc_relearn(app) < 0)
			tg_log(TG_LOG_ERROR, "msg=\"out of memory for a new term's state\"");
		app->term_on = true;
		tg_log(TG_LOG_INFO,
		       "msg=\"leading: granting from now\" epoch=%lld "
		       "etcd=%s learning_ms=%lld",
		       (long long)c->epoch, LOGFMT_Q(c->etcd), (long long)app->pol.lease_ms);
	} else if (c->change == ELECT_LOST) {
		app->term_on = false;
		/* the record the chaos test reads: no two terms may overlap */
		tg_log(TG_LOG_WARN,
		       "msg=\"stopped leading\" epoch=%lld why=%s answers=%llu "
		       "first_grant_unix_ms=%lld last_grant_unix_ms=%lld",
		       (long long)app->term.epoch, LOGFMT_Q(c->why),
		       (unsigned long long)app->term.answers,
		       (long long)app->term.first_grant_unix_ms,
		       (long long)app->term.last_grant_unix_ms);
		if (alloc_relearn(app) < 0)
			tg_log(TG_LOG_ERROR, "msg=\"out of memory for a new state\"");
	}
}

void alloc_elect_changes(struct app *app)
{
	struct role_change c;

	while (read(app->el_pipe[0], &c, sizeof(c)) == (ssize_t)sizeof(c))
		role_changed(app, &c);
}

int alloc_elect_fd(const struct app *app)
{
	return app->elect_on ? app->el_pipe[0] : -1;
}

/* ---- the election thread ---- */

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
	post_change(app, change, app->el.epoch);
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

/* Timers, answers, the next request. */
static void run(struct app *app)
{
	struct elect_request req;
	int r;

	httpc_run_timer(app->etcd);
	take(app);
	/* a request that outlived its timeout: libcurl's own timer ends it first */
	post_change(app, elect_tick(&app->el, time_mono_ms()), app->el.epoch);
	r = elect_due(&app->el, time_mono_ms(), &req);
	if (r > 0) {
		r = httpc_post(app->etcd, req.url, req.body, strlen(req.body), NULL,
			       req.timeout_ms);
		free(req.body);
		if (r < 0)
			elect_answer(&app->el, time_mono_ms(), 0, NULL, 0, strerror(-r));
	}
	publish(app);
}

static int timeout_ms(const struct app *app)
{
	int64_t w = elect_next_ms(&app->el) - time_mono_ms();
	int c;

	w = w < 0 ? 0 : w > 60000 ? 60000 : w;
	c = httpc_timeout_ms(app->etcd);
	return c >= 0 && c < w ? c : (int)w;
}

/*
 * The election's own thread: the lease is renewed on its own timer, however
 * long the loop takes over reports (a flood of them included).
 */
static void *elect_main(void *arg)
{
	struct app *app = arg;
	struct epoll_event evs[8];

	for (;;) {
		int n = epoll_wait(app->el_ep, evs, 8, timeout_ms(app));

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == app->el_stop)
				return NULL;
			httpc_socket(app->etcd, evs[i].data.fd, evs[i].events);
		}
		run(app);
	}
	tg_log(TG_LOG_ERROR, "msg=\"the election's loop failed; no grant from now\" err=\"%m\"");
	pthread_mutex_lock(&app->el_mu);
	app->elv.leading = false;
	pthread_mutex_unlock(&app->el_mu);
	return NULL;
}

int alloc_elect_start(struct app *app)
{
	const struct httpc_tls tls = { app->cli.etcd_ca, app->cli.etcd_cert, app->cli.etcd_key };
	struct epoll_event ev = { .events = EPOLLIN };
	int r;

	if (!app->elect_on)
		return 0;
	app->el_ep = epoll_create1(EPOLL_CLOEXEC);
	app->el_stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (app->el_ep < 0 || app->el_stop < 0 || pipe2(app->el_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	ev.data.fd = app->el_stop;
	if (epoll_ctl(app->el_ep, EPOLL_CTL_ADD, app->el_stop, &ev) < 0)
		return -errno;
	/* the etcd client's sockets join the thread's epoll set, never the loop's */
	r = httpc_new(app->el_ep, "tollgate-allocator/" TG_VERSION, ETCD_ANSWER_MAX, &app->etcd);
	if (r == 0)
		r = httpc_set_tls(app->etcd, &tls);
	if (r < 0)
		return r;
	publish(app);
	r = pthread_create(&app->el_thread, NULL, elect_main, app);
	if (r)
		return -r;
	app->el_running = true;
	return 0;
}

void alloc_elect_stop(struct app *app)
{
	struct elect_request req;
	int64_t epoch;
	uint64_t one = 1;

	if (!app->etcd)
		return;
	/* the thread ends first: the machine is the caller's again */
	if (app->el_running) {
		if (write(app->el_stop, &one, sizeof(one)) != (ssize_t)sizeof(one))
			tg_log(TG_LOG_ERROR,
			       "msg=\"cannot stop the election's thread\" err=\"%m\"");
		pthread_join(app->el_thread, NULL);
		app->el_running = false;
	}
	epoch = app->el.epoch;
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
	for (int *fd = (int[]){ app->el_ep, app->el_stop, app->el_pipe[0], app->el_pipe[1] }, k = 0;
	     k < 4; k++)
		if (fd[k] > 0)
			close(fd[k]);
	app->el_ep = app->el_stop = app->el_pipe[0] = app->el_pipe[1] = -1;
}
