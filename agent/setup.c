// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's process set up before its loop and torn down after it: the
 * task schedule, capabilities, the config, signals, the watch on the
 * config's directory, the exporter and the HTTP server with its routes.
 */
#include <errno.h>
#include <libgen.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent/internal.h"
#include "lib/caps.h"
#include "lib/util.h"

#define PAGE_MAX (64u << 20)

static const char index_html[] =
	"<!DOCTYPE html>\n<html><head><title>Tollgate agent</title></head><body>\n"
	"<h1>Tollgate agent</h1>\n<ul>\n<li><a href=\"metrics\">/metrics</a> "
	"(Prometheus text format 0.0.4)</li>\n<li><a href=\"healthz\">/healthz</a></li>\n"
	"<li><a href=\"readyz\">/readyz</a></li>\n<li><a href=\"destinations\">/destinations</a> "
	"(internetGuard.destinations, JSON)</li>\n</ul>\n</body></html>\n";

/* "ready" or "not ready", then each thing the node lacks, one a line, with what to do. */
static size_t readyz_text(struct app *app, bool ready)
{
	const struct agent_lacks *l = &app->a.lacks;
	size_t size = sizeof(app->ready_body);
	size_t n = (size_t)snprintf(app->ready_body, size, "%s\n", ready ? "ready" : "not ready");

	for (size_t i = 0; i < l->n && n < size; i++)
		n += (size_t)snprintf(app->ready_body + n, size - n, "%s\n", l->l[i].text);
	if (l->dropped && n < size)
		n += (size_t)snprintf(app->ready_body + n, size - n, "(%zu more not listed)\n",
				      l->dropped);
	return n < size ? n : size - 1;
}

static void route(void *cls, const char *path, struct http_reply *ret)
{
	struct app *app = cls;
	static const char text[] = "text/plain; charset=utf-8";

	if (strcmp(path, "/metrics") == 0) {
		ret->page = true;
	} else if (strcmp(path, "/healthz") == 0) {
		*ret = (struct http_reply){ .status = 200,
					    .content_type = text,
					    .body = "ok\n",
					    .len = 3 };
	} else if (strcmp(path, "/readyz") == 0) {
		bool ready = agent_ready(&app->a);

		*ret = (struct http_reply){ .status = ready ? 200 : 503,
					    .content_type = text,
					    .body = app->ready_body,
					    .len = readyz_text(app, ready),
					    .copy = true };
	} else if (strcmp(path, "/destinations") == 0) {
		/* internetGuard.destinations, as /metrics has them (tollgate-ipam top) */
		char *body = NULL;
		size_t len = 0;
		int r;

		/* the last answer's body: the server copied it when it queued that answer */
		free(app->dst_body);
		app->dst_body = NULL;
		r = exporter_destinations_json(app->ex, &body, &len);

		if (r == 0)
			*ret = (struct http_reply){ .status = 200,
						    .content_type = "application/json",
						    .body = body,
						    .len = len,
						    .copy = true };
		else
			*ret = (struct http_reply){ .status = 500,
						    .content_type = text,
						    .body = "destinations not read\n",
						    .len = 22 };
		app->dst_body = body;
	} else if (strcmp(path, "/") == 0) {
		*ret = (struct http_reply){ .status = 200,
					    .content_type = "text/html; charset=utf-8",
					    .body = index_html,
					    .len = sizeof(index_html) - 1 };
	}
}

/* The page, collected for the HTTP server; run from the loop (http_run). */
static int collect(void *cls, char **ret_buf, size_t *ret_len)
{
	struct app *app = cls;
	struct http_stats st;
	size_t len;
	char *buf;
	int r;

	expo_reset(&app->page);
	r = exporter_render(app->ex, &app->page);
	if (r >= 0) {
		agent_render_metrics(&app->a, &app->page);
		http_get_stats(app->http, &st);
		exporter_render_http(&app->page, &st);
		if (app->page.overflow)
			r = -ENOBUFS;
	}
	if (r < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"scrape failed\" err=%s", LOGFMT_Q(strerror(-r)));
		return r;
	}
	buf = expo_take(&app->page, &len);
	if (!buf)
		return -ENODATA;
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/* Each task's period, jitter, minimum gap and back-off. */
static void schedule_tasks(struct agent *a)
{
	a->declare = (struct sched_task){ .name = "declare",
					  .period_ms = a->opt.declare_ms,
					  .jitter_pct = 10,
					  .min_gap_ms = 1000,
					  .backoff_first_ms = 1000,
					  .backoff_max_ms = a->opt.declare_ms };
	/* IMDS: never more than a request a second, backing off to the period. */
	a->sync = (struct sched_task){ .name = "sync",
				       .period_ms = a->opt.sync_ms,
				       .jitter_pct = 10,
				       .min_gap_ms = 1000,
				       .backoff_first_ms = 1000,
				       .backoff_max_ms = a->opt.sync_ms };
	a->gc = (struct sched_task){ .name = "gc",
				     .period_ms = a->opt.gc_ms,
				     .jitter_pct = 10,
				     .min_gap_ms = 1000,
				     .backoff_first_ms = 5000,
				     .backoff_max_ms = a->opt.gc_ms };
}

/* A destination set's entry is forgotten a minute after its last packet: take six times as often. */
static void schedule_take(struct app *app)
{
	int64_t period = ACCT_DST_TIMEOUT_S * 1000 / 6;

	app->take = (struct sched_task){ .name = "take",
					 .period_ms = period,
					 .jitter_pct = 10,
					 .min_gap_ms = 1000,
					 .backoff_first_ms = 1000,
					 .backoff_max_ms = period };
}

int agent_check_config(const struct agent_cli *cli)
{
	struct node_config cfg = { 0 };
	struct tg_err e = { 0 };
	int r;

	if (!cli->opt.config_path) {
		fprintf(stderr, "tollgate-agent: --check needs --config\n");
		return 2;
	}
	r = node_config_load_file(cli->opt.config_path, &cfg, &e);
	node_config_verdict(stdout, cli->opt.config_path, r, &cfg, &e);
	node_config_free(&cfg);
	return r == 0 ? 0 : 1;
}

int agent_setup(struct app *app, const struct agent_cli *cli)
{
	struct agent *a = &app->a;
	struct tg_err e = { 0 };
	int r;

	memset(app, 0, sizeof(*app));
	app->inotify_fd = app->config_wd = app->store_wd = -1;
	a->opt = cli->opt;
	tg_log_set_level(cli->log_level);
	schedule_tasks(a);
	schedule_take(app);
	http_config_defaults(&app->hc);
	if (cli->page_cache_ms >= 0)
		app->hc.cache_ms = (unsigned int)cli->page_cache_ms;
	if (cli->deadline_ms >= 0)
		app->hc.deadline_ms = (unsigned int)cli->deadline_ms;
	r = http_parse_listen(cli->listen, HTTP_DEFAULT_PORT, &app->hc.addr);
	if (r < 0) {
		char why[320];
		int status = http_listen_explain(r, cli->listen, why, sizeof(why));

		fprintf(stderr, "tollgate-agent: %s\n", why);
		if (r == -EINVAL)
			agent_usage(stderr);
		return status;
	}
	/*
	 * CAP_NET_ADMIN and nothing else. The bounding set is the runtime's
	 * (the manifest's drop ALL, add NET_ADMIN): changing it would need
	 * CAP_SETPCAP.
	 */
	if ((r = caps_keep_only(1u << CAP_NET_ADMIN, false)) < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot set capabilities\" err=%s",
		       LOGFMT_Q(strerror(-r)));
		return 1;
	}
	if (!a->opt.config_path) {
		/* metrics only, from --data-dir and --network */
		snprintf(a->cfg.data_dir, sizeof(a->cfg.data_dir), "%s", a->opt.data_dir);
		a->cfg.name = cli->network;
	} else if (agent_load_config(a, &e) < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot load the config\" path=%s err=%s",
		       LOGFMT_Q(a->opt.config_path), LOGFMT_Q(e.msg));
		return 1;
	}
	sigemptyset(&app->sigs);
	sigaddset(&app->sigs, SIGTERM);
	sigaddset(&app->sigs, SIGINT);
	sigaddset(&app->sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &app->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	tg_log(TG_LOG_INFO, "msg=\"starting\" config=%s network=%s data_dir=%s version=%s%s%s",
	       a->opt.config_path ? a->opt.config_path : "-", a->cfg.name, a->cfg.data_dir,
	       TG_VERSION, a->opt.once ? " once" : "", a->opt.metrics_only ? " metrics-only" : "");
	return AGENT_RUN;
}

/* The directory: kubelet replaces a ConfigMap's file by swapping a symlink there. */
static void watch_config(struct app *app)
{
	const char *path = app->a.opt.config_path;
	char copy[PATH_MAX];

	snprintf(copy, sizeof(copy), "%s", path ? path : ".");
	snprintf(app->config_dir, sizeof(app->config_dir), "%s", dirname(copy));
	app->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (app->inotify_fd >= 0 && path)
		app->config_wd = inotify_add_watch(app->inotify_fd, app->config_dir,
						   IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
							   IN_DELETE | IN_ATTRIB);
	if (app->config_wd < 0 && path)
		tg_log(TG_LOG_WARN,
		       "msg=\"cannot watch the config's directory; SIGHUP re-reads\" "
		       "dir=%s err=\"%m\"",
		       app->config_dir);
}

int agent_setup_servers(struct app *app, const struct agent_cli *cli)
{
	int r;

	watch_config(app);
	app->ex = exporter_new(app->a.cfg.data_dir, app->a.cfg.name);
	if (!app->ex)
		return 1;
	if (app->a.cfg_ok)
		exporter_set_cooldown(app->ex, app->a.cfg.cooldown_ms);
	expo_init(&app->page, PAGE_MAX);
	app->hc.route = route;
	app->hc.route_cls = app;
	app->hc.collect = collect;
	app->hc.collect_cls = app;
	app->hc.page_type = "text/plain; version=0.0.4; charset=utf-8";
	r = http_start(&app->hc, &app->http);
	if (r < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"cannot listen\" listen=%s err=%s",
		       LOGFMT_Q(cli->listen), LOGFMT_Q(strerror(-r)));
		return 1;
	}
	return AGENT_RUN;
}

void agent_teardown(struct app *app)
{
	struct agent *a = &app->a;

	http_free(app->http);
	expo_free(&app->page);
	exporter_free(app->ex);
	free(app->dst_body);
	if (app->inotify_fd >= 0)
		close(app->inotify_fd);
	if (a->cfg_ok)
		node_config_free(&a->cfg);
	agent_budgets_free(a);
	httpc_free(app->imds);
	free(a->counted);
	free(a->cfg_text);
}
