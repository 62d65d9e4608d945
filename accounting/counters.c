// SPDX-License-Identifier: Apache-2.0
/*
 * The exporter's read of the table's counters: one filtered dump per scrape
 * on a socket kept open, parsed attribute by attribute with libmnl straight
 * from the receive buffer. libnftnl's object parser would allocate and copy
 * each of the thousands of objects on every scrape.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <libnftnl/common.h>

#include "accounting/internal.h"

/* The kernel fills a dump message of at most 32 KiB; a buffer that large takes one whole. */
#define READER_RECV_SIZE 32768
#define READER_TRIES 5

struct acct_reader {
	struct acct_nft_conn c;
	uint32_t seq;
	char buf[READER_RECV_SIZE];
};

/* The table as its GET answered: which one it is, and the ruleset generation then. */
struct table_seen {
	uint64_t handle;
	uint16_t gen;
	bool found;
};

struct read_ctx {
	acct_counter_fn fn;
	void *arg;
	size_t seen;
	const struct table_seen *table;
};

struct acct_reader *acct_reader_new(void)
{
	return calloc(1, sizeof(struct acct_reader));
}

static void reader_close(struct acct_reader *rd)
{
	acct_nft_close(&rd->c);
	memset(&rd->c, 0, sizeof(rd->c));
}

void acct_reader_free(struct acct_reader *rd)
{
	if (!rd)
		return;
	reader_close(rd);
	free(rd);
}

static uint64_t be64_attr(const struct nlattr *a)
{
	return a ? be64toh(mnl_attr_get_u64(a)) : 0;
}

/* Every answer carries the ruleset's generation (its low 16 bits) in res_id. */
static uint16_t answer_gen(const struct nlmsghdr *nlh)
{
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);

	return ntohs(g->res_id);
}

static int table_cb(const struct nlmsghdr *nlh, void *p)
{
	struct table_seen *t = p;
	const struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) != NFTA_TABLE_HANDLE)
			continue;
		if (mnl_attr_validate(a, MNL_TYPE_U64) < 0)
			return MNL_CB_ERROR;
		t->handle = be64toh(mnl_attr_get_u64(a));
		t->gen = answer_gen(nlh);
		t->found = true;
	}
	return MNL_CB_OK;
}

/*
 * One counter object. The attributes are walked in place (mnl_attr_for_each)
 * and only the six used are validated: this runs for every counter of
 * every scrape.
 */
static int counter_cb(const struct nlmsghdr *nlh, void *p)
{
	struct read_ctx *ctx = p;
	const struct nlattr *a, *name = NULL, *table = NULL, *type = NULL, *data = NULL;
	const struct nlattr *bytes = NULL, *packets = NULL, *handle = NULL;
	struct acct_counter_sample c;

	/*
	 * The dump must read the table the GET before it found: a generation
	 * changed in between may be a table deleted and made anew (its objects'
	 * handles start again). A change during the dump interrupts it.
	 */
	if (ctx->seen == 0 && answer_gen(nlh) != ctx->table->gen) {
		errno = EINTR;
		return MNL_CB_ERROR;
	}
	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		switch (mnl_attr_get_type(a)) {
		case NFTA_OBJ_NAME:
			name = a;
			break;
		case NFTA_OBJ_TABLE:
			table = a;
			break;
		case NFTA_OBJ_TYPE:
			type = a;
			break;
		case NFTA_OBJ_DATA:
			data = a;
			break;
		case NFTA_OBJ_HANDLE:
			handle = a;
			break;
		default:
			break;
		}
	}
	if (!name || !table || !type || !data || mnl_attr_validate(name, MNL_TYPE_NUL_STRING) < 0 ||
	    mnl_attr_validate(table, MNL_TYPE_NUL_STRING) < 0 ||
	    mnl_attr_validate(type, MNL_TYPE_U32) < 0 ||
	    (handle && mnl_attr_validate(handle, MNL_TYPE_U64) < 0))
		return MNL_CB_ERROR;
	/* The kernel filters by table and type; older kernels did not. */
	if (ntohl(mnl_attr_get_u32(type)) != NFT_OBJECT_COUNTER ||
	    strcmp(mnl_attr_get_str(table), ACCT_TABLE) != 0)
		return MNL_CB_OK;
	mnl_attr_for_each_nested(a, data)
	{
		uint16_t t = mnl_attr_get_type(a);

		if (t != NFTA_COUNTER_BYTES && t != NFTA_COUNTER_PACKETS)
			continue;
		if (mnl_attr_validate(a, MNL_TYPE_U64) < 0)
			return MNL_CB_ERROR;
		*(t == NFTA_COUNTER_BYTES ? &bytes : &packets) = a;
	}
	c.name = mnl_attr_get_str(name);
	c.name_len = strnlen(c.name, mnl_attr_get_payload_len(name));
	c.packets = be64_attr(packets);
	c.bytes = be64_attr(bytes);
	c.id = ctx->table->handle << 32 | (be64_attr(handle) & 0xffffffffu);
	ctx->fn(&c, ctx->arg);
	ctx->seen++;
	return MNL_CB_OK;
}

/*
 * Builds a request for the table of `family` (GETOBJ: its counters; with
 * `name`, that one) at the start of rd->buf.
 */
static void build_request(struct acct_reader *rd, uint16_t family, uint16_t type, uint16_t flags,
			  const char *name)
{
	struct nlmsghdr *nlh;

	memset(rd->buf, 0, 256);
	nlh = nftnl_nlmsg_build_hdr(rd->buf, type, family, flags, ++rd->seq);
	mnl_attr_put_strz(nlh, type == NFT_MSG_GETOBJ ? NFTA_OBJ_TABLE : NFTA_TABLE_NAME,
			  ACCT_TABLE);
	if (type == NFT_MSG_GETOBJ && name)
		mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, name);
	if (type == NFT_MSG_GETOBJ)
		mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
}

static void build_inet_request(struct acct_reader *rd, uint16_t type, uint16_t flags)
{
	build_request(rd, NFPROTO_INET, type, flags, NULL);
}

/* The table's handle and the generation it was read at; -ENOENT when it is missing. */
static int read_table_family(struct acct_reader *rd, uint16_t family, struct table_seen *t)
{
	int r;

	*t = (struct table_seen){ 0 };
	build_request(rd, family, NFT_MSG_GETTABLE, NLM_F_ACK, NULL);
	r = acct_nft_request(&rd->c, rd->buf, sizeof(rd->buf), table_cb, t);

	return r == 0 && !t->found ? -EPROTO : r;
}

static int read_table(struct acct_reader *rd, struct table_seen *t)
{
	return read_table_family(rd, NFPROTO_INET, t);
}

/*
 * The counter of table arp tollgate (ARP dropped from pods), after the inet
 * table's: 0 also when that table or counter is missing (a node declared by
 * an older release), negative errno on a failed read.
 */
static int read_arp(struct acct_reader *rd, struct read_ctx *ctx)
{
	struct table_seen t;
	struct read_ctx arp = { .fn = ctx->fn, .arg = ctx->arg, .table = &t };
	int r = read_table_family(rd, NFPROTO_ARP, &t);

	if (r == 0) {
		build_request(rd, NFPROTO_ARP, NFT_MSG_GETOBJ, NLM_F_ACK, ACCT_ARP_COUNTER);
		r = acct_nft_request(&rd->c, rd->buf, sizeof(rd->buf), counter_cb, &arp);
	}
	return r == -ENOENT || r == -EPROTO ? 0 : r;
}

int acct_reader_read(struct acct_reader *rd, acct_counter_fn fn, void *arg)
{
	struct table_seen t;
	struct read_ctx ctx = { .fn = fn, .arg = arg, .table = &t };
	int r = -EINTR;

	for (int i = 0; i < READER_TRIES && r == -EINTR; i++) {
		if (!rd->c.nl && (r = acct_nft_open(&rd->c, 0, NULL)) < 0)
			return r;
		ctx.seen = 0;
		r = read_table(rd, &t);
		if (r == 0) {
			build_inet_request(rd, NFT_MSG_GETOBJ, NLM_F_DUMP | NLM_F_ACK);
			r = acct_nft_request(&rd->c, rd->buf, sizeof(rd->buf), counter_cb, &ctx);
		}
		/*
		 * The ARP counter is one more series, not the page: a failed read
		 * of it leaves it out of this scrape (on a fresh socket next time).
		 */
		if (r == 0 && read_arp(rd, &ctx) < 0)
			reader_close(rd);
		/* A failed read may leave answers queued: the next one starts on a fresh socket. */
		if (r < 0 && r != -ENOENT)
			reader_close(rd);
	}
	return r;
}
