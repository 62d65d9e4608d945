/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_AGENT_H
#define TG_AGENT_H

/*
 * tollgate-agent: the node daemon. It owns what outlives a CNI call: the
 * node-wide declaration (at start, on a config change, on a timer, counting
 * what it repaired), the pool (IMDS sync), collection of attachments whose
 * netns is gone and of unused uplink classes, the policy applied to running
 * pods when the config changes, the plugin's installation, and the metrics.
 * One event loop (agent/loop.c); the tasks here run to completion, each in
 * well under a second on a declared node.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/sched.h"
#include "budget/budget.h"
#include "config/config.h"
#include "ipam/store.h"
#include "node/node.h"
#include "node/sync.h"
#include "node/upkeep.h"

struct agent_options {
	const char *config_path;  /* the conflist (the ConfigMap's file) */
	const char *data_dir;	  /* NULL: the config's dataDir */
	const char *cni_conf_dir; /* NULL: nothing installed */
	const char *cni_bin_dir;
	const char *plugin_path; /* the plugin binary installed into cni_bin_dir */
	const char *conf_name;	 /* file name of the installed conflist */
	const char *node_name;	 /* this node in budget reports */
	/*
	 * The host's root as mounted here, read-only (NULL: not checked): the
	 * plugin runs on the host, its libraries must be the host's.
	 */
	const char *host_root;
	bool once;	   /* start-up work, then exit */
	bool metrics_only; /* serve metrics, change nothing */
	int64_t declare_ms, sync_ms, gc_ms;
};

/* What the agent did, for /metrics (counters since start). */
struct agent_stats {
	uint64_t syncs, sync_failures;
	int64_t last_sync_ok_s; /* unix seconds, 0: never */
	uint64_t declarations, declaration_failures;
	/* repairs by object: what a declaration had to write */
	uint64_t repaired_nft_table, repaired_nft_sets, repaired_nft_chains, repaired_nft_rules,
		repaired_nft_internal, repaired_nft_pod_elements;
	uint64_t repaired_tc_ifb, repaired_tc_root, repaired_tc_node_class, repaired_tc_clsact,
		repaired_tc_filters, repaired_tc_classes_restored;
	uint64_t repaired_tc_pod_classes; /* pods whose classes had drifted from their caps */
	uint64_t repaired_sysctls;
	uint64_t sysctls_readonly; /* declarations that left a sysctl low: /proc/sys read-only */
	uint64_t gc_runs, gc_collected, gc_kept, gc_unseen, gc_classes_retired;
	uint64_t namespaces_retired, namespaces_kept;
	uint64_t reshapes, reshaped_pods, reshape_failures;
	uint64_t config_reloads, config_errors;
	uint64_t installs;
};

/*
 * A namespace with counters at the last collection: since when it has had
 * no pod (retirement after retainSeconds), or NS_HAS_PODS.
 */
#define NS_HAS_PODS INT64_MIN
struct agent_counted_ns {
	char name[IPAM_K8S_NAMESPACE_MAX + 1];
	int64_t empty_since_ms;
};

/*
 * One budget of a namespace with pods on this node (agent/grants_*.c): its
 * uploads (its class on tollgate-inet) or its downloads (the class of the
 * same minor on tollgate-inetdl), each direction an entry of its own.
 */
struct agent_budget_ns {
	char ns[BUDGET_NS_MAX + 1];
	enum budget_dir dir;
	uint16_t ns_class; /* its class's minor on its direction's IFB */
	uint32_t pods;
	uint64_t limit; /* bytes/s: its own caps on this node */
	enum budget_state state;
	uint64_t grant, safe_share; /* bytes/s, from the last answer */
	uint32_t nodes;
	int64_t lease_until_ms;	   /* CLOCK_BOOTTIME */
	int64_t fallback_since_ms; /* CLOCK_BOOTTIME: never granted since (state fallback) */
	bool fallback_on;	   /* ... and unanswered past fallbackAfterSeconds */
	bool present;		   /* its class was in the last dump */
	bool leaving;		   /* no pod left: said once more, then dropped */
	uint64_t kernel_ceil;	   /* bytes/s: the class's ceil as read or last set */
	/* the class's counters at the last report, and what they said */
	bool counted;
	uint64_t bytes, overlimits;
	int64_t at_ms;
	uint64_t sent;
	uint32_t interval_ms;
	uint64_t backlog; /* bytes queued in its pods' classes at the dump */
	uint64_t floor;	  /* bytes/s: its pods' classes' guaranteed rates, which HTB
			   * lets through whatever the ceil: what it applies at least */
	bool saturated;
	/* the counters at the last look between reports */
	uint64_t probe_bytes;
	int64_t probe_ms;
};

struct httpc;
struct nl_sock;
struct agent_budgets {
	struct agent_budget_ns *ns;
	size_t n, cap;
	struct httpc *client;	       /* NULL: not reporting (--once, --metrics-only) */
	struct nl_sock *sk;	       /* kept open: the loop reads classes 4 times a period */
	struct ipam_store_stamp store; /* of the store last read */
	uint64_t cfg_hash;	       /* of the config it was read with */
	int64_t next_ms;	       /* the next report (CLOCK_BOOTTIME) */
	int64_t probe_ms;	       /* the next look at the classes between reports */
	int64_t sent_ms;	       /* when the running report left */
	uint64_t seq;
	bool restored, dirty; /* budgets.json read; to be written */
	uint64_t reports_ok, reports_failed, answers_rejected, reports_failed_logged;
	uint64_t token_unreadable; /* reports sent without the node's token: it could not be read */
	uint64_t token_logged;	   /* ... in the stretch that runs (logged at its first) */
	uint64_t reports_refused;  /* answered 401 or 403: the node's token was not taken */
	uint64_t reports_refused_logged;
	/* replicas with leader election: the leader reported to, and the newest term seen */
	char leader[BUDGET_URL_MAX + 1]; /* "": budgets.allocator (the Service) */
	uint64_t epoch_seen;		 /* an answer of an older term is never applied */
	uint32_t redirects_in_row;	 /* redirects followed in this period (a loop stops at 3) */
	int64_t redirects_period_ms;	 /* when that period began */
	uint64_t answers_stale, redirects;
	int64_t stale_since_ms; /* answers of older terms only, since (0: none) */
	uint64_t ceil_changes, ceil_failures, lease_expiries;
	/*
	 * The allocator's policy as last heard (budgets.json keeps it): which
	 * namespaces have budgets (the config's budgets.heard points here).
	 * policy_new: heard since the running pods were last reshaped.
	 */
	struct budget_set heard;
	bool heard_looked, policy_new;
	char scanned[BUDGET_POLICY_ID_LEN + 1]; /* the policy the store was last read under */
	struct lease_guard *guard; /* ends leases in the kernel on time (lease_guard.h) */
	uint64_t guard_fired;	   /* its lowerings the loop has taken into account */
};

/*
 * What the node lacks for Tollgate, each one line for /readyz and a record
 * for the log (agent/host.c). A blocking lack means the plugin would not
 * load on the host, or the conflist names a plugin the node does not have:
 * nothing is installed and the node stays unready.
 */
#define AGENT_LACKS_MAX 16
struct agent_lack {
	char key[96]; /* what it is about: "lib:libmnl.so.0", "sysctl:..." */
	bool blocking;
	char text[768];	 /* what lacks and what to do, one line */
	char note[1024]; /* the log record's logfmt fields (msg="..." first) */
};
struct agent_lacks {
	struct agent_lack l[AGENT_LACKS_MAX];
	size_t n;
	size_t dropped; /* past AGENT_LACKS_MAX */
};

struct agent {
	struct agent_options opt;
	struct node_config cfg;
	bool cfg_ok;
	uint64_t cfg_hash; /* of the conflist's bytes: what a reload compares */
	char *cfg_text;	   /* those bytes, as validated: what is installed */
	size_t cfg_len;
	char data_dir[4096];
	struct sched_task declare, sync, gc;
	struct agent_stats stats;
	struct agent_counted_ns *counted; /* namespaces with counters */
	size_t n_counted;
	/* readiness: pool, node declared, plugin installed (when asked to) */
	bool pool_ready, declared, installed;
	bool reshape_failed;	  /* the last reshape failed: the next one declares in full */
	struct agent_lacks lacks; /* as the last declaration found them */
	struct agent_budgets budgets;
};

/*
 * What a task has to say besides its result (a pod it could not handle, an
 * address IMDS offered that no pod can have): each note one record's logfmt
 * fields (msg="..." first), logged by the loop at level warn. The tasks
 * never write to the log themselves.
 */
#define AGENT_NOTES_MAX 256
struct agent_notes {
	char *line[AGENT_NOTES_MAX];
	size_t n;
	size_t dropped; /* past AGENT_NOTES_MAX, or out of memory */
};
void agent_note(struct agent_notes *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void agent_notes_clear(struct agent_notes *n);

/* Reads the conflist; 1 when it changed (or the first time), 0 when not, <0 on error. */
int agent_load_config(struct agent *a, struct tg_err *e);
/* The node-wide declaration, under the store's lock (no deleted pod's elements come back). */
int agent_declare(struct agent *a, struct tg_err *e);
/*
 * IMDS sync (static pools: the store follows the config), asking IMDS with
 * the blocking client: static pools and --once. The daemon's loop asks IMDS
 * itself (httpc/) and hands the answer to agent_sync_answer.
 */
int agent_sync(struct agent *a, struct agent_notes *notes, struct tg_err *e);
/* The base URL the pool comes from (ipam.imdsURL, else Azure's). */
const char *agent_imds_url(const struct agent *a);
/*
 * The loop's IMDS sync, once its request ended: body (len bytes) the network
 * document, folded into the pool; NULL when the request failed (e says
 * why). Counted as agent_sync counts.
 */
int agent_sync_answer(struct agent *a, const char *body, size_t len, struct agent_notes *notes,
		      struct tg_err *e);
/* Collection of attachments whose netns is gone, and of unused uplink classes. */
int agent_gc(struct agent *a, struct agent_notes *notes, struct tg_err *e);
/*
 * Retires the counters of namespaces that have had no pod for
 * accounting.retainSeconds (their series leave /metrics with them). now_ms:
 * monotonic; the clock of an empty namespace starts when the agent first
 * finds it empty.
 */
int agent_retire_namespaces(struct agent *a, int64_t now_ms, struct tg_err *e);
/*
 * The config's shaping applied to running pods: at start-up (a ConfigMap
 * changed while the agent was down, a reshape a kill left pending), on a
 * config change and on the declaration's timer (pods an ADD made with the
 * conflist the runtime still had).
 */
int agent_reshape(struct agent *a, struct agent_notes *notes, struct tg_err *e);
/* Every pod's classes held to its recorded caps; drift put right and counted. */
int agent_reconcile(struct agent *a, struct agent_notes *notes, struct tg_err *e);
/* The plugin binary and the conflist into the runtime's directories (temp file, rename). */
int agent_install(struct agent *a, struct tg_err *e);
/* Pool, declaration and installation done, and nothing blocking lacks. */
bool agent_ready(const struct agent *a);

/*
 * ---- what the node lacks (host.c) ----
 * The plugin at plugin_path (an ELF file, ours) against the host's
 * libraries under host_root: its loader, every library it (and they) load,
 * every symbol version they need; what lacks is added to l, blocking. 0, or
 * a negative errno when the plugin itself cannot be read.
 */
int agent_host_libraries(const char *host_root, const char *plugin_path, struct agent_lacks *l);
/* The sysctls below their floors under proc_sys ("/proc/sys"), added to l (not blocking). */
void agent_host_sysctls(const char *proc_sys, struct agent_lacks *l);
/*
 * Each plugin the conflist (len bytes) chains besides Tollgate that is no
 * executable file of bin_dir, added to l, blocking: the runtime would fail
 * every ADD. 0, -EINVAL when the conflist has no plugin list, or
 * jx_parse's error.
 */
int agent_host_chained(const char *bin_dir, const char *conflist, size_t len,
		       struct agent_lacks *l);
bool agent_lacks_blocking(const struct agent_lacks *l);
/* The store's pool holds at least one address. */
int agent_pool_size(struct agent *a, size_t *ret);

/*
 * ---- cluster budgets, a node's side (grants_report.c, grants_store.c, grants_apply.c) ----
 * Their clock is time_boot_ms() (CLOCK_BOOTTIME): leases outlive a restart of the agent.
 */

/* The config asks for budgets (an allocator and at least one budget). */
bool agent_budgets_enabled(const struct agent *a);
/* When the next report is due; INT64_MAX without budgets. */
int64_t agent_budgets_next_ms(const struct agent *a);
/*
 * A period's work when due: namespaces and classes read, leases aged, ceils
 * applied, the report sent (without waiting for its answer). rnd: uniform in
 * [0, 1) for the jitter.
 */
void agent_budgets_tick(struct agent *a, int64_t now_ms, double rnd, struct agent_notes *notes);
/*
 * The store was replaced (an ADD or a DEL): the next report comes soon, so
 * that a namespace that left the node is said before the agent may be
 * stopped, at most one report every quarter period.
 */
void agent_budgets_store_changed(struct agent *a, int64_t now_ms);
/* The report's answer, once the client has it: grants applied at once. */
void agent_budgets_answer(struct agent *a, int64_t now_ms, struct agent_notes *notes);
/*
 * On SIGTERM: every granted namespace down to what a lease that ran out
 * leaves (min(grant, safe share)) before the agent exits, so that a node
 * whose agent does not come back holds no more than its safe share.
 */
void agent_budgets_stop(struct agent *a, int64_t now_ms, struct agent_notes *notes);
void agent_budgets_free(struct agent *a);

struct expo;
/* tollgate_budget_* (grant, ceil, state, reports, ceil changes, lease expiries). */
void agent_budgets_render(const struct agent *a, struct expo *x);
/* The agent's own families (syncs, repairs by object, gc, reshapes, readiness). */
void agent_render_metrics(const struct agent *a, struct expo *x);

/* Writes `len` bytes to dir/name through a temp file and rename (mode). */
int agent_write_file(const char *dir, const char *name, const void *buf, size_t len, unsigned mode);

#endif
