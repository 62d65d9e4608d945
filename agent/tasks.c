// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's tasks. Each opens what it needs, does its work and closes it
 * again: nothing stays open between runs but the event loop's descriptors.
 * A task logs nothing: it returns its error, and leaves what else it has
 * to say in its notes for the loop to log.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <netlink/netlink.h>

#include "accounting/accounting.h"
#include "agent/agent.h"
#include "lib/cleanup.h"
#include "lib/nl.h"
#include "lib/util.h"

#define CONFLIST_MAX (1 << 20)

void agent_note(struct agent_notes *n, const char *fmt, ...)
{
	va_list ap;
	char *line = NULL;
	int r;

	if (n->n == AGENT_NOTES_MAX) {
		n->dropped++;
		return;
	}
	va_start(ap, fmt);
	r = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (r < 0) {
		n->dropped++;
		return;
	}
	n->line[n->n++] = line;
}

void agent_notes_clear(struct agent_notes *n)
{
	for (size_t i = 0; i < n->n; i++)
		free(n->line[i]);
	n->n = 0;
	n->dropped = 0;
}

int agent_load_config(struct agent *a, struct tg_err *e)
{
	_cleanup_free_ char *text = NULL;
	struct node_config cfg = { 0 };
	size_t len = 0;
	uint64_t hash;
	int r;

	r = read_file(a->opt.config_path, CONFLIST_MAX, &text, &len);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", a->opt.config_path,
			       strerror(-r));
	hash = XXH3_64bits(text, len);
	if (a->cfg_ok && hash == a->cfg_hash)
		return 0;
	/* exactly these bytes are validated, and later installed */
	r = node_config_load_text(a->opt.config_path, text, len, &cfg, e);
	if (r < 0) {
		node_config_free(&cfg);
		return r; /* the config in force stays */
	}
	if (a->opt.data_dir)
		snprintf(cfg.data_dir, sizeof(cfg.data_dir), "%s", a->opt.data_dir);
	if (a->cfg_ok)
		node_config_free(&a->cfg);
	a->cfg = cfg;
	a->cfg_ok = true;
	/* which namespaces have budgets: the policy last heard, from budgets.json at start */
	a->cfg.budgets.heard = &a->budgets.heard;
	if (!a->budgets.heard_looked && a->cfg.budgets.allocator) {
		a->budgets.heard_looked = true;
		node_budgets_heard(&a->cfg, &a->budgets.heard);
	}
	a->cfg_hash = hash;
	free(a->cfg_text);
	a->cfg_text = TAKE_PTR(text);
	a->cfg_len = len;
	return 1;
}

static int open_store(const struct agent *a, struct ipam_store *s, struct tg_err *e)
{
	return ipam_store_open(s, a->cfg.data_dir, a->cfg.name, e);
}

static void count_repairs(struct agent_stats *st, const struct node_repairs *r)
{
	st->repaired_nft_table += r->nft.table;
	st->repaired_nft_sets += r->nft.sets;
	st->repaired_nft_chains += r->nft.chains;
	st->repaired_nft_rules += r->nft.rules;
	st->repaired_nft_internal += r->nft.internal;
	st->repaired_nft_pod_elements += r->nft.pods_added + r->nft.pods_removed;
	st->repaired_tc_ifb += r->tc.ifb;
	st->repaired_tc_root += r->tc.root;
	st->repaired_tc_node_class += r->tc.node_class;
	st->repaired_tc_clsact += r->tc.clsact;
	st->repaired_tc_filters += r->tc.filters;
	st->repaired_tc_classes_restored += r->classes_restored;
	st->repaired_sysctls += r->sysctls;
}

int agent_declare(struct agent *a, struct tg_err *e)
{
	struct node_uplink up = { .mtu = a->cfg.mtu ? a->cfg.mtu : 1500 };
	struct node_repairs rep = { 0 };
	struct ipam_store store;
	struct nl_sock *sk = NULL;
	int r;

	a->stats.declarations++;
	r = tg_nl_route_open(&sk);
	if (r < 0) {
		tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
		goto out;
	}
	r = node_uplink(sk, a->cfg.uplink, a->cfg.mtu, &up, e);
	if (r < 0)
		goto out;
	r = open_store(a, &store, e);
	if (r < 0)
		goto out;
	r = node_declare_from_store(sk, &a->cfg, &up, &store, NODE_DECLARE_SYSCTL_RO, &rep, e);
	ipam_store_close(&store);
	if (r == 0 && rep.sysctls_readonly)
		a->stats.sysctls_readonly++;
	/* What the first declaration writes on a fresh node is no repair. */
	if (r == 0 && a->declared)
		count_repairs(&a->stats, &rep);
out:
	nl_socket_free(sk);
	if (r < 0)
		a->stats.declaration_failures++;
	else
		a->declared = true;
	return r;
}

static int refresh_only(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	return 0;
}

const char *agent_imds_url(const struct agent *a)
{
	return a->cfg.imds_url ? a->cfg.imds_url : "http://169.254.169.254";
}

static struct node_sync_source sync_source(const struct agent *a)
{
	/* A short budget: the schedule does the retrying (and the loop stays responsive). */
	return (struct node_sync_source){ .uplink = a->cfg.uplink,
					  .imds_url = agent_imds_url(a),
					  .exclude = a->cfg.exclude,
					  .budget_s = 2 };
}

/* An offer folded into the store's pool (the offer freed). */
static int sync_offer(struct agent *a, struct ipam_store *store, struct ipam_state *st,
		      struct node_sync_offer *offer, struct agent_notes *notes, struct tg_err *e)
{
	struct ipam_sync_report rep;
	int r;

	if (offer->n_refused) {
		char ip[IP4_STRLEN];

		agent_note(notes,
			   "msg=\"IMDS offered address(es) no pod can have, left out of the "
			   "pool\" refused=%zu first=%s why=%s",
			   offer->n_refused, ip4_format(offer->refused, ip),
			   LOGFMT_Q(offer->refused_why));
	}
	r = node_sync(store, st, offer, &rep, e);
	node_imds_offer_free(offer);
	return r;
}

/* The end of a sync, counted. */
static int sync_done(struct agent *a, int r)
{
	a->stats.syncs++;
	if (r < 0)
		a->stats.sync_failures++;
	else
		a->stats.last_sync_ok_s = (int64_t)time(NULL);
	return r;
}

int agent_sync(struct agent *a, struct agent_notes *notes, struct tg_err *e)
{
	struct node_sync_source src = sync_source(a);
	struct ipam_state st = { 0 };
	struct node_sync_offer offer;
	struct ipam_store store;
	int r;

	r = open_store(a, &store, e);
	if (r < 0)
		return sync_done(a, r);
	if (a->cfg.source == IPAM_SOURCE_STATIC) {
		/* The store's pool follows the config at each update; this is one. */
		r = node_store_update(&store, &st, &a->cfg, refresh_only, NULL, e);
	} else {
		r = node_imds_offer(&src, &offer, e);
		if (r == 0)
			r = sync_offer(a, &store, &st, &offer, notes, e);
	}
	if (r == 0)
		a->pool_ready = st.n_pool > 0;
	ipam_state_free(&st);
	ipam_store_close(&store);
	return sync_done(a, r);
}

int agent_sync_answer(struct agent *a, const char *body, size_t len, struct agent_notes *notes,
		      struct tg_err *e)
{
	struct node_sync_source src = sync_source(a);
	struct ipam_state st = { 0 };
	struct node_sync_offer offer;
	struct ipam_store store;
	int r;

	if (!body)
		return sync_done(a, -EIO);
	r = node_imds_offer_from(&src, body, len, &offer, e);
	if (r < 0)
		return sync_done(a, r);
	r = open_store(a, &store, e);
	if (r < 0) {
		node_imds_offer_free(&offer);
		return sync_done(a, r);
	}
	r = sync_offer(a, &store, &st, &offer, notes, e);
	if (r == 0)
		a->pool_ready = st.n_pool > 0;
	ipam_state_free(&st);
	ipam_store_close(&store);
	return sync_done(a, r);
}

static void gc_error(void *ctx, const struct ipam_attachment *att, const char *why)
{
	agent_note(ctx,
		   "msg=\"gc of an attachment failed: kept, tried again next run\" namespace=%s "
		   "pod=%s container=%s err=%s",
		   LOGFMT_Q(att->k8s_namespace), LOGFMT_Q(att->pod), LOGFMT_Q(att->container_id),
		   LOGFMT_Q(why));
}

int agent_gc(struct agent *a, struct agent_notes *notes, struct tg_err *e)
{
	struct ipam_state st = { 0 };
	struct ipam_store store;
	struct nl_sock *sk = NULL;
	struct node_gc g = { 0 };
	int r;

	a->stats.gc_runs++;
	r = open_store(a, &store, e);
	if (r < 0)
		return r;
	r = ipam_store_load(&store, &st, e);
	if (r == 0)
		r = node_gc_find(&st, &g) < 0 ? tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory")
					      : 0;
	if (r == 0 && g.n_unseen) {
		a->stats.gc_unseen += g.n_unseen;
		agent_note(notes,
			   "msg=\"attachments name network namespaces in a directory missing or "
			   "empty here (is the host's netns directory mounted?): not collected\" "
			   "attachments=%zu dir=%s",
			   g.n_unseen, g.unseen_dir);
	}
	if (r == 0)
		r = tg_nl_route_open(&sk);
	if (r == 0)
		r = node_gc_collect(sk, &store, &st, &g, gc_error, notes, e);
	else if (!e->msg[0])
		tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	a->stats.gc_collected += g.released;
	a->stats.gc_kept += g.kept;
	a->stats.gc_classes_retired += g.retired_classes;
	node_gc_free(&g);
	nl_socket_free(sk);
	ipam_state_free(&st);
	ipam_store_close(&store);
	return r;
}

struct ns_list {
	char (*names)[IPAM_K8S_NAMESPACE_MAX + 1];
	size_t n, cap;
	bool oom;
};

/* Adds a namespace to the list once. */
static void ns_list_add(struct ns_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		void *p = realloc(l->names, cap * sizeof(*l->names));

		if (!p) {
			l->oom = true;
			return;
		}
		l->names = p;
		l->cap = cap;
	}
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
}

/* Each namespace that has counters, once (a counter per class: several calls per name). */
static void collect_ns(const struct acct_counter_sample *c, void *arg)
{
	char owner[ACCT_COUNTER_NAME_MAX];
	enum acct_family fam;
	enum acct_class cls;

	if ((acct_counter_parse(c->name, c->name_len, owner, &cls) != ACCT_OWNER_NAMESPACE &&
	     acct_spoofed_parse(c->name, c->name_len, owner, &fam) != ACCT_OWNER_NAMESPACE) ||
	    strlen(owner) > IPAM_K8S_NAMESPACE_MAX)
		return;
	ns_list_add(arg, owner);
}

static bool ns_has_pod(const struct ipam_state *st, const char *ns)
{
	for (size_t i = 0; i < st->n_att; i++)
		if (strcmp(st->att[i].k8s_namespace, ns) == 0)
			return true;
	return false;
}

/* The namespaces of `have`; for those without a pod, the time each was first found so. */
static int track_counted(struct agent *a, const struct ns_list *have, const struct ipam_state *st,
			 int64_t now_ms)
{
	struct agent_counted_ns *next = calloc(have->n + 1, sizeof(*next));

	if (!next)
		return -ENOMEM;
	for (size_t i = 0; i < have->n; i++) {
		snprintf(next[i].name, sizeof(next[i].name), "%s", have->names[i]);
		next[i].empty_since_ms = NS_HAS_PODS;
		if (ns_has_pod(st, have->names[i]))
			continue;
		next[i].empty_since_ms = now_ms;
		for (size_t j = 0; j < a->n_counted; j++)
			if (strcmp(a->counted[j].name, next[i].name) == 0 &&
			    a->counted[j].empty_since_ms != NS_HAS_PODS)
				next[i].empty_since_ms = a->counted[j].empty_since_ms;
	}
	free(a->counted);
	a->counted = next;
	a->n_counted = have->n;
	return 0;
}

/*
 * At most this many namespaces a run: the store's lock is held meanwhile
 * (about 20 ms for 1,024 in one transaction); a backlog goes over runs.
 */
#define RETIRE_PER_RUN 1024

/* Retires the empty namespaces past retainSeconds, in one transaction. */
static int retire_due(struct agent *a, int64_t now_ms, struct tg_err *e)
{
	const char **due = calloc(a->n_counted + 1, sizeof(*due));
	size_t n = 0, retired = 0;
	int r;

	if (!due)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < a->n_counted && n < RETIRE_PER_RUN; i++)
		if (a->counted[i].empty_since_ms != NS_HAS_PODS &&
		    now_ms - a->counted[i].empty_since_ms >= a->cfg.retain_seconds * 1000)
			due[n++] = a->counted[i].name;
	r = n ? acct_retire_namespaces(due, n, &retired, e) : 0;
	a->stats.namespaces_retired += retired;
	free(due);
	/* the next run finds the retired ones no more, and keeps the others' clocks */
	return r;
}

/*
 * Namespaces counted at the last collection, without pods now, whose
 * counters are gone though not retired (the table was made anew, with
 * counters for pods' namespaces only): made again, so that they are counted
 * and served until their time is up (the exporter carries what they had),
 * and added to `have`, keeping their clocks.
 */
static int keep_lost(struct agent *a, struct ns_list *have, const struct ipam_state *st,
		     int64_t now_ms, struct tg_err *e)
{
	const char **lost = calloc(a->n_counted + 1, sizeof(*lost));
	size_t n = 0;
	int r = 0;

	if (!lost)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < a->n_counted; i++) {
		const struct agent_counted_ns *ns = &a->counted[i];
		bool present = false;

		for (size_t j = 0; j < have->n && !present; j++)
			present = strcmp(have->names[j], ns->name) == 0;
		if (!present && !ns_has_pod(st, ns->name) &&
		    (ns->empty_since_ms == NS_HAS_PODS ||
		     now_ms - ns->empty_since_ms < a->cfg.retain_seconds * 1000))
			lost[n++] = ns->name;
	}
	if (n)
		r = acct_keep_namespaces(lost, n, e);
	for (size_t i = 0; i < n && r == 0; i++) {
		ns_list_add(have, lost[i]);
		if (have->oom)
			r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	}
	a->stats.namespaces_kept += r == 0 ? n : 0;
	free(lost);
	return r;
}

int agent_retire_namespaces(struct agent *a, int64_t now_ms, struct tg_err *e)
{
	bool no_table = false;
	struct ns_list have = { 0 };
	struct ipam_state st = { 0 };
	struct acct_reader *rd;
	struct ipam_store store;
	int r;

	if (!a->cfg.acct_enabled)
		return 0;
	rd = acct_reader_new();
	if (!rd)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = open_store(a, &store, e);
	if (r < 0) {
		acct_reader_free(rd);
		return r;
	}
	/*
	 * Under the store's lock: a namespace without attachments here has no
	 * ADD between its address and its elements (an ADD records first), and
	 * one assigned after the unlock makes the counters anew.
	 */
	r = ipam_store_lock(&store, e);
	if (r == 0) {
		r = ipam_store_load(&store, &st, e);
		if (r == 0) {
			r = acct_reader_read(rd, collect_ns, &have);
			if (r == -ENOENT)
				no_table =
					true; /* nothing to retire; the declaration makes it anew */
			else if (r < 0)
				tg_fail(e, CNI_ERR_IO, r, "cannot read the counters: %s",
					strerror(-r));
			else if (have.oom)
				r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		}
		if (r == 0 && !no_table)
			r = keep_lost(a, &have, &st, now_ms, e);
		if (r == 0 && !no_table)
			r = track_counted(a, &have, &st, now_ms);
		if (r == 0 && !no_table)
			r = retire_due(a, now_ms, e);
		r = no_table ? 0 : r;
		ipam_store_unlock(&store);
	}
	free(have.names);
	ipam_state_free(&st);
	ipam_store_close(&store);
	acct_reader_free(rd);
	return r;
}

static void reshape_error(void *ctx, const struct ipam_attachment *att, const char *why)
{
	agent_note(ctx, "msg=\"reshape of a pod failed\" namespace=%s pod=%s err=%s",
		   LOGFMT_Q(att->k8s_namespace), LOGFMT_Q(att->pod), LOGFMT_Q(why));
}

int agent_reshape(struct agent *a, struct agent_notes *notes, struct tg_err *e)
{
	/* after a failed run, the elements go in again even with no pod left to put right */
	struct node_reshape rs = { .lazy = !a->reshape_failed };
	struct ipam_state st = { 0 };
	struct ipam_store store;
	struct nl_sock *sk = NULL;
	int r;

	a->stats.reshapes++;
	r = tg_nl_route_open(&sk);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	r = open_store(a, &store, e);
	if (r == 0) {
		r = node_reshape(sk, &a->cfg, &store, &st, &rs, reshape_error, notes, e);
		ipam_store_close(&store);
	}
	a->stats.reshaped_pods += rs.changed + rs.repaired - rs.failed - rs.gone;
	a->stats.reshape_failures += rs.failed;
	a->reshape_failed = r < 0;
	node_reshape_free(&rs);
	ipam_state_free(&st);
	nl_socket_free(sk);
	return r;
}

static void reconcile_error(void *ctx, const struct ipam_attachment *att, const char *why)
{
	agent_note(ctx,
		   "msg=\"a pod's classes drifted and could not be put right\" namespace=%s "
		   "pod=%s err=%s",
		   LOGFMT_Q(att->k8s_namespace), LOGFMT_Q(att->pod), LOGFMT_Q(why));
}

/* An ADD makes its classes within this of recording the pod: younger ones are left alone. */
#define RECONCILE_GRACE_S 5

int agent_reconcile(struct agent *a, struct agent_notes *notes, struct tg_err *e)
{
	struct node_reconcile rc = { .grace_s = RECONCILE_GRACE_S };
	struct ipam_store store;
	struct nl_sock *sk = NULL;
	int r;

	r = tg_nl_route_open(&sk);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	r = ipam_store_open_readonly(&store, a->cfg.data_dir, a->cfg.name, e);
	if (r == 0) {
		r = node_reconcile(sk, &a->cfg, &store, &rc, reconcile_error, notes, e);
		ipam_store_close(&store);
	}
	a->stats.repaired_tc_pod_classes += rc.repaired;
	a->stats.reshape_failures += rc.failed;
	nl_socket_free(sk);
	return r;
}

int agent_pool_size(struct agent *a, size_t *ret)
{
	struct ipam_state st = { 0 };
	struct ipam_store store;
	struct tg_err e = { 0 };
	int r = ipam_store_open_readonly(&store, a->cfg.data_dir, a->cfg.name, &e);

	if (r == 0)
		r = ipam_store_load(&store, &st, &e);
	*ret = st.n_pool;
	ipam_state_free(&st);
	ipam_store_close(&store);
	return r;
}

bool agent_ready(const struct agent *a)
{
	return a->cfg_ok && a->pool_ready && a->declared &&
	       (a->installed || !a->opt.cni_conf_dir) && !agent_lacks_blocking(&a->lacks);
}
