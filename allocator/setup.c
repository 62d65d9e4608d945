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

/* The directory: kubelet replaces a ConfigMap's file by swapping a symlink there. */
static void watch_policy(struct app *app)
{
	char copy[PATH_MAX];

	snprintf(copy, sizeof(copy), "%s", app->cli.policy_path);
	snprintf(app->policy_dir, sizeof(app->policy_dir), "%s", dirname(copy));
	app->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (app->inotify_fd >= 0)
		app->policy_wd = inotify_add_watch(app->inotify_fd, app->policy_dir,
						   IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
							   IN_DELETE | IN_ATTRIB);
	if (app->policy_wd < 0)
		tg_log(TG_LOG_WARN,
		       "msg=\"cannot watch the policy's directory; SIGHUP re-reads\" "
		       "dir=%s err=\"%m\"",
		       LOGFMT_Q(app->policy_dir));
}

int alloc_setup(struct app *app, const struct alloc_cli *cli)
{
	unsigned int conns;
	int r;

	memset(app, 0, sizeof(*app));
	app->inotify_fd = app->policy_wd = app->timer_fd = -1;
	app->cli = *cli;
	tg_log_set_level(cli->log_level);
	http_config_defaults(&app->hc);
	r = http_parse_listen(cli->listen, BUDGET_DEFAULT_PORT, &app->hc.addr);
	if (r < 0) {
		char why[320];
		int status = http_listen_explain(r, cli->listen, why, sizeof(why));

		fprintf(stderr, "tollgate-allocator: %s\n", why);
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
	watch_policy(app);
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
	       "msg=\"starting\" policy=%s listen=%s budgets=%zu lease_ms=%lld "
	       "round_ms=%lld max_connections=%u per_client=%u version=%s",
	       LOGFMT_Q(cli->policy_path), LOGFMT_Q(cli->listen), app->pol.budgets.n,
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
