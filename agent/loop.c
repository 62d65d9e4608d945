// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's event loop (agent/internal.h). One thread: epoll over a
 * signalfd (TERM and INT exit 0, HUP re-reads the config), an inotify watch
 * on the config's directory (kubelet swaps a ConfigMap through a `..data`
 * symlink) and on the store's (the plugin's pool-exhausted signal), and the
 * HTTP server (http/http.h); the wait ends when the next task is due. The
 * loop runs the tasks of agent.h and logs what they did.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/lease_guard.h"
#include "lib/cleanup.h"
#include "lib/cniops.h"
#include "lib/util.h"

static double uniform(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)time_mono_ms() * 2654435761u;
	return (double)v / 4294967296.0;
}

/* ---- the tasks, as the loop runs them ---- */

static uint64_t repairs(const struct agent_stats *s)
{
	return s->repaired_nft_table + s->repaired_nft_sets + s->repaired_nft_chains +
	       s->repaired_nft_rules + s->repaired_nft_internal + s->repaired_nft_pod_elements +
	       s->repaired_tc_ifb + s->repaired_tc_root + s->repaired_tc_node_class +
	       s->repaired_tc_clsact + s->repaired_tc_filters + s->repaired_tc_classes_restored +
	       s->repaired_sysctls + s->repaired_tc_pod_classes;
}

/*
 * The policy held on running pods, after each declaration: the config's caps
 * recorded and applied (at start-up too: a ConfigMap edited while the agent
 * was down, a reshape a kill left pending; and pods an ADD made with the
 * conflist the runtime still had), then every pod's classes compared with
 * its caps and put right where they drifted.
 */
static void run_policy(struct app *app)
{
	struct agent_notes notes = { 0 };
	struct tg_err e = { 0 };
	uint64_t pods = app->a.stats.reshaped_pods;
	int r = agent_reshape(&app->a, &notes, &e);

	agent_log_notes(&notes);
	if (r < 0)
		tg_log(TG_LOG_ERROR, "msg=\"reshape failed\" err=%s", LOGFMT_Q(e.msg));
	else if (app->a.stats.reshaped_pods != pods)
		tg_log(TG_LOG_INFO, "msg=\"running pods reshaped\" pods=%llu",
		       (unsigned long long)(app->a.stats.reshaped_pods - pods));
	memset(&e, 0, sizeof(e));
	r = agent_reconcile(&app->a, &notes, &e);
	agent_log_notes(&notes);
	if (r < 0)
		tg_log(TG_LOG_ERROR, "msg=\"reconcile of the pods' classes failed\" err=%s",
		       LOGFMT_Q(e.msg));
}

/*
 * What the node lacks, looked at after each declaration (the sysctls it
 * could not raise, the host's libraries for the plugin about to be
 * installed, the plugins the conflist chains): each lack logged once when
 * it appears and once when it is gone, never at every look.
 */
static void check_node(struct app *app)
{
	struct agent *a = &app->a;
	struct agent_lacks *now = &app->lacks_scratch;
	int r = 0;

	memset(now, 0, sizeof(*now));
	if (a->opt.host_root && a->opt.cni_bin_dir)
		r = agent_host_libraries(a->opt.host_root, a->opt.plugin_path, now);
	if (r < 0 && r != app->host_check_err)
		tg_log(TG_LOG_ERROR,
		       "msg=\"cannot read the plugin to check the host's libraries\" "
		       "plugin=%s err=%s",
		       LOGFMT_Q(a->opt.plugin_path), LOGFMT_Q(strerror(-r)));
	app->host_check_err = r;
	if (a->opt.cni_bin_dir && a->opt.cni_conf_dir && a->cfg_text)
		agent_host_chained(a->opt.cni_bin_dir, a->cfg_text, a->cfg_len, now);
	agent_host_sysctls("/proc/sys", now);
	for (size_t i = 0; i < now->n; i++) {
		bool known = false;

		for (size_t k = 0; k < a->lacks.n && !known; k++)
			known = strcmp(a->lacks.l[k].key, now->l[i].key) == 0;
		if (!known)
			tg_log(now->l[i].blocking ? TG_LOG_ERROR : TG_LOG_WARN, "%s",
			       now->l[i].note);
	}
	for (size_t k = 0; k < a->lacks.n; k++) {
		bool still = false;

		for (size_t i = 0; i < now->n && !still; i++)
			still = strcmp(a->lacks.l[k].key, now->l[i].key) == 0;
		if (!still)
			tg_log(TG_LOG_INFO, "msg=\"no longer lacking\" what=%s",
			       LOGFMT_Q(a->lacks.l[k].key));
	}
	if (now->dropped && !a->lacks.dropped)
		tg_log(TG_LOG_WARN, "msg=\"more lacks than listed\" left_out=%zu", now->dropped);
	a->lacks = *now;
}

static void run_declare(struct app *app)
{
	uint64_t before = repairs(&app->a.stats);
	struct tg_err e = { 0 };

	sched_started(&app->a.declare, time_mono_ms());
	if (agent_declare(&app->a, &e) < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"declaration failed\" err=%s", LOGFMT_Q(e.msg));
		sched_failed(&app->a.declare, time_mono_ms());
		return;
	}
	run_policy(app);
	if (repairs(&app->a.stats) != before)
		tg_log(TG_LOG_WARN, "msg=\"node-wide state repaired\" objects=%llu",
		       (unsigned long long)(repairs(&app->a.stats) - before));
	check_node(app);
	sched_succeeded(&app->a.declare, time_mono_ms(), uniform());
}

/*
 * A sync's end: scheduled again, logged. A failure backs off within
 * [min_ms, max_ms] (IMDS's Retry-After; its 410 while the VM starts).
 */
static void sync_finish(struct app *app, int r, struct agent_notes *notes, const struct tg_err *e,
			bool was_ready, int64_t min_ms, int64_t max_ms)
{
	agent_log_notes(notes);
	if (r < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"sync failed\" err=%s failures=%u", LOGFMT_Q(e->msg),
		       app->a.sync.failures + 1);
		sched_failed_within(&app->a.sync, time_mono_ms(), min_ms, max_ms);
		return;
	}
	if (!app->a.pool_ready) {
		/* no pool yet: keep asking, backing off */
		tg_log(TG_LOG_WARN, "msg=\"the pool is empty\"");
		sched_failed(&app->a.sync, time_mono_ms());
		return;
	}
	if (!was_ready)
		tg_log(TG_LOG_INFO, "msg=\"pool ready\"");
	sched_succeeded(&app->a.sync, time_mono_ms(), uniform());
}

static bool imds_busy(const struct app *app)
{
	return app->imds && httpc_busy(app->imds);
}

/* The loop's IMDS sync: the request goes out, its answer comes in take_imds. */
static void request_imds(struct app *app)
{
	struct agent_notes notes = { 0 };
	struct tg_err e = { 0 };
	char url[1100];
	int r = imds_url(agent_imds_url(&app->a), url, sizeof(url));

	if (r == 0)
		r = httpc_get(app->imds, url, "Metadata: true", IMDS_REQUEST_TIMEOUT_MS);
	if (r == 0)
		return;
	tg_fail(&e, CNI_ERR_IO, r, "cannot ask IMDS %s: %s", url, strerror(-r));
	sync_finish(app, agent_sync_answer(&app->a, NULL, 0, &notes, &e), &notes, &e,
		    app->a.pool_ready, 0, INT64_MAX);
}

/*
 * IMDS's answer, once in: the pool synced from it, or the failure backed
 * off as IMDS asks (Retry-After; 410, "not ready yet", retried every second
 * for up to IMDS_GONE_RETRY_S since the first).
 */
static void take_imds(struct app *app)
{
	struct agent_notes notes = { 0 };
	struct tg_err e = { 0 };
	const char *body = NULL;
	bool was_ready = app->a.pool_ready;
	int64_t now = time_mono_ms(), min_ms = 0, max_ms = INT64_MAX, ra;
	size_t len = 0;
	long status = 0;
	char why[320];
	int r = app->imds ? httpc_take(app->imds, &status, &body, &len, why, sizeof(why)) : 0;

	if (r == 0)
		return;
	/* the config turned to a static pool meanwhile: that sync is due at once */
	if (app->a.cfg.source == IPAM_SOURCE_STATIC)
		return;
	if (r > 0 || status != 410)
		app->imds_gone_since_ms = 0;
	if (r < 0) {
		tg_fail(&e, CNI_ERR_IO, -EIO, "IMDS %s: %s", agent_imds_url(&app->a), why);
		ra = httpc_retry_after_s(app->imds) * 1000;
		if (ra > app->a.opt.sync_ms)
			ra = app->a.opt.sync_ms;
		if (imds_retryable(status))
			min_ms = ra;
		if (status == 410 && !app->imds_gone_since_ms)
			app->imds_gone_since_ms = now;
		if (status == 410 && now - app->imds_gone_since_ms < IMDS_GONE_RETRY_S * 1000)
			max_ms = ra > 1000 ? ra : 1000;
	}
	r = agent_sync_answer(&app->a, r > 0 ? body : NULL, len, &notes, &e);
	sync_finish(app, r, &notes, &e, was_ready, min_ms, max_ms);
}

static void run_sync(struct app *app)
{
	struct agent_notes notes = { 0 };
	struct tg_err e = { 0 };
	bool was_ready = app->a.pool_ready;
	int r;

	sched_started(&app->a.sync, time_mono_ms());
	/* In the loop, IMDS is asked without waiting for it: the loop never blocks. */
	if (app->imds && app->a.cfg.source != IPAM_SOURCE_STATIC) {
		request_imds(app);
		return;
	}
	r = agent_sync(&app->a, &notes, &e);
	sync_finish(app, r, &notes, &e, was_ready, 0, INT64_MAX);
}

static void run_gc(struct app *app)
{
	struct agent_notes notes = { 0 };
	struct tg_err e = { 0 };
	int r;

	sched_started(&app->a.gc, time_mono_ms());
	r = agent_gc(&app->a, &notes, &e);
	agent_log_notes(&notes);
	if (r < 0) {
		tg_log(TG_LOG_ERROR, "msg=\"gc failed\" err=%s", LOGFMT_Q(e.msg));
		sched_failed(&app->a.gc, time_mono_ms());
		return;
	}
	if (agent_retire_namespaces(&app->a, time_mono_ms(), &e) < 0)
		tg_log(TG_LOG_ERROR, "msg=\"namespace retirement failed\" err=%s", LOGFMT_Q(e.msg));
	sched_succeeded(&app->a.gc, time_mono_ms(), uniform());
}

static void run_install(struct app *app)
{
	struct tg_err e = { 0 };

	/* a plugin the host cannot load is never installed (the lack is said once) */
	if (app->a.installed || !app->a.opt.cni_conf_dir || !app->a.pool_ready ||
	    !app->a.declared || agent_lacks_blocking(&app->a.lacks))
		return;
	if (agent_install(&app->a, &e) < 0)
		tg_log(TG_LOG_ERROR, "msg=\"install failed\" err=%s", LOGFMT_Q(e.msg));
	else
		tg_log(TG_LOG_INFO, "msg=\"plugin installed\" conf_dir=%s bin_dir=%s",
		       app->a.opt.cni_conf_dir,
		       app->a.opt.cni_bin_dir ? app->a.opt.cni_bin_dir : "-");
}

/* How soon after a new conflist is installed the running pods are reshaped again. */
#define RESHAPE_AFTER_INSTALL_MS 2000

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
		tg_log(TG_LOG_ERROR, "msg=\"config not reloaded; the one in force stays\" err=%s",
		       LOGFMT_Q(e.msg));
		return;
	}
	app->a.stats.config_reloads++;
	tg_log(TG_LOG_INFO, "msg=\"config changed\" path=%s", app->a.opt.config_path);
	if (app->ex)
		exporter_set_cooldown(app->ex, app->a.cfg.cooldown_ms);
	if (app->a.opt.metrics_only)
		return;
	run_declare(app); /* and the reshape */
	sched_soon(&app->a.sync, time_mono_ms(), 0);
	app->a.installed = false; /* the new conflist goes to the runtime */
	run_install(app);
	/*
	 * An ADD the runtime started with the old conflist records the old
	 * caps after that reshape: the next declaration's reshape, soon,
	 * gives them the new ones (and every later one, for ADDs still later).
	 */
	sched_soon(&app->a.declare, time_mono_ms(), RESHAPE_AFTER_INSTALL_MS);
}

/* The plugin's pool-exhausted signal lands in the store's directory (once it exists). */
static void watch_store(struct app *app)
{
	char dir[PATH_MAX + 256];

	if (app->store_wd >= 0 || app->inotify_fd < 0)
		return;
	snprintf(dir, sizeof(dir), "%s/%s", app->a.cfg.data_dir, app->a.cfg.name);
	app->store_wd =
		inotify_add_watch(app->inotify_fd, dir, IN_ATTRIB | IN_CREATE | IN_MOVED_TO);
}

/* What the destination sets counted, into the exporter's ledger (a scrape takes too). */
static void run_take(struct app *app)
{
	int r;

	sched_started(&app->take, time_mono_ms());
	r = app->ex ? exporter_take_destinations(app->ex) : 0;
	if (r < 0) {
		tg_log(TG_LOG_WARN, "msg=\"destination sets not read\" err=%s",
		       LOGFMT_Q(strerror(-r)));
		sched_failed(&app->take, time_mono_ms());
		return;
	}
	sched_succeeded(&app->take, time_mono_ms(), uniform());
}

static void run_due(struct app *app)
{
	int64_t now = time_mono_ms();
	bool ran = false;

	if (app->config_changed) {
		app->config_changed = false;
		reload(app);
		ran = true;
	}
	if (sched_due(&app->take, now))
		run_take(app);
	if (app->exhausted && !app->a.opt.metrics_only) {
		/* soon, but never two IMDS requests within the task's minimum gap */
		app->exhausted = false;
		tg_log(TG_LOG_INFO, "msg=\"the plugin found no free address: syncing\"");
		sched_soon(&app->a.sync, now, 0);
	}
	if (!app->a.opt.metrics_only) {
		if (sched_due(&app->a.declare, now)) {
			run_declare(app);
			ran = true;
		}
		if (sched_due(&app->a.sync, now) && !imds_busy(app)) {
			run_sync(app);
			ran = true;
		}
		watch_store(app);
		run_install(app);
		if (sched_due(&app->a.gc, time_mono_ms())) {
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

/* Cluster budgets: the period's report when due, and an answer once it is in. */
static void run_budgets(struct app *app)
{
	struct agent_notes notes = { 0 };
	int64_t now = time_boot_ms();

	if (!agent_budgets_enabled(&app->a) || app->a.opt.metrics_only)
		return;
	agent_budgets_answer(&app->a, now, &notes);
	agent_budgets_tick(&app->a, now, uniform(), &notes);
	agent_log_notes(&notes);
	/* a new policy: the running pods' classes follow which namespaces it budgets */
	if (app->a.budgets.policy_new) {
		app->a.budgets.policy_new = false;
		run_policy(app);
	}
}

static int next_wait_ms(struct app *app)
{
	/* a sync whose request runs is due again only once its answer is in */
	const struct sched_task *const tasks[] = { &app->take, &app->a.declare, &app->a.gc,
						   imds_busy(app) ? NULL : &app->a.sync };
	int64_t next = sched_next(tasks, app->a.opt.metrics_only ? 1 : 4);
	int64_t wait = next == INT64_MAX ? -1 : next - time_mono_ms();
	int h = app->http ? http_timeout_ms(app->http) : -1;
	int i = app->imds ? httpc_timeout_ms(app->imds) : -1;

	if (wait < 0 && next != INT64_MAX)
		wait = 0;
	if (wait > INT32_MAX)
		wait = INT32_MAX;
	if (h >= 0 && (wait < 0 || h < wait))
		wait = h;
	if (i >= 0 && (wait < 0 || i < wait))
		wait = i;
	if (agent_budgets_enabled(&app->a) && !app->a.opt.metrics_only) {
		int64_t b = agent_budgets_next_ms(&app->a) - time_boot_ms();
		int c = app->a.budgets.client ? httpc_timeout_ms(app->a.budgets.client) : -1;

		if (b < 0)
			b = 0;
		if (wait < 0 || b < wait)
			wait = b;
		if (c >= 0 && c < wait)
			wait = c;
	}
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
			else if (ev->wd == app->store_wd && ev->len && (ev->mask & IN_MOVED_TO) &&
				 strcmp(ev->name, IPAM_STORE_FILE) == 0)
				agent_budgets_store_changed(&app->a, time_boot_ms());
			p += sizeof(*ev) + ev->len;
		}
	}
}

/* 0 after SIGTERM or SIGINT, a negative errno when the loop itself failed. */
static int serve(struct app *app)
{
	_cleanup_close_ int ep = epoll_create1(EPOLL_CLOEXEC);
	_cleanup_close_ int sfd = signalfd(-1, &app->sigs, SFD_NONBLOCK | SFD_CLOEXEC);
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
	/* The budget reports' client: its sockets join this epoll set as libcurl opens them. */
	if (!app->a.opt.metrics_only && httpc_new(ep, "tollgate-agent/" TG_VERSION, BUDGET_BODY_MAX,
						  &app->a.budgets.client) < 0)
		return -ENOMEM;
	/* IMDS's client, the same way: the pool's sync never waits on IMDS in this loop. */
	if (!app->a.opt.metrics_only &&
	    httpc_new(ep, "tollgate-agent/" TG_VERSION, IMDS_BODY_MAX, &app->imds) < 0)
		return -ENOMEM;
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
					tg_log(TG_LOG_INFO, "msg=\"shutting down\" signal=%u",
					       si.ssi_signo);
					return 0;
				}
			} else if (evs[i].data.fd == app->inotify_fd) {
				drain_inotify(app);
			} else if (app->imds && httpc_has_socket(app->imds, evs[i].data.fd)) {
				httpc_socket(app->imds, evs[i].data.fd, evs[i].events);
			} else if (evs[i].data.fd != http_fd(app->http) && app->a.budgets.client) {
				httpc_socket(app->a.budgets.client, evs[i].data.fd, evs[i].events);
			}
		}
		if (app->a.budgets.client)
			httpc_run_timer(app->a.budgets.client);
		if (app->imds)
			httpc_run_timer(app->imds);
		take_imds(app);
		run_due(app);
		run_budgets(app);
		http_run(app->http);
	}
}

/* Start-up: the config, the node declared, the pool, the plugin installed. */
static void start_up(struct app *app)
{
	int64_t now = time_mono_ms();

	if (app->a.opt.cni_bin_dir && !app->a.opt.host_root && !app->a.opt.metrics_only)
		tg_log(TG_LOG_INFO, "msg=\"the host's libraries are not checked for the plugin "
				    "(no --host-root)\"");

	sched_init(&app->a.declare, now);
	sched_init(&app->a.sync, now);
	sched_init(&app->a.gc, now);
	sched_init(&app->take, now);
	run_due(app);
}

/* --once: the start-up work with a bounded number of sync tries (1 s apart, then backing off). */
int agent_once(struct app *app)
{
	int64_t deadline = time_mono_ms() + 60000;

	start_up(app);
	while (!agent_ready(&app->a) && time_mono_ms() < deadline) {
		int64_t wait = app->a.sync.next_ms - time_mono_ms();

		if (wait > 0)
			usleep((useconds_t)(wait > 5000 ? 5000 : wait) * 1000);
		run_due(app);
	}
	tg_log(agent_ready(&app->a) ? TG_LOG_INFO : TG_LOG_ERROR, "msg=\"once: %s\"",
	       agent_ready(&app->a) ? "ready" : "not ready within 60 s");
	return agent_ready(&app->a) ? 0 : 1;
}

int agent_loop(struct app *app)
{
	struct agent_notes notes = { 0 };
	int r;

	start_up(app);
	/* a sleeping thread until a lease runs: started whatever the budgets, which a reload may set */
	if (!app->a.opt.metrics_only &&
	    (r = lease_guard_start(&app->a.budgets.guard, app->a.cfg.mtu ? app->a.cfg.mtu : 1500)) <
		    0)
		tg_log(TG_LOG_ERROR,
		       "msg=\"budget: the lease guard did not start; leases end with the loop\" err=%s",
		       LOGFMT_Q(strerror(-r)));
	r = serve(app);
	if (r == 0 && !app->a.opt.metrics_only) {
		agent_budgets_stop(&app->a, time_boot_ms(), &notes);
		agent_log_notes(&notes);
	}
	return r < 0 ? 1 : 0;
}
