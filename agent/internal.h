/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_AGENT_INTERNAL_H
#define TG_AGENT_INTERNAL_H

/*
 * The binary around the tasks of agent.h: its options (options.c), its log
 * (log.c), the process and its servers set up and torn down (setup.c), and
 * the event loop (loop.c), which runs the tasks and is the one that logs
 * what they did and what they said.
 */

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "agent/agent.h"
#include "httpc/httpc.h"
#include "exporter/exporter.h"
#include "http/http.h"
#include "lib/log.h"

/* ---- the log (lib/log.h; log.c: the tasks' notes) ---- */

/* A task's notes, one warn record each (and one for those left out); emptied. */
void agent_log_notes(struct agent_notes *n);

/* ---- the command line (options.c) ---- */

struct agent_cli {
	struct agent_options opt;
	const char *listen;		/* ADDR:PORT, :PORT, HOST:PORT, or an address or name */
	const char *network;		/* --metrics-only without --config: the store's network */
	int page_cache_ms, deadline_ms; /* -1: the HTTP server's defaults */
	enum tg_log_level log_level;
	char plugin[PATH_MAX]; /* opt.plugin_path when --plugin is not given */
	char hostname[256];    /* opt.node_name when --node-name is not given */
	bool check;	       /* --check: judge --config, print the verdict, exit */
};

/* --check: the verdict on --config (the plugin's parser) on stdout; 0 taken, 1 refused. */
int agent_check_config(const struct agent_cli *cli);

/* What agent_parse_options and the set-up return when the agent goes on. */
#define AGENT_RUN (-1)

/*
 * Reads and checks the command line into *ret (the usage or the problem on
 * stderr, --help's on stdout). AGENT_RUN, or the exit status: 0 after
 * --help, 2 for a usage error.
 */
int agent_parse_options(int argc, char **argv, struct agent_cli *ret);
void agent_usage(FILE *f);

/* ---- the budget reports: sent with httpc/httpc.h in the loop ---- */

#define AGENT_REPORT_TIMEOUT_MS 1000 /* a report's whole life */
#define AGENT_TOKEN_MAX 8192	     /* bytes of budgets.tokenFile */

/*
 * ---- cluster budgets, a node's side: between grants_report.c (the task,
 * the reports and answers), grants_store.c (what the node holds, and
 * budgets.json) and grants_apply.c (the classes read, the ceils applied) ----
 */

/* The namespace's entry in that direction, or NULL. */
struct agent_budget_ns *agent_budgets_find_ns(struct agent_budgets *b, const char *ns,
					      enum budget_dir dir);
/* The ifindex of a direction's IFB (tollgate-inet, tollgate-inetdl), 0: missing. */
int agent_budgets_ifindex(struct nl_sock *sk, enum budget_dir dir);
/* The budgeted namespaces with pods on this node, from the store: 0, or a negative errno with e. */
int agent_budgets_refresh_namespaces(struct agent *a, int64_t now_ms, struct tg_err *e);
/* Leases that ran out: min(grant, safe share) from now on. */
/*
 * Leases that ran out go to lease-expired, and a namespace never granted
 * whose fallback time came takes its fallback: true when a ceil is to change.
 */
bool agent_budgets_age_leases(struct agent *a, int64_t now_ms);
/* budgets.json written (dirty cleared when it was). */
void agent_budgets_save_state(struct agent *a, int64_t now_ms);
/*
 * After a restart: the grants whose leases still run (same boot, CLOCK_BOOTTIME)
 * come back as they were, a lease that ran out meanwhile as expired.
 */
void agent_budgets_restore_state(struct agent *a, int64_t now_ms);
/* Whether a class's use flipped since the last report (grants_apply.c: FLIP_IDLE_SHARE). */
bool agent_budgets_probe_flipped(struct agent *a, int64_t now_ms);
/* Reads the classes (with_counters: a report's counters too) and applies every ceil. */
int agent_budgets_read_and_apply(struct agent *a, bool with_counters, int64_t now_ms,
				 struct agent_notes *notes, struct tg_err *e);

/* ---- the daemon (setup.c, loop.c) ---- */

struct app {
	struct agent a;
	struct http_config hc;
	struct exporter *ex;
	struct expo page;
	struct http_server *http;
	int inotify_fd;
	int config_wd, store_wd; /* watches: the config's directory, the store's */
	char config_dir[PATH_MAX];
	sigset_t sigs;	     /* blocked, read from a signalfd by the loop */
	bool config_changed; /* an event in the config's directory: re-read */
	bool exhausted;	     /* the plugin found no free address: sync soon */
	/* The pool's IMDS requests, sent from the loop (NULL: --once asks with the blocking client). */
	struct httpc *imds;
	int64_t imds_gone_since_ms; /* IMDS has said 410 (not ready yet) since; 0: it has not */
	/* internetGuard.destinations' sets taken between scrapes, before an entry can expire */
	struct sched_task take;
	char *dst_body;			  /* /destinations' last answer (copied by the server) */
	struct agent_lacks lacks_scratch; /* a look at the node, before it replaces a.lacks */
	int host_check_err;		  /* the last look's error reading the plugin (said once) */
	char ready_body[AGENT_LACKS_MAX * 800 + 64]; /* /readyz's answer (copied by the server) */
};

/*
 * The process: --listen resolved, the task schedule, capabilities dropped,
 * the config read, signals blocked. AGENT_RUN, or the exit status (2: a
 * usage error, 1: anything else), said on stderr.
 */
int agent_setup(struct app *app, const struct agent_cli *cli);
/* The config's watch, the exporter and the HTTP server. AGENT_RUN, or 1. */
int agent_setup_servers(struct app *app, const struct agent_cli *cli);
/* What the set-up made; each part may be missing. */
void agent_teardown(struct app *app);

/* The daemon: start-up work, then the loop until SIGTERM or SIGINT. The exit status. */
int agent_loop(struct app *app);
/* --once: the start-up work, sync retried for up to 60 s. 0 when ready, 1 when not. */
int agent_once(struct app *app);

#endif
