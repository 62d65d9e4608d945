// SPDX-License-Identifier: Apache-2.0
/*
 * The declaration of table `inet tollgate`: read what the kernel holds,
 * compare it with what the config asks for (table.c, rules.c), and write
 * only the difference in one atomic batch.
 *
 * Replacing objects that packets may be using makes the kernel wait for an
 * RCU grace period (when the socket closes), and makes concurrent callers
 * queue behind it; so nothing that is already right is written again. Each
 * rule carries a comment "tollgate:<hash>" of what its chain is made from
 * (chain_stamp), which makes a chain's comparison one string per rule; the
 * set `internal` is compared element by element.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "accounting/internal.h"
#include "lib/util.h"

/* Reads of the table a concurrent commit may interrupt before the declaration gives up. */
#define READ_TRIES 5
#define STAMP_PREFIX "tollgate:"
#define STAMP_LEN (sizeof(STAMP_PREFIX) + 16)

/* What the config asks for: the rules, each chain's stamp, the internal set. */
struct want {
	const struct acct_config *cfg;
	struct acct_rule_list rules;
	char stamp[ACCT_TABLE_CHAINS][STAMP_LEN];
	size_t n_rules[ACCT_TABLE_CHAINS];
	struct acct_bound bounds[ACCT_TABLE_BOUNDS_MAX];
	size_t n_bounds;
};

/* What the kernel holds. */
struct seen {
	bool table;
	bool sets_read, chains_read;
	bool set[ACCT_TABLE_SETS];
	bool chain[ACCT_TABLE_CHAINS];
	size_t n_rules[ACCT_TABLE_CHAINS];
	size_t stamped[ACCT_TABLE_CHAINS]; /* rules carrying the chain's stamp */
	struct acct_bound bounds[ACCT_TABLE_BOUNDS_MAX + 1];
	size_t n_bounds;	   /* ACCT_TABLE_BOUNDS_MAX + 1: more than any config makes */
	bool old_prerouting;	   /* an older layout's prerouting chain (at -150) */
	bool arp_right;		   /* table arp tollgate as cfg declares it */
	struct guard_seen *guards; /* the guard chains that hold rules */
	size_t n_guards, cap_guards;
	const struct want *want;
	int err;
};

/* A namespace's guard chains as the rule dump showed them. */
struct guard_seen {
	char ns[ACCT_GUARD_CHAIN_MAX];
	unsigned n_rules[ACCT_DIRS], stamped[ACCT_DIRS]; /* rules, and those with cfg's stamp */
};

static int chain_index(const char *name)
{
	for (int i = 0; name && i < ACCT_TABLE_CHAINS; i++)
		if (strcmp(acct_table_chains[i].name, name) == 0)
			return i;
	return -1;
}

static int set_index(const char *name)
{
	for (int i = 0; name && i < ACCT_TABLE_SETS; i++)
		if (strcmp(acct_table_sets[i].name, name) == 0)
			return i;
	return -1;
}

static uint64_t hash_list(const char *const *list, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = hash_fnv1a64(list[i], strlen(list[i]) + 1, h);
	return hash_fnv1a64(&n, sizeof(n), h);
}

/* servicePorts' entries: their ports and (what @service_ok's elements follow) namespaces. */
static uint64_t services_hash(const struct acct_access *a, uint64_t h)
{
	for (size_t i = 0; i < a->n_services; i++) {
		const struct acct_service_port *sp = &a->services[i];

		h = hash_fnv1a64(sp->ports, sp->n_ports * sizeof(sp->ports[0]), h);
		h = hash_fnv1a64(&sp->n_ports, sizeof(sp->n_ports), h);
		h = hash_list(sp->ns, sp->n_ns, h);
	}
	return hash_fnv1a64(&a->n_services, sizeof(a->n_services), h);
}

/*
 * What nodeAccess puts into a chain's stamp: from_pod's jump to to_agent
 * follows metricsPort; to_cloud and to_agent stand for who is let through
 * (their sets' elements), so a changed list redoes them and, with them,
 * the elements of every pod (acct_declare); to_service the same for
 * servicePorts, and forward's and input's jumps to it follow whether there
 * are any.
 */
static uint64_t access_hash(const struct acct_config *cfg, const char *chain, uint64_t h)
{
	const struct acct_access *a = &cfg->access;
	uint8_t filter = a->metrics_filter;

	if (strcmp(chain, ACCT_CHAIN_FROM_POD) == 0 || strcmp(chain, ACCT_CHAIN_TO_AGENT) == 0) {
		h = hash_fnv1a64(&filter, sizeof(filter), h);
		h = hash_fnv1a64(&a->metrics_port, sizeof(a->metrics_port), h);
	}
	if (strcmp(chain, ACCT_CHAIN_TO_CLOUD) == 0)
		h = hash_list(a->metadata_ns, a->n_metadata_ns, h);
	if (strcmp(chain, ACCT_CHAIN_TO_AGENT) == 0)
		h = hash_list(a->metrics_ns, a->n_metrics_ns, h);
	if (strcmp(chain, ACCT_CHAIN_TO_SERVICE) == 0)
		h = services_hash(a, h);
	if (strcmp(chain, "forward") == 0 || strcmp(chain, "input") == 0) {
		uint8_t any = a->n_services > 0;

		h = hash_fnv1a64(&any, sizeof(any), h);
	}
	return h;
}

/*
 * A chain's stamp: what its rules are made from (the layout's version, the
 * chain, the config's fields that rules use; not internalCIDRs, which live
 * in a set). Computed without building a rule, so the ADD's probe stays
 * cheap; ACCT_TABLE_LAYOUT changes with every change of the rules rules.c builds.
 */
static void chain_stamp(const struct acct_config *cfg, int c, char ret[STAMP_LEN])
{
	uint64_t h = hash_fnv1a64(ACCT_TABLE_LAYOUT, strlen(ACCT_TABLE_LAYOUT), FNV1A64_INIT);
	uint8_t flags = (uint8_t)(cfg->masquerade | cfg->enabled << 1 | cfg->per_pod << 2 |
				  cfg->guard.on << 3 | cfg->guard.dst.on << 4);

	h = hash_fnv1a64(acct_table_chains[c].name, strlen(acct_table_chains[c].name), h);
	h = hash_fnv1a64(&flags, sizeof(flags), h);
	h = hash_fnv1a64(&cfg->internet_mark, sizeof(cfg->internet_mark), h);
	h = hash_fnv1a64(&cfg->inet_ingress_classid, sizeof(cfg->inet_ingress_classid), h);
	h = hash_fnv1a64(&cfg->access.ns_connections, sizeof(cfg->access.ns_connections), h);
	h = hash_fnv1a64(&cfg->access.neighbours_per_second,
			 sizeof(cfg->access.neighbours_per_second), h);
	if (cfg->pod_link_prefix)
		h = hash_fnv1a64(cfg->pod_link_prefix, strlen(cfg->pod_link_prefix), h);
	h = access_hash(cfg, acct_table_chains[c].name, h);
	snprintf(ret, STAMP_LEN, STAMP_PREFIX "%016llx", (unsigned long long)h);
}

/* What cfg asks for; the rules' comments only when they are to be written. */
static int want_build(const struct acct_config *cfg, struct want *w, bool to_write)
{
	int r;

	memset(w, 0, sizeof(*w));
	w->cfg = cfg;
	r = acct_table_rules(cfg, &w->rules);
	if (r < 0)
		return r;
	for (size_t i = 0; i < w->rules.n; i++) {
		int c = chain_index(nftnl_rule_get_str(w->rules.r[i], NFTNL_RULE_CHAIN));

		if (c < 0)
			return -EINVAL;
		w->n_rules[c]++;
	}
	for (int c = 0; c < ACCT_TABLE_CHAINS; c++)
		chain_stamp(cfg, c, w->stamp[c]);
	for (size_t i = 0; to_write && i < w->rules.n && r == 0; i++)
		r = acct_rule_comment(
			w->rules.r[i],
			w->stamp[chain_index(nftnl_rule_get_str(w->rules.r[i], NFTNL_RULE_CHAIN))]);
	w->n_bounds = acct_table_internal_bounds(cfg, w->bounds);
	return r;
}

/* ---- reading the kernel ---- */

static struct guard_seen *guard_find(const struct seen *s, const char *ns)
{
	for (size_t i = 0; i < s->n_guards; i++)
		if (strcmp(s->guards[i].ns, ns) == 0)
			return &s->guards[i];
	return NULL;
}

static void guard_rule_seen(struct seen *s, const char *ns, enum acct_dir dir, const char *comment)
{
	struct guard_seen *g = guard_find(s, ns);
	char stamp[ACCT_GUARD_STAMP_LEN];

	if (!s->want->cfg->guard.on || strlen(ns) >= sizeof(g->ns))
		return;
	if (!g) {
		if (!array_grow(&s->guards, &s->cap_guards, s->n_guards, sizeof(*s->guards), 16)) {
			s->err = -ENOMEM;
			return;
		}
		g = &s->guards[s->n_guards++];
		memset(g, 0, sizeof(*g));
		snprintf(g->ns, sizeof(g->ns), "%s", ns);
	}
	acct_guard_stamp(s->want->cfg, ns, stamp);
	g->n_rules[dir]++;
	g->stamped[dir] += comment && strcmp(comment, stamp) == 0;
}

/* Both chains of the namespace hold what cfg asks, each rule with its stamp. */
static bool guard_right(const struct acct_config *cfg, const struct guard_seen *g)
{
	for (int d = 0; d < ACCT_DIRS; d++)
		if (g->n_rules[d] != acct_guard_rules_wanted(cfg, g->ns, (enum acct_dir)d) ||
		    g->stamped[d] != g->n_rules[d])
			return false;
	return true;
}

/*
 * Every namespace of `all` has its guard chain as cfg asks: made where it
 * is missing, rewritten where its rules were made for other limits. Each
 * namespace once, however many pods it has.
 */
static int put_guards(struct acct_batch *bt, const struct acct_config *cfg,
		      const struct acct_pod *all, size_t n_all, const struct seen *s,
		      struct acct_repairs *rep)
{
	int r = 0;

	for (size_t i = 0; i < n_all && r == 0; i++) {
		const char *ns = all[i].k8s_namespace ? all[i].k8s_namespace : "";
		const struct guard_seen *g;
		bool done = false;

		for (size_t j = 0; j < i && !done; j++)
			done = strcmp(all[j].k8s_namespace ? all[j].k8s_namespace : "", ns) == 0;
		if (done)
			continue;
		g = guard_find(s, ns);
		if (g && guard_right(cfg, g))
			continue;
		r = acct_guard_put_chain(bt, cfg, ns, false, g != NULL);
		rep->chains += g == NULL;
		rep->rules++;
	}
	return r;
}

/* Only a rule's chain and comment are read: no expression is parsed. */
static int rule_cb(const struct nlmsghdr *nlh, void *p)
{
	struct seen *s = p;
	const struct nlattr *a;
	const char *comment = NULL, *chain = NULL;
	char text[64] = "";
	int c = -1;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		uint16_t t = mnl_attr_get_type(a);

		if (t == NFTA_RULE_CHAIN && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0) {
			chain = mnl_attr_get_str(a);
			c = chain_index(chain);
		} else if (t == NFTA_RULE_USERDATA)
			comment =
				acct_udata_comment(a, NFTNL_UDATA_RULE_COMMENT, text, sizeof(text))
					? text
					: NULL;
	}
	/* guard_in_<ns> before guard_<ns>: a namespace has no '_' */
	if (c < 0 && chain &&
	    strncmp(chain, ACCT_CHAIN_GUARD_IN_PREFIX, strlen(ACCT_CHAIN_GUARD_IN_PREFIX)) == 0)
		guard_rule_seen(s, chain + strlen(ACCT_CHAIN_GUARD_IN_PREFIX), ACCT_DIR_INGRESS,
				comment);
	else if (c < 0 && chain &&
		 strncmp(chain, ACCT_CHAIN_GUARD_PREFIX, strlen(ACCT_CHAIN_GUARD_PREFIX)) == 0)
		guard_rule_seen(s, chain + strlen(ACCT_CHAIN_GUARD_PREFIX), ACCT_DIR_EGRESS,
				comment);
	if (c >= 0) {
		s->chain[c] = true;
		s->n_rules[c]++;
		if (comment && strcmp(comment, s->want->stamp[c]) == 0)
			s->stamped[c]++;
	}
	return MNL_CB_OK;
}

static int name_cb(const struct nlmsghdr *nlh, void *p)
{
	struct seen *s = p;
	const struct nlattr *a;
	int i;

	/* Chains and sets both carry their name right after the table's. */
	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		uint16_t t = mnl_attr_get_type(a);

		if (nlh->nlmsg_type == ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN) &&
		    t == NFTA_CHAIN_NAME && (i = chain_index(mnl_attr_get_str(a))) >= 0)
			s->chain[i] = true;
		if (nlh->nlmsg_type == ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN) &&
		    t == NFTA_CHAIN_NAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
		    strcmp(mnl_attr_get_str(a), ACCT_CHAIN_PREROUTING_OLD) == 0)
			s->old_prerouting = true;
		if (nlh->nlmsg_type == ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSET) &&
		    t == NFTA_SET_NAME && (i = set_index(mnl_attr_get_str(a))) >= 0)
			s->set[i] = true;
	}
	return MNL_CB_OK;
}

static int bound_cb(struct nftnl_set_elem *el, void *p)
{
	struct seen *s = p;
	uint32_t len = 0, be;
	const void *key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &len);
	uint32_t flags = nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_FLAGS)
				 ? nftnl_set_elem_get_u32(el, NFTNL_SET_ELEM_FLAGS)
				 : 0;

	if (s->n_bounds > ACCT_TABLE_BOUNDS_MAX)
		return 0;
	if (!key || len != 4) {
		s->n_bounds = ACCT_TABLE_BOUNDS_MAX + 1; /* not ours: replace */
		return 0;
	}
	memcpy(&be, key, 4);
	s->bounds[s->n_bounds++] =
		(struct acct_bound){ ntohl(be), (flags & NFT_SET_ELEM_INTERVAL_END) != 0 };
	return 0;
}

static int bounds_elems_cb(const struct nlmsghdr *nlh, void *p)
{
	struct nftnl_set *set = nftnl_set_alloc();

	if (!set)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, set) == 0)
		nftnl_set_elem_foreach(set, bound_cb, p);
	nftnl_set_free(set);
	return MNL_CB_OK;
}

/* One dump of the table's objects of a kind; -ENOENT when the table is missing. */
static int dump_objects(struct acct_nft_conn *c, uint16_t type, const char *set, mnl_cb_t cb,
			struct seen *s)
{
	char buf[ACCT_NFT_RECV_SIZE] = { 0 };
	struct nlmsghdr *nlh =
		nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, NLM_F_DUMP | NLM_F_ACK, 1);
	int r;

	if (type == NFT_MSG_GETSETELEM) {
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, ACCT_TABLE);
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
	} else {
		/* NFTA_RULE_TABLE, NFTA_CHAIN_TABLE and NFTA_SET_TABLE are all attribute 1 */
		mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, ACCT_TABLE);
	}
	r = acct_nft_request(c, buf, sizeof(buf), cb, s);
	return r < 0 && s->err ? s->err : r;
}

static bool bound_less(const struct acct_bound *a, const struct acct_bound *b)
{
	return a->key != b->key ? a->key < b->key : a->end < b->end;
}

static void bounds_sort(struct acct_bound *b, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && bound_less(&b[j], &b[j - 1]); j--) {
			struct acct_bound t = b[j];

			b[j] = b[j - 1];
			b[j - 1] = t;
		}
}

static bool rules_right_in(const struct want *w, const struct seen *s, int c)
{
	return s->n_rules[c] == w->n_rules[c] && s->stamped[c] == w->n_rules[c];
}

/* A chain holding what it should (an empty one is present: a rule names it). */
static bool chain_right(const struct want *w, const struct seen *s, int c)
{
	return rules_right_in(w, s, c) && (s->chain[c] || w->n_rules[c] == 0);
}

static bool internal_right(const struct want *w, struct seen *s)
{
	struct acct_bound want[ACCT_TABLE_BOUNDS_MAX];

	if (s->n_bounds != w->n_bounds)
		return false;
	memcpy(want, w->bounds, w->n_bounds * sizeof(*want));
	bounds_sort(want, w->n_bounds);
	bounds_sort(s->bounds, s->n_bounds);
	for (size_t i = 0; i < w->n_bounds; i++)
		if (want[i].key != s->bounds[i].key || want[i].end != s->bounds[i].end)
			return false;
	return true;
}

static bool rules_seen(const struct seen *s)
{
	for (int i = 0; i < ACCT_TABLE_CHAINS; i++)
		if (s->n_rules[i])
			return true;
	return false;
}

static void build_gettable(struct nlmsghdr *nlh, const void *unused)
{
	(void)unused;
	mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, ACCT_TABLE);
}

/*
 * Reads what the comparison needs: the rules (whose stamps say whether every
 * chain and the sets they name exist), the set `internal`, and only when
 * something is off the chains and sets themselves.
 */
static int read_kernel(struct acct_nft_conn *c, const struct want *w, struct seen *s)
{
	bool rules_right = true;
	int r;

	free(s->guards); /* a read again, after an interrupted dump */
	memset(s, 0, sizeof(*s));
	s->want = w;
	r = acct_arp_read(c, w->cfg);
	if (r < 0)
		return r;
	s->arp_right = r == 1;
	r = dump_objects(c, NFT_MSG_GETRULE, NULL, rule_cb, s);
	if (r == 0 && !rules_seen(s))
		/* A dump names no table that is missing: ask for the table itself. */
		r = acct_nft_get(c, NFT_MSG_GETTABLE, build_gettable, NULL);
	if (r == -ENOENT)
		return 0; /* no table: everything is missing */
	if (r < 0)
		return r;
	s->table = true;
	for (int i = 0; i < ACCT_TABLE_CHAINS; i++)
		rules_right = rules_right && chain_right(w, s, i);
	r = dump_objects(c, NFT_MSG_GETSETELEM, ACCT_SET_INTERNAL, bounds_elems_cb, s);
	if (r < 0 && r != -ENOENT)
		return r;
	if (rules_right && r == 0)
		return 0;
	s->n_bounds = r == -ENOENT ? 0 : s->n_bounds;
	r = dump_objects(c, NFT_MSG_GETCHAIN, NULL, name_cb, s);
	if (r == 0)
		r = dump_objects(c, NFT_MSG_GETSET, NULL, name_cb, s);
	s->chains_read = s->sets_read = r == 0;
	return r == -ENOENT ? 0 : r;
}

/* ---- writing the difference ---- */

static int put_old_prerouting_removal(struct acct_batch *bt)
{
	static const struct acct_chain_def old = { ACCT_CHAIN_PREROUTING_OLD, NULL, 0, 0 };

	/* its rules first, then the chain, in this order in the batch */
	int r = acct_table_flush_chain(bt, old.name);

	return r | acct_table_chain_msg(bt, &old, NFT_MSG_DELCHAIN, 0);
}

static int put_difference(struct acct_batch *bt, const struct acct_config *cfg,
			  const struct want *w, struct seen *s, struct acct_repairs *rep,
			  bool *ret_access_redo)
{
	bool rules_right = true, sets_right = true, redo[ACCT_TABLE_CHAINS];
	int r = 0;

	if (!s->arp_right) {
		r |= acct_arp_put(bt, cfg);
		rep->rules++;
	}

	if (!s->table) {
		struct nftnl_table *t = nftnl_table_alloc();
		struct nlmsghdr *nlh;

		if (!t)
			return -ENOMEM;
		nftnl_table_set_str(t, NFTNL_TABLE_NAME, ACCT_TABLE);
		nlh = acct_batch_msg(bt, NFT_MSG_NEWTABLE, NLM_F_CREATE);
		nftnl_table_nlmsg_build_payload(nlh, t);
		nftnl_table_free(t);
		acct_batch_next(bt);
		rep->table++;
	}
	for (int i = 0; i < ACCT_TABLE_CHAINS; i++)
		rules_right = rules_right && chain_right(w, s, i);
	for (int i = 0; i < ACCT_TABLE_SETS; i++) {
		if (s->table && (rules_right || s->set[i]))
			continue;
		r |= acct_table_put_set(bt, &acct_table_sets[i]);
		rep->sets++;
		sets_right = false;
	}
	if (!rules_right)
		r |= acct_table_put_host_counters(bt);
	/* Chains first: a rule may jump to a chain that comes later. */
	for (int c = 0; c < ACCT_TABLE_CHAINS; c++) {
		/* Unread (every rule was right) means present. */
		bool exists = s->chain[c] || (s->table && !s->chains_read);

		redo[c] = !exists || !rules_right_in(w, s, c);
		if (!exists) {
			r |= acct_table_put_chain(bt, &acct_table_chains[c]);
			rep->chains++;
		} else if (redo[c] && s->n_rules[c]) {
			r |= acct_table_flush_chain(bt, acct_table_chains[c].name);
		}
	}
	/* The chain an older layout hooked at -150: gone in the batch its successor comes in. */
	if (s->old_prerouting) {
		r |= put_old_prerouting_removal(bt);
		rep->chains++;
	}
	*ret_access_redo = redo[chain_index(ACCT_CHAIN_TO_CLOUD)] ||
			   redo[chain_index(ACCT_CHAIN_TO_AGENT)] ||
			   redo[chain_index(ACCT_CHAIN_TO_SERVICE)];
	for (int c = 0; c < ACCT_TABLE_CHAINS; c++) {
		if (!redo[c])
			continue;
		for (size_t i = 0; i < w->rules.n; i++)
			if (chain_index(nftnl_rule_get_str(w->rules.r[i], NFTNL_RULE_CHAIN)) == c)
				r |= acct_table_put_rule(bt, w->rules.r[i]);
		rep->rules += w->n_rules[c];
	}
	if (!sets_right || !internal_right(w, s)) {
		if (s->table && s->n_bounds)
			acct_table_flush_set(bt, ACCT_SET_INTERNAL);
		r |= acct_table_put_internal(bt, cfg);
		rep->internal++;
	}
	return r ? -ENOMEM : sets_right ? 0 : 1;
}

static unsigned repairs_total(const struct acct_repairs *rep)
{
	return rep->table + rep->sets + rep->chains + rep->rules + rep->internal;
}

/* What a comparison built and read, either of them NULL. */
static void want_seen_free(struct want *w, struct seen *s)
{
	if (w)
		acct_rule_list_free(&w->rules);
	free(w);
	if (s)
		free(s->guards);
	free(s);
}

int acct_declare(const struct acct_config *cfg, const struct acct_pod *all, size_t n_all,
		 unsigned flags, struct acct_repairs *ret, struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct acct_repairs rep = { 0 };
	struct acct_batch *bt = NULL;
	struct want *w = calloc(1, sizeof(*w));
	struct seen *s = calloc(1, sizeof(*s));
	char why[256] = "";
	bool access_redo = false;
	int r, lost;

	if (!w || !s || want_build(cfg, w, true) < 0) {
		r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		goto out;
	}
	r = acct_nft_open(&c, n_all * ACCT_BATCH_PER_POD, e);
	if (r < 0)
		goto out;
	r = read_kernel(&c, w, s);
	/*
	 * A commit anywhere in the netns during a dump (an ADD's, a DEL's)
	 * interrupts it (NLM_F_DUMP_INTR): read again, on a fresh socket, since
	 * the rest of the interrupted dump may still be queued on this one.
	 */
	for (int tries = 1; r == -EINTR && tries < READ_TRIES; tries++) {
		acct_nft_close(&c);
		r = acct_nft_open(&c, n_all * ACCT_BATCH_PER_POD, e);
		if (r < 0)
			goto out;
		r = read_kernel(&c, w, s);
	}
	if (r < 0) {
		r = acct_nft_fail(e, r, "reading table inet " ACCT_TABLE, "");
		goto out;
	}
	bt = acct_batch_new(2 * (ACCT_BATCH_BASE + n_all * ACCT_BATCH_PER_POD));
	if (!bt) {
		r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		goto out;
	}
	acct_batch_start(bt);
	lost = put_difference(bt, cfg, w, s, &rep, &access_redo);
	r = lost < 0 ? lost : 0;
	/*
	 * Who nodeAccess lets through follows the config's lists: when they
	 * changed (to_cloud, to_agent or to_service redone), or every pod goes back in
	 * anyway, the allowed sets are made again from the store in this batch.
	 */
	if (r == 0 && lost == 0 && (access_redo || (flags & ACCT_DECLARE_PODS))) {
		acct_table_flush_set(bt, ACCT_SET_METADATA_OK);
		acct_table_flush_set(bt, ACCT_SET_AGENT_OK);
		acct_table_flush_set(bt, ACCT_SET_SERVICE_OK);
		for (size_t i = 0; i < n_all && r == 0 && !(flags & ACCT_DECLARE_PODS); i++)
			r = acct_put_pod_access(bt, cfg, &all[i]);
	}
	if (r == 0 && cfg->guard.on)
		r = put_guards(bt, cfg, all, n_all, s, &rep);
	/* Sets made anew lost their elements: every pod goes back in, from the store. */
	if (r == 0 && (lost > 0 || (flags & ACCT_DECLARE_PODS))) {
		/*
		 * A kept @ingress_class may hold another class than a record's
		 * (a NEWSETELEM of another value fails the batch): it is made
		 * again from the store in this transaction, strays gone too.
		 */
		if (s->table)
			acct_table_flush_set(bt, ACCT_MAP_INGRESS_CLASS);
		for (size_t i = 0; i < n_all && r == 0; i++) {
			r = acct_put_pod(bt, cfg, &all[i]);
			/* the store's mappings win over any element left in a map that was kept */
			if (r == 0)
				r = acct_hostport_put(bt, NFT_MSG_NEWSETELEM, &all[i], true);
		}
	}
	if (r == 0 && (repairs_total(&rep) || (flags & ACCT_DECLARE_PODS && n_all)))
		r = acct_batch_send(&c, bt, why, sizeof(why));
	if (r < 0)
		r = acct_nft_fail(e, r, "declaring table inet " ACCT_TABLE, why);
out:
	if (ret)
		*ret = rep;
	acct_batch_free(bt);
	acct_nft_close(&c);
	want_seen_free(w, s);
	return r < 0 ? r : repairs_total(&rep) > 0;
}

int acct_declared(const struct acct_config *cfg)
{
	struct acct_nft_conn c = { 0 };
	struct want *w = calloc(1, sizeof(*w));
	struct seen *s = calloc(1, sizeof(*s));
	bool right = true;
	int r;

	if (!w || !s || want_build(cfg, w, false) < 0) {
		r = -ENOMEM;
		goto out;
	}
	r = acct_nft_open(&c, 0, NULL);
	if (r == 0)
		r = read_kernel(&c, w, s);
	acct_nft_close(&c);
	if (r < 0)
		goto out;
	for (int i = 0; i < ACCT_TABLE_CHAINS; i++)
		right = right && chain_right(w, s, i);
	r = s->table && right && internal_right(w, s) && s->arp_right && !s->old_prerouting;
out:
	want_seen_free(w, s);
	return r;
}
