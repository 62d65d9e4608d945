// SPDX-License-Identifier: Apache-2.0
/*
 * Table `arp tollgate`, owned wholly by Tollgate: its chain `input` drops
 * every ARP packet that arrives on a pod's host link, counted in
 * node_arp_dropped. The neighbour table is one per host: a pod that fills it
 * with forged senders cuts the node off from new peers. Pods need no ARP:
 * both ends of a pod's veth hold permanent neighbour entries (node/plumb.c).
 *
 * Declared with table inet tollgate, in the same batch (declare.c): read
 * with one rule dump, its one rule stamped like the inet table's, and when
 * anything is off every object is written again, each message creating or
 * replacing, so that the batch holds whatever the kernel had.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter_arp.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "accounting/internal.h"
#include "lib/util.h"

#define ARP_STAMP_LEN 32

static void arp_stamp(const struct acct_config *cfg, char ret[ARP_STAMP_LEN])
{
	uint64_t h = hash_fnv1a64(ACCT_ARP_LAYOUT, strlen(ACCT_ARP_LAYOUT), FNV1A64_INIT);

	if (cfg->pod_link_prefix)
		h = hash_fnv1a64(cfg->pod_link_prefix, strlen(cfg->pod_link_prefix), h);
	snprintf(ret, ARP_STAMP_LEN, "tollgate:%016llx", (unsigned long long)h);
}

struct arp_seen {
	const char *stamp;
	unsigned rules, stamped;
};

static int stamp_rule_cb(const struct nlmsghdr *nlh, void *p)
{
	struct arp_seen *s = p;
	const struct nlattr *a;
	char comment[64] = "";
	bool ours = false, has_comment = false;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		uint16_t t = mnl_attr_get_type(a);

		if (t == NFTA_RULE_CHAIN && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			ours = strcmp(mnl_attr_get_str(a), ACCT_ARP_CHAIN) == 0;
		else if (t == NFTA_RULE_USERDATA)
			has_comment = acct_udata_comment(a, NFTNL_UDATA_RULE_COMMENT, comment,
							 sizeof(comment));
	}
	s->rules++;
	if (ours && has_comment && strcmp(comment, s->stamp) == 0)
		s->stamped++;
	return MNL_CB_OK;
}

int acct_arp_read(struct acct_nft_conn *c, const struct acct_config *cfg)
{
	char buf[ACCT_NFT_RECV_SIZE] = { 0 }, stamp[ARP_STAMP_LEN];
	struct arp_seen s = { .stamp = stamp };
	struct nlmsghdr *nlh =
		nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_ARP, NLM_F_DUMP | NLM_F_ACK, 1);
	int r;

	arp_stamp(cfg, stamp);
	mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, ACCT_TABLE);
	r = acct_nft_request(c, buf, sizeof(buf), stamp_rule_cb, &s);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	/* One rule, ours; a dump names no table that is missing, and an empty one is wrong too. */
	return s.rules == 1 && s.stamped == 1;
}

/*
 * iifname "<prefix>*" counter name "node_arp_dropped" drop, stamped; NULL
 * when any part of it could not be built (short of its match it would drop
 * every ARP packet of the node).
 */
static struct nftnl_rule *drop_rule(const struct acct_config *cfg)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	char stamp[ARP_STAMP_LEN];

	if (!r)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, ACCT_ARP_CHAIN);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_ARP);
	acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
	acct_rule_add(r, acct_expr_cmp_eq(cfg->pod_link_prefix,
					  (uint32_t)strlen(cfg->pod_link_prefix)));
	acct_rule_add(r, acct_expr_counter(ACCT_ARP_COUNTER));
	acct_rule_add(r, acct_expr_verdict(NF_DROP, NULL));
	arp_stamp(cfg, stamp);
	if (acct_rule_spoiled() || acct_rule_comment(r, stamp) < 0) {
		nftnl_rule_free(r);
		return NULL;
	}
	return r;
}

int acct_arp_put(struct acct_batch *bt, const struct acct_config *cfg)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_chain *ch = nftnl_chain_alloc();
	struct nftnl_obj *o = nftnl_obj_alloc();
	struct nftnl_rule *flush = nftnl_rule_alloc();
	struct nftnl_rule *r = cfg->pod_link_prefix ? drop_rule(cfg) : NULL;
	struct nlmsghdr *nlh;
	int ret = -ENOMEM;

	if (!t || !ch || !o || !flush || !r)
		goto out;
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, ACCT_TABLE);
	nlh = acct_batch_msg_family(bt, NFT_MSG_NEWTABLE, NLM_F_CREATE, NFPROTO_ARP);
	nftnl_table_nlmsg_build_payload(nlh, t);
	acct_batch_next(bt);

	nftnl_chain_set_str(ch, NFTNL_CHAIN_TABLE, ACCT_TABLE);
	nftnl_chain_set_str(ch, NFTNL_CHAIN_NAME, ACCT_ARP_CHAIN);
	nftnl_chain_set_u32(ch, NFTNL_CHAIN_HOOKNUM, NF_ARP_IN);
	nftnl_chain_set_s32(ch, NFTNL_CHAIN_PRIO, 0);
	nftnl_chain_set_str(ch, NFTNL_CHAIN_TYPE, "filter");
	nftnl_chain_set_u32(ch, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	nlh = acct_batch_msg_family(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE, NFPROTO_ARP);
	nftnl_chain_nlmsg_build_payload(nlh, ch);
	acct_batch_next(bt);

	/* Created when missing, never reset (no NLM_F_EXCL) */
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, ACCT_TABLE);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, ACCT_ARP_COUNTER);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_ARP);
	nlh = acct_batch_msg_family(bt, NFT_MSG_NEWOBJ, NLM_F_CREATE, NFPROTO_ARP);
	nftnl_obj_nlmsg_build_payload(nlh, o);
	acct_batch_next(bt);

	/* Whatever the chain held goes, in the batch its rule comes back in. */
	nftnl_rule_set_str(flush, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(flush, NFTNL_RULE_CHAIN, ACCT_ARP_CHAIN);
	nlh = acct_batch_msg_family(bt, NFT_MSG_DELRULE, 0, NFPROTO_ARP);
	nftnl_rule_nlmsg_build_payload(nlh, flush);
	acct_batch_next(bt);

	nlh = acct_batch_msg_family(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, NFPROTO_ARP);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	acct_batch_next(bt);
	ret = 0;
out:
	if (t)
		nftnl_table_free(t);
	if (ch)
		nftnl_chain_free(ch);
	if (o)
		nftnl_obj_free(o);
	if (flush)
		nftnl_rule_free(flush);
	if (r)
		nftnl_rule_free(r);
	return ret;
}
