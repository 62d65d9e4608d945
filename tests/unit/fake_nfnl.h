/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_FAKE_NFNL_H
#define TG_TEST_FAKE_NFNL_H

/*
 * A fake nf_tables behind libmnl's socket calls, for unit tests that need no
 * kernel: the test binary links with -Wl,--wrap= for each mnl_socket_*
 * function below (see FAKE_NFNL_WRAP in the Makefile), so the accounting
 * module's netlink traffic ends here. Requests are parsed with libnftnl and
 * libmnl, answers built with them, as the kernel would send them: a table
 * model (tables with a handle each, counters with a handle from their
 * table's generator and their values) that answers GETTABLE, dumps of
 * GETOBJ (filtered by table and type, or not, as older kernels), and
 * batches (NEWTABLE, DELTABLE, NEWOBJ and DELOBJ of counters applied all or
 * nothing, every other message accepted and counted), each message with
 * NLM_F_ACK acknowledged. The ruleset generation (res_id of every answer)
 * moves with every commit.
 *
 * Include in one file of a test binary, after cmocka.h.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/object.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

/* Kernel 6.3's "delete if present", which older uapi headers lack (as accounting/internal.h). */
#ifndef NFT_MSG_DESTROYOBJ
#define NFT_MSG_DESTROYOBJ 31
#endif

#define FAKE_TABLES 4
#define FAKE_OBJS 4096
#define FAKE_NAME 64
#define FAKE_MSG_TYPES 64 /* nf_tables message types, with room for newer than the headers know */
/* Answers are packed into datagrams of at most this size (the smallest buffer a caller passes). */
#define FAKE_DGRAM 8192

struct fake_obj {
	char name[FAKE_NAME];
	uint32_t type; /* NFT_OBJECT_COUNTER, NFT_OBJECT_QUOTA */
	uint64_t handle, packets, bytes;
};

struct fake_table {
	bool used;
	char name[FAKE_NAME];
	uint64_t handle;
	uint64_t hgen; /* the table's handle generator: its objects' handles */
	size_t n_obj;
	struct fake_obj obj[FAKE_OBJS];
};

struct fake_model {
	struct fake_table t[FAKE_TABLES];
	uint64_t table_handles; /* the namespace's generator of table handles */
};

struct fake_dgram {
	struct fake_dgram *next;
	size_t len;
	char buf[FAKE_DGRAM];
};

/* One socket: its own queue of answers; the eventfd is readable while it is not empty. */
struct fake_sock {
	int efd;
	uint32_t portid;
	struct fake_dgram *head, *tail;
};

static struct {
	struct fake_model m, scratch;
	uint32_t gen;
	bool unfiltered;	  /* dumps as kernels before 4.x: every object of every table */
	int bump_gen_on_gettable; /* that many GETTABLEs see the generation move right after */
	/* what the batches brought */
	unsigned batches, committed, messages;
	unsigned counts[FAKE_MSG_TYPES];
	unsigned socks_open, next_portid;
} fake;

/* ---- the model ---- */

static inline struct fake_table *fake_table_find(struct fake_model *m, const char *name)
{
	for (int i = 0; i < FAKE_TABLES; i++)
		if (m->t[i].used && strcmp(m->t[i].name, name) == 0)
			return &m->t[i];
	return NULL;
}

static inline struct fake_table *fake_table_new(struct fake_model *m, const char *name)
{
	for (int i = 0; i < FAKE_TABLES; i++) {
		struct fake_table *t = &m->t[i];

		if (t->used)
			continue;
		memset(t, 0, sizeof(*t));
		t->used = true;
		snprintf(t->name, sizeof(t->name), "%s", name);
		t->handle = ++m->table_handles;
		return t;
	}
	fail_msg("fake nfnetlink: more than %d tables", FAKE_TABLES);
	return NULL;
}

static inline struct fake_obj *fake_obj_find(struct fake_table *t, const char *name)
{
	for (size_t i = 0; i < t->n_obj; i++)
		if (strcmp(t->obj[i].name, name) == 0)
			return &t->obj[i];
	return NULL;
}

static inline struct fake_obj *fake_obj_new(struct fake_table *t, const char *name, uint32_t type)
{
	struct fake_obj *o;

	if (t->n_obj >= FAKE_OBJS)
		fail_msg("fake nfnetlink: more than %d objects in table %s", FAKE_OBJS, t->name);
	o = &t->obj[t->n_obj++];
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->type = type;
	o->handle = ++t->hgen;
	return o;
}

static inline void fake_obj_del(struct fake_table *t, struct fake_obj *o)
{
	size_t i = (size_t)(o - t->obj);

	memmove(o, o + 1, (t->n_obj - i - 1) * sizeof(*o));
	t->n_obj--;
}

/* ---- what a test sets up (as `nft -f` would: each call one commit) ---- */

static inline void fake_nfnl_reset(void)
{
	memset(&fake.m, 0, sizeof(fake.m));
	fake.gen = 1;
	fake.unfiltered = false;
	fake.bump_gen_on_gettable = 0;
	fake.batches = fake.committed = fake.messages = 0;
	memset(fake.counts, 0, sizeof(fake.counts));
	/* a failed test may have left its sockets open: they are not the next one's */
	fake.socks_open = 0;
}

static inline void fake_add_table(const char *table)
{
	if (!fake_table_find(&fake.m, table))
		fake_table_new(&fake.m, table);
	fake.gen++;
}

static inline void fake_del_table(const char *table)
{
	struct fake_table *t = fake_table_find(&fake.m, table);

	if (!t)
		fail_msg("fake nfnetlink: no table %s to delete", table);
	t->used = false;
	fake.gen++;
}

/* A new object of that type (its table made when missing), with these values. */
static inline void fake_add_obj(const char *table, const char *name, uint32_t type,
				uint64_t packets, uint64_t bytes)
{
	struct fake_table *t = fake_table_find(&fake.m, table);
	struct fake_obj *o;

	if (!t)
		t = fake_table_new(&fake.m, table);
	if (fake_obj_find(t, name))
		fail_msg("fake nfnetlink: %s %s exists", table, name);
	o = fake_obj_new(t, name, type);
	o->packets = packets;
	o->bytes = bytes;
	fake.gen++;
}

static inline void fake_add_counter(const char *table, const char *name, uint64_t packets,
				    uint64_t bytes)
{
	fake_add_obj(table, name, NFT_OBJECT_COUNTER, packets, bytes);
}

static inline void fake_del_counter(const char *table, const char *name)
{
	struct fake_table *t = fake_table_find(&fake.m, table);
	struct fake_obj *o = t ? fake_obj_find(t, name) : NULL;

	if (!o)
		fail_msg("fake nfnetlink: no counter %s %s to delete", table, name);
	fake_obj_del(t, o);
	fake.gen++;
}

/*
 * ---- the tables of the shared cases (tests/unit/acct_cases.h, render_cases.h) ----
 *
 * What tests/kernel/nft_kernel.h does with `nft -f` in the kernel, done to
 * the model. A batch is one transaction there and nothing here: each call is
 * a commit of its own, and no case reads between the calls of one batch.
 */
#define NFT_FX_FAKE 1
#define NFT_FX_NEED() \
	do {          \
	} while (0)

static inline void nft_fx_reset(void)
{
	fake_nfnl_reset();
}

/* After a case: every socket the code under test opened it closed again. */
static inline int nft_fx_done(void)
{
	if (fake.socks_open != 0) {
		print_error("%u fake nfnetlink sockets left open\n", fake.socks_open);
		return -1;
	}
	return 0;
}

static inline void nft_fx_batch_begin(void)
{
}

static inline void nft_fx_batch_end(void)
{
}

static inline void nft_fx_add_table(const char *table)
{
	fake_add_table(table);
}

static inline void nft_fx_del_table(const char *table)
{
	fake_del_table(table);
}

static inline bool nft_fx_has_table(const char *table)
{
	return fake_table_find(&fake.m, table) != NULL;
}

static inline void nft_fx_add_counter(const char *table, const char *name, uint64_t packets,
				      uint64_t bytes)
{
	fake_add_counter(table, name, packets, bytes);
}

static inline void nft_fx_del_counter(const char *table, const char *name)
{
	fake_del_counter(table, name);
}

/* ---- answers ---- */

static inline struct fake_sock *fake_sock_of(const struct mnl_socket *nl)
{
	return (struct fake_sock *)(uintptr_t)nl;
}

/* Room for `len` more bytes of answers: the last datagram, or a new one. */
static inline char *fake_room(struct fake_sock *s, size_t len)
{
	struct fake_dgram *d = s->tail;
	uint64_t one = 1;
	char *p;

	if (len > FAKE_DGRAM)
		fail_msg("fake nfnetlink: an answer of %zu bytes", len);
	if (!d || d->len + len > FAKE_DGRAM) {
		d = calloc(1, sizeof(*d));
		assert_non_null(d);
		if (s->tail)
			s->tail->next = d;
		else
			s->head = d;
		s->tail = d;
		assert_int_equal(write(s->efd, &one, sizeof(one)), sizeof(one));
	}
	p = d->buf + d->len;
	d->len += MNL_ALIGN(len);
	return p;
}

/* Starts an answer of `type` in a scratch buffer; fake_put() queues it. */
static inline struct nlmsghdr *fake_hdr(char *buf, uint16_t type, uint16_t flags,
					const struct nlmsghdr *req, struct fake_sock *s)
{
	struct nlmsghdr *nlh =
		nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, flags, req->nlmsg_seq);
	struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);

	nlh->nlmsg_pid = s->portid;
	g->res_id = htons((uint16_t)fake.gen);
	return nlh;
}

static inline void fake_put(struct fake_sock *s, const struct nlmsghdr *nlh)
{
	memcpy(fake_room(s, nlh->nlmsg_len), nlh, nlh->nlmsg_len);
}

/* The extended-ack text the fake sends with every refusal. */
#define FAKE_EXTACK "refused by the fake nf_tables"

/*
 * NLMSG_ERROR for `req` (error 0: its acknowledgement), its header capped;
 * a refusal carries FAKE_EXTACK as the kernel's text (NETLINK_EXT_ACK).
 */
static inline void fake_ack(struct fake_sock *s, const struct nlmsghdr *req, int error)
{
	char buf[256] = { 0 };
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nlmsgerr *err;

	nlh->nlmsg_type = NLMSG_ERROR;
	nlh->nlmsg_flags = NLM_F_CAPPED;
	nlh->nlmsg_seq = req->nlmsg_seq;
	nlh->nlmsg_pid = s->portid;
	err = mnl_nlmsg_put_extra_header(nlh, sizeof(*err));
	err->error = error;
	err->msg = *req;
	if (error) {
		nlh->nlmsg_flags |= NLM_F_ACK_TLVS;
		mnl_attr_put_strz(nlh, NLMSGERR_ATTR_MSG, FAKE_EXTACK);
	}
	fake_put(s, nlh);
}

static inline void fake_done(struct fake_sock *s, const struct nlmsghdr *req)
{
	char buf[64] = { 0 };
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	int *zero = mnl_nlmsg_put_extra_header(nlh, sizeof(int));

	nlh->nlmsg_type = NLMSG_DONE;
	nlh->nlmsg_flags = NLM_F_MULTI;
	nlh->nlmsg_seq = req->nlmsg_seq;
	nlh->nlmsg_pid = s->portid;
	*zero = 0;
	fake_put(s, nlh);
}

/* A string attribute of a request (after its nfgenmsg), or NULL. */
static inline const char *fake_str_attr(const struct nlmsghdr *nlh, uint16_t type)
{
	const struct nlattr *a;

	mnl_attr_for_each(a, nlh,
			  sizeof(struct nfgenmsg)) if (mnl_attr_get_type(a) == type &&
						       mnl_attr_validate(a, MNL_TYPE_NUL_STRING) ==
							       0) return mnl_attr_get_str(a);
	return NULL;
}

static inline void fake_gettable(struct fake_sock *s, const struct nlmsghdr *req)
{
	const char *name = fake_str_attr(req, NFTA_TABLE_NAME);
	struct fake_table *t = name ? fake_table_find(&fake.m, name) : NULL;
	char buf[512] = { 0 };
	struct nlmsghdr *nlh;
	struct nftnl_table *nt;

	if (!t) {
		fake_ack(s, req, -ENOENT);
		return;
	}
	nt = nftnl_table_alloc();
	assert_non_null(nt);
	nlh = fake_hdr(buf, NFT_MSG_NEWTABLE, 0, req, s);
	nftnl_table_set_str(nt, NFTNL_TABLE_NAME, t->name);
	nftnl_table_set_u32(nt, NFTNL_TABLE_FLAGS, 0);
	nftnl_table_nlmsg_build_payload(nlh, nt);
	nftnl_table_free(nt);
	mnl_attr_put_u64(nlh, NFTA_TABLE_HANDLE, htobe64(t->handle));
	fake_put(s, nlh);
	if (req->nlmsg_flags & NLM_F_ACK)
		fake_ack(s, req, 0);
	if (fake.bump_gen_on_gettable > 0) {
		fake.bump_gen_on_gettable--;
		fake.gen++; /* a commit by someone else, between the GET and the dump */
	}
}

static inline void fake_put_obj(struct fake_sock *s, const struct nlmsghdr *req,
				const struct fake_table *t, const struct fake_obj *o)
{
	char buf[512] = { 0 };
	struct nlmsghdr *nlh = fake_hdr(buf, NFT_MSG_NEWOBJ, NLM_F_MULTI, req, s);
	struct nftnl_obj *no = nftnl_obj_alloc();

	assert_non_null(no);
	nftnl_obj_set_str(no, NFTNL_OBJ_TABLE, t->name);
	nftnl_obj_set_str(no, NFTNL_OBJ_NAME, o->name);
	nftnl_obj_set_u32(no, NFTNL_OBJ_TYPE, o->type);
	nftnl_obj_set_u64(no, NFTNL_OBJ_HANDLE, o->handle);
	if (o->type == NFT_OBJECT_COUNTER) {
		nftnl_obj_set_u64(no, NFTNL_OBJ_CTR_PKTS, o->packets);
		nftnl_obj_set_u64(no, NFTNL_OBJ_CTR_BYTES, o->bytes);
	} else if (o->type == NFT_OBJECT_QUOTA) {
		nftnl_obj_set_u64(no, NFTNL_OBJ_QUOTA_BYTES, o->bytes);
		nftnl_obj_set_u64(no, NFTNL_OBJ_QUOTA_CONSUMED, o->packets);
	}
	nftnl_obj_nlmsg_build_payload(nlh, no);
	nftnl_obj_free(no);
	fake_put(s, nlh);
}

static inline void fake_dump_obj(struct fake_sock *s, const struct nlmsghdr *req)
{
	const char *table = fake_str_attr(req, NFTA_OBJ_TABLE);
	const struct nlattr *a;
	uint32_t type = 0;

	mnl_attr_for_each(a, req,
			  sizeof(struct nfgenmsg)) if (mnl_attr_get_type(a) == NFTA_OBJ_TYPE &&
						       mnl_attr_validate(a, MNL_TYPE_U32) == 0)
		type = ntohl(mnl_attr_get_u32(a));
	for (int i = 0; i < FAKE_TABLES; i++) {
		const struct fake_table *t = &fake.m.t[i];

		if (!t->used || (!fake.unfiltered && table && strcmp(t->name, table) != 0))
			continue;
		for (size_t k = 0; k < t->n_obj; k++)
			if (fake.unfiltered || !type || t->obj[k].type == type)
				fake_put_obj(s, req, t, &t->obj[k]);
	}
	fake_done(s, req);
}

/* ---- batches ---- */

/* One message of a batch, applied to the scratch model; 0 or the kernel's error. */
static inline int fake_batch_msg(const struct nlmsghdr *nlh)
{
	uint16_t type = NFNL_MSG_TYPE(nlh->nlmsg_type);
	char table[FAKE_NAME] = "", name[FAKE_NAME] = "";
	struct fake_table *t;
	struct fake_obj *o;

	if (NFNL_SUBSYS_ID(nlh->nlmsg_type) != NFNL_SUBSYS_NFTABLES || type >= FAKE_MSG_TYPES)
		return -EOPNOTSUPP;
	fake.messages++;
	fake.counts[type]++;
	if (type == NFT_MSG_NEWTABLE || type == NFT_MSG_DELTABLE) {
		struct nftnl_table *nt = nftnl_table_alloc();

		assert_non_null(nt);
		if (nftnl_table_nlmsg_parse(nlh, nt) < 0 ||
		    !nftnl_table_is_set(nt, NFTNL_TABLE_NAME)) {
			nftnl_table_free(nt);
			return -EINVAL;
		}
		snprintf(table, sizeof(table), "%s", nftnl_table_get_str(nt, NFTNL_TABLE_NAME));
		nftnl_table_free(nt);
		t = fake_table_find(&fake.scratch, table);
		if (type == NFT_MSG_DELTABLE) {
			if (!t)
				return -ENOENT;
			t->used = false;
		} else if (t && (nlh->nlmsg_flags & NLM_F_EXCL)) {
			return -EEXIST;
		} else if (!t) {
			fake_table_new(&fake.scratch, table);
		}
		return 0;
	}
	if (type == NFT_MSG_NEWOBJ || type == NFT_MSG_DELOBJ || type == NFT_MSG_DESTROYOBJ) {
		struct nftnl_obj *no = nftnl_obj_alloc();
		uint32_t otype;

		assert_non_null(no);
		if (nftnl_obj_nlmsg_parse(nlh, no) < 0 || !nftnl_obj_is_set(no, NFTNL_OBJ_TABLE) ||
		    !nftnl_obj_is_set(no, NFTNL_OBJ_NAME)) {
			nftnl_obj_free(no);
			return -EINVAL;
		}
		snprintf(table, sizeof(table), "%s", nftnl_obj_get_str(no, NFTNL_OBJ_TABLE));
		snprintf(name, sizeof(name), "%s", nftnl_obj_get_str(no, NFTNL_OBJ_NAME));
		otype = nftnl_obj_get_u32(no, NFTNL_OBJ_TYPE);
		nftnl_obj_free(no);
		t = fake_table_find(&fake.scratch, table);
		if (!t)
			return type == NFT_MSG_DESTROYOBJ ? 0 : -ENOENT;
		o = fake_obj_find(t, name);
		if (type == NFT_MSG_NEWOBJ) {
			if (o)
				return (nlh->nlmsg_flags & NLM_F_EXCL) ? -EEXIST : 0;
			fake_obj_new(t, name, otype);
		} else if (o) {
			fake_obj_del(t, o);
		} else if (type == NFT_MSG_DELOBJ) {
			return -ENOENT;
		}
		return 0;
	}
	/* sets, chains, rules, elements: accepted, counted, not modelled */
	return 0;
}

static inline void fake_batch(struct fake_sock *s, const char *buf, size_t len)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	int left = (int)len, failed = 0;
	bool ended = false;

	fake.batches++;
	/* nfnetlink refuses a batch for no known subsystem as a whole: one error, for its begin */
	if (ntohs(g->res_id) >= NFNL_SUBSYS_COUNT) {
		fake_ack(s, nlh, -EINVAL);
		return;
	}
	if (ntohs(g->res_id) != NFNL_SUBSYS_NFTABLES) {
		fake_ack(s, nlh, -EOPNOTSUPP);
		return;
	}
	fake.scratch = fake.m;
	for (nlh = mnl_nlmsg_next(nlh, &left); mnl_nlmsg_ok(nlh, left);
	     nlh = mnl_nlmsg_next(nlh, &left)) {
		int err;

		if (nlh->nlmsg_type == NFNL_MSG_BATCH_END) {
			ended = true;
			break;
		}
		err = fake_batch_msg(nlh);
		if (err && !failed)
			failed = err;
		if (err || (nlh->nlmsg_flags & NLM_F_ACK))
			fake_ack(s, nlh, err);
	}
	if (!ended)
		fail_msg("fake nfnetlink: a batch without its end message");
	if (!failed) {
		fake.m = fake.scratch;
		fake.gen++;
		fake.committed++;
	}
}

/* ---- the wrapped libmnl socket calls ---- */

struct mnl_socket *__wrap_mnl_socket_open(int bus);
int __wrap_mnl_socket_bind(struct mnl_socket *nl, unsigned int groups, pid_t pid);
int __wrap_mnl_socket_close(struct mnl_socket *nl);
int __wrap_mnl_socket_get_fd(const struct mnl_socket *nl);
unsigned int __wrap_mnl_socket_get_portid(const struct mnl_socket *nl);
int __wrap_mnl_socket_setsockopt(const struct mnl_socket *nl, int type, void *buf, socklen_t len);
ssize_t __wrap_mnl_socket_sendto(const struct mnl_socket *nl, const void *req, size_t siz);
ssize_t __wrap_mnl_socket_recvfrom(const struct mnl_socket *nl, void *buf, size_t siz);

struct mnl_socket *__wrap_mnl_socket_open(int bus)
{
	struct fake_sock *s;

	if (bus != NETLINK_NETFILTER) {
		errno = EPROTONOSUPPORT;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->efd = eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0) {
		free(s);
		return NULL;
	}
	s->portid = 4000 + ++fake.next_portid;
	fake.socks_open++;
	return (struct mnl_socket *)(uintptr_t)s;
}

int __wrap_mnl_socket_bind(struct mnl_socket *nl, unsigned int groups, pid_t pid)
{
	return 0;
}

int __wrap_mnl_socket_close(struct mnl_socket *nl)
{
	struct fake_sock *s = fake_sock_of(nl);

	while (s->head) {
		struct fake_dgram *d = s->head;

		s->head = d->next;
		free(d);
	}
	close(s->efd);
	free(s);
	fake.socks_open--;
	return 0;
}

int __wrap_mnl_socket_get_fd(const struct mnl_socket *nl)
{
	return fake_sock_of(nl)->efd;
}

unsigned int __wrap_mnl_socket_get_portid(const struct mnl_socket *nl)
{
	return fake_sock_of(nl)->portid;
}

int __wrap_mnl_socket_setsockopt(const struct mnl_socket *nl, int type, void *buf, socklen_t len)
{
	return 0;
}

ssize_t __wrap_mnl_socket_sendto(const struct mnl_socket *nl, const void *req, size_t siz)
{
	struct fake_sock *s = fake_sock_of(nl);
	const struct nlmsghdr *nlh = req;

	if (!mnl_nlmsg_ok(nlh, (int)siz)) {
		errno = EINVAL;
		return -1;
	}
	if (nlh->nlmsg_type == NFNL_MSG_BATCH_BEGIN) {
		fake_batch(s, req, siz);
	} else if (nlh->nlmsg_type == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETTABLE) &&
		   !(nlh->nlmsg_flags & NLM_F_DUMP)) {
		fake_gettable(s, nlh);
	} else if (nlh->nlmsg_type == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETOBJ) &&
		   (nlh->nlmsg_flags & NLM_F_DUMP)) {
		fake_dump_obj(s, nlh);
	} else if (nlh->nlmsg_type == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETSET) &&
		   (nlh->nlmsg_flags & NLM_F_DUMP)) {
		/* the model's tables hold counters only: every set dump is empty */
		fake_done(s, nlh);
	} else if (NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_GETRULE ||
		   NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_GETCHAIN ||
		   NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_GETSET ||
		   NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_GETSETELEM) {
		/* not modelled: answered only for a table that is missing */
		const char *table =
			fake_str_attr(nlh, 1 /* NFTA_{RULE,CHAIN,SET,SET_ELEM_LIST}_TABLE */);

		if (table && fake_table_find(&fake.m, table))
			fail_msg("fake nfnetlink: a dump of the rules, chains or sets of table %s",
				 table);
		if (NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_GETSETELEM)
			fake_ack(s, nlh, -ENOENT);
		else
			fake_done(s, nlh);
	} else {
		fake_ack(s, nlh, -EOPNOTSUPP);
	}
	return (ssize_t)siz;
}

ssize_t __wrap_mnl_socket_recvfrom(const struct mnl_socket *nl, void *buf, size_t siz)
{
	struct fake_sock *s = fake_sock_of(nl);
	struct fake_dgram *d = s->head;
	uint64_t one;
	size_t n;

	if (!d) {
		/* the kernel would block here for ever: a caller waiting for no answer */
		errno = ETIMEDOUT;
		return -1;
	}
	assert_int_equal(read(s->efd, &one, sizeof(one)), sizeof(one));
	s->head = d->next;
	if (!s->head)
		s->tail = NULL;
	n = d->len;
	if (n > siz) {
		free(d);
		errno = ENOSPC; /* as libmnl says of a truncated datagram */
		return -1;
	}
	memcpy(buf, d->buf, n);
	free(d);
	return (ssize_t)n;
}

#endif
