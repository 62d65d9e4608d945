// SPDX-License-Identifier: Apache-2.0
/*
 * internetGuard.destinations in table inet tollgate: each namespace's sets
 * dst_<namespace>_egress and dst_<namespace>_ingress (made and removed with
 * its guard chains, guard.c), and their read. The read parses the answers
 * in place with libmnl: a set holds up to 65,536 elements and the node
 * daemon reads every set every few seconds.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>

#include "accounting/internal.h"
#include "lib/util.h"

#define DST_RECV_SIZE 32768
/* The set's comment: `nft list` shows it, acct_dst_read parses it. */
#define DST_COMMENT_FMT "tollgate: prefixLength %u top %u"

void acct_dst_set_name(const char *k8s_namespace, enum acct_dir dir,
		       char ret[ACCT_COUNTER_NAME_MAX])
{
	snprintf(ret, ACCT_COUNTER_NAME_MAX, ACCT_DST_SET_PREFIX "%.100s_%s",
		 k8s_namespace ? k8s_namespace : "", acct_dir_names[dir]);
}

bool acct_dst_set_parse(const char *name, char ret_ns[ACCT_COUNTER_NAME_MAX],
			enum acct_dir *ret_dir)
{
	size_t len = strlen(name), pre = strlen(ACCT_DST_SET_PREFIX);

	if (len >= ACCT_COUNTER_NAME_MAX || strncmp(name, ACCT_DST_SET_PREFIX, pre) != 0)
		return false;
	for (int d = 0; d < ACCT_DIRS; d++) {
		size_t suf = strlen(acct_dir_names[d]) + 1;
		const char *ns = name + pre;
		size_t ns_len;

		if (len < pre + suf || name[len - suf] != '_' ||
		    strcmp(name + len - suf + 1, acct_dir_names[d]) != 0)
			continue;
		ns_len = len - pre - suf;
		/* a namespace is a DNS label: no '_' */
		if (memchr(ns, '_', ns_len))
			return false;
		memcpy(ret_ns, ns, ns_len);
		ret_ns[ns_len] = '\0';
		*ret_dir = (enum acct_dir)d;
		return true;
	}
	return false;
}

int acct_dst_put_set(struct acct_batch *bt, const struct acct_config *cfg,
		     const char *k8s_namespace, enum acct_dir dir, uint16_t msg)
{
	char name[ACCT_COUNTER_NAME_MAX], comment[64];
	struct nftnl_udata_buf *u = NULL;
	struct nftnl_set *s;
	struct nftnl_expr *counter;
	struct nlmsghdr *nlh;

	acct_dst_set_name(k8s_namespace, dir, name);
	if (msg != NFT_MSG_NEWSET) {
		s = nftnl_set_alloc();
		if (!s)
			return -ENOMEM;
		nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
		nftnl_set_set_str(s, NFTNL_SET_NAME, name);
		nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	} else {
		/* { type ipv4_addr; size tracked; flags dynamic,timeout; timeout 60s; counter; } */
		/* the kernel wants an id for every new set: one of the name's, above the skeleton's */
		uint32_t id = (uint32_t)hash_fnv1a64(name, strlen(name), FNV1A64_INIT) | 1u << 31;

		s = acct_set_new(name, id, NFT_SET_TIMEOUT | NFT_SET_EVAL, ACCT_KEY_ADDR);
		counter = nftnl_expr_alloc("counter");
		if (!s || !counter) {
			if (s)
				nftnl_set_free(s);
			if (counter)
				nftnl_expr_free(counter);
			return -ENOMEM;
		}
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, cfg->guard.dst.tracked);
		/* what a reader needs to know of the config, in the set itself */
		snprintf(comment, sizeof(comment), DST_COMMENT_FMT, cfg->guard.dst.prefix_len,
			 cfg->guard.dst.top);
		if (!(u = nftnl_udata_buf_alloc(128)) ||
		    !nftnl_udata_put_strz(u, NFTNL_UDATA_SET_COMMENT, comment)) {
			nftnl_set_free(s);
			nftnl_expr_free(counter);
			nftnl_udata_buf_free(u);
			return -ENOMEM;
		}
		nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(u),
				   nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
		nftnl_set_set_u64(s, NFTNL_SET_TIMEOUT, ACCT_DST_TIMEOUT_S * 1000ull);
		nftnl_set_add_expr(s, counter);
	}
	nlh = acct_batch_msg(bt, msg, msg == NFT_MSG_NEWSET ? NLM_F_CREATE : 0);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	acct_batch_next(bt);
	return 0;
}

/* ---- the read ---- */

struct set_name {
	char ns[ACCT_COUNTER_NAME_MAX];
	enum acct_dir dir;
	uint8_t prefix_len;
	uint32_t top;
};

struct names_ctx {
	struct set_name *v;
	size_t n, cap;
	int err;
};

static int set_cb(const struct nlmsghdr *nlh, void *p)
{
	struct names_ctx *ctx = p;
	const struct nlattr *a;
	struct set_name sn = { .prefix_len = 0 };
	bool ours = false, has_comment = false;
	unsigned len, top;
	char text[64] = "";

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) == NFTA_SET_NAME &&
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			ours = acct_dst_set_parse(mnl_attr_get_str(a), sn.ns, &sn.dir);
		else if (mnl_attr_get_type(a) == NFTA_SET_USERDATA)
			has_comment =
				acct_udata_comment(a, NFTNL_UDATA_SET_COMMENT, text, sizeof(text));
	}
	/* The comment says how the set groups destinations (DST_COMMENT_FMT). */
	if (has_comment && sscanf(text, DST_COMMENT_FMT, &len, &top) == 2 && len >= 1 &&
	    len <= 32 && top >= 1) {
		sn.prefix_len = (uint8_t)len;
		sn.top = top;
	}
	if (!ours)
		return MNL_CB_OK;
	if (!array_grow(&ctx->v, &ctx->cap, ctx->n, sizeof(*ctx->v), 16)) {
		ctx->err = -ENOMEM;
		return MNL_CB_ERROR;
	}
	ctx->v[ctx->n++] = sn;
	return MNL_CB_OK;
}

struct elems_ctx {
	const struct acct_dst_visitor *v;
	struct acct_dst_set set;
};

/* counter's bytes and packets out of an expression (NFTA_EXPR_NAME, NFTA_EXPR_DATA) */
static void expr_counter(const struct nlattr *expr, uint64_t *bytes, uint64_t *packets)
{
	const struct nlattr *a, *data = NULL;
	bool counter = false;

	mnl_attr_for_each_nested(a, expr)
	{
		if (mnl_attr_get_type(a) == NFTA_EXPR_NAME &&
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			counter = strcmp(mnl_attr_get_str(a), "counter") == 0;
		else if (mnl_attr_get_type(a) == NFTA_EXPR_DATA)
			data = a;
	}
	if (!counter || !data)
		return;
	mnl_attr_for_each_nested(a, data)
	{
		uint16_t t = mnl_attr_get_type(a);

		if ((t == NFTA_COUNTER_BYTES || t == NFTA_COUNTER_PACKETS) &&
		    mnl_attr_validate(a, MNL_TYPE_U64) == 0)
			*(t == NFTA_COUNTER_BYTES ? bytes : packets) = be64toh(mnl_attr_get_u64(a));
	}
}

static void read_dst_elem(struct elems_ctx *ctx, const struct nlattr *el)
{
	const struct nlattr *a, *b;
	uint64_t bytes = 0, packets = 0;
	uint32_t prefix = 0;
	bool keyed = false;

	mnl_attr_for_each_nested(a, el)
	{
		uint16_t t = mnl_attr_get_type(a);

		if (t == NFTA_SET_ELEM_KEY) {
			mnl_attr_for_each_nested(b, a)
			{
				uint32_t be;

				if (mnl_attr_get_type(b) != NFTA_DATA_VALUE ||
				    mnl_attr_get_payload_len(b) != 4)
					continue;
				memcpy(&be, mnl_attr_get_payload(b), 4);
				prefix = ntohl(be);
				keyed = true;
			}
		} else if (t == NFTA_SET_ELEM_EXPR) {
			expr_counter(a, &bytes, &packets);
		} else if (t == NFTA_SET_ELEM_EXPRESSIONS) {
			mnl_attr_for_each_nested(b, a)
			{
				expr_counter(b, &bytes, &packets);
			}
		}
	}
	if (keyed && ctx->v->elem)
		ctx->v->elem(&ctx->set, prefix, bytes, packets, ctx->v->arg);
}

static int dst_elems_cb(const struct nlmsghdr *nlh, void *p)
{
	struct elems_ctx *ctx = p;
	const struct nlattr *a, *b;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) != NFTA_SET_ELEM_LIST_ELEMENTS)
			continue;
		mnl_attr_for_each_nested(b, a)
		{
			if (mnl_attr_get_type(b) == NFTA_LIST_ELEM)
				read_dst_elem(ctx, b);
		}
	}
	return MNL_CB_OK;
}

int acct_dst_read(bool reset, const struct acct_dst_visitor *v, size_t *ret_sets)
{
	struct names_ctx names = { 0 };
	struct acct_nft_conn c = { 0 };
	char *buf = malloc(DST_RECV_SIZE);
	struct nlmsghdr *nlh;
	size_t done = 0;
	int r;

	if (!buf)
		return -ENOMEM;
	r = acct_nft_open(&c, 0, NULL);
	if (r == 0) {
		memset(buf, 0, 256);
		nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSET, NFPROTO_INET,
					    NLM_F_DUMP | NLM_F_ACK, 1);
		mnl_attr_put_strz(nlh, NFTA_SET_TABLE, ACCT_TABLE);
		r = acct_nft_request(&c, buf, DST_RECV_SIZE, set_cb, &names);
		r = r < 0 && names.err ? names.err : r;
	}
	for (size_t i = 0; r == 0 && i < names.n; i++) {
		struct elems_ctx ctx = { .v = v };
		char set[ACCT_COUNTER_NAME_MAX];
		int q;

		ctx.set = (struct acct_dst_set){ names.v[i].ns, names.v[i].dir,
						 names.v[i].prefix_len, names.v[i].top };
		if (v->set)
			v->set(&ctx.set, v->arg);
		acct_dst_set_name(names.v[i].ns, names.v[i].dir, set);
		memset(buf, 0, 256);
		nlh = nftnl_nlmsg_build_hdr(buf,
					    reset ? NFT_MSG_GETSETELEM_RESET : NFT_MSG_GETSETELEM,
					    NFPROTO_INET, NLM_F_DUMP | NLM_F_ACK, (uint32_t)i + 2);
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, ACCT_TABLE);
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
		q = acct_nft_request_all(&c, buf, DST_RECV_SIZE, dst_elems_cb, &ctx);
		/* a set retired since the list: nothing to take */
		if (q < 0 && q != -ENOENT)
			r = q;
		done += q == 0;
	}
	acct_nft_close(&c);
	free(names.v);
	free(buf);
	if (ret_sets)
		*ret_sets = done;
	return r;
}
