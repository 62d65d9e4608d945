// SPDX-License-Identifier: Apache-2.0
/*
 * The rules of table `inet tollgate` for a config, in chain order: the
 * marks, the classification and counting of pods' traffic, the shaper's
 * classes and the masquerade here, each feature's own rules from its file
 * (antispoof.c, access.c, guard.c, hostports.c); compared with the
 * kernel's and written by declare.c (the chains they live in and the sets
 * they look up: table.c).
 */
#include <errno.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/rule.h>

#include "accounting/internal.h"
#include "lib/util.h"

/* `iif lo return` / `oif lo return`: loopback is neither internal nor internet traffic. */
static struct nftnl_rule *skip_loopback(const char *chain, uint32_t meta_key)
{
	struct nftnl_rule *r = acct_rule_new(chain);
	uint32_t lo = 1; /* the loopback device is ifindex 1 in every namespace */

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_meta(meta_key));
	acct_rule_add(r, acct_expr_cmp_eq(&lo, sizeof(lo)));
	acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
	return r;
}

/*
 * A counting rule: classify on one address against @internal (class_off 0:
 * the chain already did), then count into the object that a map keyed by the
 * other (pod) address names, or into a named host counter.
 */
static struct nftnl_rule *count_rule(const char *chain, uint32_t class_off, bool internet,
				     uint32_t key_off, const char *map, uint32_t map_id,
				     const char *named)
{
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	if (class_off) {
		acct_rule_add(r, acct_expr_ip(class_off));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, internet));
	}
	if (map) {
		acct_rule_add(r, acct_expr_ip(key_off));
		acct_rule_add(r, acct_expr_objref_map(map, map_id));
	} else {
		acct_rule_add(r, acct_expr_counter(named));
	}
	return r;
}

/*
 * ip daddr != @internal meta mark set meta mark | M: (mark & ~M) ^ M sets M
 * and keeps every other bit.
 */
static struct nftnl_rule *mark_rule(const char *chain, uint32_t mark)
{
	struct nftnl_rule *r = acct_rule_new(chain);
	uint32_t mask = ~mark, xor = mark;

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, true));
	acct_rule_add(r, acct_expr_meta(NFT_META_MARK));
	acct_rule_add(r, acct_expr_bitwise32(mask, xor));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_MARK));
	return r;
}

/* In fwd_ingress (source not internal): ip daddr @pods meta priority set <the pods' internet ingress class> */
static struct nftnl_rule *inet_ingress_class_rule(uint32_t classid)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_FWD_INGRESS);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_PODS, ACCT_ID_PODS, false));
	acct_rule_add(r, acct_expr_immediate32(classid));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_PRIORITY));
	return r;
}

/*
 * In fwd_ingress, after inet_ingress_class_rule: `meta priority set ip daddr
 * map @ingress_class meta mark set meta mark | M`. A pod without an element
 * stops the rule at the lookup: neither is set. Priority and mark come from
 * one element, so the pod's downloads move to tollgate-inetdl (the mark
 * steers them there from its veth, the priority picks the class) in the
 * transaction that adds it, and back to its veth's class in the one that
 * deletes it; a packet matched by both rules leaves with this one's priority.
 */
static struct nftnl_rule *inet_ingress_tree_rule(uint32_t mark)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_FWD_INGRESS);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_map(ACCT_MAP_INGRESS_CLASS, ACCT_ID_INGRESS_CLASS, NFT_REG_1,
				       NFT_REG_1));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_PRIORITY));
	acct_rule_add(r, acct_expr_meta(NFT_META_MARK));
	acct_rule_add(r, acct_expr_bitwise32(~mark, mark));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_MARK));
	return r;
}

/* In fwd_egress (destination not internal): meta priority set ip saddr map @egress_class */
static struct nftnl_rule *inet_egress_class_rule(void)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_FWD_EGRESS);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_map(ACCT_MAP_EGRESS_CLASS, ACCT_ID_EGRESS_CLASS, NFT_REG_1,
				       NFT_REG_1));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_PRIORITY));
	return r;
}

/* [ip saddr|daddr @internal] jump|goto <target> (class_off 0: unconditional) */
static struct nftnl_rule *branch_rule(const char *chain, uint32_t class_off, uint32_t v,
				      const char *target)
{
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	if (class_off) {
		acct_rule_add(r, acct_expr_ip(class_off));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
	}
	acct_rule_add(r, acct_expr_verdict(v, target));
	return r;
}

static struct nftnl_rule *masquerade_rule(void)
{
	struct nftnl_rule *r = acct_rule_new("postrouting");

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_MASQ, ACCT_ID_MASQ, false));
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, true));
	acct_rule_add(r, acct_expr_plain("masq"));
	return r;
}

/* The pod counting rules of one chain: egress keyed by saddr, ingress by daddr. */
static int add_pod_counting(struct acct_rule_list *list, const char *chain, bool egress,
			    bool ingress, const char *const maps[], uint32_t first_id)
{
	int r = 0;

	if (egress) {
		r |= acct_rule_list_add(list,
					count_rule(chain, 16, false, 12, maps[ACCT_EGRESS_INTERNAL],
						   first_id + ACCT_EGRESS_INTERNAL, NULL));
		r |= acct_rule_list_add(list,
					count_rule(chain, 16, true, 12, maps[ACCT_EGRESS_INTERNET],
						   first_id + ACCT_EGRESS_INTERNET, NULL));
	}
	if (ingress) {
		r |= acct_rule_list_add(list, count_rule(chain, 12, false, 16,
							 maps[ACCT_INGRESS_INTERNAL],
							 first_id + ACCT_INGRESS_INTERNAL, NULL));
		r |= acct_rule_list_add(list,
					count_rule(chain, 12, true, 16, maps[ACCT_INGRESS_INTERNET],
						   first_id + ACCT_INGRESS_INTERNET, NULL));
	}
	return r ? -ENOMEM : 0;
}

/* Forwarded traffic's counting rules, in the chains that classified it already. */
static int add_fwd_counting(struct acct_rule_list *list, const char *const maps[],
			    uint32_t first_id)
{
	static const struct {
		const char *chain;
		enum acct_class cls;
		uint32_t key_off; /* the pod's address: source going out, destination coming in */
	} rules[] = {
		{ ACCT_CHAIN_FWD_EGRESS_INTERNAL, ACCT_EGRESS_INTERNAL, 12 },
		{ ACCT_CHAIN_FWD_EGRESS, ACCT_EGRESS_INTERNET, 12 },
		{ ACCT_CHAIN_FWD_INGRESS_INTERNAL, ACCT_INGRESS_INTERNAL, 16 },
		{ ACCT_CHAIN_FWD_INGRESS, ACCT_INGRESS_INTERNET, 16 },
	};
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
		r |= acct_rule_list_add(list, count_rule(rules[i].chain, 0, false, rules[i].key_off,
							 maps[rules[i].cls],
							 first_id + rules[i].cls, NULL));
	return r ? -ENOMEM : 0;
}

int acct_table_rules(const struct acct_config *cfg, struct acct_rule_list *list)
{
	int r = 0;

	list->n = 0;
	list->failed = false;
	if (!cfg->pod_link_prefix || !cfg->pod_link_prefix[0] ||
	    strlen(cfg->pod_link_prefix) >= ACCT_KEY_LINK_LEN)
		return -EINVAL;
	/* A pod sends only as itself, whatever else the config says. */
	r |= acct_antispoof_rules(list, cfg);
	r |= acct_access_rules(list, cfg);
	/*
	 * Internet-bound packets carry the mark from before routing on. What
	 * reaches the mark in from_pod has its pod's address (anti-spoofing saw
	 * to it): no lookup in @pods to tell a pod's packet.
	 */
	r |= acct_rule_list_add(list, skip_loopback("output", NFT_META_OIF));
	if (cfg->internet_mark) {
		r |= acct_rule_list_add(list, mark_rule(ACCT_CHAIN_FROM_POD, cfg->internet_mark));
		r |= acct_rule_list_add(list, mark_rule("output", cfg->internet_mark));
	}
	/* Forwarded pod traffic: one classification per direction (see ACCT_CHAIN_FWD_EGRESS). */
	r |= acct_rule_list_add(list, branch_rule("forward", 0, NFT_JUMP, ACCT_CHAIN_FWD_EGRESS));
	r |= acct_rule_list_add(list, branch_rule("forward", 0, NFT_JUMP, ACCT_CHAIN_FWD_INGRESS));
	r |= acct_rule_list_add(list, branch_rule(ACCT_CHAIN_FWD_EGRESS, 16, NFT_GOTO,
						  ACCT_CHAIN_FWD_EGRESS_INTERNAL));
	r |= acct_rule_list_add(list, branch_rule(ACCT_CHAIN_FWD_INGRESS, 12, NFT_GOTO,
						  ACCT_CHAIN_FWD_INGRESS_INTERNAL));
	/* Internet traffic passes its namespace's guard before it is counted or shaped. */
	if (cfg->guard.on)
		r |= acct_guard_jump_rules(list, cfg);
	/* The shaper's classes for internet traffic (the classids come with the config). */
	r |= acct_rule_list_add(list, inet_egress_class_rule());
	if (cfg->inet_ingress_classid)
		r |= acct_rule_list_add(list, inet_ingress_class_rule(cfg->inet_ingress_classid));
	/* after it: a pod in tollgate-inetdl's tree leaves with that tree's class */
	if (cfg->internet_mark)
		r |= acct_rule_list_add(list, inet_ingress_tree_rule(cfg->internet_mark));
	if (cfg->enabled) {
		r |= add_fwd_counting(list, acct_ns_maps, ACCT_ID_NS_MAPS);
		if (cfg->per_pod)
			r |= add_fwd_counting(list, acct_pod_maps, ACCT_ID_POD_MAPS);
		/* Pods' traffic with the node itself. */
		r |= acct_rule_list_add(list, skip_loopback("input", NFT_META_IIF));
		r |= add_pod_counting(list, "input", true, false, acct_ns_maps, ACCT_ID_NS_MAPS);
		if (cfg->per_pod)
			r |= add_pod_counting(list, "input", true, false, acct_pod_maps,
					      ACCT_ID_POD_MAPS);
		r |= acct_rule_list_add(list, count_rule("input", 12, false, 0, NULL, 0,
							 "host_ingress_internal"));
		r |= acct_rule_list_add(list, count_rule("input", 12, true, 0, NULL, 0,
							 "host_ingress_internet"));
		r |= add_pod_counting(list, "output", false, true, acct_ns_maps, ACCT_ID_NS_MAPS);
		if (cfg->per_pod)
			r |= add_pod_counting(list, "output", false, true, acct_pod_maps,
					      ACCT_ID_POD_MAPS);
		r |= acct_rule_list_add(list, count_rule("output", 16, false, 0, NULL, 0,
							 "host_egress_internal"));
		r |= acct_rule_list_add(list, count_rule("output", 16, true, 0, NULL, 0,
							 "host_egress_internet"));
	}
	r |= acct_hostport_rules(list);
	r |= acct_rule_list_add(list, masquerade_rule());
	if (r || list->failed) {
		acct_rule_list_free(list);
		return -ENOMEM;
	}
	return 0;
}
