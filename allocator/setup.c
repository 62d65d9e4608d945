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

/*
 * A file's directory: kubelet replaces a ConfigMap's or Secret's files by
 * swapping a symlink there. Any change there re-reads every file the
 * allocator reads (each taken only when its bytes changed).
 */
static int watch_dir(struct app *app, const char *file, const char *what)
{
	char copy[PATH_MAX], dir[PATH_MAX];
	int wd;

	snprintf(copy, sizeof(copy), "%s", file);
	snprintf(dir, sizeof(dir), "%s", dirname(copy));
	wd = app->inotify_fd < 0 ? -1
				 : inotify_add_watch(app->inotify_fd, dir,
						     IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
							     IN_DELETE | IN_ATTRIB);
	if (wd < 0)
		tg_log(TG_LOG_WARN,
		       "msg=\"cannot watch the %s's directory; SIGHUP re-reads\" "
		       "dir=%s err=\"%m\"",
		       what, LOGFMT_Q(dir));
	return wd;
}

static void watch_files(struct app *app)
{
	char copy[PATH_MAX];

	snprintf(copy, sizeof(copy), "%s", app->cli.policy_path);
	snprintf(app->policy_dir, sizeof(app->policy_dir), "%s", dirname(copy));
	app->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	app->policy_wd = watch_dir(app, app->cli.policy_path, "policy");
	if (app->cli.jwks && !alloc_trust_url(app->cli.jwks))
		watch_dir(app, app->cli.jwks, "issuer keys");
	if (app->cli.tls_cert) {
		watch_dir(app, app->cli.tls_cert, "TLS certificate");
		watch_dir(app, app->cli.tls_key, "TLS key");
	}
}

/* A digest of the TLS files' bytes (0: none, or unreadable): a reload only when it moves. */
uint64_t alloc_tls_digest(const struct app *app)
{
	const char *f[2] = { app->cli.tls_cert, app->cli.tls_key };
	uint64_t h = FNV1A64_INIT;

	for (size_t i = 0; i < 2; i++) {
		char *text = NULL;
		size_t len = 0;

		if (!f[i] || read_file(f[i], 1u << 20, &text, &len) < 0)
			return 0;
		h = hash_fnv1a64(text, len, h);
		free(text);
	}
	return h;
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
	r = alloc_trust_setup(app);
	if (r == -ENOMEM)
		tg_log(TG_LOG_ERROR, "msg=\"out of memory\"");
	if (r < 0)
		return 1;
	if (!app->trust.on)
		tg_log(TG_LOG_WARN, "msg=\"--insecure-no-auth: every report is taken for the node "
				    "it names; any pod that reaches this port can steer the "
				    "budgets\"");
	alloc_elect_init(app);
	sigemptyset(&app->sigs);
	sigaddset(&app->sigs, SIGTERM);
	sigaddset(&app->sigs, SIGINT);
	sigaddset(&app->sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &app->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	watch_files(app);
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
	app->hc.tls_err = app->tls_err;
	app->hc.tls_err_size = sizeof(app->tls_err);
	app->tls_digest = alloc_tls_digest(app);
	r = http_start(&app->hc, &app->http);
	if (r < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot listen\" listen=%s err=%s",
		       LOGFMT_Q(cli->listen),
		       LOGFMT_Q(app->tls_err[0] ? app->tls_err : strerror(-r)));
		return 1;
	}
	tg_log(TG_LOG_INFO,
	       "msg=\"starting\" policy=%s listen=%s budgets=%zu lease_ms=%lld "
	       "round_ms=%lld max_connections=%u per_client=%u tls=%s auth=%s version=%s",
	       LOGFMT_Q(cli->policy_path), LOGFMT_Q(cli->listen), app->pol.budgets.n,
	       (long long)app->pol.lease_ms, (long long)app->round_ms, conns, cli->per_client,
	       cli->tls_cert ? "on" : "off", cli->jwks ? "jwks" : "none", TG_VERSION);
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
	alloc_trust_free(app);
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
