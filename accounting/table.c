// SPDX-License-Identifier: Apache-2.0
/*
 * What table `inet tollgate` holds for a config (see accounting.h for the
 * whole picture): its sets, chains and rules, built here and compared with
 * the kernel by declare.c, which writes only what differs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include "accounting/internal.h"
#include "lib/util.h"

const char *const acct_ns_maps[ACCT_CLASSES] = {
	"ns_egress_internal", "ns_egress_internet", "ns_ingress_internal", "ns_ingress_internet",
};
const char *const acct_pod_maps[ACCT_CLASSES] = {
	"pod_egress_internal", "pod_egress_internet", "pod_ingress_internal", "pod_ingress_internet",
};
const char *const acct_spoofed_maps[ACCT_FAMILIES] = { "spoofed_ipv4", "spoofed_ipv6" };

/* Set ids let rules in the same transaction refer to sets created in it. */
enum {
	ID_INTERNAL = 1,
	ID_PODS,
	ID_MASQ,
	ID_EGRESS_CLASS,
	ID_NS_MAPS,
	ID_POD_MAPS = ID_NS_MAPS + ACCT_CLASSES,
	ID_POD_SRC = ID_POD_MAPS + ACCT_CLASSES,
	ID_SPOOFED_MAPS,
};

/*
 * Forwarded packets are classified once per direction: `forward` jumps to
 * fwd_egress (by destination) and fwd_ingress (by source), each of which
 * looks @internal up once and goes to its *_internal chain on a match. Two
 * interval lookups a packet, however many counting rules follow.
 */
#define FWD_EGRESS "fwd_egress"
#define FWD_EGRESS_INTERNAL "fwd_egress_internal"
#define FWD_INGRESS "fwd_ingress"
#define FWD_INGRESS_INTERNAL "fwd_ingress_internal"

/*
 * Everything from a pod's link goes from `prerouting` to `from_pod` first:
 * anti-spoofing (one lookup of (input link, source) per packet, whatever the
 * number of pods), then the internet mark. A forged packet is dropped
 * before NAT (-100), the mark, counting and shaping see it. Not a base
 * chain of its own at raw priority: that would cost every packet of the
 * node one more hook, measured here at about as much again as the check
 * itself; conntrack sees a forged packet first, but its entry is never
 * confirmed. With the check before it, the mark needs no lookup in @pods.
 */
#define FROM_POD "from_pod"
#define SPOOFED "spoofed"

const struct chain_def table_chains[TABLE_CHAINS] = {
	{ "prerouting", "filter", NF_INET_PRE_ROUTING, -150 }, /* mangle: before routing */
	{ FROM_POD, NULL, 0, 0 },
	{ SPOOFED, NULL, 0, 0 },
	{ "forward", "filter", NF_INET_FORWARD, -150 },
	{ "input", "filter", NF_INET_LOCAL_IN, -150 },
	{ "output", "route", NF_INET_LOCAL_OUT, -150 },	/* route: a new mark re-routes */
	{ "postrouting", "nat", NF_INET_POST_ROUTING, 100 }, /* srcnat */
	{ FWD_EGRESS, NULL, 0, 0 },
	{ FWD_EGRESS_INTERNAL, NULL, 0, 0 },
	{ FWD_INGRESS, NULL, 0, 0 },
	{ FWD_INGRESS_INTERNAL, NULL, 0, 0 },
};

void set_add_key(struct nftnl_set *s, uint32_t ip_host, bool interval_end)
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

size_t set_key_of(enum set_key k, const char *link, uint32_t ip_host, uint8_t ret[KEY_MAX])
{
	uint32_t be = htonl(ip_host);
	size_t n = 0;

	memset(ret, 0, KEY_MAX);
	if (k != KEY_ADDR) {
		/* `meta iifname` loads the whole IFNAMSIZ buffer, NUL-padded */
		strncpy((char *)ret, link ? link : "", KEY_LINK_LEN - 1);
		n = KEY_LINK_LEN;
	}
	if (k != KEY_LINK) {
		memcpy(ret + n, &be, 4);
		n += 4;
	}
	return n;
}

static struct nftnl_set *set_new(const char *name, uint32_t id, uint32_t flags, enum set_key key)
{
	struct nftnl_set *s = nftnl_set_alloc();
	static const uint32_t key_len[] = { [KEY_ADDR] = 4, [KEY_LINK] = KEY_LINK_LEN,
					    [KEY_LINK_ADDR] = KEY_LINK_LEN + 4 };
	static const uint32_t key_type[] = {
		[KEY_ADDR] = NFT_TYPE_IPADDR, [KEY_LINK] = NFT_TYPE_IFNAME,
		[KEY_LINK_ADDR] = NFT_TYPE_CONCAT(NFT_TYPE_IFNAME, NFT_TYPE_IPADDR),
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
	if (flags & NFT_SET_MAP) {
		/* ipv4_addr : classid, with nft's byte-order notes so `nft list` reads it right. */
		static const uint8_t udata[] = { 0x00, 0x04, 0x02, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01,
						 0x00, 0x00, 0x00, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00 };

		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_TYPE_CLASSID);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 4);
		nftnl_set_set_data(s, NFTNL_SET_USERDATA, udata, sizeof(udata));
	}
	if (key == KEY_LINK) {
		/* A link name is a host-order string: nft's note, else `nft list` prints "". */
		static const uint8_t udata[] = { 0x00, 0x04, 0x01, 0x00, 0x00, 0x00 };

		nftnl_set_set_data(s, NFTNL_SET_USERDATA, udata, sizeof(udata));
	}
	return s;
}

const struct set_def table_sets[TABLE_SETS] = {
	{ SET_INTERNAL, ID_INTERNAL, NFT_SET_INTERVAL, KEY_ADDR },
	{ SET_PODS, ID_PODS, 0, KEY_ADDR },
	{ SET_MASQ, ID_MASQ, 0, KEY_ADDR },
	{ MAP_EGRESS_CLASS, ID_EGRESS_CLASS, NFT_SET_MAP, KEY_ADDR },
	{ SET_POD_SRC, ID_POD_SRC, 0, KEY_LINK_ADDR },
	{ "spoofed_ipv4", ID_SPOOFED_MAPS + ACCT_IPV4, NFT_SET_OBJECT, KEY_LINK },
	{ "spoofed_ipv6", ID_SPOOFED_MAPS + ACCT_IPV6, NFT_SET_OBJECT, KEY_LINK },
	{ "ns_egress_internal", ID_NS_MAPS + 0, NFT_SET_OBJECT, KEY_ADDR },
	{ "ns_egress_internet", ID_NS_MAPS + 1, NFT_SET_OBJECT, KEY_ADDR },
	{ "ns_ingress_internal", ID_NS_MAPS + 2, NFT_SET_OBJECT, KEY_ADDR },
	{ "ns_ingress_internet", ID_NS_MAPS + 3, NFT_SET_OBJECT, KEY_ADDR },
	{ "pod_egress_internal", ID_POD_MAPS + 0, NFT_SET_OBJECT, KEY_ADDR },
	{ "pod_egress_internet", ID_POD_MAPS + 1, NFT_SET_OBJECT, KEY_ADDR },
	{ "pod_ingress_internal", ID_POD_MAPS + 2, NFT_SET_OBJECT, KEY_ADDR },
	{ "pod_ingress_internet", ID_POD_MAPS + 3, NFT_SET_OBJECT, KEY_ADDR },
};

int table_put_set(struct batch *bt, const struct set_def *d)
{
	struct nftnl_set *s = set_new(d->name, d->id, d->flags, d->key);
	struct nlmsghdr *nlh;

	if (!s)
		return -ENOMEM;
	nlh = batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	batch_next(bt);
	return 0;
}

/* Removes every element of a set: DELSETELEM without an element list. */
void table_flush_set(struct batch *bt, const char *set)
{
	struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_DELSETELEM, 0);

	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, ACCT_TABLE);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
	batch_next(bt);
}

size_t table_internal_bounds(const struct acct_config *cfg, struct bound ret[TABLE_BOUNDS_MAX])
{
	size_t n = 0;

	/*
	 * Interval sets take boundaries: a start key, and the key after the last
	 * address flagged as an end. Like nft, open with an end at 0.0.0.0 so the
	 * space below the first range is outside the set.
	 */
	if (cfg->n_internal && cfg->internal[0].net != 0)
		ret[n++] = (struct bound){ 0, true };
	for (size_t i = 0; i < cfg->n_internal && i < ACCT_MAX_INTERNAL; i++) {
		uint32_t last = cidr4_last(&cfg->internal[i]);

		ret[n++] = (struct bound){ cfg->internal[i].net, false };
		if (last != UINT32_MAX)
			ret[n++] = (struct bound){ last + 1, true };
	}
	return n;
}

int table_put_internal(struct batch *bt, const struct acct_config *cfg)
{
	struct nftnl_set *s = set_new(SET_INTERNAL, ID_INTERNAL, NFT_SET_INTERVAL, KEY_ADDR);
	struct bound b[TABLE_BOUNDS_MAX];
	size_t n = table_internal_bounds(cfg, b);
	struct nlmsghdr *nlh;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		set_add_key(s, b[i].key, b[i].end);
	nlh = batch_msg(bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	batch_next(bt);
	return 0;
}

int acct_put_counter_msg(struct batch *bt, const char *name, uint16_t msg, uint16_t flags)
{
	struct nftnl_obj *o = nftnl_obj_alloc();
	struct nlmsghdr *nlh;

	if (!o)
		return -ENOMEM;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, ACCT_TABLE);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nlh = batch_msg(bt, msg, flags);
	nftnl_obj_nlmsg_build_payload(nlh, o);
	nftnl_obj_free(o);
	batch_next(bt);
	return 0;
}

int acct_put_counter(struct batch *bt, const char *name)
{
	/* No NLM_F_EXCL: an existing counter is kept as it is, bytes and all. */
	return acct_put_counter_msg(bt, name, NFT_MSG_NEWOBJ, NLM_F_CREATE);
}

/* ---- rule building ---- */

static void put(struct nftnl_rule *r, struct nftnl_expr *ex)
{
	if (ex)
		nftnl_rule_add_expr(r, ex);
}

static struct nftnl_expr *meta_load(uint32_t key)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("meta");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_DREG, NFT_REG_1);
	return ex;
}

static struct nftnl_expr *cmp_eq(const void *data, uint32_t len)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("cmp");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
	nftnl_expr_set(ex, NFTNL_EXPR_CMP_DATA, data, len);
	return ex;
}

/* 12: ip saddr, 16: ip daddr; into register dreg */
static struct nftnl_expr *load_ip_to(uint32_t offset, uint32_t dreg)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("payload");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_LEN, 4);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	return ex;
}

static struct nftnl_expr *load_ip(uint32_t offset)
{
	return load_ip_to(offset, NFT_REG_1);
}

static struct nftnl_expr *lookup(const char *set, uint32_t id, bool invert)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("lookup");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(ex, NFTNL_EXPR_LOOKUP_SET, set);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SET_ID, id);
	if (invert)
		nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
	return ex;
}

/* counter name <reg1> map @set */
static struct nftnl_expr *counter_map(const char *set, uint32_t id)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("objref");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_OBJREF_SET_SREG, NFT_REG_1);
	nftnl_expr_set_str(ex, NFTNL_EXPR_OBJREF_SET_NAME, set);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_OBJREF_SET_ID, id);
	return ex;
}

/* counter name "<name>" */
static struct nftnl_expr *counter_named(const char *name)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("objref");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	nftnl_expr_set_str(ex, NFTNL_EXPR_OBJREF_IMM_NAME, name);
	return ex;
}

/* A verdict; `chain` names the target of a jump or goto. */
static struct nftnl_expr *verdict(uint32_t v, const char *chain)
{
	struct nftnl_expr *imm = nftnl_expr_alloc("immediate");

	nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_VERDICT, v);
	if (chain)
		nftnl_expr_set_str(imm, NFTNL_EXPR_IMM_CHAIN, chain);
	return imm;
}

/* meta nfproto ipv4|ipv6 */
static void match_nfproto(struct nftnl_rule *r, uint8_t proto)
{
	put(r, meta_load(NFT_META_NFPROTO));
	put(r, cmp_eq(&proto, sizeof(proto)));
}

/* A rule of either family. */
static struct nftnl_rule *rule_new_any(const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	if (!r)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return r;
}

static struct nftnl_rule *rule_new(const char *chain)
{
	struct nftnl_rule *r = rule_new_any(chain);

	/* meta nfproto ipv4: what nft adds for `ip ...` matches in an inet table */
	if (r)
		match_nfproto(r, NFPROTO_IPV4);
	return r;
}

/* Appends a rule to the list (which owns it from now on); the list remembers a failure. */
static int put_rule(struct rule_list *w, struct nftnl_rule *r)
{
	if (!r || w->n >= TABLE_RULES_MAX) {
		if (r)
			nftnl_rule_free(r);
		w->failed = true;
		return -ENOMEM;
	}
	w->r[w->n++] = r;
	return 0;
}

void rule_list_free(struct rule_list *w)
{
	for (size_t i = 0; i < w->n; i++)
		nftnl_rule_free(w->r[i]);
	w->n = 0;
}

/* `iif lo return` / `oif lo return`: loopback is neither internal nor internet traffic. */
static struct nftnl_rule *skip_loopback(const char *chain, uint32_t meta_key)
{
	struct nftnl_rule *r = rule_new(chain);
	uint32_t lo = 1; /* the loopback device is ifindex 1 in every namespace */

	if (!r)
		return NULL;
	put(r, meta_load(meta_key));
	put(r, cmp_eq(&lo, sizeof(lo)));
	put(r, verdict(NFT_RETURN, NULL));
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
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	if (class_off) {
		put(r, load_ip(class_off));
		put(r, lookup(SET_INTERNAL, ID_INTERNAL, internet));
	}
	if (map) {
		put(r, load_ip(key_off));
		put(r, counter_map(map, map_id));
	} else {
		put(r, counter_named(named));
	}
	return r;
}

/*
 * ip daddr != @internal meta mark set meta mark | M: (mark & ~M) ^ M sets M
 * and keeps every other bit.
 */
static struct nftnl_rule *mark_rule(const char *chain, uint32_t mark)
{
	struct nftnl_rule *r = rule_new(chain);
	struct nftnl_expr *ex;
	uint32_t mask = ~mark, xor = mark;

	if (!r)
		return NULL;
	put(r, load_ip(16));
	put(r, lookup(SET_INTERNAL, ID_INTERNAL, true));
	put(r, meta_load(NFT_META_MARK));
	ex = nftnl_expr_alloc("bitwise");
	nftnl_expr_set_u32(ex, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_BITWISE_LEN, sizeof(uint32_t));
	nftnl_expr_set(ex, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof(mask));
	nftnl_expr_set(ex, NFTNL_EXPR_BITWISE_XOR, &xor, sizeof(xor));
	put(r, ex);
	ex = nftnl_expr_alloc("meta");
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_KEY, NFT_META_MARK);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_SREG, NFT_REG_1);
	put(r, ex);
	return r;
}

static struct nftnl_expr *meta_set_priority(void)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("meta");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_KEY, NFT_META_PRIORITY);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_SREG, NFT_REG_1);
	return ex;
}

/* In fwd_ingress (source not internal): ip daddr @pods meta priority set <the pods' internet ingress class> */
static struct nftnl_rule *inet_ingress_class_rule(uint32_t classid)
{
	struct nftnl_rule *r = rule_new(FWD_INGRESS);
	struct nftnl_expr *imm;

	if (!r)
		return NULL;
	put(r, load_ip(16));
	put(r, lookup(SET_PODS, ID_PODS, false));
	imm = nftnl_expr_alloc("immediate");
	nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(imm, NFTNL_EXPR_IMM_DATA, &classid, sizeof(classid));
	put(r, imm);
	put(r, meta_set_priority());
	return r;
}

/* In fwd_egress (destination not internal): meta priority set ip saddr map @egress_class */
static struct nftnl_rule *inet_egress_class_rule(void)
{
	struct nftnl_rule *r = rule_new(FWD_EGRESS);
	struct nftnl_expr *ex;

	if (!r)
		return NULL;
	put(r, load_ip(12));
	ex = nftnl_expr_alloc("lookup");
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_1);
	nftnl_expr_set_str(ex, NFTNL_EXPR_LOOKUP_SET, MAP_EGRESS_CLASS);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SET_ID, ID_EGRESS_CLASS);
	put(r, ex);
	put(r, meta_set_priority());
	return r;
}

/* [ip saddr|daddr @internal] jump|goto <target> (class_off 0: unconditional) */
static struct nftnl_rule *branch_rule(const char *chain, uint32_t class_off, uint32_t v,
				      const char *target)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	if (class_off) {
		put(r, load_ip(class_off));
		put(r, lookup(SET_INTERNAL, ID_INTERNAL, false));
	}
	put(r, verdict(v, target));
	return r;
}

/* iifname "<prefix>*": the packet came in from a pod's host link. */
static void match_pod_link(struct nftnl_rule *r, const char *prefix)
{
	put(r, meta_load(NFT_META_IIFNAME));
	put(r, cmp_eq(prefix, (uint32_t)strlen(prefix)));
}

/* In prerouting, either family: iifname "<prefix>*" jump from_pod */
static struct nftnl_rule *from_pod_rule(const char *prefix)
{
	struct nftnl_rule *r = rule_new_any("prerouting");

	if (!r)
		return NULL;
	match_pod_link(r, prefix);
	put(r, verdict(NFT_JUMP, FROM_POD));
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
	struct nftnl_rule *r = rule_new(FROM_POD);

	if (!r)
		return NULL;
	put(r, meta_load(NFT_META_IIFNAME));
	put(r, load_ip_to(12, NFT_REG_2));
	put(r, lookup(SET_POD_SRC, ID_POD_SRC, true));
	put(r, verdict(NFT_GOTO, SPOOFED));
	return r;
}

/* meta nfproto ipv6 goto spoofed: no IPv6 from pods until dual-stack. */
static struct nftnl_rule *antispoof_ipv6_rule(void)
{
	struct nftnl_rule *r = rule_new_any(FROM_POD);

	if (!r)
		return NULL;
	match_nfproto(r, NFPROTO_IPV6);
	put(r, verdict(NFT_GOTO, SPOOFED));
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
	struct nftnl_rule *r = rule_new_any(SPOOFED);
	char name[ACCT_COUNTER_NAME_MAX];

	if (!r)
		return NULL;
	if (!last)
		match_nfproto(r, f == ACCT_IPV4 ? NFPROTO_IPV4 : NFPROTO_IPV6);
	if (by_link) {
		put(r, meta_load(NFT_META_IIFNAME));
		put(r, counter_map(acct_spoofed_maps[f], ID_SPOOFED_MAPS + f));
	} else {
		acct_spoofed_counter_name(NULL, f, name);
		put(r, counter_named(name));
	}
	put(r, verdict(NF_DROP, NULL));
	return r;
}

static struct nftnl_rule *masquerade_rule(void)
{
	struct nftnl_rule *r = rule_new("postrouting");

	if (!r)
		return NULL;
	put(r, load_ip(12));
	put(r, lookup(SET_MASQ, ID_MASQ, false));
	put(r, load_ip(16));
	put(r, lookup(SET_INTERNAL, ID_INTERNAL, true));
	put(r, nftnl_expr_alloc("masq"));
	return r;
}

int table_put_chain(struct batch *bt, const struct chain_def *d)
{
	struct nftnl_chain *ch = nftnl_chain_alloc();
	struct nlmsghdr *nlh;

	if (!ch)
		return -ENOMEM;
	nftnl_chain_set_str(ch, NFTNL_CHAIN_TABLE, ACCT_TABLE);
	nftnl_chain_set_str(ch, NFTNL_CHAIN_NAME, d->name);
	if (d->type) {
		nftnl_chain_set_u32(ch, NFTNL_CHAIN_HOOKNUM, d->hook);
		nftnl_chain_set_s32(ch, NFTNL_CHAIN_PRIO, d->prio);
		nftnl_chain_set_str(ch, NFTNL_CHAIN_TYPE, d->type);
		nftnl_chain_set_u32(ch, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	nlh = batch_msg(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
	nftnl_chain_nlmsg_build_payload(nlh, ch);
	nftnl_chain_free(ch);
	batch_next(bt);
	return 0;
}

/* Removes every rule of a chain: a rule without a handle names them all. */
int table_flush_chain(struct batch *bt, const char *chain)
{
	struct nftnl_rule *flush = nftnl_rule_alloc();
	struct nlmsghdr *nlh;

	if (!flush)
		return -ENOMEM;
	nftnl_rule_set_str(flush, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(flush, NFTNL_RULE_CHAIN, chain);
	nlh = batch_msg(bt, NFT_MSG_DELRULE, 0);
	nftnl_rule_nlmsg_build_payload(nlh, flush);
	nftnl_rule_free(flush);
	batch_next(bt);
	return 0;
}

/* Adds a rule to the end of its chain. */
int table_put_rule(struct batch *bt, struct nftnl_rule *r)
{
	struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);

	nftnl_rule_nlmsg_build_payload(nlh, r);
	batch_next(bt);
	return 0;
}

int table_put_host_counters(struct batch *bt)
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

/* The pod counting rules of one chain: egress keyed by saddr, ingress by daddr. */
static int put_pod_counting(struct rule_list *bt, const char *chain, bool egress, bool ingress,
			    const char *const maps[], uint32_t first_id)
{
	int r = 0;

	if (egress) {
		r |= put_rule(bt, count_rule(chain, 16, false, 12, maps[ACCT_EGRESS_INTERNAL],
					     first_id + ACCT_EGRESS_INTERNAL, NULL));
		r |= put_rule(bt, count_rule(chain, 16, true, 12, maps[ACCT_EGRESS_INTERNET],
					     first_id + ACCT_EGRESS_INTERNET, NULL));
	}
	if (ingress) {
		r |= put_rule(bt, count_rule(chain, 12, false, 16, maps[ACCT_INGRESS_INTERNAL],
					     first_id + ACCT_INGRESS_INTERNAL, NULL));
		r |= put_rule(bt, count_rule(chain, 12, true, 16, maps[ACCT_INGRESS_INTERNET],
					     first_id + ACCT_INGRESS_INTERNET, NULL));
	}
	return r ? -ENOMEM : 0;
}

/* Forwarded traffic's counting rules, in the chains that classified it already. */
static int put_fwd_counting(struct rule_list *bt, const char *const maps[], uint32_t first_id)
{
	static const struct {
		const char *chain;
		enum acct_class cls;
		uint32_t key_off;	/* the pod's address: source going out, destination coming in */
	} rules[] = {
		{ FWD_EGRESS_INTERNAL, ACCT_EGRESS_INTERNAL, 12 },
		{ FWD_EGRESS, ACCT_EGRESS_INTERNET, 12 },
		{ FWD_INGRESS_INTERNAL, ACCT_INGRESS_INTERNAL, 16 },
		{ FWD_INGRESS, ACCT_INGRESS_INTERNET, 16 },
	};
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
		r |= put_rule(bt, count_rule(rules[i].chain, 0, false, rules[i].key_off,
					     maps[rules[i].cls], first_id + rules[i].cls, NULL));
	return r ? -ENOMEM : 0;
}

int table_rules(const struct acct_config *cfg, struct rule_list *bt)
{
	int r = 0;

	bt->n = 0;
	bt->failed = false;
	if (!cfg->pod_link_prefix || !cfg->pod_link_prefix[0] ||
	    strlen(cfg->pod_link_prefix) >= KEY_LINK_LEN)
		return -EINVAL;
	/* A pod sends only as itself, whatever else the config says. */
	r |= put_rule(bt, from_pod_rule(cfg->pod_link_prefix));
	r |= put_rule(bt, antispoof_rule());
	r |= put_rule(bt, antispoof_ipv6_rule());
	r |= put_rule(bt, spoofed_rule(ACCT_IPV4, true, false));
	r |= put_rule(bt, spoofed_rule(ACCT_IPV6, true, false));
	r |= put_rule(bt, spoofed_rule(ACCT_IPV4, false, false));
	r |= put_rule(bt, spoofed_rule(ACCT_IPV6, false, true));
	/*
	 * Internet-bound packets carry the mark from before routing on. What
	 * reaches the mark in from_pod has its pod's address (anti-spoofing saw
	 * to it): no lookup in @pods to tell a pod's packet.
	 */
	r |= put_rule(bt, skip_loopback("output", NFT_META_OIF));
	if (cfg->internet_mark) {
		r |= put_rule(bt, mark_rule(FROM_POD, cfg->internet_mark));
		r |= put_rule(bt, mark_rule("output", cfg->internet_mark));
	}
	/* Forwarded pod traffic: one classification per direction (see chains[]). */
	r |= put_rule(bt, branch_rule("forward", 0, NFT_JUMP, FWD_EGRESS));
	r |= put_rule(bt, branch_rule("forward", 0, NFT_JUMP, FWD_INGRESS));
	r |= put_rule(bt, branch_rule(FWD_EGRESS, 16, NFT_GOTO, FWD_EGRESS_INTERNAL));
	r |= put_rule(bt, branch_rule(FWD_INGRESS, 12, NFT_GOTO, FWD_INGRESS_INTERNAL));
	/* The shaper's classes for internet traffic (the classids come with the config). */
	r |= put_rule(bt, inet_egress_class_rule());
	if (cfg->inet_ingress_classid)
		r |= put_rule(bt, inet_ingress_class_rule(cfg->inet_ingress_classid));
	if (cfg->enabled) {
		r |= put_fwd_counting(bt, acct_ns_maps, ID_NS_MAPS);
		if (cfg->per_pod)
			r |= put_fwd_counting(bt, acct_pod_maps, ID_POD_MAPS);
		/* Pods' traffic with the node itself. */
		r |= put_rule(bt, skip_loopback("input", NFT_META_IIF));
		r |= put_pod_counting(bt, "input", true, false, acct_ns_maps, ID_NS_MAPS);
		if (cfg->per_pod)
			r |= put_pod_counting(bt, "input", true, false, acct_pod_maps, ID_POD_MAPS);
		r |= put_rule(bt, count_rule("input", 12, false, 0, NULL, 0, "host_ingress_internal"));
		r |= put_rule(bt, count_rule("input", 12, true, 0, NULL, 0, "host_ingress_internet"));
		r |= put_pod_counting(bt, "output", false, true, acct_ns_maps, ID_NS_MAPS);
		if (cfg->per_pod)
			r |= put_pod_counting(bt, "output", false, true, acct_pod_maps, ID_POD_MAPS);
		r |= put_rule(bt, count_rule("output", 16, false, 0, NULL, 0, "host_egress_internal"));
		r |= put_rule(bt, count_rule("output", 16, true, 0, NULL, 0, "host_egress_internet"));
	}
	r |= put_rule(bt, masquerade_rule());
	if (r || bt->failed) {
		rule_list_free(bt);
		return -ENOMEM;
	}
	return 0;
}
