// SPDX-License-Identifier: Apache-2.0
/*
 * What table `inet tollgate` holds for a config (see accounting.h for the
 * whole picture): its sets, chains and named host counters, built here
 * (its rules: rules.c and each feature's file) and compared with the
 * kernel by declare.c, which writes only what differs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/chain.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include "accounting/internal.h"
#include "lib/util.h"

const char *const acct_ns_maps[ACCT_CLASSES] = {
	"ns_egress_internal",
	"ns_egress_internet",
	"ns_ingress_internal",
	"ns_ingress_internet",
};
const char *const acct_pod_maps[ACCT_CLASSES] = {
	"pod_egress_internal",
	"pod_egress_internet",
	"pod_ingress_internal",
	"pod_ingress_internet",
};
const char *const acct_spoofed_maps[ACCT_FAMILIES] = { "spoofed_ipv4", "spoofed_ipv6" };
const char *const acct_drop_maps[ACCT_DROPS] = { ACCT_MAP_METADATA_DROP, ACCT_MAP_AGENT_DROP,
						 ACCT_MAP_INVALID_DROP, ACCT_MAP_NEIGHBOUR_DROP };

const struct acct_chain_def acct_table_chains[ACCT_TABLE_CHAINS] = {
	/* raw: before conntrack, which a forged packet must not update */
	{ ACCT_CHAIN_PREROUTING, "filter", NF_INET_PRE_ROUTING, ACCT_PRIO_RAW },
	{ ACCT_CHAIN_FROM_POD, NULL, 0, 0 },
	{ ACCT_CHAIN_SPOOFED, NULL, 0, 0 },
	{ ACCT_CHAIN_TO_CLOUD, NULL, 0, 0 },
	{ ACCT_CHAIN_TO_AGENT, NULL, 0, 0 },
	{ ACCT_CHAIN_TO_SERVICE, NULL, 0, 0 },
	{ ACCT_CHAIN_SERVICE_DENY, NULL, 0, 0 },
	{ "forward", "filter", NF_INET_FORWARD, -150 },
	{ "input", "filter", NF_INET_LOCAL_IN, -150 },
	{ "output", "route", NF_INET_LOCAL_OUT, -150 },	     /* route: a new mark re-routes */
	{ "postrouting", "nat", NF_INET_POST_ROUTING, 100 }, /* srcnat */
	{ ACCT_CHAIN_FWD_EGRESS, NULL, 0, 0 },
	{ ACCT_CHAIN_FWD_EGRESS_INTERNAL, NULL, 0, 0 },
	{ ACCT_CHAIN_FWD_INGRESS, NULL, 0, 0 },
	{ ACCT_CHAIN_FWD_INGRESS_INTERNAL, NULL, 0, 0 },
	{ ACCT_CHAIN_GUARD_REFUSE, NULL, 0, 0 },
	{ ACCT_CHAIN_PREROUTING_NAT, "nat", NF_INET_PRE_ROUTING, -100 }, /* dstnat */
	{ ACCT_CHAIN_OUTPUT_NAT, "nat", NF_INET_LOCAL_OUT, -100 },
};

void acct_set_add_key(struct nftnl_set *s, uint32_t ip_host, bool interval_end)
{
	struct nftnl_set_elem *el = nftnl_set_elem_alloc();
	uint32_t key = htonl(ip_host);

	if (!el)
		return;
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, &key, sizeof(key));
	if (interval_end)
		nftnl_set_elem_set_u32(el, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
	nftnl_set_elem_add(s, el);
}

size_t acct_set_key_of(enum acct_set_key k, const char *link, uint32_t ip_host,
		       uint8_t ret[ACCT_KEY_MAX])
{
	uint32_t be = htonl(ip_host);
	size_t n = 0;

	memset(ret, 0, ACCT_KEY_MAX);
	if (k != ACCT_KEY_ADDR) {
		/* `meta iifname` loads the whole IFNAMSIZ buffer, NUL-padded */
		strncpy((char *)ret, link ? link : "", ACCT_KEY_LINK_LEN - 1);
		n = ACCT_KEY_LINK_LEN;
	}
	if (k != ACCT_KEY_LINK) {
		memcpy(ret + n, &be, 4);
		n += 4;
	}
	return n;
}

struct nftnl_set *acct_set_new(const char *name, uint32_t id, uint32_t flags, enum acct_set_key key)
{
	struct nftnl_set *s = nftnl_set_alloc();
	static const uint32_t key_len[] = { [ACCT_KEY_ADDR] = 4,
					    [ACCT_KEY_LINK] = ACCT_KEY_LINK_LEN,
					    [ACCT_KEY_LINK_ADDR] = ACCT_KEY_LINK_LEN + 4,
					    [ACCT_KEY_HOSTPORT] = 8,
					    [ACCT_KEY_HOSTPORT_IP] = 12 };
	static const uint32_t key_type[] = {
		[ACCT_KEY_ADDR] = ACCT_NFT_TYPE_IPADDR,
		[ACCT_KEY_LINK] = ACCT_NFT_TYPE_IFNAME,
		[ACCT_KEY_LINK_ADDR] =
			ACCT_NFT_TYPE_CONCAT(ACCT_NFT_TYPE_IFNAME, ACCT_NFT_TYPE_IPADDR),
		[ACCT_KEY_HOSTPORT] =
			ACCT_NFT_TYPE_CONCAT(ACCT_NFT_TYPE_INET_PROTO, ACCT_NFT_TYPE_INET_SERVICE),
		[ACCT_KEY_HOSTPORT_IP] = ACCT_NFT_TYPE_CONCAT(
			ACCT_NFT_TYPE_CONCAT(ACCT_NFT_TYPE_IPADDR, ACCT_NFT_TYPE_INET_PROTO),
			ACCT_NFT_TYPE_INET_SERVICE),
	};

	if (!s)
		return NULL;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len[key]);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type[key]);
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	if (flags)
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
	if (flags & NFT_SET_OBJECT)
		nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE, NFT_OBJECT_COUNTER);
	if ((flags & NFT_SET_MAP) && (key == ACCT_KEY_HOSTPORT || key == ACCT_KEY_HOSTPORT_IP)) {
		/* a hostPort's target: ipv4_addr . inet_service */
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE,
				  ACCT_NFT_TYPE_CONCAT(ACCT_NFT_TYPE_IPADDR,
						       ACCT_NFT_TYPE_INET_SERVICE));
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, ACCT_HOSTPORT_DATA_LEN);
	} else if (flags & NFT_SET_MAP) {
		/* ipv4_addr : classid, with nft's byte-order notes so `nft list` reads it right. */
		static const uint8_t udata[] = { 0x00, 0x04, 0x02, 0x00, 0x00, 0x00,
						 0x01, 0x04, 0x01, 0x00, 0x00, 0x00,
						 0x06, 0x04, 0x00, 0x00, 0x00, 0x00 };

		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, ACCT_NFT_TYPE_CLASSID);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 4);
		nftnl_set_set_data(s, NFTNL_SET_USERDATA, udata, sizeof(udata));
	}
	if (key == ACCT_KEY_LINK) {
		/* A link name is a host-order string: nft's note, else `nft list` prints "". */
		static const uint8_t udata[] = { 0x00, 0x04, 0x01, 0x00, 0x00, 0x00 };

		nftnl_set_set_data(s, NFTNL_SET_USERDATA, udata, sizeof(udata));
	}
	return s;
}

/* A set or map of fixed attributes; one of verdicts (key -> jump). */
#define PLAIN(name, id, flags, key)                  \
	{                                            \
		name, id, flags, key, false, 0, 0, 0 \
	}
#define VERDICTS(name, id, flags, key)              \
	{                                           \
		name, id, flags, key, true, 0, 0, 0 \
	}
const struct acct_set_def acct_table_sets[ACCT_TABLE_SETS] = {
	PLAIN(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, NFT_SET_INTERVAL, ACCT_KEY_ADDR),
	PLAIN(ACCT_SET_PODS, ACCT_ID_PODS, 0, ACCT_KEY_ADDR),
	PLAIN(ACCT_SET_MASQ, ACCT_ID_MASQ, 0, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_EGRESS_CLASS, ACCT_ID_EGRESS_CLASS, NFT_SET_MAP, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_INGRESS_CLASS, ACCT_ID_INGRESS_CLASS, NFT_SET_MAP, ACCT_KEY_ADDR),
	PLAIN(ACCT_SET_POD_SRC, ACCT_ID_POD_SRC, 0, ACCT_KEY_LINK_ADDR),
	PLAIN("spoofed_ipv4", ACCT_ID_SPOOFED_MAPS + ACCT_IPV4, NFT_SET_OBJECT, ACCT_KEY_LINK),
	PLAIN("spoofed_ipv6", ACCT_ID_SPOOFED_MAPS + ACCT_IPV6, NFT_SET_OBJECT, ACCT_KEY_LINK),
	PLAIN("ns_egress_internal", ACCT_ID_NS_MAPS + 0, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("ns_egress_internet", ACCT_ID_NS_MAPS + 1, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("ns_ingress_internal", ACCT_ID_NS_MAPS + 2, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("ns_ingress_internet", ACCT_ID_NS_MAPS + 3, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("pod_egress_internal", ACCT_ID_POD_MAPS + 0, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("pod_egress_internet", ACCT_ID_POD_MAPS + 1, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("pod_ingress_internal", ACCT_ID_POD_MAPS + 2, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN("pod_ingress_internet", ACCT_ID_POD_MAPS + 3, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN(ACCT_SET_METADATA_OK, ACCT_ID_METADATA_OK, 0, ACCT_KEY_ADDR),
	PLAIN(ACCT_SET_AGENT_OK, ACCT_ID_AGENT_OK, 0, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_METADATA_DROP, ACCT_ID_METADATA_DROP, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_AGENT_DROP, ACCT_ID_AGENT_DROP, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_INVALID_DROP, ACCT_ID_INVALID_DROP, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_NEIGHBOUR_DROP, ACCT_ID_NEIGHBOUR_DROP, NFT_SET_OBJECT, ACCT_KEY_ADDR),
	{ ACCT_MAP_NEXTHOP_LIMIT, ACCT_ID_NEXTHOP_LIMIT, NFT_SET_OBJECT, ACCT_KEY_ADDR, false,
	  NFT_OBJECT_LIMIT, 0, 0 },
	/* filled by the rules (dynamic), bounded, each next hop forgotten a while after its last use */
	{ ACCT_SET_NEXTHOPS, ACCT_ID_NEXTHOPS, NFT_SET_EVAL | NFT_SET_TIMEOUT, ACCT_KEY_ADDR, false,
	  0, ACCT_NEXTHOPS_TRACKED, ACCT_NEXTHOP_TIMEOUT_S },
	VERDICTS(ACCT_MAP_GUARD, ACCT_ID_GUARD, NFT_SET_MAP, ACCT_KEY_ADDR),
	VERDICTS(ACCT_MAP_GUARD_IN, ACCT_ID_GUARD_IN, NFT_SET_MAP, ACCT_KEY_ADDR),
	PLAIN(ACCT_MAP_HOSTPORT, ACCT_ID_HOSTPORT, NFT_SET_MAP, ACCT_KEY_HOSTPORT),
	PLAIN(ACCT_MAP_HOSTPORT_IP, ACCT_ID_HOSTPORT_IP, NFT_SET_MAP, ACCT_KEY_HOSTPORT_IP),
	PLAIN(ACCT_SET_SERVICE_OK, ACCT_ID_SERVICE_OK, 0, ACCT_KEY_HOSTPORT_IP),
};

int acct_table_put_set(struct acct_batch *bt, const struct acct_set_def *d)
{
	struct nftnl_set *s = acct_set_new(d->name, d->id, d->flags, d->key);
	struct nlmsghdr *nlh;

	if (!s)
		return -ENOMEM;
	if (d->obj_type)
		nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE, d->obj_type);
	if (d->size)
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, d->size);
	if (d->timeout_s)
		nftnl_set_set_u64(s, NFTNL_SET_TIMEOUT, (uint64_t)d->timeout_s * 1000);
	if (d->verdicts) {
		/* ipv4_addr : verdict (nft's note for the key only: a verdict has no byte order) */
		static const uint8_t udata[] = { 0x00, 0x04, 0x02, 0x00, 0x00, 0x00 };

		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 0);
		nftnl_set_set_data(s, NFTNL_SET_USERDATA, udata, sizeof(udata));
	}
	nlh = acct_batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	acct_batch_next(bt);
	return 0;
}

/* Removes every element of a set: DELSETELEM without an element list. */
void acct_table_flush_set(struct acct_batch *bt, const char *set)
{
	struct nlmsghdr *nlh = acct_batch_msg(bt, NFT_MSG_DELSETELEM, 0);

	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, ACCT_TABLE);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
	acct_batch_next(bt);
}

size_t acct_table_internal_bounds(const struct acct_config *cfg,
				  struct acct_bound ret[ACCT_TABLE_BOUNDS_MAX])
{
	size_t n = 0;

	/*
	 * Interval sets take boundaries: a start key, and the key after the last
	 * address flagged as an end. Like nft, open with an end at 0.0.0.0 so the
	 * space below the first range is outside the set.
	 */
	if (cfg->n_internal && cfg->internal[0].net != 0)
		ret[n++] = (struct acct_bound){ 0, true };
	for (size_t i = 0; i < cfg->n_internal && i < ACCT_MAX_INTERNAL; i++) {
		uint32_t last = cidr4_last(&cfg->internal[i]);

		ret[n++] = (struct acct_bound){ cfg->internal[i].net, false };
		if (last != UINT32_MAX)
			ret[n++] = (struct acct_bound){ last + 1, true };
	}
	return n;
}

int acct_table_put_internal(struct acct_batch *bt, const struct acct_config *cfg)
{
	struct nftnl_set *s =
		acct_set_new(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, NFT_SET_INTERVAL, ACCT_KEY_ADDR);
	struct acct_bound b[ACCT_TABLE_BOUNDS_MAX];
	size_t n = acct_table_internal_bounds(cfg, b);
	struct nlmsghdr *nlh;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		acct_set_add_key(s, b[i].key, b[i].end);
	nlh = acct_batch_msg(bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	acct_batch_next(bt);
	return 0;
}

/* An object's message; with a limit's rate (packets a second, 0: none given), its rate and burst. */
static int put_obj(struct acct_batch *bt, const char *name, uint32_t type, uint16_t msg,
		   uint16_t flags, uint64_t rate, uint32_t burst)
{
	struct nftnl_obj *o = nftnl_obj_alloc();
	struct nlmsghdr *nlh;

	if (!o)
		return -ENOMEM;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, ACCT_TABLE);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, type);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	if (type == NFT_OBJECT_LIMIT && rate) {
		/* rate over <rate>/second burst <burst> packets */
		nftnl_obj_set_u64(o, NFTNL_OBJ_LIMIT_RATE, rate);
		nftnl_obj_set_u64(o, NFTNL_OBJ_LIMIT_UNIT, 1);
		nftnl_obj_set_u32(o, NFTNL_OBJ_LIMIT_BURST, burst);
		nftnl_obj_set_u32(o, NFTNL_OBJ_LIMIT_TYPE, NFT_LIMIT_PKTS);
		nftnl_obj_set_u32(o, NFTNL_OBJ_LIMIT_FLAGS, NFT_LIMIT_F_INV);
	}
	nlh = acct_batch_msg(bt, msg, flags);
	nftnl_obj_nlmsg_build_payload(nlh, o);
	nftnl_obj_free(o);
	acct_batch_next(bt);
	return 0;
}

int acct_put_counter_msg(struct acct_batch *bt, const char *name, uint16_t msg, uint16_t flags)
{
	return put_obj(bt, name, NFT_OBJECT_COUNTER, msg, flags, 0, 0);
}

int acct_put_obj_msg(struct acct_batch *bt, const char *name, uint32_t type, uint16_t msg,
		     uint16_t flags)
{
	return put_obj(bt, name, type, msg, flags, 0, 0);
}

int acct_put_limit(struct acct_batch *bt, const char *name, uint64_t per_second, uint32_t burst)
{
	/* No NLM_F_EXCL: an existing limit is kept as it is (the kernel cannot update one). */
	return put_obj(bt, name, NFT_OBJECT_LIMIT, NFT_MSG_NEWOBJ, NLM_F_CREATE, per_second, burst);
}

int acct_put_counter(struct acct_batch *bt, const char *name)
{
	/* No NLM_F_EXCL: an existing counter is kept as it is, bytes and all. */
	return acct_put_counter_msg(bt, name, NFT_MSG_NEWOBJ, NLM_F_CREATE);
}

int acct_table_chain_msg(struct acct_batch *bt, const struct acct_chain_def *d, uint16_t msg,
			 uint16_t flags)
{
	struct nftnl_chain *ch = nftnl_chain_alloc();
	struct nlmsghdr *nlh;

	if (!ch)
		return -ENOMEM;
	nftnl_chain_set_str(ch, NFTNL_CHAIN_TABLE, ACCT_TABLE);
	nftnl_chain_set_str(ch, NFTNL_CHAIN_NAME, d->name);
	if (d->type && msg == NFT_MSG_NEWCHAIN) {
		nftnl_chain_set_u32(ch, NFTNL_CHAIN_HOOKNUM, d->hook);
		nftnl_chain_set_s32(ch, NFTNL_CHAIN_PRIO, d->prio);
		nftnl_chain_set_str(ch, NFTNL_CHAIN_TYPE, d->type);
		nftnl_chain_set_u32(ch, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	nlh = acct_batch_msg(bt, msg, flags);
	nftnl_chain_nlmsg_build_payload(nlh, ch);
	nftnl_chain_free(ch);
	acct_batch_next(bt);
	return 0;
}

int acct_table_put_chain(struct acct_batch *bt, const struct acct_chain_def *d)
{
	return acct_table_chain_msg(bt, d, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
}

/* Removes every rule of a chain: a rule without a handle names them all. */
int acct_table_flush_chain(struct acct_batch *bt, const char *chain)
{
	struct nftnl_rule *flush = nftnl_rule_alloc();
	struct nlmsghdr *nlh;

	if (!flush)
		return -ENOMEM;
	nftnl_rule_set_str(flush, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(flush, NFTNL_RULE_CHAIN, chain);
	nlh = acct_batch_msg(bt, NFT_MSG_DELRULE, 0);
	nftnl_rule_nlmsg_build_payload(nlh, flush);
	nftnl_rule_free(flush);
	acct_batch_next(bt);
	return 0;
}

/* Adds a rule to the end of its chain. */
int acct_table_put_rule(struct acct_batch *bt, struct nftnl_rule *r)
{
	struct nlmsghdr *nlh = acct_batch_msg(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);

	nftnl_rule_nlmsg_build_payload(nlh, r);
	acct_batch_next(bt);
	return 0;
}

int acct_table_put_host_counters(struct acct_batch *bt)
{
	char name[ACCT_COUNTER_NAME_MAX];
	int r = 0;

	for (int i = 0; i < ACCT_CLASSES; i++) {
		acct_host_counter_name((enum acct_class)i, name);
		r |= acct_put_counter(bt, name);
	}
	for (int f = 0; f < ACCT_FAMILIES; f++) {
		acct_spoofed_counter_name(NULL, (enum acct_family)f, name);
		r |= acct_put_counter(bt, name);
	}
	return r ? -ENOMEM : 0;
}
