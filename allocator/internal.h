/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ALLOCATOR_INTERNAL_H
#define TG_ALLOCATOR_INTERNAL_H

/*
 * Between the allocator's files: the allocation state under the policy
 * (state.c, the policy file read by config/), the process
 * set up and torn down (setup.c), the HTTP side, reports and the metrics
 * page (serve.c), the election's side (leader.c) and the loop (loop.c).
 * Calls go one way, never back: setup.c to loop.c, serve.c and leader.c;
 * loop.c and serve.c to leader.c; those to state.c.
 */

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/allocator.h"
#include "allocator/elect.h"
#include "auth/auth.h"
#include "budget/budget.h"
#include "config/config.h"
#include "exporter/exporter.h"
#include "http/http.h"

/* ---- the policy (its file: config/config.h, struct alloc_policy) ---- */

/* The round's period: a quarter of the nodes' report period, never under this. */
#define ALLOC_ROUND_MIN_MS 100
int64_t alloc_round_ms(const struct alloc_policy *p);

/* ---- the process ---- */

enum alloc_report_result {
	ALLOC_REPORT_OK,
	ALLOC_REPORT_MALFORMED,	 /* not a report: bad JSON, a wrong type, a value out of range */
	ALLOC_REPORT_OVERSIZED,	 /* over BUDGET_BODY_MAX (the HTTP server's 413s included) */
	ALLOC_REPORT_VERSION,	 /* a version this allocator does not speak */
	ALLOC_REPORT_REDIRECTED, /* a follower's: answered with the leader's URL (307) */
	ALLOC_REPORT_NO_LEADER,	 /* a follower's that knows no leader (503) */
	ALLOC_REPORT_UNAUTHENTICATED, /* no valid token of the agents' (401) */
	ALLOC_REPORT_FORBIDDEN,	      /* a valid token of another node than the report's (403) */
	ALLOC_REPORT_BUSY,	      /* bodies in flight at their cap (the HTTP server's 503s) */
	ALLOC_REPORT_RESULTS
};

struct alloc_stats {
	uint64_t reports[ALLOC_REPORT_RESULTS];
	uint64_t report_failures; /* a good report that could not be answered (memory) */
	uint64_t rounds;
	double round_seconds; /* the last round's */
	uint64_t reloads, reload_errors;
};

/* Who may report (trust.c); on: --jwks given. */
#define ALLOC_TOKENS_MAX 262144	     /* tokens remembered: two per node of a large cluster */
#define ALLOC_JWKS_REFRESH_MS 300000 /* a URL's set fetched again */
#define ALLOC_JWKS_RETRY_MS 30000    /* ... after a failure */
#define ALLOC_JWKS_UNKNOWN_MS 10000  /* ... at most this often for a key it does not have */
#define ALLOC_JWKS_TIMEOUT_MS 10000
struct alloc_trust {
	bool on, url;
	char subject[320];
	struct auth_want want;
	struct auth_keys *keys;	  /* NULL: none yet (a URL not fetched): every report refused */
	struct auth_cache *cache; /* tokens verified */
	struct httpc *client;	  /* a URL's */
	int64_t fetch_ms;	  /* the next fetch (monotonic) */
	int64_t unknown_fetch_ms; /* the last one a key not in the set asked for */
	bool fetch_failing;
	uint64_t refused[AUTH_RESULTS], verified, cache_hits, forbidden;
	uint64_t jwks_loads, jwks_errors;
};

/* The election as the loop sees it (leader.c publishes it after each step). */
struct alloc_elect_view {
	bool leading;
	int64_t lead_until_ms, epoch;
	bool leader_known;
	int64_t leader_epoch;
	char leader[ETCD_VALUE_MAX + 1];
	bool etcd_ok;
	struct elect_stats stats;
};

struct app {
	struct alloc_cli cli;
	struct alloc_trust trust;
	struct alloc_policy pol;
	char *tried_text; /* the last bytes read, taken or refused */
	struct budget_alloc *ba;
	struct budget_view *views; /* room for pol.budgets.n */
	struct http_config hc;
	struct http_server *http;
	struct expo page;
	char *answer;		   /* the last answer's text (the HTTP server copies it) */
	char reason[640];	   /* the last 400's text */
	int64_t refused_logged_ms; /* refused reports are logged once per ALLOC_REFUSED_LOG_MS */
	uint64_t refused_since_log;
	int inotify_fd, policy_wd, timer_fd;
	char policy_dir[PATH_MAX];
	sigset_t sigs;
	int64_t round_ms; /* the timer's period in force */
	struct alloc_stats stats;
	/*
	 * leader election (leader.c); elect_on false: the only replica, always
	 * leading. The machine (el) and its etcd client run on a thread of
	 * their own (the lease renewed on time, however busy the loop); the
	 * loop reads elv under el_mu and takes role changes from el_pipe.
	 */
	bool elect_on;
	struct elect el;
	struct httpc *etcd;
	pthread_t el_thread;
	bool el_running;
	int el_ep, el_stop, el_pipe[2];
	pthread_mutex_t el_mu;
	struct alloc_elect_view elv;
	bool term_on; /* the loop has taken up the term in app->term (a WON it read) */
	char etcd_urls[ELECT_URLS_MAX][ELECT_URL_MAX + 1];
	struct alloc_term { /* this replica's term in force, or its last */
		int64_t epoch;
		uint64_t answers; /* reports answered with grants */
		int64_t first_grant_unix_ms, last_grant_unix_ms;
	} term;
	char *redirect;			      /* the last redirect's text */
	char redirect_to[ETCD_VALUE_MAX + 1]; /* ... and its Location */
	char tls_err[512];		      /* why the TLS files were refused */
	uint64_t tls_digest;		      /* of the TLS files served */
	int etcd_said; /* what the log last said of etcd: -1 nothing, 0 down, 1 up */
};

#define ALLOC_REFUSED_LOG_MS 10000
#define ALLOC_BODIES_BYTES (32u << 20) /* report bodies in flight, all clients together */
#define ALLOC_REFUSALS_PER_CLIENT 20   /* reports refused a second before an address is benched */

/* ---- the allocation state under the policy in force (state.c) ---- */

/*
 * The config read and taken (at start: `first`, and a failure is the end;
 * later, a failure keeps the policy in force and is counted). 1 when the
 * policy changed, 0 when the bytes were the same as the last read, or a
 * negative errno.
 */
int alloc_reload(struct app *app, bool first);
/* Arms the round's timer for the policy in force (when its period changed). 0 or -errno. */
int alloc_arm_rounds(struct app *app);
/* One allocation round, timed. */
void alloc_round(struct app *app);
/* A new allocation state for the policy in force (a new term learns anew). 0 or -ENOMEM. */
int alloc_relearn(struct app *app);

/* ---- the process (setup.c) ---- */

/* Process, config, HTTP server: 0, or the exit status (said in the log). */
int alloc_setup(struct app *app, const struct alloc_cli *cli);
void alloc_teardown(struct app *app);
/* A digest of --tls-cert's and --tls-key's bytes; 0 without TLS or when one cannot be read. */
uint64_t alloc_tls_digest(const struct app *app);
/* The HTTP server's callbacks and its config (serve.c). */
void alloc_http_config(struct app *app, struct http_config *hc);
/* ---- leader election (leader.c) ---- */

/* The etcd URLs and the machine, from the command line (before the loop). */
void alloc_elect_init(struct app *app);
/* The election's thread and its etcd client. 0 or -errno. */
int alloc_elect_start(struct app *app);
/* The descriptor the loop watches for role changes (-1 without --etcd). */
int alloc_elect_fd(const struct app *app);
/* Role changes the thread posted, taken up (a new term's state, the records). */
void alloc_elect_changes(struct app *app);
/* The election's state now, for the page and the redirects. */
void alloc_elect_view(struct app *app, struct alloc_elect_view *ret);
/* A clean shutdown: a leader revokes its lease (a follower takes over at once). */
void alloc_elect_stop(struct app *app);
/* Whether this replica grants now (always without --etcd). */
bool alloc_leading(struct app *app);
/* A report answered with grants, in the term's record. */
void alloc_term_granted(struct app *app);

/* ---- who may report (trust.c) ---- */

/* Whether --jwks is a URL (else a file). */
bool alloc_trust_url(const char *jwks);
/* From the command line; a --jwks file read now. 0, -ENOMEM or -EINVAL (said in the log). */
int alloc_trust_setup(struct app *app);
void alloc_trust_free(struct app *app);
/*
 * A --jwks file read again (its directory changed, SIGHUP): 1 a new set, 0
 * the same, -errno. A URL's: fetched at once on SIGHUP (hup).
 */
int alloc_trust_reload(struct app *app, bool hup);
/* A --jwks URL's client, its sockets in epfd; the first fetch due now. 0 or -ENOMEM. */
int alloc_trust_start(struct app *app, int epfd);
bool alloc_trust_has_socket(const struct app *app, int fd);
void alloc_trust_socket(struct app *app, int fd, uint32_t events);
/* Answers taken, the next fetch started when due. */
void alloc_trust_run(struct app *app);
int alloc_trust_timeout_ms(const struct app *app);
/*
 * The node an Authorization header's token proves: AUTH_OK with *ret, or
 * why not (counted).
 */
enum auth_result alloc_trust_verify(struct app *app, const char *authorization,
				    struct auth_identity *ret, char *why, size_t size);
/* Whether the header's token was verified before (the HTTP server's admission). */
bool alloc_trust_proven(struct app *app, const char *authorization);
void alloc_trust_render(struct app *app, struct expo *x);

/* The loop until SIGTERM or SIGINT: 0, or a negative errno when the loop itself failed. */
int alloc_loop(struct app *app);

#endif
