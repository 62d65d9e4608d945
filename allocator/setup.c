// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's process set up before its loop and torn down after it:
 * the open-file limit, capabilities, the config and its watch, signals,
 * the round's timer and the HTTP server.
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "allocator/internal.h"
#include "config/config.h"
#include "lib/caps.h"
#include "lib/util.h"

#define PAGE_MAX (16u << 20)
/* descriptors kept back from the connections: the listener, epoll, timer, inotify, log */
#define FD_SPARE 64

/*
 * Every node keeps a connection open: the soft limit goes up to the hard
 * one (which needs no privilege), and the connections the server takes are
 * what the limit leaves. Returns the connections that fit.
 */
static unsigned int raise_nofile(unsigned int want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return want;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = was;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want + FD_SPARE) {
		unsigned int fit = rl.rlim_cur > 2 * FD_SPARE
					   ? (unsigned int)(rl.rlim_cur - FD_SPARE)
					   : FD_SPARE;

		tg_log(TG_LOG_WARN,
		       "msg=\"the open-file limit caps the connections\" "
		       "max_connections=%u nofile=%llu connections=%u",
		       want, (unsigned long long)rl.rlim_cur, fit);
		return fit;
	}
	return want;
}

/* A new allocation state (learning for one lease) for the policy's lease. */
static struct budget_alloc *new_state(const struct alloc_policy *pol)
{
	struct budget_params p;

	budget_params_defaults(&p);
	p.lease_ms = pol->lease_ms;
	p.report_ms = pol->report_ms;
	/* a node is forgotten well after its lease ran out, never before */
	if (p.forget_ms < 3 * pol->lease_ms)
		p.forget_ms = 3 * pol->lease_ms;
	return budget_alloc_new(&p, time_mono_ms());
}

int alloc_relearn(struct app *app)
{
	struct budget_alloc *ba = new_state(&app->pol);

	if (!ba || budget_alloc_set(ba, app->pol.defs, app->pol.n) < 0) {
		budget_alloc_free(ba);
		return -ENOMEM;
	}
	budget_alloc_free(app->ba);
	app->ba = ba;
	return 0;
}

static bool same_budgets(const struct alloc_policy *a, const struct alloc_policy *b)
{
	return a->n == b->n && memcmp(a->defs, b->defs, a->n * sizeof(*a->defs)) == 0;
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

	r = read_file(app->cli.config_path, NODE_CONFIG_MAX, &text, &len);
	if (r < 0) {
		tg_fail(&e, CNI_ERR_IO, r, "cannot read %s: %s", app->cli.config_path,
			strerror(-r));
		goto refused;
	}
	if (app->tried_text && strcmp(app->tried_text, text) == 0) {
		free(text);
		return 0; /* what was read last time: taken then, or refused then */
	}
	free(app->tried_text);
	app->tried_text = text;
	r = alloc_policy_load(app->cli.config_path, text, len, &pol, &e);
	if (r < 0)
		goto refused;
	views = realloc(app->views, (pol.n ? pol.n : 1) * sizeof(*views));
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
		ba = new_state(&pol);
		if (!ba) {
			alloc_policy_free(&pol);
			r = tg_fail(&e, CNI_ERR_IO, -ENOMEM, "out of memory");
			goto refused;
		}
	}
	r = budget_alloc_set(ba ? ba : app->ba, pol.defs, pol.n);
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
		       "msg=\"config changed\" path=%s budgets=%zu "
		       "lease_ms=%lld report_ms=%lld%s%s",
		       LOGFMT_Q(app->cli.config_path), pol.n, (long long)pol.lease_ms,
		       (long long)pol.report_ms,
		       same_budgets(&pol, &app->pol) ? " budgets_unchanged" : "",
		       lease_changed ? " relearning" : "");
	}
	if (!pol.has_allocator)
		tg_log(TG_LOG_WARN, "msg=\"budgets.allocator is not set: no node reports here\"");
	else if (!pol.n)
		tg_log(TG_LOG_WARN, "msg=\"budgets.internetEgress is empty: nothing to allocate\"");
	alloc_policy_free(&app->pol);
	app->pol = pol;
	return 1;
refused:
	if (first) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot load the config\" path=%s err=%s",
		       LOGFMT_Q(app->cli.config_path), LOGFMT_Q(e.msg));
		return r;
	}
	app->stats.reloads++;
	app->stats.reload_errors++;
	tg_log(TG_LOG_ERROR, "msg=\"config not reloaded; the one in force stays\" path=%s err=%s",
	       LOGFMT_Q(app->cli.config_path), LOGFMT_Q(e.msg));
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

/* The directory: kubelet replaces a ConfigMap's file by swapping a symlink there. */
static void watch_config(struct app *app)
{
	char copy[PATH_MAX];

	snprintf(copy, sizeof(copy), "%s", app->cli.config_path);
	snprintf(app->config_dir, sizeof(app->config_dir), "%s", dirname(copy));
	app->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (app->inotify_fd >= 0)
		app->config_wd = inotify_add_watch(app->inotify_fd, app->config_dir,
						   IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
							   IN_DELETE | IN_ATTRIB);
	if (app->config_wd < 0)
		tg_log(TG_LOG_WARN,
		       "msg=\"cannot watch the config's directory; SIGHUP re-reads\" "
		       "dir=%s err=\"%m\"",
		       LOGFMT_Q(app->config_dir));
}

int alloc_setup(struct app *app, const struct alloc_cli *cli)
{
	unsigned int conns;
	int r;

	memset(app, 0, sizeof(*app));
	app->inotify_fd = app->config_wd = app->timer_fd = -1;
	app->cli = *cli;
	tg_log_set_level(cli->log_level);
	http_config_defaults(&app->hc);
	r = http_parse_listen(cli->listen, BUDGET_DEFAULT_PORT, &app->hc.addr);
	if (r < 0) {
		int status;
		const char *why = http_listen_problem(r, &status);

		fprintf(stderr, "tollgate-allocator: --listen \"%s\"%s%s\n", cli->listen,
			why ? why : ": ", why ? "" : strerror(-r));
		if (r == -EINVAL)
			alloc_usage(stderr);
		return status;
	}
	conns = raise_nofile(cli->max_connections);
	/* Nothing the allocator does needs a capability. */
	if ((r = caps_keep_only(0, true)) < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot drop capabilities\" err=%s",
		       LOGFMT_Q(strerror(-r)));
		return 1;
	}
	if (alloc_reload(app, true) < 0)
		return 1;
	alloc_elect_init(app);
	sigemptyset(&app->sigs);
	sigaddset(&app->sigs, SIGTERM);
	sigaddset(&app->sigs, SIGINT);
	sigaddset(&app->sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &app->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	watch_config(app);
	app->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (app->timer_fd < 0 || (r = alloc_arm_rounds(app)) < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot arm the round's timer\" err=\"%m\"");
		return 1;
	}
	expo_init(&app->page, PAGE_MAX);
	app->hc.max_connections = conns;
	app->hc.per_client = cli->per_client;
	app->hc.deadline_ms = cli->deadline_ms;
	alloc_http_config(app, &app->hc);
	r = http_start(&app->hc, &app->http);
	if (r < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot listen\" listen=%s err=%s",
		       LOGFMT_Q(cli->listen), LOGFMT_Q(strerror(-r)));
		return 1;
	}
	tg_log(TG_LOG_INFO,
	       "msg=\"starting\" config=%s listen=%s budgets=%zu lease_ms=%lld "
	       "round_ms=%lld max_connections=%u per_client=%u version=%s",
	       LOGFMT_Q(cli->config_path), LOGFMT_Q(cli->listen), app->pol.n,
	       (long long)app->pol.lease_ms, (long long)app->round_ms, conns, cli->per_client,
	       TG_VERSION);
	if (app->elect_on)
		tg_log(TG_LOG_INFO,
		       "msg=\"leader election: no grant until this replica leads\" "
		       "etcd=%s key=%s advertise=%s ttl_s=%u",
		       LOGFMT_Q(cli->etcd), LOGFMT_Q(cli->election_key), LOGFMT_Q(cli->advertise),
		       cli->election_ttl_s);
	return 0;
}

void alloc_teardown(struct app *app)
{
	alloc_elect_stop(app);
	http_free(app->http);
	expo_free(&app->page);
	if (app->inotify_fd >= 0)
		close(app->inotify_fd);
	if (app->timer_fd >= 0)
		close(app->timer_fd);
	budget_alloc_free(app->ba);
	alloc_policy_free(&app->pol);
	free(app->views);
	free(app->answer);
	free(app->redirect);
	free(app->tried_text);
}

int alloc_main(const struct alloc_cli *cli)
{
	/* static: the state outlives any stack frame that matters and is large */
	static struct app app;
	int r = alloc_setup(&app, cli);

	if (r == 0)
		r = alloc_loop(&app) < 0 ? 1 : 0;
	alloc_teardown(&app);
	return r;
}
