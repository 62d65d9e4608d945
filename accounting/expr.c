// SPDX-License-Identifier: Apache-2.0
/*
 * The nftables expressions Tollgate's rules are made of (rules.c and each
 * feature's file for table inet tollgate, arp.c for table arp tollgate): one builder each, every
 * allocation checked. A builder returns NULL when it cannot build, and
 * acct_rule_add() remembers a missing expression: a rule that lost one
 * is spoiled whole (acct_rule_spoiled), never sent short of a match (a
 * drop rule without its iifname match drops every packet of the node).
 */
#include <stdio.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "accounting/internal.h"

/* Expressions that could not be built since the last acct_rule_spoiled(): one process, one thread. */
static unsigned acct_expr_missing;

void acct_rule_add(struct nftnl_rule *r, struct nftnl_expr *ex)
{
	if (!ex) {
		acct_expr_missing++;
		return;
	}
	nftnl_rule_add_expr(r, ex);
}

bool acct_rule_spoiled(void)
{
	bool spoiled = acct_expr_missing != 0;

	acct_expr_missing = 0;
	return spoiled;
}

struct nftnl_expr *acct_expr_meta_to(uint32_t key, uint32_t dreg)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("meta");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_DREG, dreg);
	return ex;
}

struct nftnl_expr *acct_expr_meta(uint32_t key)
{
	return acct_expr_meta_to(key, NFT_REG_1);
}

struct nftnl_expr *acct_expr_meta_set(uint32_t key)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("meta");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_SREG, NFT_REG_1);
	return ex;
}

struct nftnl_expr *acct_expr_cmp(uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("cmp");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(ex, NFTNL_EXPR_CMP_DATA, data, len);
	return ex;
}

struct nftnl_expr *acct_expr_cmp_eq(const void *data, uint32_t len)
{
	return acct_expr_cmp(NFT_CMP_EQ, data, len);
}

struct nftnl_expr *acct_expr_bitwise32(uint32_t mask, uint32_t xor)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("bitwise");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_BITWISE_LEN, sizeof(uint32_t));
	nftnl_expr_set(ex, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof(mask));
	nftnl_expr_set(ex, NFTNL_EXPR_BITWISE_XOR, &xor, sizeof(xor));
	return ex;
}

struct nftnl_expr *acct_expr_payload_to(uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("payload");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	return ex;
}

struct nftnl_expr *acct_expr_ip_to(uint32_t offset, uint32_t dreg)
{
	return acct_expr_payload_to(NFT_PAYLOAD_NETWORK_HEADER, offset, 4, dreg);
}

struct nftnl_expr *acct_expr_ip(uint32_t offset)
{
	return acct_expr_ip_to(offset, NFT_REG_1);
}

struct nftnl_expr *acct_expr_lookup(const char *set, uint32_t id, bool invert)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("lookup");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(ex, NFTNL_EXPR_LOOKUP_SET, set);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SET_ID, id);
	if (invert)
		nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
	return ex;
}

struct nftnl_expr *acct_expr_map(const char *map, uint32_t id, uint32_t sreg, uint32_t dreg)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("lookup");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_DREG, dreg);
	nftnl_expr_set_str(ex, NFTNL_EXPR_LOOKUP_SET, map);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SET_ID, id);
	return ex;
}

struct nftnl_expr *acct_expr_objref_map(const char *map, uint32_t id)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("objref");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_OBJREF_SET_SREG, NFT_REG_1);
	nftnl_expr_set_str(ex, NFTNL_EXPR_OBJREF_SET_NAME, map);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_OBJREF_SET_ID, id);
	return ex;
}

struct nftnl_expr *acct_expr_counter(const char *name)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("objref");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	nftnl_expr_set_str(ex, NFTNL_EXPR_OBJREF_IMM_NAME, name);
	return ex;
}

struct nftnl_expr *acct_expr_verdict(uint32_t v, const char *chain)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("immediate");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_IMM_VERDICT, v);
	if (chain)
		nftnl_expr_set_str(ex, NFTNL_EXPR_IMM_CHAIN, chain);
	return ex;
}

struct nftnl_expr *acct_expr_immediate32(uint32_t value)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("immediate");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(ex, NFTNL_EXPR_IMM_DATA, &value, sizeof(value));
	return ex;
}

struct nftnl_expr *acct_expr_ct(uint32_t key)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("ct");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CT_KEY, key);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	return ex;
}

struct nftnl_expr *acct_expr_plain(const char *name)
{
	return nftnl_expr_alloc(name);
}

struct nftnl_expr *acct_expr_reject(uint32_t type, uint8_t code)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("reject");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(ex, NFTNL_EXPR_REJECT_CODE, code);
	return ex;
}

struct nftnl_expr *acct_expr_dynset_update(const char *set)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("dynset");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
	nftnl_expr_set_str(ex, NFTNL_EXPR_DYNSET_SET_NAME, set);
	return ex;
}

struct nftnl_expr *acct_expr_limit_over(uint64_t per_second, uint32_t burst)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("limit");

	if (!ex)
		return NULL;
	nftnl_expr_set_u64(ex, NFTNL_EXPR_LIMIT_RATE, per_second);
	nftnl_expr_set_u64(ex, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LIMIT_BURST, burst);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
	return ex;
}

struct nftnl_expr *acct_expr_count_over(uint32_t n)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("connlimit");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CONNLIMIT_COUNT, n);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CONNLIMIT_FLAGS, NFT_CONNLIMIT_F_INV);
	return ex;
}

struct nftnl_expr *acct_expr_fib_daddr_type(void)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("fib");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
	return ex;
}

struct nftnl_expr *acct_expr_dnat4(uint32_t reg_addr, uint32_t reg_port)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("nat");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_NAT_FAMILY, NFPROTO_IPV4);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_NAT_REG_ADDR_MIN, reg_addr);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_NAT_REG_PROTO_MIN, reg_port);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_NAT_FLAGS,
			   NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED);
	return ex;
}

struct nftnl_expr *acct_expr_dynset(const char *set, uint32_t id, uint32_t op)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("dynset");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_DYNSET_OP, op);
	nftnl_expr_set_str(ex, NFTNL_EXPR_DYNSET_SET_NAME, set);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_DYNSET_SET_ID, id);
	return ex;
}

struct nftnl_expr *acct_expr_rt_nexthop4(void)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("rt");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_RT_KEY, NFT_RT_NEXTHOP4);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_RT_DREG, NFT_REG_1);
	return ex;
}
