// SPDX-License-Identifier: Apache-2.0
/*
 * A node's side of cluster budgets (agent.h): every reportSeconds (+-10 %)
 * it reads its budgeted namespaces from the store and their classes on
 * tollgate-inet from the kernel (one dump), ages leases, puts each class's
 * ceil where its state says (one netlink change per change, no pod
 * touched), and reports to the allocator; an answer's grants are applied
 * the moment it arrives. The arithmetic (the ceil of each state, the wire
 * format) is budget/'s.
 *
 * What it holds survives a restart of the agent in <dataDir>/<network>/
 * budgets.json (leases on CLOCK_BOOTTIME): a rolling update does not drop
 * every node to its fallback at once. `tollgate-ipam status` reads it too.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <netlink/route/tc.h>

#include "agent/internal.h"
#include "budget/budget.h"
#include "lib/cleanup.h"
#include "lib/jsonx.h"
#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "lib/replace.h"
#include "lib/util.h"
#include "shaper/shaper.h"

#define BUDGET_STATE_FILE "budgets.json"
/*
 * A class that sent at least this share of its ceil over a period ran at it;
 * so did one whose pods' queues hold a standing backlog (TCP under a ceil
 * that just moved may send less than it, yet wants more). Overlimits say
 * nothing here: HTB counts one whenever a burst goes past the class's
 * cburst, far below its ceil. The share stays well above 1 / the
 * allocator's margin (budget/alloc.c: a class is granted 1.1 x what it
 * sends, 0.91): a class that got what it asked for must not look held
 * back. TCP held by a ceil sends 0.997 of it and more.
 */
#define SATURATED_SHARE 0.97
#define SATURATED_BACKLOG (4 * 1514)

static struct agent_budget_ns *find_ns(struct agent_budgets *b, const char *ns)
{
	for (size_t i = 0; i < b->n; i++)
		if (strcmp(b->ns[i].ns, ns) == 0)
			return &b->ns[i];
	return NULL;
}

static struct agent_budget_ns *add_ns(struct agent_budgets *b, const char *ns)
{
	struct agent_budget_ns *n = find_ns(b, ns), *grown;

	if (n)
		return n;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 8;

		grown = realloc(b->ns, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		b->ns = grown;
		b->cap = cap;
	}
	n = &b->ns[b->n++];
	*n = (struct agent_budget_ns){ .state = BUDGET_FALLBACK };
	snprintf(n->ns, sizeof(n->ns), "%s", ns);
	return n;
}

bool agent_budgets_enabled(const struct agent *a)
{
	const struct budget_policy *p = &a->cfg.budgets;

	return a->cfg_ok && p->allocator && p->egress && json_object_object_length(p->egress) > 0;
}

/* The ceil a namespace's state asks for, bytes/s. */
static uint64_t wanted_ceil(const struct agent *a, const struct agent_budget_ns *n)
{
	return budget_node_ceil(n->state, n->grant, n->safe_share, a->cfg.budgets.fallback_bps / 8,
				n->limit);
}

/*
 * The budgeted namespaces that have pods on this node, from the store: each
 * one's class, pods and own caps; read again only when the store was
 * replaced or the config changed. Namespaces gone from the node (or from
 * the config's budgets) are dropped.
 */
static int refresh_namespaces(struct agent *a, struct tg_err *e)
{
	struct agent_budgets *b = &a->budgets;
	struct ipam_state st = { 0 };
	struct ipam_store store;
	size_t keep = 0;
	int r = ipam_store_open_readonly(&store, a->cfg.data_dir, a->cfg.name, e), changed;

	if (r < 0)
		return r;
	if (b->cfg_hash != a->cfg_hash)
		b->store.looked = false; /* which namespaces have budgets may have changed */
	changed = ipam_store_stamp_changed(&store, &b->store);
	if (changed < 0) {
		ipam_store_close(&store);
		return tg_fail(e, CNI_ERR_IO, changed, "the store: %s", strerror(-changed));
	}
	if (changed && b->store.present) {
		r = ipam_store_load(&store, &st, e);
		if (r < 0) {
			ipam_store_close(&store);
			b->store.looked = false; /* again at the next tick */
			ipam_state_free(&st);
			return r;
		}
	}
	ipam_store_close(&store);
	if (changed) {
		b->cfg_hash = a->cfg_hash;
		for (size_t i = 0; i < b->n; i++)
			b->ns[i].pods = 0;
	}
	for (size_t i = 0; i < st.n_att; i++) {
		const struct ipam_attachment *att = &st.att[i];
		const struct shaping *s = &att->shaping;
		struct agent_budget_ns *n;
		uint64_t cap;

		if (!s->budget_fallback_bps || !s->ns_class ||
		    !node_config_budget(&a->cfg, att->k8s_namespace))
			continue;
		n = add_ns(b, att->k8s_namespace);
		if (!n) {
			ipam_state_free(&st);
			b->store.looked = false;
			return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		}
		n->ns_class = s->ns_class;
		n->pods++;
		cap = shaping_min_cap(s->ns_egress_bps, s->node_egress_bps);
		n->limit = (cap ? cap : SHAPER_LINE_BPS) / 8;
	}
	ipam_state_free(&st);
	/*
	 * A namespace whose last pod left: said once more in a report (no
	 * pod, nothing applied) so that the allocator frees its share at
	 * once; its class, empty until gc retires it, goes down to the
	 * fallback meanwhile, like a class a new pod's ADD would make.
	 */
	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];

		if (n->pods == 0 && n->leaving)
			continue; /* said: gone */
		if (n->pods == 0 && !n->leaving) {
			n->leaving = true;
			n->state = BUDGET_FALLBACK;
			n->grant = n->safe_share = 0;
			n->nodes = 0;
		} else {
			n->leaving = false;
		}
		b->ns[keep++] = *n;
	}
	if (keep != b->n)
		b->dirty = true;
	b->n = keep;
	return 0;
}

struct class_read {
	struct agent_budgets *b;
	int64_t now_ms;
};

/* One class of tollgate-inet's dump: a budgeted namespace's counters and ceil. */
static void on_class(const struct shaper_stats *st, void *arg)
{
	struct class_read *cr = arg;

	for (size_t i = 0; i < cr->b->n; i++) {
		struct agent_budget_ns *n = &cr->b->ns[i];

		if (st->parent == (uint32_t)TC_HANDLE(1, n->ns_class))
			n->backlog += st->backlog; /* one of its pods' classes */
		if (st->classid != (uint32_t)TC_HANDLE(1, n->ns_class))
			continue;
		n->present = true;
		n->kernel_ceil = st->ceil_bps / 8;
		if (n->counted && st->bytes >= n->bytes && cr->now_ms > n->at_ms) {
			uint64_t sent = st->bytes - n->bytes;
			uint64_t interval = (uint64_t)(cr->now_ms - n->at_ms);

			n->sent = sent;
			n->interval_ms = (uint32_t)(interval > UINT32_MAX ? UINT32_MAX : interval);
			n->saturated = (double)sent * 1000 >=
				       SATURATED_SHARE * (double)n->kernel_ceil * (double)interval;
		} else {
			n->sent = 0;
			n->interval_ms = 0;
			n->saturated = false;
		}
		n->bytes = n->probe_bytes = st->bytes;
		n->overlimits = st->overlimits;
		n->at_ms = n->probe_ms = cr->now_ms;
		n->counted = true;
	}
}

/*
 * Between reports, a look at the classes every quarter period: a class
 * that was saturated at the last report and now sends less than half its
 * ceil (its traffic stopped), or one that was not and now runs at its
 * ceil (its traffic came, or a lower grant holds it), is worth telling the
 * allocator now rather than at the next period: capacity changes hands a
 * period sooner.
 */
#define FLIP_IDLE_SHARE 0.5

struct probe_read {
	struct agent_budgets *b;
	int64_t now_ms;
	uint64_t *backlog; /* per namespace, of its pods' classes */
	uint64_t *sent;
	int64_t *interval;
};

static void on_probe(const struct shaper_stats *st, void *arg)
{
	struct probe_read *pr = arg;

	for (size_t i = 0; i < pr->b->n; i++) {
		struct agent_budget_ns *n = &pr->b->ns[i];

		if (st->parent == (uint32_t)TC_HANDLE(1, n->ns_class))
			pr->backlog[i] += st->backlog;
		if (st->classid != (uint32_t)TC_HANDLE(1, n->ns_class) || !n->counted)
			continue;
		if (st->bytes >= n->probe_bytes && pr->now_ms > n->probe_ms) {
			pr->sent[i] = st->bytes - n->probe_bytes;
			pr->interval[i] = pr->now_ms - n->probe_ms;
		}
		n->probe_bytes = st->bytes;
		n->probe_ms = pr->now_ms;
	}
}

/*
 * The next report no later than `at_ms`, and never sooner than a quarter
 * period after the last one (nor in the past): at most four a period.
 */
static void report_by(struct agent *a, int64_t at_ms, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	int64_t floor_ms = b->sent_ms + a->cfg.budgets.report_ms / 4;

	if (at_ms < floor_ms)
		at_ms = floor_ms;
	if (at_ms < now_ms)
		at_ms = now_ms;
	if (at_ms < b->next_ms)
		b->next_ms = at_ms;
}

/* To the leader a redirect named, else to budgets.allocator (the replicas' Service). */
static int post_report(struct agent *a, const char *body, size_t len)
{
	const struct agent_budgets *b = &a->budgets;
	const char *base = b->leader[0] ? b->leader : a->cfg.budgets.allocator;
	size_t n = strlen(base);
	char url[BUDGET_URL_MAX + 64];

	while (n && base[n - 1] == '/')
		n--;
	if (n + sizeof(BUDGET_REPORT_PATH) > sizeof(url))
		return -ENAMETOOLONG;
	snprintf(url, sizeof(url), "%.*s%s", (int)n, base, BUDGET_REPORT_PATH);
	return httpc_post(b->client, url, body, len, AGENT_REPORT_TIMEOUT_MS);
}

/* The loop's netlink socket, opened on first use (and after a failure). */
static int budget_sock(struct agent_budgets *b, struct nl_sock **ret)
{
	int r = b->sk ? 0 : tg_nl_route_open(&b->sk);

	*ret = b->sk;
	return r;
}

/* After a failed exchange: what is left unread on it goes with it. */
static void budget_sock_drop(struct agent_budgets *b)
{
	nl_socket_free(b->sk);
	b->sk = NULL;
}

/* Whether a class's use flipped since the last report (see FLIP_IDLE_SHARE). */
static bool probe_flipped(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	struct nl_sock *sk;
	uint64_t backlog[BUDGET_PER_REPORT_MAX] = { 0 }, sent[BUDGET_PER_REPORT_MAX] = { 0 };
	int64_t interval[BUDGET_PER_REPORT_MAX] = { 0 };
	struct probe_read pr = { .b = b,
				 .now_ms = now_ms,
				 .backlog = backlog,
				 .sent = sent,
				 .interval = interval };
	bool flipped = false;
	int ifb;

	if (b->n > BUDGET_PER_REPORT_MAX || budget_sock(b, &sk) < 0)
		return false;
	ifb = shaper_inet_ifindex(sk);
	if (!ifb)
		return false;
	if (shaper_dump_classes(sk, ifb, on_probe, &pr) < 0) {
		budget_sock_drop(b);
		return false;
	}
	for (size_t i = 0; i < b->n; i++) {
		const struct agent_budget_ns *n = &b->ns[i];
		double at_ceil = (double)n->kernel_ceil * (double)interval[i];

		if (!n->counted || n->leaving || interval[i] <= 0)
			continue;
		if (n->saturated)
			flipped |= (double)sent[i] * 1000 < FLIP_IDLE_SHARE * at_ceil;
		else
			flipped |= (double)sent[i] * 1000 >= SATURATED_SHARE * at_ceil ||
				   backlog[i] >= SATURATED_BACKLOG;
	}
	return flipped;
}

/* Each class's ceil to what its state asks for: one change where it differs. */
static void apply_ceils(struct agent *a, struct nl_sock *sk, int ifb, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	int mtu = a->cfg.mtu ? a->cfg.mtu : 1500;

	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];
		uint64_t want = wanted_ceil(a, n);
		int r;

		if (!n->present || n->kernel_ceil == want)
			continue;
		r = shaper_ns_set_ceil(sk, ifb, n->ns_class, want * 8, mtu);
		if (r < 0) {
			b->ceil_failures++;
			agent_note(notes,
				   "msg=\"budget: setting a namespace's ceil failed\" namespace=%s "
				   "ceil_bytes_per_second=%llu err=%s",
				   LOGFMT_Q(n->ns), (unsigned long long)want,
				   LOGFMT_Q(strerror(-r)));
			continue;
		}
		n->kernel_ceil = want;
		b->ceil_changes++;
		b->dirty = true;
	}
}

/* Reads the classes (with_counters: a report's counters too) and applies every ceil. */
static int read_and_apply(struct agent *a, bool with_counters, int64_t now_ms,
			  struct agent_notes *notes, struct tg_err *e)
{
	struct agent_budgets *b = &a->budgets;
	struct nl_sock *sk;
	struct class_read cr = { .b = b, .now_ms = now_ms };
	int ifb, r = budget_sock(b, &sk);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "netlink: %s", strerror(-r));
	ifb = shaper_inet_ifindex(sk);
	if (!ifb)
		return 0; /* no tollgate-inet yet: the declaration makes it */
	if (with_counters) {
		for (size_t i = 0; i < b->n; i++) {
			b->ns[i].present = false;
			b->ns[i].backlog = 0;
		}
		r = shaper_dump_classes(sk, ifb, on_class, &cr);
		if (r < 0) {
			budget_sock_drop(b);
			return tg_fail(e, CNI_ERR_IO, r, "reading the classes of %s: %s",
				       SHAPER_INET_IFB, strerror(-r));
		}
		for (size_t i = 0; i < b->n; i++)
			if (b->ns[i].interval_ms && b->ns[i].backlog >= SATURATED_BACKLOG)
				b->ns[i].saturated = true;
	}
	apply_ceils(a, sk, ifb, notes);
	return 0;
}

/* Leases that ran out: min(grant, safe share) from now on. */
static void age_leases(struct agent_budgets *b, int64_t now_ms)
{
	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];

		if (n->state == BUDGET_GRANTED && now_ms >= n->lease_until_ms) {
			n->state = BUDGET_LEASE_EXPIRED;
			b->lease_expiries++;
			b->dirty = true;
		}
	}
}

/* The report of this period: one entry per budgeted namespace with pods here. */
static int build_report(struct agent *a, char **ret, size_t *ret_len)
{
	struct agent_budgets *b = &a->budgets;
	struct budget_usage use[BUDGET_PER_REPORT_MAX];
	struct budget_report rep = { .seq = ++b->seq, .use = use };

	snprintf(rep.node, sizeof(rep.node), "%s", a->opt.node_name);
	for (size_t i = 0; i < b->n && rep.n < BUDGET_PER_REPORT_MAX; i++) {
		const struct agent_budget_ns *n = &b->ns[i];

		if (n->leaving) {
			use[rep.n] = (struct budget_usage){ .state = BUDGET_FALLBACK };
			snprintf(use[rep.n].ns, sizeof(use[rep.n].ns), "%s", n->ns);
			rep.n++;
			continue;
		}
		if (!n->present)
			continue;
		use[rep.n] = (struct budget_usage){
			.sent_bytes = n->sent,
			.interval_ms = n->interval_ms,
			.saturated = n->saturated,
			.applied = n->kernel_ceil,
			.limit = n->limit,
			.state = n->state,
			.pods = n->pods,
			.safe_share = n->safe_share,
			.nodes = n->nodes,
		};
		snprintf(use[rep.n].ns, sizeof(use[rep.n].ns), "%s", n->ns);
		rep.n++;
	}
	return budget_report_build(&rep, ret, ret_len);
}

/* ---- budgets.json: what the node holds, for a restart and for tollgate-ipam ---- */

static void state_path(const struct agent *a, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", a->cfg.data_dir, a->cfg.name);
}

static void save_state(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	_cleanup_json_ json_object *o = json_object_new_object();
	json_object *arr = json_object_new_array();
	char dir[PATH_MAX + 256];
	const char *text;

	if (!o || !arr) {
		json_object_put(arr);
		return;
	}
	jx_add(o, "version", json_object_new_int(1));
	jx_add(o, "node", json_object_new_string(a->opt.node_name ? a->opt.node_name : ""));
	jx_add(o, "allocator", json_object_new_string(a->cfg.budgets.allocator));
	jx_add(o, "bootMs", json_object_new_int64(now_ms));
	jx_add(o, "epoch", json_object_new_int64((int64_t)b->epoch_seen));
	jx_add(o, "updated", json_object_new_int64((int64_t)time(NULL)));
	for (size_t i = 0; i < b->n; i++) {
		const struct agent_budget_ns *n = &b->ns[i];
		json_object *e = json_object_new_object();

		jx_add(e, "namespace", json_object_new_string(n->ns));
		jx_add(e, "state", json_object_new_string(budget_state_names[n->state]));
		jx_add(e, "grant", json_object_new_int64((int64_t)n->grant));
		jx_add(e, "safeShare", json_object_new_int64((int64_t)n->safe_share));
		jx_add(e, "nodes", json_object_new_int64(n->nodes));
		jx_add(e, "applied", json_object_new_int64((int64_t)n->kernel_ceil));
		jx_add(e, "limit", json_object_new_int64((int64_t)n->limit));
		jx_add(e, "leaseUntilBootMs", json_object_new_int64(n->lease_until_ms));
		jx_add(e, "pods", json_object_new_int64(n->pods));
		json_object_array_add(arr, e);
	}
	jx_add(o, "namespaces", arr);
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
	state_path(a, dir, sizeof(dir));
	/* Only this node's one agent writes it: one writer, the store's fixed temp name. */
	if (tg_file_replace(dir, BUDGET_STATE_FILE, text, strlen(text), tg_dir_durable(dir)) == 0)
		b->dirty = false;
}

/*
 * After a restart: the grants whose leases still run (same boot, CLOCK_BOOTTIME)
 * come back as they were, a lease that ran out meanwhile as expired.
 */
static void restore_state(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	char dir[PATH_MAX + 256], path[PATH_MAX + 300];
	_cleanup_json_ json_object *o = NULL;
	json_object *arr, *v;
	int64_t boot_ms = 0;

	state_path(a, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, BUDGET_STATE_FILE);
	o = jx_read_file(path);
	if (!o || !json_object_object_get_ex(o, "namespaces", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return;
	/* a file from before this boot says nothing of this one */
	if (json_object_object_get_ex(o, "bootMs", &v))
		boot_ms = json_object_get_int64(v);
	if (boot_ms <= 0 || boot_ms > now_ms)
		return;
	/* the newest term seen outlives a restart: a deposed leader's answer stays refused */
	if (json_object_object_get_ex(o, "epoch", &v) && json_object_get_int64(v) > 0)
		b->epoch_seen = (uint64_t)json_object_get_int64(v);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i), *f;
		const char *ns, *state;
		struct agent_budget_ns *n;

		if (!json_object_object_get_ex(e, "namespace", &f) ||
		    !json_object_is_type(f, json_type_string))
			continue;
		ns = json_object_get_string(f);
		if (strlen(ns) > BUDGET_NS_MAX || !node_config_budget(&a->cfg, ns))
			continue;
		if (!json_object_object_get_ex(e, "state", &f))
			continue;
		state = json_object_get_string(f);
		n = add_ns(b, ns);
		if (!n)
			return;
		n->state = BUDGET_FALLBACK;
		for (int s = 0; s < BUDGET_STATES; s++)
			if (state && strcmp(state, budget_state_names[s]) == 0)
				n->state = (enum budget_state)s;
#define GET_U64(key, dst)                                                          \
	if (json_object_object_get_ex(e, key, &f) && json_object_get_int64(f) > 0) \
	dst = (uint64_t)json_object_get_int64(f)
		GET_U64("grant", n->grant);
		GET_U64("safeShare", n->safe_share);
		GET_U64("limit", n->limit);
#undef GET_U64
		if (json_object_object_get_ex(e, "nodes", &f))
			n->nodes = (uint32_t)json_object_get_int64(f);
		if (json_object_object_get_ex(e, "leaseUntilBootMs", &f))
			n->lease_until_ms = json_object_get_int64(f);
		n->pods = 1; /* until the store says */
	}
	age_leases(b, now_ms);
}

/* ---- the task ---- */

int64_t agent_budgets_next_ms(const struct agent *a)
{
	const struct agent_budgets *b = &a->budgets;
	int64_t next = b->next_ms;

	if (!agent_budgets_enabled(a))
		return INT64_MAX;
	if (b->sent_ms && b->probe_ms < next)
		next = b->probe_ms;
	/* a lease ends on time, not at the next report: the allocator counts on it */
	for (size_t i = 0; i < b->n; i++)
		if (b->ns[i].state == BUDGET_GRANTED && b->ns[i].lease_until_ms < next)
			next = b->ns[i].lease_until_ms;
	return next;
}

/* Leases that ran out between reports: their ceils go down now. */
static void expire_due(struct agent *a, int64_t now_ms, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	uint64_t before = b->lease_expiries;
	struct tg_err e = { 0 };

	age_leases(b, now_ms);
	if (b->lease_expiries == before)
		return;
	if (read_and_apply(a, false, now_ms, notes, &e) < 0)
		agent_note(notes,
			   "msg=\"budget: a lease ran out and the ceil could not be lowered\" "
			   "err=%s",
			   LOGFMT_Q(e.msg));
	save_state(a, now_ms);
}

void agent_budgets_tick(struct agent *a, int64_t now_ms, double rnd, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	int64_t period = a->cfg.budgets.report_ms;
	struct tg_err e = { 0 };
	char *body = NULL;
	size_t len = 0;
	int r;

	if (now_ms < b->next_ms && now_ms >= b->probe_ms && b->sent_ms) {
		b->probe_ms = now_ms + period / 4;
		if (probe_flipped(a, now_ms))
			report_by(a, now_ms, now_ms);
	}
	if (now_ms < b->next_ms) {
		expire_due(a, now_ms, notes);
		return;
	}
	/* +-10 %: a fleet started together does not report in step */
	b->next_ms = now_ms + period - period / 10 + (int64_t)(rnd * (double)(period / 5));
	b->probe_ms = now_ms + period / 4;
	if (!b->restored) {
		b->restored = true;
		restore_state(a, now_ms);
	}
	if (refresh_namespaces(a, &e) < 0) {
		agent_note(notes, "msg=\"budget: the store could not be read\" err=%s",
			   LOGFMT_Q(e.msg));
		return;
	}
	age_leases(b, now_ms);
	if (read_and_apply(a, true, now_ms, notes, &e) < 0)
		agent_note(notes, "msg=\"budget: the classes could not be read\" err=%s",
			   LOGFMT_Q(e.msg));
	if (b->dirty)
		save_state(a, now_ms);
	if (!b->client || httpc_busy(b->client) || !a->opt.node_name)
		return;
	if (build_report(a, &body, &len) < 0)
		return;
	r = post_report(a, body, len);
	free(body);
	if (r < 0) {
		b->reports_failed++;
		return;
	}
	b->sent_ms = now_ms;
}

/*
 * A replica that does not lead said where the leader is: the report goes
 * there at once, and the next ones too until one fails. A redirect of an
 * older term than one seen is a stale replica's and is not followed; nor
 * is a fourth in one report period (replicas that disagree, or that still
 * name a leader that is gone), until the next period.
 */
static void redirected(struct agent *a, const char *body, size_t len, int64_t now_ms,
		       struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	struct budget_redirect d;
	struct tg_err e = { 0 };

	if (budget_redirect_parse(body, len, &d, &e) < 0) {
		b->answers_rejected++;
		agent_note(notes, "msg=\"budget: the allocator's redirect was refused\" err=%s",
			   LOGFMT_Q(e.msg));
		return;
	}
	if (d.epoch < b->epoch_seen) {
		b->answers_stale++;
		return;
	}
	b->redirects++;
	if (now_ms - b->redirects_period_ms >= a->cfg.budgets.report_ms) {
		b->redirects_period_ms = now_ms;
		b->redirects_in_row = 0;
	}
	if (++b->redirects_in_row > 3)
		return;
	if (strcmp(b->leader, d.leader) != 0)
		agent_note(notes, "msg=\"budget: reporting to the leader\" leader=%s epoch=%llu",
			   LOGFMT_Q(d.leader), (unsigned long long)d.epoch);
	snprintf(b->leader, sizeof(b->leader), "%s", d.leader);
	b->next_ms = now_ms;
}

void agent_budgets_store_changed(struct agent *a, int64_t now_ms)
{
	if (!agent_budgets_enabled(a))
		return;
	/* (20 ms: the plugin's other writes of the call land first) */
	report_by(a, now_ms + 20, now_ms);
}

void agent_budgets_answer(struct agent *a, int64_t now_ms, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	struct budget_answer ans = { 0 };
	struct tg_err e = { 0 };
	const char *body;
	char why[256];
	long status;
	size_t len;
	int r = b->client ? httpc_take(b->client, &status, &body, &len, why, sizeof(why)) : 0;

	if (r == 0)
		return;
	if (r < 0 && status == 307) {
		redirected(a, body, len, now_ms, notes);
		return;
	}
	if (r < 0 && b->leader[0]) {
		/* the leader reported to is gone or no longer leads: the Service finds the next */
		agent_note(notes,
			   "msg=\"budget: the leader did not answer; reporting to the "
			   "allocator's address\" leader=%s allocator=%s err=%s",
			   LOGFMT_Q(b->leader), LOGFMT_Q(a->cfg.budgets.allocator), LOGFMT_Q(why));
		b->leader[0] = '\0';
		b->next_ms = now_ms;
	}
	if (r < 0) {
		b->reports_failed++;
		/* once per failing stretch, not once a second */
		if (b->reports_failed_logged++ == 0)
			agent_note(notes,
				   "msg=\"budget: the allocator did not answer; leases run out, "
				   "networking goes on\" allocator=%s err=%s",
				   LOGFMT_Q(a->cfg.budgets.allocator), LOGFMT_Q(why));
		return;
	}
	if (budget_answer_parse(body, len, &ans, &e) < 0) {
		b->answers_rejected++;
		agent_note(notes, "msg=\"budget: the allocator's answer was refused\" err=%s",
			   LOGFMT_Q(e.msg));
		return;
	}
	if (ans.epoch && ans.epoch < b->epoch_seen) {
		/*
		 * A deposed leader's late answer: its grants are not this term's.
		 * Such answers end within that leader's etcd TTL; older terms
		 * answering for three leases on end mean the terms started
		 * again (the replicas moved to a new etcd), and are taken.
		 */
		if (!b->stale_since_ms)
			b->stale_since_ms = now_ms;
		if (now_ms - b->stale_since_ms < 3 * ans.lease_ms) {
			b->answers_stale++;
			budget_answer_free(&ans);
			return;
		}
		agent_note(
			notes,
			"msg=\"budget: only older terms have answered for three leases: "
			"the allocator's terms started again (a new etcd?)\" epoch=%llu was=%llu",
			(unsigned long long)ans.epoch, (unsigned long long)b->epoch_seen);
		b->epoch_seen = ans.epoch;
		b->dirty = true;
	}
	b->stale_since_ms = 0;
	b->redirects_in_row = 0;
	if (ans.epoch > b->epoch_seen) {
		b->epoch_seen = ans.epoch;
		b->dirty = true;
	}
	if (b->reports_failed_logged)
		agent_note(notes, "msg=\"budget: the allocator answers again\" failed_reports=%llu",
			   (unsigned long long)b->reports_failed_logged);
	b->reports_failed_logged = 0;
	b->reports_ok++;
	/* the allocator wants to hear sooner while grants move: never over the period */
	if (ans.next_report_ms > 0) {
		int64_t period = a->cfg.budgets.report_ms;
		int64_t soon = now_ms + (ans.next_report_ms < period / 10 ? period / 10
					 : ans.next_report_ms < period	  ? ans.next_report_ms
									  : period);

		if (soon < b->next_ms)
			b->next_ms = soon;
	}
	for (size_t i = 0; i < ans.n; i++) {
		struct agent_budget_ns *n = find_ns(b, ans.g[i].ns);

		if (!n || n->leaving)
			continue;
		/* the lease runs from when the report left: it never outlives the allocator's view */
		n->state = BUDGET_GRANTED;
		n->grant = ans.g[i].grant;
		n->safe_share = ans.g[i].safe_share;
		n->nodes = ans.g[i].nodes;
		n->lease_until_ms = b->sent_ms + ans.lease_ms;
		b->dirty = true;
	}
	budget_answer_free(&ans);
	age_leases(b, now_ms);
	if (read_and_apply(a, false, now_ms, notes, &e) < 0)
		agent_note(notes, "msg=\"budget: a grant could not be applied\" err=%s",
			   LOGFMT_Q(e.msg));
	if (b->dirty)
		save_state(a, now_ms);
}

void agent_budgets_free(struct agent *a)
{
	httpc_free(a->budgets.client);
	nl_socket_free(a->budgets.sk);
	free(a->budgets.ns);
	memset(&a->budgets, 0, sizeof(a->budgets));
}

/* ---- /metrics ---- */

void agent_budgets_render(const struct agent *a, struct expo *x)
{
	const struct agent_budgets *b = &a->budgets;
	static const char grant[] = "tollgate_budget_grant_bytes_per_second";
	static const char state[] = "tollgate_budget_state";
	static const char ceil[] = "tollgate_budget_ceil_bytes_per_second";

	if (!agent_budgets_enabled(a))
		return;
	expo_family(x, grant, "gauge",
		    "The grant this node holds of its namespace's cluster budget (0: none yet).");
	for (size_t i = 0; i < b->n; i++)
		expo_sample_u64(x, grant, (const char *const[]){ "namespace", b->ns[i].ns, NULL },
				b->ns[i].grant);
	expo_family(
		x, ceil, "gauge",
		"The ceil in force on the namespace's internet class: the grant, the safe share "
		"after a lease ran out, or the fallback.");
	for (size_t i = 0; i < b->n; i++)
		expo_sample_u64(x, ceil, (const char *const[]){ "namespace", b->ns[i].ns, NULL },
				b->ns[i].kernel_ceil);
	expo_family(x, state, "gauge",
		    "1 for the state each budgeted namespace is in on this node.");
	for (size_t i = 0; i < b->n; i++)
		for (int s = 0; s < BUDGET_STATES; s++)
			expo_sample_u64(x, state,
					(const char *const[]){ "namespace", b->ns[i].ns, "state",
							       budget_state_names[s], NULL },
					b->ns[i].state == (enum budget_state)s);
	expo_family(x, "tollgate_budget_reports_total", "counter",
		    "Reports to the allocator, by result (error: no answer, an HTTP error, or an "
		    "answer refused; redirected: a replica that does not lead named the leader; "
		    "stale: an answer of an older term than one seen, not applied).");
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "ok", NULL }, b->reports_ok);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "error", NULL },
			b->reports_failed + b->answers_rejected);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "redirected", NULL }, b->redirects);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "stale", NULL }, b->answers_stale);
	expo_family(x, "tollgate_budget_epoch", "gauge",
		    "The newest allocator term this node has seen (0: no leader election); an "
		    "answer of an older one is never applied.");
	expo_sample_u64(x, "tollgate_budget_epoch", (const char *const[]){ NULL }, b->epoch_seen);
	expo_family(
		x, "tollgate_budget_ceil_changes_total", "counter",
		"Changes of a budgeted namespace's ceil (one netlink change each), and failures.");
	expo_sample_u64(x, "tollgate_budget_ceil_changes_total",
			(const char *const[]){ "result", "ok", NULL }, b->ceil_changes);
	expo_sample_u64(x, "tollgate_budget_ceil_changes_total",
			(const char *const[]){ "result", "error", NULL }, b->ceil_failures);
	expo_family(x, "tollgate_budget_lease_expiries_total", "counter",
		    "Grants whose lease ran out without renewal.");
	expo_sample_u64(x, "tollgate_budget_lease_expiries_total", (const char *const[]){ NULL },
			b->lease_expiries);
}
