// SPDX-License-Identifier: Apache-2.0
/*
 * What every rule of table inet tollgate is made of beyond its expressions
 * (expr.c): a rule's frame, the matches several features share, and the
 * list a set of rules is collected in (which drops a spoiled rule and fails).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/rtnetlink.h>
#include <libnftnl/rule.h>

#include "accounting/internal.h"

/* meta nfproto ipv4|ipv6 */
void acct_match_nfproto(struct nftnl_rule *r, uint8_t proto)
{
	acct_rule_add(r, acct_expr_meta(NFT_META_NFPROTO));
	acct_rule_add(r, acct_expr_cmp_eq(&proto, sizeof(proto)));
}

/* A rule of either family. */
struct nftnl_rule *acct_rule_new_any(const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	if (!r)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return r;
}

struct nftnl_rule *acct_rule_new(const char *chain)
{
	struct nftnl_rule *r = acct_rule_new_any(chain);

	/* meta nfproto ipv4: what nft adds for `ip ...` matches in an inet table */
	if (r)
		acct_match_nfproto(r, NFPROTO_IPV4);
	return r;
}

/* Appends a rule to the list (which owns it from now on); the list remembers a failure. */
int acct_rule_list_add(struct acct_rule_list *w, struct nftnl_rule *r)
{
	/* a rule that lost an expression is never sent short of it */
	if (acct_rule_spoiled() || !r || w->n >= ACCT_TABLE_RULES_MAX) {
		if (r)
			nftnl_rule_free(r);
		w->failed = true;
		return -ENOMEM;
	}
	w->r[w->n++] = r;
	return 0;
}

void acct_rule_list_free(struct acct_rule_list *w)
{
	for (size_t i = 0; i < w->n; i++)
		nftnl_rule_free(w->r[i]);
	w->n = 0;
}

/* ct state & bits != 0 */
void acct_match_ct_state(struct nftnl_rule *r, uint32_t bits)
{
	uint32_t zero = 0;

	acct_rule_add(r, acct_expr_ct(NFT_CT_STATE));
	acct_rule_add(r, acct_expr_bitwise32(bits, zero));
	acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, &zero, sizeof(zero)));
}

/* iifname "<prefix>*": the packet came in from a pod's host link. */
void acct_match_pod_link(struct nftnl_rule *r, const char *prefix)
{
	acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
	acct_rule_add(r, acct_expr_cmp_eq(prefix, (uint32_t)strlen(prefix)));
}

/* fib daddr type local */
void acct_match_local(struct nftnl_rule *r)
{
	uint32_t local = RTN_LOCAL;

	acct_rule_add(r, acct_expr_fib_daddr_type());
	acct_rule_add(r, acct_expr_cmp_eq(&local, sizeof(local)));
}

/* ct state new: the first packet of a connection (a refusal never touches an established one) */
void acct_match_ct_new(struct nftnl_rule *r)
{
	acct_match_ct_state(r, NF_CT_STATE_BIT(IP_CT_NEW));
}

/* ip daddr <addr> (host order) */
void acct_match_daddr(struct nftnl_rule *r, uint32_t addr)
{
	uint32_t be = htonl(addr);

	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_cmp_eq(&be, sizeof(be)));
}

/* meta l4proto <proto> th dport <port> */
void acct_match_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port)
{
	uint16_t be = htons(port);

	acct_rule_add(r, acct_expr_meta(NFT_META_L4PROTO));
	acct_rule_add(r, acct_expr_cmp_eq(&proto, sizeof(proto)));
	acct_rule_add(r, acct_expr_payload_to(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1));
	acct_rule_add(r, acct_expr_cmp_eq(&be, sizeof(be)));
}
