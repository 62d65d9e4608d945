// SPDX-License-Identifier: Apache-2.0
/* The `inet tollgate` nftables table, through libnftnl batches over libmnl. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "accounting/accounting.h"
#include "lib/cleanup.h"

#define SET_INTERNAL "internal"
#define SET_PODS "pods"
#define SET_MASQ "masq"
#define CHAIN_POSTROUTING "postrouting"
#define NFT_TYPE_IPADDR 7 /* nft's datatype id for ipv4_addr, so `nft list` prints addresses */
#define SET_ID_INTERNAL 1
#define SET_ID_PODS 2
#define SET_ID_MASQ 3
#define BATCH_SIZE (64 * 1024)
#define NFT_RECV_SIZE 16384 /* MNL_SOCKET_BUFFER_SIZE is a runtime value (page size) */

struct batch {
	char buf[BATCH_SIZE];
	struct mnl_nlmsg_batch *b;
	uint32_t seq;
	unsigned int acks;	/* messages that asked for an answer */
};

struct nft_conn {
	struct mnl_socket *nl;
	uint32_t portid;
};

static int conn_open(struct nft_conn *c, struct tg_err *e)
{
	int one = 1;

	c->nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!c->nl)
		return tg_fail(e, CNI_ERR_IO, -errno, "cannot open nftables netlink socket: %m");
	if (mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int r = -errno;

		mnl_socket_close(c->nl);
		c->nl = NULL;
		return tg_fail(e, CNI_ERR_IO, r, "cannot bind nftables netlink socket: %s",
			       strerror(-r));
	}
	/* Ask for the kernel's own words on failures (extended ack). */
	mnl_socket_setsockopt(c->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	c->portid = mnl_socket_get_portid(c->nl);
	return 0;
}

static void conn_close(struct nft_conn *c)
{
	if (c->nl)
		mnl_socket_close(c->nl);
	c->nl = NULL;
}

static void batch_stop(struct batch *bt)
{
	if (bt->b)
		mnl_nlmsg_batch_stop(bt->b);
	bt->b = NULL;
}

static void batch_freep(struct batch **bt)
{
	if (*bt)
		batch_stop(*bt);
	free(*bt);
}

static void batch_start(struct batch *bt)
{
	batch_stop(bt);
	/* Zeroed so that attribute padding never carries stale bytes to the kernel. */
	memset(bt->buf, 0, sizeof(bt->buf));
	bt->seq = (uint32_t)time(NULL);
	bt->acks = 0;
	bt->b = mnl_nlmsg_batch_start(bt->buf, sizeof(bt->buf));
	nftnl_batch_begin(mnl_nlmsg_batch_current(bt->b), bt->seq++);
	mnl_nlmsg_batch_next(bt->b);
}

static struct nlmsghdr *batch_msg(struct batch *bt, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type,
						     NFPROTO_INET, flags | NLM_F_ACK, bt->seq++);

	bt->acks++;
	return nlh;
}

static bool batch_next(struct batch *bt)
{
	/* false when the message did not fit: the batch must not be sent. */
	return mnl_nlmsg_batch_next(bt->b);
}

/* Extracts the extended-ack message, if the kernel sent one. */
static const char *extack_msg(const struct nlmsghdr *nlh)
{
	const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *attr;
	size_t off;

	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	off = sizeof(*err);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += err->msg.nlmsg_len - sizeof(err->msg);
	mnl_attr_for_each(attr, nlh, off) {
		if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
		    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
			return mnl_attr_get_str(attr);
	}
	return NULL;
}

/*
 * Sends the batch and collects one answer per message. nfnetlink handles a
 * batch inside sendmsg(), so every answer is queued when it returns.
 * Returns 0 or the first negative errno the kernel reported.
 */
static int batch_send(struct nft_conn *c, struct batch *bt, char *why, size_t why_len)
{
	char buf[NFT_RECV_SIZE];
	unsigned int got = 0;
	int first = 0;

	nftnl_batch_end(mnl_nlmsg_batch_current(bt->b), bt->seq++);
	mnl_nlmsg_batch_next(bt->b);
	if (mnl_socket_sendto(c->nl, mnl_nlmsg_batch_head(bt->b), mnl_nlmsg_batch_size(bt->b)) < 0)
		return -errno;
	while (got < bt->acks) {
		struct pollfd p = { .fd = mnl_socket_get_fd(c->nl), .events = POLLIN };
		struct nlmsghdr *nlh;
		ssize_t n;
		int len;

		if (poll(&p, 1, 2000) <= 0)
			return first ? first : -ETIMEDOUT;
		n = mnl_socket_recvfrom(c->nl, buf, sizeof(buf));
		if (n < 0)
			return first ? first : -errno;
		len = (int)n;
		for (nlh = (struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, len);
		     nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *err;

			if (nlh->nlmsg_pid != c->portid)
				continue;
			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue; /* an object echoed back by a GET */
			got++;
			err = mnl_nlmsg_get_payload(nlh);
			if (err->error && !first) {
				const char *m = extack_msg(nlh);

				first = err->error;
				if (why && m)
					snprintf(why, why_len, "%s", m);
			}
		}
	}
	return first;
}

static struct nftnl_set *set_new(const char *name, uint32_t id, uint32_t flags)
{
	struct nftnl_set *s = nftnl_set_alloc();

	if (!s)
		return NULL;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 4);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, NFT_TYPE_IPADDR);
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	if (flags)
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
	return s;
}

static void set_add_key(struct nftnl_set *s, uint32_t ip_host, bool interval_end)
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

static void put_expr(struct nftnl_rule *r, struct nftnl_expr *ex)
{
	nftnl_rule_add_expr(r, ex);
}

static struct nftnl_expr *expr_payload_ip(uint32_t offset)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("payload");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_LEN, 4);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	return ex;
}

static struct nftnl_expr *expr_lookup(const char *set, uint32_t id, bool invert)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("lookup");

	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(ex, NFTNL_EXPR_LOOKUP_SET, set);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_SET_ID, id);
	if (invert)
		nftnl_expr_set_u32(ex, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
	return ex;
}

/* ip saddr @masq ip daddr != @internal masquerade (after `meta nfproto ipv4`). */
static struct nftnl_rule *masquerade_rule(void)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nftnl_expr *ex;
	uint8_t v4 = NFPROTO_IPV4;

	if (!r)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, CHAIN_POSTROUTING);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	ex = nftnl_expr_alloc("meta");
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_KEY, NFT_META_NFPROTO);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_META_DREG, NFT_REG_1);
	put_expr(r, ex);
	ex = nftnl_expr_alloc("cmp");
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
	nftnl_expr_set(ex, NFTNL_EXPR_CMP_DATA, &v4, sizeof(v4));
	put_expr(r, ex);
	put_expr(r, expr_payload_ip(12));
	put_expr(r, expr_lookup(SET_MASQ, SET_ID_MASQ, false));
	put_expr(r, expr_payload_ip(16));
	put_expr(r, expr_lookup(SET_INTERNAL, SET_ID_INTERNAL, true));
	put_expr(r, nftnl_expr_alloc("masq"));
	return r;
}

static int add_pod_elem(struct batch *bt, const char *set, uint32_t ip, uint16_t type)
{
	struct nftnl_set *s = nftnl_set_alloc();
	struct nlmsghdr *nlh;

	if (!s)
		return -ENOMEM;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	set_add_key(s, ip, false);
	nlh = batch_msg(bt, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	return batch_next(bt) ? 0 : -ENOBUFS;
}

/* Removes every element of a set: DELSETELEM without an element list. */
static bool flush_set(struct batch *bt, const char *set)
{
	struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_DELSETELEM, 0);

	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, ACCT_TABLE);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
	return batch_next(bt);
}

/*
 * The table as the config declares it: created where missing, the internal
 * set and the postrouting rules replaced, all in the caller's transaction, so
 * no packet ever sees a half-built table and a changed config (masquerade,
 * internalCIDRs) reaches the kernel with the next ADD. The pods set keeps its
 * elements.
 */
static int build_table(struct batch *bt, const struct acct_config *cfg)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_chain *ch = nftnl_chain_alloc();
	struct nftnl_set *internal = set_new(SET_INTERNAL, SET_ID_INTERNAL, NFT_SET_INTERVAL);
	struct nftnl_set *pods = set_new(SET_PODS, SET_ID_PODS, 0);
	struct nftnl_set *masq = set_new(SET_MASQ, SET_ID_MASQ, 0);
	struct nftnl_rule *rule = masquerade_rule();
	struct nftnl_rule *flush;
	struct nlmsghdr *nlh;
	int r = -ENOMEM;
	size_t i;

	if (!t || !ch || !internal || !pods || !masq || !rule)
		goto out;
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, ACCT_TABLE);
	nlh = batch_msg(bt, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	nftnl_table_nlmsg_build_payload(nlh, t);
	batch_next(bt);

	nlh = batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
	nftnl_set_nlmsg_build_payload(nlh, internal);
	batch_next(bt);
	flush_set(bt, SET_INTERNAL);
	/*
	 * Interval sets take boundaries: a start key, and the key after the last
	 * address flagged as an end. Like nft, open with an end at 0.0.0.0 so the
	 * space below the first range is outside the set.
	 */
	if (cfg->n_internal && cfg->internal[0].net != 0)
		set_add_key(internal, 0, true);
	for (i = 0; i < cfg->n_internal; i++) {
		uint32_t last = cidr4_last(&cfg->internal[i]);

		set_add_key(internal, cfg->internal[i].net, false);
		if (last != UINT32_MAX)
			set_add_key(internal, last + 1, true);
	}
	if (cfg->n_internal) {
		nlh = batch_msg(bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
		nftnl_set_elems_nlmsg_build_payload(nlh, internal);
		if (!batch_next(bt)) {
			r = -ENOBUFS;
			goto out;
		}
	}
	nlh = batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
	nftnl_set_nlmsg_build_payload(nlh, pods);
	batch_next(bt);
	nlh = batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
	nftnl_set_nlmsg_build_payload(nlh, masq);
	batch_next(bt);

	nftnl_chain_set_str(ch, NFTNL_CHAIN_TABLE, ACCT_TABLE);
	nftnl_chain_set_str(ch, NFTNL_CHAIN_NAME, CHAIN_POSTROUTING);
	nftnl_chain_set_u32(ch, NFTNL_CHAIN_HOOKNUM, NF_INET_POST_ROUTING);
	nftnl_chain_set_s32(ch, NFTNL_CHAIN_PRIO, 100); /* srcnat */
	nftnl_chain_set_str(ch, NFTNL_CHAIN_TYPE, "nat");
	nftnl_chain_set_u32(ch, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	nlh = batch_msg(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
	nftnl_chain_nlmsg_build_payload(nlh, ch);
	batch_next(bt);

	/* Flush the chain: a rule without a handle names every rule of the chain. */
	flush = nftnl_rule_alloc();
	if (!flush)
		goto out;
	nftnl_rule_set_str(flush, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(flush, NFTNL_RULE_CHAIN, CHAIN_POSTROUTING);
	nlh = batch_msg(bt, NFT_MSG_DELRULE, 0);
	nftnl_rule_nlmsg_build_payload(nlh, flush);
	nftnl_rule_free(flush);
	batch_next(bt);

	if (rule) {
		nlh = batch_msg(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
		nftnl_rule_nlmsg_build_payload(nlh, rule);
		batch_next(bt);
	}
	r = 0;
out:
	if (t)
		nftnl_table_free(t);
	if (ch)
		nftnl_chain_free(ch);
	if (internal)
		nftnl_set_free(internal);
	if (pods)
		nftnl_set_free(pods);
	if (masq)
		nftnl_set_free(masq);
	if (rule)
		nftnl_rule_free(rule);
	return r;
}

static int fail_nft(struct tg_err *e, int r, const char *what, const char *why)
{
	return tg_fail(e, CNI_ERR_IO, r, "nftables: %s failed: %s%s%s", what, strerror(-r),
		       why[0] ? ": " : "", why);
}

int acct_pod_add(const struct acct_config *cfg, uint32_t ip, struct tg_err *e)
{
	struct nft_conn c = { 0 };
	_cleanup_(batch_freep) struct batch *bt = calloc(1, sizeof(*bt));
	char why[256] = "";
	int r;

	if (!bt)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = conn_open(&c, e);
	if (r < 0)
		return r;
	/* One transaction: the table as configured, plus this pod's element. */
	batch_start(bt);
	r = build_table(bt, cfg);
	if (r == 0)
		r = add_pod_elem(bt, SET_PODS, ip, NFT_MSG_NEWSETELEM);
	if (r == 0 && cfg->masquerade)
		r = add_pod_elem(bt, SET_MASQ, ip, NFT_MSG_NEWSETELEM);
	if (r == 0)
		r = batch_send(&c, bt, why, sizeof(why));
	conn_close(&c);
	if (r < 0)
		return fail_nft(e, r, "adding the pod to table inet " ACCT_TABLE, why);
	return 0;
}

int acct_pod_del(uint32_t ip, struct tg_err *e)
{
	struct nft_conn c = { 0 };
	_cleanup_(batch_freep) struct batch *bt = calloc(1, sizeof(*bt));
	char why[256] = "";
	int r;

	if (!bt)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = conn_open(&c, e);
	if (r < 0)
		return r;
	/*
	 * One transaction per set: a missing element fails its whole
	 * transaction with ENOENT, and "already gone" is success here.
	 */
	for (size_t i = 0; i < 2; i++) {
		batch_start(bt);
		r = add_pod_elem(bt, i == 0 ? SET_MASQ : SET_PODS, ip, NFT_MSG_DELSETELEM);
		if (r == 0)
			r = batch_send(&c, bt, why, sizeof(why));
		if (r < 0 && r != -ENOENT)
			break;
		r = 0;
	}
	conn_close(&c);
	if (r < 0)
		return fail_nft(e, r, "removing the pod from table inet " ACCT_TABLE, why);
	return 0;
}

static int elem_present(const char *set, uint32_t ip, struct tg_err *e)
{
	char buf[NFT_RECV_SIZE] = { 0 };
	struct nft_conn c = { 0 };
	struct nftnl_set *s;
	struct nlmsghdr *nlh;
	int r;

	r = conn_open(&c, e);
	if (r < 0)
		return r;
	s = nftnl_set_alloc();
	if (!s) {
		conn_close(&c);
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	set_add_key(s, ip, false);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_ACK, 1);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	r = 0;
	if (mnl_socket_sendto(c.nl, nlh, nlh->nlmsg_len) < 0)
		r = -errno;
	while (r == 0) {
		ssize_t n = mnl_socket_recvfrom(c.nl, buf, sizeof(buf));

		if (n < 0) {
			r = -errno;
			break;
		}
		r = mnl_cb_run(buf, (size_t)n, 1, c.portid, NULL, NULL);
		if (r < 0)
			r = -errno;
		else if (r == MNL_CB_STOP)
			break;
		else
			r = 0;
	}
	conn_close(&c);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return fail_nft(e, r, "looking up the pod in table inet " ACCT_TABLE, "");
	return 1;
}

int acct_pod_check(uint32_t ip, bool masquerade, struct tg_err *e)
{
	int r = elem_present(SET_PODS, ip, e);

	if (r == 1)
		r = elem_present(SET_MASQ, ip, e) == (masquerade ? 1 : 0);
	return r;
}

struct dump_ctx {
	uint32_t *ips;
	size_t n, cap;
	int err;
};

static int collect_elem(struct nftnl_set_elem *el, void *p)
{
	struct dump_ctx *d = p;
	uint32_t len = 0;
	const void *key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &len);
	uint32_t be;

	if (!key || len != 4)
		return 0;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		uint32_t *grown = realloc(d->ips, cap * sizeof(*grown));

		if (!grown) {
			d->err = -ENOMEM;
			return -1;
		}
		d->ips = grown;
		d->cap = cap;
	}
	memcpy(&be, key, 4);
	d->ips[d->n++] = ntohl(be);
	return 0;
}

static int elems_cb(const struct nlmsghdr *nlh, void *p)
{
	struct nftnl_set *s = nftnl_set_alloc();
	int r = MNL_CB_OK;

	if (!s)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) == 0)
		nftnl_set_elem_foreach(s, collect_elem, p);
	else
		r = MNL_CB_ERROR;
	nftnl_set_free(s);
	return r;
}

int acct_list_set(const char *set, uint32_t **ret, size_t *ret_n, struct tg_err *e)
{
	char buf[NFT_RECV_SIZE] = { 0 };
	struct dump_ctx d = { 0 };
	struct nft_conn c = { 0 };
	struct nftnl_set *s;
	struct nlmsghdr *nlh;
	int r;

	r = conn_open(&c, e);
	if (r < 0)
		return r;
	s = nftnl_set_alloc();
	if (!s) {
		conn_close(&c);
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP | NLM_F_ACK, 1);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	r = 0;
	if (mnl_socket_sendto(c.nl, nlh, nlh->nlmsg_len) < 0)
		r = -errno;
	while (r == 0) {
		ssize_t n = mnl_socket_recvfrom(c.nl, buf, sizeof(buf));

		if (n < 0) {
			r = -errno;
			break;
		}
		r = mnl_cb_run(buf, (size_t)n, 1, c.portid, elems_cb, &d);
		if (r < 0)
			r = d.err ? d.err : -errno;
		else if (r == MNL_CB_STOP)
			break;
		else
			r = 0;
	}
	conn_close(&c);
	if (r < 0) {
		free(d.ips);
		if (r == -ENOENT)
			return r; /* no table or no set: the caller decides what that means */
		return fail_nft(e, r, "listing set", set);
	}
	*ret = d.ips;
	*ret_n = d.n;
	return 0;
}
