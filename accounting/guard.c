// SPDX-License-Identifier: Apache-2.0
/*
 * internetGuard in table inet tollgate: each namespace's chains
 * guard_<namespace> and guard_in_<namespace>, its refused-connection
 * counters and destination sets, and the pods' elements of @guard_ns and
 * @guard_in that lead there, with the rules of the chains and of the jumps
 * (see internal.h for who writes what, when).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>

#include "accounting/internal.h"
#include "lib/util.h"

void acct_guard_chain_name(const char *k8s_namespace, enum acct_dir dir,
			   char ret[ACCT_GUARD_CHAIN_MAX])
{
	snprintf(ret, ACCT_GUARD_CHAIN_MAX, "%s%s",
		 dir == ACCT_DIR_INGRESS ? ACCT_CHAIN_GUARD_IN_PREFIX : ACCT_CHAIN_GUARD_PREFIX,
		 k8s_namespace);
}

void acct_guard_stamp(const struct acct_config *cfg, const char *k8s_namespace,
		      char ret[ACCT_GUARD_STAMP_LEN])
{
	const struct acct_destinations *d = &cfg->guard.dst;
	uint32_t limits[7] = { acct_guard_concurrent(&cfg->guard, k8s_namespace),
			       cfg->guard.new_per_second,
			       d->on,
			       d->on ? d->prefix_len : 0,
			       d->on ? d->tracked : 0,
			       d->on ? d->top : 0,
			       cfg->access.ns_connections };
	uint64_t h = hash_fnv1a64(ACCT_TABLE_LAYOUT, strlen(ACCT_TABLE_LAYOUT), FNV1A64_INIT);

	h = hash_fnv1a64(ACCT_CHAIN_GUARD_PREFIX, strlen(ACCT_CHAIN_GUARD_PREFIX), h);
	h = hash_fnv1a64(limits, sizeof(limits), h);
	snprintf(ret, ACCT_GUARD_STAMP_LEN, "tollgate:%016llx", (unsigned long long)h);
}

/* A guard chain's message: a regular chain, reached by jump */
static int put_chain_msg(struct acct_batch *bt, const char *name, uint16_t msg, uint16_t flags)
{
	const struct acct_chain_def d = { name, NULL, 0, 0 };

	return acct_table_chain_msg(bt, &d, msg, flags);
}

int acct_guard_put_chain(struct acct_batch *bt, const struct acct_config *cfg,
			 const char *k8s_namespace, bool exclusive, bool rewrite)
{
	char chain[ACCT_GUARD_CHAIN_MAX], stamp[ACCT_GUARD_STAMP_LEN], name[ACCT_COUNTER_NAME_MAX];
	struct acct_rule_list rules[ACCT_DIRS];
	int r = 0;

	acct_guard_stamp(cfg, k8s_namespace, stamp);
	for (int d = 0; d < ACCT_DIRS; d++)
		if (acct_guard_rules(cfg, k8s_namespace, (enum acct_dir)d, stamp, &rules[d]) < 0) {
			if (d)
				acct_rule_list_free(&rules[0]);
			return -ENOMEM;
		}
	/*
	 * The rules count into these: they exist before the first rule that
	 * names them. The internet limits' only with internetGuard.connections
	 * (the exporter's gauge of a namespace's connections follows them).
	 */
	for (int w = 0; w < ACCT_REFUSALS; w++) {
		if (w == ACCT_REFUSED_CEILING ? !cfg->access.ns_connections : !cfg->guard.limits)
			continue;
		acct_refused_counter_name(k8s_namespace, (enum acct_refusal)w, name);
		r |= acct_put_counter(bt, name);
	}
	for (int d = 0; d < ACCT_DIRS; d++) {
		acct_guard_chain_name(k8s_namespace, (enum acct_dir)d, chain);
		/* the egress chain is the unit's mark: whoever makes it makes the rest */
		r |= put_chain_msg(bt, chain, NFT_MSG_NEWCHAIN,
				   NLM_F_CREATE | (exclusive && !rewrite && d == ACCT_DIR_EGRESS
							   ? NLM_F_EXCL
							   : 0));
		if (rewrite)
			r |= acct_table_flush_chain(bt, chain);
	}
	/* Sets made for other limits or a prefix length of old: made anew (no rule names them now). */
	for (int d = 0; d < ACCT_DIRS; d++) {
		if (rewrite)
			r |= acct_dst_put_set(bt, cfg, k8s_namespace, (enum acct_dir)d,
					      NFT_MSG_DESTROYSET);
		if (cfg->guard.dst.on)
			r |= acct_dst_put_set(bt, cfg, k8s_namespace, (enum acct_dir)d,
					      NFT_MSG_NEWSET);
	}
	for (int d = 0; d < ACCT_DIRS; d++) {
		for (size_t i = 0; i < rules[d].n; i++)
			r |= acct_table_put_rule(bt, rules[d].r[i]);
		acct_rule_list_free(&rules[d]);
	}
	return r ? -ENOMEM : 0;
}

int acct_guard_put_removal(struct acct_batch *bt, const char *k8s_namespace, bool destroy, int only)
{
	char chain[ACCT_GUARD_CHAIN_MAX];
	int r = 0;

	/* The chains' rules go with them, and with them what holds the sets and counters. */
	for (int d = 0; d < ACCT_DIRS; d++) {
		if (only >= 0 && only != d)
			continue;
		acct_guard_chain_name(k8s_namespace, (enum acct_dir)d, chain);
		r |= put_chain_msg(bt, chain, destroy ? NFT_MSG_DESTROYCHAIN : NFT_MSG_DELCHAIN, 0);
	}
	for (int d = 0; d < ACCT_DIRS; d++)
		if (only < 0 || only == ACCT_DIRS + d)
			r |= acct_dst_put_set(bt, NULL, k8s_namespace, (enum acct_dir)d,
					      destroy ? NFT_MSG_DESTROYSET : NFT_MSG_DELSET);
	return r ? -ENOMEM : 0;
}

/* @guard_ns or @guard_in with the pod's element (its key; with `jump`, the jump to its namespace's chain) */
static struct nftnl_set *guard_elem(const struct acct_pod *p, enum acct_dir dir, bool jump)
{
	struct nftnl_set *s =
		acct_set_ref(dir == ACCT_DIR_INGRESS ? ACCT_MAP_GUARD_IN : ACCT_MAP_GUARD);
	struct nftnl_set_elem *el = nftnl_set_elem_alloc();
	char chain[ACCT_GUARD_CHAIN_MAX];
	uint32_t key = htonl(p->ip);

	if (!s || !el) {
		if (s)
			nftnl_set_free(s);
		if (el)
			nftnl_set_elem_free(el);
		return NULL;
	}
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, &key, sizeof(key));
	if (jump) {
		acct_guard_chain_name(p->k8s_namespace ? p->k8s_namespace : "", dir, chain);
		nftnl_set_elem_set_u32(el, NFTNL_SET_ELEM_VERDICT, NFT_JUMP);
		nftnl_set_elem_set_str(el, NFTNL_SET_ELEM_CHAIN, chain);
	}
	nftnl_set_elem_add(s, el);
	return s;
}

int acct_guard_put_elem(struct acct_batch *bt, uint16_t type, const struct acct_pod *p, int only)
{
	for (int d = 0; d < ACCT_DIRS; d++) {
		struct nftnl_set *s;
		struct nlmsghdr *nlh;

		if (only >= 0 && only != d)
			continue;
		s = guard_elem(p, (enum acct_dir)d, type == NFT_MSG_NEWSETELEM);
		if (!s)
			return -ENOMEM;
		/* REPLACE: an address taken over by a pod of another namespace jumps to that one's chain */
		nlh = acct_batch_msg(bt, type,
				     type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE | NLM_F_REPLACE : 0);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		acct_batch_next(bt);
	}
	return 0;
}

static void build_getchain(struct nlmsghdr *nlh, const void *arg)
{
	mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, ACCT_TABLE);
	mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, arg);
}

int acct_guard_chain_exists(struct acct_nft_conn *c, const char *k8s_namespace)
{
	char chain[ACCT_GUARD_CHAIN_MAX];
	int r;

	acct_guard_chain_name(k8s_namespace, ACCT_DIR_EGRESS, chain);
	r = acct_nft_get(c, NFT_MSG_GETCHAIN, build_getchain, chain);
	return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

struct elem_seen {
	const char *want;
	bool right;
};

static int verdict_cb(struct nftnl_set_elem *el, void *p)
{
	struct elem_seen *s = p;
	const char *chain = nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_CHAIN)
				    ? nftnl_set_elem_get_str(el, NFTNL_SET_ELEM_CHAIN)
				    : NULL;

	s->right = nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_VERDICT) &&
		   (int)nftnl_set_elem_get_u32(el, NFTNL_SET_ELEM_VERDICT) == NFT_JUMP && chain &&
		   strcmp(chain, s->want) == 0;
	return 0;
}

static int verdict_elems_cb(const struct nlmsghdr *nlh, void *p)
{
	return acct_foreach_elem(nlh, verdict_cb, p);
}

int acct_guard_elem_right(struct acct_nft_conn *c, const struct acct_pod *p)
{
	int r = 1;

	for (int d = 0; d < ACCT_DIRS && r == 1; d++) {
		char buf[ACCT_NFT_RECV_SIZE] = { 0 }, chain[ACCT_GUARD_CHAIN_MAX];
		struct nlmsghdr *nlh =
			nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_ACK, 1);
		struct nftnl_set *s = guard_elem(p, (enum acct_dir)d, false);
		struct elem_seen seen = { .want = chain };

		if (!s)
			return -ENOMEM;
		acct_guard_chain_name(p->k8s_namespace ? p->k8s_namespace : "", (enum acct_dir)d,
				      chain);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		r = acct_nft_request(c, buf, sizeof(buf), verdict_elems_cb, &seen);
		r = r == -ENOENT ? 0 : r < 0 ? r : seen.right;
	}
	return r;
}

/* ---- the rules ---- */

/*
 * Past the internal branch: in fwd_egress `[ct state new] ip saddr vmap
 * @guard_ns` (every packet with destinations, only a connection's first
 * without), in fwd_ingress `ip daddr vmap @guard_in`.
 */
static struct nftnl_rule *guard_jump_rule(enum acct_dir dir, bool only_new)
{
	bool in = dir == ACCT_DIR_INGRESS;
	struct nftnl_rule *r = acct_rule_new(in ? ACCT_CHAIN_FWD_INGRESS : ACCT_CHAIN_FWD_EGRESS);

	if (!r)
		return NULL;
	if (only_new)
		acct_match_ct_new(r);
	acct_rule_add(r, acct_expr_ip(in ? 16 : 12));
	acct_rule_add(
		r,
		in ? acct_expr_map(ACCT_MAP_GUARD_IN, ACCT_ID_GUARD_IN, NFT_REG_1, NFT_REG_VERDICT)
		   : acct_expr_map(ACCT_MAP_GUARD, ACCT_ID_GUARD, NFT_REG_1, NFT_REG_VERDICT));
	return r;
}

/*
 * With a ceiling, before anything counts: in fwd_egress_internal `ct state
 * new ip saddr vmap @guard_ns`, in input the same for what comes from a
 * pod's link. With the internet's jump from fwd_egress, every new
 * connection of a pod reaches its namespace's guard chain once, whatever
 * its destination; an internal packet of an established one pays a ct
 * state compare, no lookup.
 */
static struct nftnl_rule *guard_new_jump_rule(const char *chain, const char *prefix)
{
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	if (prefix)
		acct_match_pod_link(r, prefix);
	acct_match_ct_new(r);
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_map(ACCT_MAP_GUARD, ACCT_ID_GUARD, NFT_REG_1, NFT_REG_VERDICT));
	return r;
}

/*
 * In guard-refuse: `meta l4proto tcp reject with tcp reset` (tcp), else
 * `reject with icmpx admin-prohibited`: the client's connect fails at once.
 */
static struct nftnl_rule *refuse_rule(bool tcp)
{
	struct nftnl_rule *r = acct_rule_new_any(ACCT_CHAIN_GUARD_REFUSE);
	uint8_t proto = IPPROTO_TCP;

	if (!r)
		return NULL;
	if (tcp) {
		acct_rule_add(r, acct_expr_meta(NFT_META_L4PROTO));
		acct_rule_add(r, acct_expr_cmp_eq(&proto, sizeof(proto)));
	}
	acct_rule_add(r, acct_expr_reject(tcp ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH,
					  tcp ? 0 : NFT_REJECT_ICMPX_ADMIN_PROHIBITED));
	return r;
}

/*
 * [ct state new] <over> counter name "ns_<namespace>_refused_<why>" goto
 * guard-refuse (takes over); ct state new where every packet comes here.
 */
static struct nftnl_rule *refusal_rule(const char *chain, bool only_new, struct nftnl_expr *over,
				       const char *k8s_namespace, enum acct_refusal why)
{
	struct nftnl_rule *r = acct_rule_new_any(chain);
	char name[ACCT_COUNTER_NAME_MAX];

	/* without its match the rule would refuse every connection: none at all */
	if (!r || !over) {
		if (r)
			nftnl_rule_free(r);
		if (over)
			nftnl_expr_free(over);
		return NULL;
	}
	if (only_new)
		acct_match_ct_new(r);
	acct_rule_add(r, over);
	acct_refused_counter_name(k8s_namespace, why, name);
	acct_rule_add(r, acct_expr_counter(name));
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_GUARD_REFUSE));
	return r;
}

/* update @dst_<namespace>_<dir> { ip daddr|saddr & mask }: the set's counter takes the packet */
static struct nftnl_rule *destination_rule(const char *chain, const struct acct_destinations *d,
					   const char *k8s_namespace, enum acct_dir dir)
{
	struct nftnl_rule *r = acct_rule_new_any(chain);
	uint32_t mask = d->prefix_len ? htonl(~0u << (32 - d->prefix_len)) : 0;
	char set[ACCT_COUNTER_NAME_MAX];

	if (!r)
		return NULL;
	acct_dst_set_name(k8s_namespace, dir, set);
	/* the outside end: where egress goes, where ingress comes from */
	acct_rule_add(r, acct_expr_ip(dir == ACCT_DIR_EGRESS ? 16 : 12));
	if (d->prefix_len < 32)
		acct_rule_add(r, acct_expr_bitwise32(mask, 0));
	acct_rule_add(r, acct_expr_dynset_update(set));
	return r;
}

unsigned acct_guard_rules_wanted(const struct acct_config *cfg, const char *k8s_namespace,
				 enum acct_dir dir)
{
	const struct acct_guard *g = &cfg->guard;
	unsigned n = 1 + g->dst.on; /* return, the destination's update */

	if (dir == ACCT_DIR_EGRESS && cfg->access.ns_connections)
		n += 3; /* the ceiling, and the internal and local destinations' returns */
	if (dir == ACCT_DIR_EGRESS && g->limits)
		n += (g->new_per_second != 0) + (acct_guard_concurrent(g, k8s_namespace) != 0);
	return n;
}

int acct_guard_rules(const struct acct_config *cfg, const char *k8s_namespace, enum acct_dir dir,
		     const char *stamp, struct acct_rule_list *list)
{
	const struct acct_guard *g = &cfg->guard;
	uint32_t concurrent = acct_guard_concurrent(g, k8s_namespace);
	char chain[ACCT_GUARD_CHAIN_MAX];
	struct nftnl_rule *r;
	struct nftnl_expr *ex;
	int err = 0;

	list->n = 0;
	list->failed = false;
	acct_guard_chain_name(k8s_namespace, dir, chain);
	/*
	 * The ceiling first, over every new connection of the namespace's pods
	 * (fwd_egress_internal and input jump here with it, as fwd_egress
	 * does); then only what goes to the internet meets the rest.
	 */
	if (dir == ACCT_DIR_EGRESS && cfg->access.ns_connections) {
		ex = acct_expr_count_over(cfg->access.ns_connections);
		err |= acct_rule_list_add(list, refusal_rule(chain, true, ex, k8s_namespace,
							     ACCT_REFUSED_CEILING));
		r = acct_rule_new(chain);
		if (r) {
			acct_rule_add(r, acct_expr_ip(16));
			acct_rule_add(r,
				      acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
			acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
		}
		err |= acct_rule_list_add(list, r);
		r = acct_rule_new(chain);
		if (r) {
			acct_match_local(r);
			acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
		}
		err |= acct_rule_list_add(list, r);
	}
	/* Rate first: a connection it refuses never enters the count. */
	if (dir == ACCT_DIR_EGRESS && g->limits && g->new_per_second) {
		/* limit rate over R/second burst R packets */
		ex = acct_expr_limit_over(g->new_per_second, g->new_per_second);
		err |= acct_rule_list_add(list, refusal_rule(chain, g->dst.on, ex, k8s_namespace,
							     ACCT_REFUSED_RATE));
	}
	if (dir == ACCT_DIR_EGRESS && g->limits && concurrent) {
		/* ct count over N: this connection included, more than N */
		ex = acct_expr_count_over(concurrent);
		err |= acct_rule_list_add(list, refusal_rule(chain, g->dst.on, ex, k8s_namespace,
							     ACCT_REFUSED_CONCURRENT));
	}
	/*
	 * Past every refusal: the set counts only what the namespace's counter
	 * counts too. A full set fails the update, and the packet goes on.
	 */
	if (g->dst.on)
		err |= acct_rule_list_add(list,
					  destination_rule(chain, &g->dst, k8s_namespace, dir));
	/* A chain of a namespace without limits still holds a rule: the stamp lives on rules. */
	r = acct_rule_new_any(chain);
	if (r)
		acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
	err |= acct_rule_list_add(list, r);
	for (size_t i = 0; i < list->n && !err; i++)
		err = acct_rule_comment(list->r[i], stamp);
	if (err || list->failed) {
		acct_rule_list_free(list);
		return -ENOMEM;
	}
	return 0;
}

int acct_guard_jump_rules(struct acct_rule_list *list, const struct acct_config *cfg)
{
	int r = 0;

	r |= acct_rule_list_add(list, guard_jump_rule(ACCT_DIR_EGRESS, !cfg->guard.dst.on));
	if (cfg->guard.dst.on)
		r |= acct_rule_list_add(list, guard_jump_rule(ACCT_DIR_INGRESS, false));
	/*
	 * The node's conntrack table: a namespace's new internal and
	 * local connections pass its guard chain too, whose first rule
	 * is the ceiling (they return before its internet limits).
	 */
	if (cfg->access.ns_connections) {
		r |= acct_rule_list_add(list,
					guard_new_jump_rule(ACCT_CHAIN_FWD_EGRESS_INTERNAL, NULL));
		r |= acct_rule_list_add(list, guard_new_jump_rule("input", cfg->pod_link_prefix));
	}
	r |= acct_rule_list_add(list, refuse_rule(true));
	r |= acct_rule_list_add(list, refuse_rule(false));
	return r ? -ENOMEM : 0;
}
