// SPDX-License-Identifier: Apache-2.0
/*
 * Anti-spoofing's rules in table inet tollgate: everything from a pod's
 * link goes to from_pod first, where a packet whose link . source is not
 * in @pod_src (the pods' elements: pods.c), and any IPv6, goes to chain
 * spoofed: counted to the sender's namespace and dropped.
 */
#include <errno.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/rule.h>

#include "accounting/internal.h"

/* In prerouting_raw, either family: iifname "<prefix>*" jump from_pod */
static struct nftnl_rule *from_pod_rule(const char *prefix)
{
	struct nftnl_rule *r = acct_rule_new_any(ACCT_CHAIN_PREROUTING);

	if (!r)
		return NULL;
	acct_match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_FROM_POD));
	return r;
}

/*
 * iifname . ip saddr != @pod_src goto spoofed: the one lookup every IPv4
 * packet of a pod costs. The key is laid out as nft lays out a
 * concatenation: the link's name fills register 1 (16 bytes), the address
 * follows in register 2.
 */
static struct nftnl_rule *antispoof_rule(void)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
	acct_rule_add(r, acct_expr_ip_to(12, NFT_REG_2));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_POD_SRC, ACCT_ID_POD_SRC, true));
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_SPOOFED));
	return r;
}

/* meta nfproto ipv6 goto spoofed: no IPv6 from pods until dual-stack. */
static struct nftnl_rule *antispoof_ipv6_rule(void)
{
	struct nftnl_rule *r = acct_rule_new_any(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	acct_match_nfproto(r, NFPROTO_IPV6);
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_SPOOFED));
	return r;
}

/*
 * In chain spoofed: count to the sender's namespace (the map keyed by its
 * link), else to the node's counter, and drop. The last rule matches
 * whatever is left: a chain reached by goto that ends without a verdict
 * would hand the packet back to the hook's accept policy.
 */
static struct nftnl_rule *spoofed_rule(enum acct_family f, bool by_link, bool last)
{
	struct nftnl_rule *r = acct_rule_new_any(ACCT_CHAIN_SPOOFED);
	char name[ACCT_COUNTER_NAME_MAX];

	if (!r)
		return NULL;
	if (!last)
		acct_match_nfproto(r, f == ACCT_IPV4 ? NFPROTO_IPV4 : NFPROTO_IPV6);
	if (by_link) {
		acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
		acct_rule_add(r,
			      acct_expr_objref_map(acct_spoofed_maps[f], ACCT_ID_SPOOFED_MAPS + f));
	} else {
		acct_spoofed_counter_name(NULL, f, name);
		acct_rule_add(r, acct_expr_counter(name));
	}
	acct_rule_add(r, acct_expr_verdict(NF_DROP, NULL));
	return r;
}

int acct_antispoof_rules(struct acct_rule_list *list, const struct acct_config *cfg)
{
	int r = 0;

	/* A pod sends only as itself, whatever else the config says. */
	r |= acct_rule_list_add(list, from_pod_rule(cfg->pod_link_prefix));
	r |= acct_rule_list_add(list, antispoof_rule());
	r |= acct_rule_list_add(list, antispoof_ipv6_rule());
	r |= acct_rule_list_add(list, spoofed_rule(ACCT_IPV4, true, false));
	r |= acct_rule_list_add(list, spoofed_rule(ACCT_IPV6, true, false));
	r |= acct_rule_list_add(list, spoofed_rule(ACCT_IPV4, false, false));
	r |= acct_rule_list_add(list, spoofed_rule(ACCT_IPV6, false, true));
	return r ? -ENOMEM : 0;
}
