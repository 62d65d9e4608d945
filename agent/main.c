// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-agent: the node daemon (agent/agent.h).
 *
 *   tollgate-agent --config FILE [--data-dir D] [--listen ADDR:PORT]
 *                  [--cni-conf-dir DIR --cni-bin-dir DIR] [--once] [--metrics-only]
 *
 * One thread, one event loop: epoll over a signalfd (TERM and INT exit 0,
 * HUP re-reads the config), an inotify watch on the config's directory
 * (kubelet swaps a ConfigMap through a `..data` symlink), a timerfd for the
 * next task, and the HTTP server (http/http.h).
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "exporter/exporter.h"
#include "http/http.h"
#include "lib/cleanup.h"
#include "lib/cniops.h"
#include "lib/util.h"

#define PAGE_MAX (64u << 20)

struct app {
	struct agent a;
	struct exporter *ex;
	struct expo page;
	struct http_server *http;
	int inotify_fd;
	int config_wd, store_wd;	/* watches: the config's directory, the store's */
	char config_dir[PATH_MAX];
	bool config_changed;		/* an event in the config's directory: re-read */
	bool exhausted;			/* the plugin found no free address: sync soon */
};

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO };
static enum log_level log_level = LOG_INFO;

static void __attribute__((format(printf, 2, 3))) logf_(enum log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info" };
	char ts[32], msg[768];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, names[lvl], msg);
}

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static double uniform(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)mono_ms() * 2654435761u;
	return (double)v / 4294967296.0;
}

static const char index_html[] =
	"<!DOCTYPE html>\n<html><head><title>Tollgate agent</title></head><body>\n"
	"<h1>Tollgate agent</h1>\n<ul>\n<li><a href=\"metrics\">/metrics</a> "
	"(Prometheus text format 0.0.4)</li>\n<li><a href=\"healthz\">/healthz</a></li>\n"
	"<li><a href=\"readyz\">/readyz</a></li>\n</ul>\n</body></html>\n";

static void route(void *cls, const char *path, struct http_reply *ret)
{
	struct app *app = cls;
	static const char text[] = "text/plain; charset=utf-8";

	if (strcmp(path, "/metrics") == 0) {
		ret->page = true;
	} else if (strcmp(path, "/healthz") == 0) {
		*ret = (struct http_reply){ .status = 200, .content_type = text, .body = "ok\n",
					    .len = 3 };
	} else if (strcmp(path, "/readyz") == 0) {
		bool ready = agent_ready(&app->a);

		*ret = (struct http_reply){ .status = ready ? 200 : 503, .content_type = text,
					    .body = ready ? "ready\n" : "not ready\n",
					    .len = ready ? 6 : 10 };
	} else if (strcmp(path, "/") == 0) {
		*ret = (struct http_reply){ .status = 200, .content_type = "text/html; charset=utf-8",
					    .body = index_html, .len = sizeof(index_html) - 1 };
	}
}

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
		logf_(LOG_ERROR, "msg=\"scrape failed\" err=\"%s\"", strerror(-r));
		return r;
	}
	buf = expo_take(&app->page, &len);
	if (!buf)
		return -ENODATA;
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/*
 * Keeps CAP_NET_ADMIN and nothing else in the effective and permitted sets,
 * and sets no_new_privs. The bounding set is the runtime's (the manifest's
 * drop ALL, add NET_ADMIN): changing it would need CAP_SETPCAP.
 */
static int keep_net_admin(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	uint32_t keep = 1u << CAP_NET_ADMIN;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	data[0].effective &= keep;
	data[0].permitted &= keep;
	data[0].inheritable = 0;
	data[1].effective = data[1].permitted = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -errno : 0;
}

/* ---- the tasks, as the loop runs them ---- */

static uint64_t repairs(const struct agent_stats *s)
{
	return s->repaired_nft_table + s->repaired_nft_sets + s->repaired_nft_chains +
	       s->repaired_nft_rules + s->repaired_nft_internal + s->repaired_tc_ifb +
	       s->repaired_tc_root + s->repaired_tc_node_class + s->repaired_tc_clsact +
	       s->repaired_tc_filters + s->repaired_tc_classes_restored + s->repaired_sysctls;
}

static void run_declare(struct app *app)
{
	uint64_t before = repairs(&app->a.stats), ro = app->a.stats.sysctls_readonly;
	struct tg_err e = { 0 };

	sched_started(&app->a.declare, mono_ms());
	if (agent_declare(&app->a, &e) < 0) {
		logf_(LOG_ERROR, "msg=\"declaration failed\" err=\"%s\"", e.msg);
		sched_failed(&app->a.declare, mono_ms());
		return;
	}
	if (repairs(&app->a.stats) != before)
		logf_(LOG_WARN, "msg=\"node-wide state repaired\" objects=%llu",
		      (unsigned long long)(repairs(&app->a.stats) - before));
	/* once: the next declarations find the same */
	if (ro == 0 && app->a.stats.sysctls_readonly)
		logf_(LOG_WARN, "msg=\"a sysctl is below its floor and /proc/sys is read-only "
		      "(an unprivileged container): left to the plugin on the host\"");
	sched_succeeded(&app->a.declare, mono_ms(), uniform());
}

static void run_sync(struct app *app)
{
	struct tg_err e = { 0 };
	bool was_ready = app->a.pool_ready;

	sched_started(&app->a.sync, mono_ms());
	if (agent_sync(&app->a, &e) < 0) {
		logf_(LOG_ERROR, "msg=\"sync failed\" err=\"%s\" failures=%u", e.msg,
		      app->a.sync.failures + 1);
		sched_failed(&app->a.sync, mono_ms());
		return;
	}
	if (!app->a.pool_ready) {
		/* no pool yet: keep asking, backing off */
		logf_(LOG_WARN, "msg=\"the pool is empty\"");
		sched_failed(&app->a.sync, mono_ms());
		return;
	}
	if (!was_ready)
		logf_(LOG_INFO, "msg=\"pool ready\"");
	sched_succeeded(&app->a.sync, mono_ms(), uniform());
}

static void run_gc(struct app *app)
{
	struct tg_err e = { 0 };

	sched_started(&app->a.gc, mono_ms());
	if (agent_gc(&app->a, &e) < 0) {
		logf_(LOG_ERROR, "msg=\"gc failed\" err=\"%s\"", e.msg);
		sched_failed(&app->a.gc, mono_ms());
		return;
	}
	if (agent_retire_namespaces(&app->a, mono_ms(), &e) < 0)
		logf_(LOG_ERROR, "msg=\"namespace retirement failed\" err=\"%s\"", e.msg);
	sched_succeeded(&app->a.gc, mono_ms(), uniform());
}

static void run_install(struct app *app)
{
	struct tg_err e = { 0 };

	if (app->a.installed || !app->a.opt.cni_conf_dir || !app->a.pool_ready ||
	    !app->a.declared)
		return;
	if (agent_install(&app->a, &e) < 0)
		logf_(LOG_ERROR, "msg=\"install failed\" err=\"%s\"", e.msg);
	else
		logf_(LOG_INFO, "msg=\"plugin installed\" conf_dir=%s bin_dir=%s",
		      app->a.opt.cni_conf_dir, app->a.opt.cni_bin_dir ? app->a.opt.cni_bin_dir : "-");
}

/* The config's directory changed: re-read; a new config is declared, reshaped, installed. */
static void reload(struct app *app)
{
	struct tg_err e = { 0 };
	int r = app->a.opt.config_path ? agent_load_config(&app->a, &e) : 0;

	if (r == 0)
		return;
	if (r < 0) {
		app->a.stats.config_reloads++;
		app->a.stats.config_errors++;
		logf_(LOG_ERROR, "msg=\"config not reloaded; the one in force stays\" err=\"%s\"",
		      e.msg);
		return;
	}
	app->a.stats.config_reloads++;
	logf_(LOG_INFO, "msg=\"config changed\" path=%s", app->a.opt.config_path);
	if (app->a.opt.metrics_only)
		return;
	run_declare(app);
	memset(&e, 0, sizeof(e));
	if (agent_reshape(&app->a, &e) < 0)
		logf_(LOG_ERROR, "msg=\"reshape failed\" err=\"%s\"", e.msg);
	sched_soon(&app->a.sync, mono_ms(), 0);
	app->a.installed = false; /* the new conflist goes to the runtime */
	run_install(app);
}

/* The plugin's pool-exhausted signal lands in the store's directory (once it exists). */
static void watch_store(struct app *app)
{
	char dir[PATH_MAX + 256];

	if (app->store_wd >= 0 || app->inotify_fd < 0)
		return;
	snprintf(dir, sizeof(dir), "%s/%s", app->a.cfg.data_dir, app->a.cfg.name);
	app->store_wd = inotify_add_watch(app->inotify_fd, dir, IN_ATTRIB | IN_CREATE);
}

static void run_due(struct app *app)
{
	int64_t now = mono_ms();
	bool ran = false;

	if (app->config_changed) {
		app->config_changed = false;
		reload(app);
		ran = true;
	}
	if (app->exhausted && !app->a.opt.metrics_only) {
		/* soon, but never two IMDS requests within the task's minimum gap */
		app->exhausted = false;
		logf_(LOG_INFO, "msg=\"the plugin found no free address: syncing\"");
		sched_soon(&app->a.sync, now, 0);
	}
	if (!app->a.opt.metrics_only) {
		if (sched_due(&app->a.declare, now)) {
			run_declare(app);
			ran = true;
		}
		if (sched_due(&app->a.sync, now)) {
			run_sync(app);
			ran = true;
		}
		watch_store(app);
		run_install(app);
		if (sched_due(&app->a.gc, mono_ms())) {
			run_gc(app);
			ran = true;
		}
	}
	/*
	 * A task's buffers (a full declaration's nftables batch is ~3 kB a pod)
	 * go back to the kernel once it is done: the daemon idles small.
	 */
	if (ran)
		malloc_trim(0);
}

static int next_wait_ms(struct app *app)
{
	const struct sched_task *const tasks[] = { &app->a.declare, &app->a.sync, &app->a.gc };
	int64_t next = app->a.opt.metrics_only ? INT64_MAX : sched_next(tasks, 3);
	int64_t wait = next == INT64_MAX ? -1 : next - mono_ms();
	int h = app->http ? http_timeout_ms(app->http) : -1;

	if (wait < 0 && next != INT64_MAX)
		wait = 0;
	if (wait > INT32_MAX)
		wait = INT32_MAX;
	if (h >= 0 && (wait < 0 || h < wait))
		wait = h;
	return (int)wait;
}

static void drain_inotify(struct app *app)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(app->inotify_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if (ev->wd == app->config_wd)
				app->config_changed = true;
			else if (ev->wd == app->store_wd && ev->len &&
				 strcmp(ev->name, CNIOPS_EXHAUSTED_FILE) == 0)
				app->exhausted = true;
			p += sizeof(*ev) + ev->len;
		}
	}
}

static int serve(struct app *app, const sigset_t *sigs)
{
	_cleanup_close_ int ep = epoll_create1(EPOLL_CLOEXEC);
	_cleanup_close_ int sfd = signalfd(-1, sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN }, evs[8];

	if (ep < 0 || sfd < 0)
		return -errno;
	ev.data.fd = sfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
		return -errno;
	ev.data.fd = http_fd(app->http);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	if (app->inotify_fd >= 0) {
		ev.data.fd = app->inotify_fd;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
			return -errno;
	}
	for (;;) {
		int n = epoll_wait(ep, evs, 8, next_wait_ms(app));

		if (n < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == sfd) {
				struct signalfd_siginfo si;

				while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						app->config_changed = true;
						continue;
					}
					logf_(LOG_INFO, "msg=\"shutting down\" signal=%u", si.ssi_signo);
					return 0;
				}
			} else if (evs[i].data.fd == app->inotify_fd) {
				drain_inotify(app);
			}
		}
		run_due(app);
		http_run(app->http);
	}
}

static void usage(FILE *f)
{
	fputs("usage: tollgate-agent --config FILE [--data-dir DIR] [--listen ADDR:PORT|:PORT]\n"
	      "                      [--cni-conf-dir DIR --cni-bin-dir DIR] [--plugin FILE]\n"
	      "                      [--conf-name NAME] [--once] [--metrics-only]\n"
	      "                      [--declare-interval S] [--sync-interval S] [--gc-interval S]\n"
	      "                      [--page-cache-ms MS] [--deadline-ms MS] [--log-level L]\n"
	      "       tollgate-agent --metrics-only --data-dir DIR --network NAME [--listen ...]\n"
	      "defaults: --listen :9617, --plugin: tollgate beside this binary,\n"
	      "          --conf-name 10-tollgate.conflist, intervals 30 / 300 / 60 s,\n"
	      "          --page-cache-ms 1000 (scrapes within it share one page),\n"
	      "          --deadline-ms 10000 (a request's whole life), --log-level info\n"
	      "endpoints: /metrics, /healthz, /readyz, /\n",
	      f);
}

/* Says what is wrong with --listen; the exit status (2: usage, 1: could not resolve now). */
static int listen_problem(const char *listen, int r)
{
	switch (r) {
	case -EAFNOSUPPORT:
		fprintf(stderr, "tollgate-agent: --listen \"%s\": IPv6 is not served; give an IPv4 "
				"address or a name with one\n", listen);
		return 2;
	case -ENOENT:
		fprintf(stderr, "tollgate-agent: --listen \"%s\": the name has no IPv4 address\n",
			listen);
		return 1;
	case -EAGAIN:
		fprintf(stderr, "tollgate-agent: --listen \"%s\": the resolver did not answer; "
				"try again\n", listen);
		return 1;
	case -EINVAL:
		fprintf(stderr, "tollgate-agent: --listen \"%s\" is not ADDR:PORT, :PORT or "
				"HOST:PORT (port 1-65535)\n", listen);
		usage(stderr);
		return 2;
	default:
		fprintf(stderr, "tollgate-agent: --listen \"%s\": %s\n", listen, strerror(-r));
		return 1;
	}
}

static int parse_seconds(const char *s, int64_t *ret_ms)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > 86400)
		return -EINVAL;
	*ret_ms = (int64_t)v * 1000;
	return 0;
}

static void default_plugin(char *buf, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0) {
		snprintf(buf, size, "/usr/local/bin/tollgate");
		return;
	}
	self[n] = '\0';
	snprintf(buf, size, "%s/tollgate", dirname(self));
}

/* Start-up: the config, the node declared, the pool, the plugin installed. */
static void start_up(struct app *app)
{
	int64_t now = mono_ms();

	sched_init(&app->a.declare, now);
	sched_init(&app->a.sync, now);
	sched_init(&app->a.gc, now);
	run_due(app);
}

/* --once: the start-up work with a bounded number of sync tries (1 s apart, then backing off). */
static int once(struct app *app)
{
	int64_t deadline = mono_ms() + 60000;

	start_up(app);
	while (!agent_ready(&app->a) && mono_ms() < deadline) {
		int64_t wait = app->a.sync.next_ms - mono_ms();

		if (wait > 0)
			usleep((useconds_t)(wait > 5000 ? 5000 : wait) * 1000);
		run_due(app);
	}
	logf_(agent_ready(&app->a) ? LOG_INFO : LOG_ERROR, "msg=\"once: %s\"",
	      agent_ready(&app->a) ? "ready" : "not ready within 60 s");
	return agent_ready(&app->a) ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "cni-conf-dir", required_argument, NULL, 'C' },
		{ "cni-bin-dir", required_argument, NULL, 'B' },
		{ "plugin", required_argument, NULL, 'p' },
		{ "conf-name", required_argument, NULL, 'N' },
		{ "once", no_argument, NULL, 'o' },
		{ "metrics-only", no_argument, NULL, 'm' },
		{ "declare-interval", required_argument, NULL, 'D' },
		{ "sync-interval", required_argument, NULL, 'S' },
		{ "gc-interval", required_argument, NULL, 'G' },
		{ "page-cache-ms", required_argument, NULL, 'P' },
		{ "deadline-ms", required_argument, NULL, 'T' },
		{ "network", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct app app = { .inotify_fd = -1, .config_wd = -1, .store_wd = -1 };
	struct agent *a = &app.a;
	const char *listen = ":9617", *network = NULL;
	int page_cache_ms = -1, deadline_ms = -1;
	char plugin[PATH_MAX], cfg_copy[PATH_MAX];
	struct http_config hc;
	struct tg_err e = { 0 };
	sigset_t sigs;
	int opt, r;

	a->opt = (struct agent_options){ .conf_name = "10-tollgate.conflist",
					 .declare_ms = 30000, .sync_ms = 300000,
					 .gc_ms = 60000 };
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': a->opt.config_path = optarg; break;
		case 'd': a->opt.data_dir = optarg; break;
		case 'l': listen = optarg; break;
		case 'C': a->opt.cni_conf_dir = optarg; break;
		case 'B': a->opt.cni_bin_dir = optarg; break;
		case 'p': a->opt.plugin_path = optarg; break;
		case 'N': a->opt.conf_name = optarg; break;
		case 'o': a->opt.once = true; break;
		case 'm': a->opt.metrics_only = true; break;
		case 'D':
		case 'S':
		case 'G':
			if (parse_seconds(optarg, opt == 'D'   ? &a->opt.declare_ms
						  : opt == 'S' ? &a->opt.sync_ms
							       : &a->opt.gc_ms) < 0) {
				fprintf(stderr, "tollgate-agent: an interval is 1 to 86400 seconds\n");
				return 2;
			}
			break;
		case 'P':
		case 'T': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || !*optarg || (opt == 'P' && (v < 0 || v > 60000)) ||
			    (opt == 'T' && (v < 100 || v > 600000))) {
				fprintf(stderr, "tollgate-agent: %s\n",
					opt == 'P' ? "--page-cache-ms is 0 to 60000"
						   : "--deadline-ms is 100 to 600000");
				return 2;
			}
			*(opt == 'P' ? &page_cache_ms : &deadline_ms) = (int)v;
			break;
		}
		case 'n': network = optarg; break;
		case 'v':
			if (strcmp(optarg, "error") == 0)
				log_level = LOG_ERROR;
			else if (strcmp(optarg, "warn") == 0)
				log_level = LOG_WARN;
			else if (strcmp(optarg, "info") == 0)
				log_level = LOG_INFO;
			else {
				fprintf(stderr, "tollgate-agent: --log-level is error, warn or info\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	/* Metrics only, the store named by --data-dir and --network: no config needed. */
	if (a->opt.metrics_only && !a->opt.config_path && a->opt.data_dir && network) {
		if (!name_is_safe(network, 128)) {
			fprintf(stderr, "tollgate-agent: --network \"%s\" is not a valid network name\n",
				network);
			return 2;
		}
	} else if (optind < argc || !a->opt.config_path || network) {
		if (!a->opt.config_path)
			fprintf(stderr, "tollgate-agent: --config is required (or --metrics-only with "
					"--data-dir and --network)\n");
		else if (network)
			fprintf(stderr, "tollgate-agent: --network goes with --metrics-only without "
					"--config (the config names its network)\n");
		usage(stderr);
		return 2;
	}
	if (a->opt.cni_bin_dir && !a->opt.cni_conf_dir) {
		fprintf(stderr, "tollgate-agent: --cni-bin-dir goes with --cni-conf-dir\n");
		return 2;
	}
	if (!a->opt.plugin_path) {
		default_plugin(plugin, sizeof(plugin));
		a->opt.plugin_path = plugin;
	}
	a->declare = (struct sched_task){ .name = "declare", .period_ms = a->opt.declare_ms,
					  .jitter_pct = 10, .min_gap_ms = 1000,
					  .backoff_first_ms = 1000,
					  .backoff_max_ms = a->opt.declare_ms };
	/* IMDS: never more than a request a second, backing off to the period. */
	a->sync = (struct sched_task){ .name = "sync", .period_ms = a->opt.sync_ms,
				       .jitter_pct = 10, .min_gap_ms = 1000,
				       .backoff_first_ms = 1000, .backoff_max_ms = a->opt.sync_ms };
	a->gc = (struct sched_task){ .name = "gc", .period_ms = a->opt.gc_ms, .jitter_pct = 10,
				     .min_gap_ms = 1000, .backoff_first_ms = 5000,
				     .backoff_max_ms = a->opt.gc_ms };
	http_config_defaults(&hc);
	if (page_cache_ms >= 0)
		hc.cache_ms = (unsigned int)page_cache_ms;
	if (deadline_ms >= 0)
		hc.deadline_ms = (unsigned int)deadline_ms;
	r = http_parse_listen(listen, HTTP_DEFAULT_PORT, &hc.addr);
	if (r < 0)
		return listen_problem(listen, r);
	if ((r = keep_net_admin()) < 0) {
		logf_(LOG_ERROR, "msg=\"cannot set capabilities\" err=\"%s\"", strerror(-r));
		return 1;
	}
	if (!a->opt.config_path) {
		/* metrics only, from --data-dir and --network */
		snprintf(a->cfg.data_dir, sizeof(a->cfg.data_dir), "%s", a->opt.data_dir);
		a->cfg.name = network;
	} else if (agent_load_config(a, &e) < 0) {
		logf_(LOG_ERROR, "msg=\"cannot load the config\" path=%s err=\"%s\"",
		      a->opt.config_path, e.msg);
		return 1;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	logf_(LOG_INFO, "msg=\"starting\" config=%s network=%s data_dir=%s version=%s%s%s",
	      a->opt.config_path ? a->opt.config_path : "-", a->cfg.name, a->cfg.data_dir, TG_VERSION,
	      a->opt.once ? " once" : "", a->opt.metrics_only ? " metrics-only" : "");
	if (a->opt.once)
		return once(&app);

	/* The directory: kubelet replaces a ConfigMap's file by swapping a symlink there. */
	snprintf(cfg_copy, sizeof(cfg_copy), "%s", a->opt.config_path ? a->opt.config_path : ".");
	snprintf(app.config_dir, sizeof(app.config_dir), "%s", dirname(cfg_copy));
	app.inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (app.inotify_fd >= 0 && a->opt.config_path)
		app.config_wd = inotify_add_watch(app.inotify_fd, app.config_dir,
						  IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
							  IN_DELETE | IN_ATTRIB);
	if (app.config_wd < 0 && a->opt.config_path)
		logf_(LOG_WARN, "msg=\"cannot watch the config's directory; SIGHUP re-reads\" "
		      "dir=%s err=\"%m\"",
		      app.config_dir);
	app.ex = exporter_new(a->cfg.data_dir, a->cfg.name);
	if (!app.ex)
		return 1;
	expo_init(&app.page, PAGE_MAX);
	hc.route = route;
	hc.route_cls = &app;
	hc.collect = collect;
	hc.collect_cls = &app;
	hc.page_type = "text/plain; version=0.0.4; charset=utf-8";
	r = http_start(&hc, &app.http);
	if (r < 0) {
		logf_(LOG_ERROR, "msg=\"cannot listen\" listen=%s err=\"%s\"", listen, strerror(-r));
		return 1;
	}
	start_up(&app);
	r = serve(&app, &sigs);
	http_free(app.http);
	expo_free(&app.page);
	exporter_free(app.ex);
	if (app.inotify_fd >= 0)
		close(app.inotify_fd);
	if (a->cfg_ok)
		node_config_free(&a->cfg);
	free(a->counted);
	return r < 0 ? 1 : 0;
}
