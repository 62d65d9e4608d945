/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_BUDGET_H
#define TG_BUDGET_H

/*
 * Cluster budgets: one namespace's internet traffic in one direction
 * (uploads, egress; downloads, ingress) capped across every node. A budget
 * is keyed by (namespace, direction): the two directions of one namespace
 * are two budgets, allocated independently.
 * This module is the one place that knows the wire format (/v1/ reports and
 * their answers) and the allocation arithmetic; tollgate-allocator and
 * tollgate-agent both call it, neither reimplements it. Pure: no I/O, no
 * clock (time comes in as arguments, milliseconds of a monotonic clock).
 *
 * Units: rates are bytes per second (the metrics' unit), byte counts bytes.
 *
 * The protocol: every reportSeconds each agent POSTs one report to
 * /v1/report, and the answer carries its grants:
 *
 *   report {"version":1,"node":"n1","seq":42,"policy":"5f0c2a9e81d3b447",
 *           "directions":true,
 *           "budgets":[{"namespace":"datasets","sentBytes":1250000,
 *                       "intervalMs":1000,"saturated":true,"applied":1250000,
 *                       "limit":125000000,"state":"granted","pods":3,
 *                       "safeShare":900000,"nodes":6},
 *                      {"namespace":"datasets","direction":"ingress",
 *                       "sentBytes":5000000,...}]}
 *   answer {"version":1,"leaseMs":10000,"nextReportMs":260,
 *           "grants":[{"namespace":"datasets","grant":1500000,
 *                      "safeShare":900000,"nodes":6},
 *                     {"namespace":"datasets","direction":"ingress",
 *                      "grant":4000000,"safeShare":3000000,"nodes":6}],
 *           "policy":{"id":"5f0c2a9e81d3b447",
 *                     "namespaces":[{"namespace":"datasets",
 *                                    "internetEgress":2500000000,
 *                                    "internetIngress":5000000000}]}}
 *
 * direction (optional, absent: "egress"): "egress" or "ingress", in each
 * report entry and grant; a namespace may appear once per direction.
 * sentBytes is what its class passed in that direction (to the internet,
 * or from it). A policy entry carries internetEgress, internetIngress or
 * both. An agent or allocator that predates directions writes none and
 * reads every entry as egress, so uploads work across versions. A report
 * of this version says "directions":true; to a node whose report does not
 * (one that predates directions, which would refuse a policy with download
 * budgets: the id it computes leaves them out) the allocator sends the
 * policy's uploads alone, whose id is the one that version computes. A
 * policy of uploads only keeps the id it had before directions.
 *
 * policy (optional both ways): a report names the policy the node holds;
 * the answer carries the allocator's whole policy (the budgets, bytes/s)
 * when that is not the one in force, so a node learns which of its
 * namespaces are budgeted in which direction, and an edit reaches it in its next answer.
 *
 * applied: the ceil in force on the node (bytes/s); limit: the most the node
 * would apply (its own caps: namespace and node); state: the node's state
 * for that budget; safeShare and nodes: what its last answer said (0 when
 * it has had none), so that an allocator that starts anew learns how many
 * nodes held grants before it. A namespace the allocator has no budget for
 * is left out of the answer. nextReportMs (optional, absent: none) asks for
 * the next report sooner than the node's period: while a grant of the
 * answer moves (a decrease the allocator waits to hear applied, a rise
 * held back until others have given capacity up, a demand that moved
 * since the last round), so that capacity changes hands in a fraction of
 * a period.
 *
 * epoch (optional, absent: 0) is the granting leader's term where
 * replicas elect one (the election key's revision in etcd): a node never
 * applies a grant of an older epoch than one it has seen, so a deposed
 * leader's late answers change nothing. A replica that does not lead
 * answers 307 with the leader it knows (and a Location header):
 *
 *   redirect {"version":1,"leader":"http://10.0.3.7:9618","epoch":7}
 *
 * and 503 while it knows none; the node then reports to that leader
 * until a report there fails.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "lib/err.h"

#define BUDGET_WIRE_VERSION 1
#define BUDGET_REPORT_PATH "/v1/report"
#define BUDGET_BODY_MAX (160 << 10)   /* bytes of one report */
#define BUDGET_ANSWER_MAX (256 << 10) /* of one answer (with a policy) */
#define BUDGET_NODE_MAX 253	      /* a node name: a DNS subdomain */
#define BUDGET_NS_MAX 63	      /* a namespace: a DNS label */
/*
 * Budgets in one report or answer: a node's namespaces (at most 256 with
 * budgets) in both directions. The version before directions took 256
 * and 64 KiB: what a node reports of uploads alone still fits them.
 */
#define BUDGET_PER_REPORT_MAX 512
#define BUDGET_DEFAULT_PORT 9618
/*
 * What the parsers accept, so the most either side may write: a rate of one
 * node (applied, limit, grant, safe share: 32 Gbit/s), the interval a
 * report covers, a node's pods, the nodes of one budget, a lease.
 */
#define BUDGET_RATE_MAX 4000000000ULL
#define BUDGET_INTERVAL_MAX_MS 3600000
#define BUDGET_PODS_MAX 65535
#define BUDGET_NODES_MAX 1000000
#define BUDGET_LEASE_MAX_MS 3600000
#define BUDGET_URL_MAX 255	   /* a leader's URL in a redirect */
#define BUDGET_EPOCH_MAX INT64_MAX /* etcd's revisions are int64 */
/* A cluster budget, bytes/s: 1 Pbit/s. */
#define BUDGET_TOTAL_MAX 125000000000000ULL

/* A node's state for one budget (tollgate_budget_state's label). */
enum budget_state {
	BUDGET_FALLBACK,      /* never granted (or forgotten): the config's fallback */
	BUDGET_GRANTED,	      /* a grant whose lease runs */
	BUDGET_LEASE_EXPIRED, /* no renewal: min(grant, safe share) */
};
#define BUDGET_STATES 3
extern const char
	*const budget_state_names[BUDGET_STATES]; /* "fallback", "granted", "lease-expired" */

/* A budget's direction: a namespace's uploads or its downloads (0: egress). */
enum budget_dir {
	BUDGET_EGRESS,	/* pods -> internet: the class on tollgate-inet */
	BUDGET_INGRESS, /* internet -> pods: the class on tollgate-inetdl */
};
#define BUDGET_DIRS 2
extern const char *const budget_dir_names[BUDGET_DIRS]; /* "egress", "ingress" */
/* The policy's key of a direction: "internetEgress", "internetIngress". */
extern const char *const budget_dir_keys[BUDGET_DIRS];
/* The direction of name (n bytes): 0, or -EINVAL when it names none. */
int budget_dir_parse(const char *name, size_t n, enum budget_dir *ret);

/* ---- the policy: which namespaces have budgets, in which direction ---- */

struct budget_def {
	char ns[BUDGET_NS_MAX + 1];
	enum budget_dir dir;
	uint64_t budget; /* bytes/s across the cluster */
};

/*
 * The budgets of the allocator's policy file, as answers carry them to the
 * nodes and the nodes keep them (budgets.json): sorted by namespace, then
 * direction (egress first), named
 * by an id that changes when they do (a digest of what they say, not of
 * how the file is written), so a node hears them again only after an edit.
 */
#define BUDGET_POLICY_NS_MAX 1024
#define BUDGET_POLICY_ID_LEN 16
struct budget_set {
	char id[BUDGET_POLICY_ID_LEN + 1]; /* "": none (heard) */
	struct budget_def *d;
	size_t n;
};
/*
 * Sorts s->d by (namespace, direction) and names it (its id: the digest of
 * an egress budget is what it was before directions, an ingress budget
 * adds its own). -EINVAL with e naming the budget written twice.
 */
int budget_set_seal(struct budget_set *s, struct tg_err *e);
/* The budget of the namespace in that direction, NULL: none. */
const struct budget_def *budget_set_find(const struct budget_set *s, const char *ns,
					 enum budget_dir dir);
void budget_set_free(struct budget_set *s);
/*
 * The uploads' budgets of s alone, sealed: the policy as a node that
 * predates directions holds it (its id the one that version computes).
 * 0 or -ENOMEM.
 */
int budget_set_uploads(const struct budget_set *s, struct budget_set *ret);
/*
 * The policy object of an answer ({"id":..., "namespaces":[...]}), for the
 * node's own file too: written, and read as strictly as from the wire (its
 * id checked against its namespaces). from_json: 0, -EINVAL or -ENOMEM
 * with e; to_json: NULL on -ENOMEM.
 */
int budget_policy_from_json(json_object *o, struct budget_set *ret, struct tg_err *e);
json_object *budget_policy_to_json(const struct budget_set *s);
/*
 * What a node holds of its budgets, in <dataDir>/<network>/: written by
 * its agent (grants, leases and the policy heard); the plugin and
 * tollgate-ipam read it.
 */
#define BUDGET_NODE_FILE "budgets.json"

/* ---- the wire format ---- */

struct budget_usage {
	char ns[BUDGET_NS_MAX + 1];
	enum budget_dir dir;
	uint64_t sent_bytes;  /* in its direction since the last report */
	uint32_t interval_ms; /* the time those bytes took; 0: first report */
	bool saturated;	      /* the class ran at its ceil */
	uint64_t applied;     /* the ceil in force, bytes/s */
	uint64_t limit;	      /* the most the node would apply, bytes/s */
	enum budget_state state;
	uint32_t pods;	     /* of the namespace on the node: the node's weight;
					   0 with applied 0: the namespace left the node */
	uint64_t safe_share; /* from the last answer, 0: none */
	uint32_t nodes;	     /* from the last answer, 0: none */
};

struct budget_report {
	char node[BUDGET_NODE_MAX + 1];
	uint64_t seq;
	bool directions; /* "directions":true: the node takes download budgets */
	char policy[BUDGET_POLICY_ID_LEN + 1]; /* the policy's id the node holds; "": none */
	struct budget_usage *use;
	size_t n;
};

struct budget_grant {
	char ns[BUDGET_NS_MAX + 1];
	enum budget_dir dir;
	uint64_t grant;	     /* bytes/s */
	uint64_t safe_share; /* budget x 0.9 / nodes, bytes/s */
	uint32_t nodes;	     /* nodes holding grants of this budget */
};

struct budget_answer {
	int64_t lease_ms;
	int64_t next_report_ms; /* > 0: the next report is wanted this soon */
	uint64_t epoch;		/* the granting leader's term; 0: no election */
	struct budget_grant *g;
	size_t n;
	/*
	 * The policy in force, when the report named another (id ""): none.
	 * Parsed, the answer's own; built, the caller's (never freed by
	 * budget_answer_free when the caller clears it first).
	 */
	struct budget_set policy;
};

/* A replica that does not lead: where the leader is. */
struct budget_redirect {
	char leader[BUDGET_URL_MAX + 1]; /* http:// or https://, printable, no spaces */
	uint64_t epoch;
};

/*
 * JSON text of a report, answer or redirect (malloc'ed, NUL-terminated; *ret_len
 * without the NUL). 0 or -ENOMEM.
 */
int budget_report_build(const struct budget_report *r, char **ret, size_t *ret_len);
int budget_answer_build(const struct budget_answer *a, char **ret, size_t *ret_len);
int budget_redirect_build(const struct budget_redirect *d, char **ret, size_t *ret_len);
/* Whether s is a leader's URL a redirect may carry (what the parser accepts). */
bool budget_leader_url_ok(const char *s, size_t n);
/*
 * Strict parsers (any bytes: a hostile peer writes them): a document over
 * BUDGET_BODY_MAX, not JSON, of another version, with a member of the wrong
 * type or out of range (BUDGET_*_MAX), a bad name, a member missing or
 * written twice, or a (namespace, direction) twice is -EINVAL (an unknown version
 * -EPROTO), with e (code CNI_ERR_DECODE) naming the member and its index
 * ("budgets[3].applied: ..."). Unknown members are ignored. On success the
 * caller frees with *_free; on failure nothing is left to free.
 */
int budget_report_parse(const char *text, size_t len, struct budget_report *ret, struct tg_err *e);
int budget_answer_parse(const char *text, size_t len, struct budget_answer *ret, struct tg_err *e);
int budget_redirect_parse(const char *text, size_t len, struct budget_redirect *ret,
			  struct tg_err *e);
void budget_report_free(struct budget_report *r);
void budget_answer_free(struct budget_answer *a);

/* ---- the allocation arithmetic (the allocator's state) ---- */

struct budget_params {
	int64_t lease_ms;     /* a grant's life without renewal */
	int64_t forget_ms;    /* a node silent this long is gone */
	double reserve;	      /* of each budget kept back from the water-fill (0.05) */
	double safe_fraction; /* safe share = budget x this / nodes (0.9) */
	uint64_t min_grant;   /* the least a node's fair share is, bytes/s (a rise to
					 * it waits for capacity as any rise does; a budget
					 * below nodes x min_grant is split evenly) */
	int64_t report_ms;    /* the nodes' period; > 0: answers ask for early
					 * reports while grants move (nextReportMs) */
	uint32_t max_nodes;   /* nodes remembered at most; 0: BUDGET_NODES_MAX */
};
void budget_params_defaults(struct budget_params *p);

struct budget_alloc;

/*
 * A new allocator at `now_ms`. Its start is the first report it hears:
 * from then, for one lease it is learning (it grants each node only what
 * that node reports holding), and until forget_ms it keeps
 * back what nodes it has not heard from yet may still apply (the safe
 * shares the allocator before handed out, less those the nodes heard say
 * they hold). NULL on -ENOMEM.
 */
struct budget_alloc *budget_alloc_new(const struct budget_params *p, int64_t now_ms);
void budget_alloc_free(struct budget_alloc *a);
/*
 * The budgets (the config's, on start and on every reload), each a
 * (namespace, direction): a budget that goes away releases its nodes; one
 * that shrinks takes capacity back decrease before increase. 0, -EINVAL (a
 * budget twice), -ENOMEM.
 */
int budget_alloc_set(struct budget_alloc *a, const struct budget_def *d, size_t n);
/* The nodes' report period (budget_params.report_ms), on a reload. */
void budget_alloc_set_report_ms(struct budget_alloc *a, int64_t report_ms);
/*
 * One node's report: its usage recorded (demand estimate updated), its
 * answer built from the last round's fair shares, each grant clamped so
 * that the sum of what every node may be applying stays within the budget
 * (a grant above what the node holds only out of capacity nobody else may
 * be using; the budget's reserve is never granted: namespaces that arrive
 * on a node apply the join rate out of it before they are heard). The answer's arrays
 * are the caller's (budget_answer_free). 0, -ENOSPC (a node not known
 * while max_nodes are: nothing recorded, it is not remembered), or -ENOMEM
 * (what was recorded stays, counted as if its answer had been sent).
 *
 * The sum holds for every node the allocator knows of. Four it cannot: a
 * node silent past forget_ms still applies what it held (its grant when
 * its agent is dead, its safe share when the agent is cut off); a node
 * whose agent is dead across an allocator's restart holds its grant where
 * the new allocator counts its safe share; one silent
 * since before a budget was lowered holds a share of the old budget, which
 * an allocator started since does not know; and when every node a new
 * allocator hears is new (none says it held a grant), it takes the
 * cluster for a new one, unaware of a node silent since before it.
 */
int budget_alloc_report(struct budget_alloc *a, const struct budget_report *r, int64_t now_ms,
			struct budget_answer *ret);
/*
 * A round: silences aged (a node silent past its lease still counts at
 * all it may apply, past forget_ms not at all), then each budget's
 * weighted max-min water-fill over the nodes' demands recomputed. Cost:
 * linear in nodes x budgets.
 */
void budget_alloc_round(struct budget_alloc *a, int64_t now_ms);

/* One budget as the allocator sees it (its metrics, `tollgate-allocator` logs). */
struct budget_view {
	char ns[BUDGET_NS_MAX + 1];
	enum budget_dir dir;
	uint64_t budget;
	uint64_t granted;    /* sum of the grants last sent */
	uint64_t committed;  /* sum of what nodes may be applying (with what is kept
					 * back for nodes not heard since the start) */
	uint64_t demand;     /* sum of the demand estimates */
	uint64_t usage;	     /* sum of the last reported rates */
	uint32_t nodes;	     /* holding grants (heard within forget_ms) */
	uint64_t safe_share; /* budget x safe_fraction / nodes */
};
/* Up to max budgets into ret, in the config's order; returns how many there are. */
size_t budget_alloc_views(const struct budget_alloc *a, struct budget_view *ret, size_t max);
/* Still learning (no report heard yet, or within one lease of the first). */
bool budget_alloc_learning(const struct budget_alloc *a, int64_t now_ms);

/* ---- a node's side: what it applies ---- */

/*
 * What a namespace never granted on a node (it just arrived, or came back
 * after it left) applies until the allocator answers for it: 10 kbit/s,
 * what the allocator's reserve can prove free for thousands of nodes
 * joining at once. The config's fallback only once the allocator has gone
 * unanswered for budgets.fallbackAfterSeconds (BUDGET_FALLBACK_AFTER_MS by
 * default): a bound beyond the budget, which the budget alerts report.
 */
#define BUDGET_JOIN_RATE 1250ULL
#define BUDGET_FALLBACK_AFTER_MS 300000
/*
 * The ceil of a namespace never granted (budget_node_ceil's `fallback`):
 * the join rate until `unanswered_ms` (since the later of its arrival and
 * the node's last answered report) reaches after_ms, then `fallback`.
 */
uint64_t budget_node_fallback(uint64_t fallback, int64_t unanswered_ms, int64_t after_ms);
/*
 * The ceil a node applies for one budget, bytes/s: the grant while its lease
 * runs, min(grant, safe share) once it ran out, the fallback when it never
 * had one (budget_node_fallback's); never above `limit` (the node's own caps).
 */
uint64_t budget_node_ceil(enum budget_state st, uint64_t grant, uint64_t safe_share,
			  uint64_t fallback, uint64_t limit);

#endif
