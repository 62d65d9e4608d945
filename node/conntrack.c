// SPDX-License-Identifier: Apache-2.0
/*
 * The node's conntrack table (node/conntrack.h): one dump of its IPv4
 * flows, each visited, and those a filter picks deleted as they pass, on a
 * second handle (the dump's is busy until the dump ends; the kernel's dump
 * holds its place by a reference, so a flow deleted behind it is fine).
 *
 * Forgetting an address asks the kernel for its flows only (ctnetlink's
 * dump filter, CTA_FILTER, Linux 5.9; libnetfilter_conntrack 1.0.9 has no
 * call for it, so the request is built with libmnl and its answers read
 * by the library): a table of 100,000 flows is then walked in the kernel,
 * not copied out, while the store's lock is held. A kernel without the
 * filter gets the whole dump, as before.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <linux/netfilter/nf_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netlink/route/addr.h>

#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "node/conntrack.h"

/* A dump the kernel could not finish (a table that changed under a full socket buffer): tried again. */
#define DUMP_TRIES 3

/* The node's own addresses, where a hostPort on every address applies. */
struct locals {
	uint32_t *ip;
	size_t n, cap;
	bool oom;
};

struct pick {
	uint32_t ip;		       /* 0: none */
	const struct hostports *ports; /* NULL: none */
	const struct locals *local;
};

struct walk {
	node_ct_visit_fn visit;
	void *ctx;
	const struct pick *pick; /* NULL: visit only */
	struct nfct_handle *del;
	int deleted;
	int err; /* the first deletion that failed */
};

static void flow_of(const struct nf_conntrack *ct, struct node_ct_flow *f)
{
	memset(f, 0, sizeof(*f));
	f->proto = nfct_get_attr_u8(ct, ATTR_ORIG_L4PROTO);
	f->orig_src = ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC));
	f->orig_dst = ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST));
	f->reply_src = ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC));
	f->reply_dst = ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_DST));
	if (nfct_attr_is_set(ct, ATTR_ORIG_PORT_DST))
		f->orig_dport = ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST));
	f->tcp_state = -1;
	if (f->proto == IPPROTO_TCP && nfct_attr_is_set(ct, ATTR_TCP_STATE))
		f->tcp_state = nfct_get_attr_u8(ct, ATTR_TCP_STATE);
}

static bool local_to(const struct locals *l, uint32_t ip)
{
	/* The mappings on every address leave these to the node (accounting/hostports.c). */
	if ((ip >> 24) == 127 || (ip >> 16) == 0xa9fe)
		return false;
	for (size_t i = 0; i < l->n; i++)
		if (l->ip[i] == ip)
			return true;
	return false;
}

static bool flow_picked(const struct pick *p, const struct node_ct_flow *f)
{
	if (p->ip && (f->orig_src == p->ip || f->orig_dst == p->ip || f->reply_src == p->ip ||
		      f->reply_dst == p->ip))
		return true;
	for (size_t i = 0; p->ports && i < p->ports->n; i++) {
		const struct hostport *m = &p->ports->m[i];

		if (m->proto == IPPROTO_TCP || f->proto != m->proto ||
		    f->orig_dport != m->host_port)
			continue;
		if (m->host_ip ? f->orig_dst == m->host_ip : local_to(p->local, f->orig_dst))
			return true;
	}
	return false;
}

static int on_ct(enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *arg)
{
	struct walk *w = arg;
	struct node_ct_flow f;

	(void)type;
	if (nfct_get_attr_u8(ct, ATTR_ORIG_L3PROTO) != AF_INET)
		return NFCT_CB_CONTINUE;
	flow_of(ct, &f);
	if (w->visit)
		w->visit(&f, w->ctx);
	if (w->pick && flow_picked(w->pick, &f)) {
		/* The flow as dumped, its zone with it: gone already (it timed out) is fine. */
		if (nfct_query(w->del, NFCT_Q_DESTROY, ct) == 0)
			w->deleted++;
		else if (errno != ENOENT && !w->err)
			w->err = errno ? -errno : -EIO;
	}
	return NFCT_CB_CONTINUE;
}

static int walk_run(struct walk *w, int tries)
{
	uint32_t family = AF_INET;
	struct nfct_handle *h = nfct_open(CONNTRACK, 0);
	int r = 0;

	if (!h)
		return errno ? -errno : -EIO;
	if (w->pick) {
		w->del = nfct_open(CONNTRACK, 0);
		if (!w->del) {
			r = errno ? -errno : -EIO;
			nfct_close(h);
			return r;
		}
	}
	nfct_callback_register(h, NFCT_T_ALL, on_ct, w);
	for (int i = 0; i < tries; i++) {
		r = nfct_query(h, NFCT_Q_DUMP, &family) < 0 ? (errno ? -errno : -EIO) : 0;
		if (r != -EINTR && r != -ENOBUFS)
			break;
	}
	if (w->del)
		nfct_close(w->del);
	nfct_close(h);
	return r < 0 ? r : w->err;
}

/*
 * The dump filter's fields (the kernel's CTA_FILTER_F_* of nf_internals.h,
 * not in the uapi headers): which fields of a tuple must equal the request's.
 */
#define CT_FILTER_IP_SRC (1u << 0)
#define CT_FILTER_IP_DST (1u << 1)
#define CT_FILTER_PROTO_NUM (1u << 3)
#define CT_FILTER_PROTO_DST_PORT (1u << 5)

/* One filtered dump: flows whose original (or reply) tuple has these fields. */
struct ct_sel {
	bool reply;
	uint32_t flags; /* CT_FILTER_* */
	uint32_t ip;	/* host order, with IP_SRC or IP_DST */
	uint8_t proto;	/* with PROTO_NUM */
	uint16_t dport; /* with PROTO_DST_PORT */
};

/* A tuple nest of the request: the selected fields when it is the selected direction. */
static void put_tuple(struct nlmsghdr *nlh, const struct ct_sel *s, bool reply)
{
	struct nlattr *tuple = mnl_attr_nest_start(nlh, reply ? CTA_TUPLE_REPLY : CTA_TUPLE_ORIG);
	struct nlattr *n;

	if (s->reply == reply && (s->flags & (CT_FILTER_IP_SRC | CT_FILTER_IP_DST))) {
		n = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
		mnl_attr_put_u32(nlh, (s->flags & CT_FILTER_IP_SRC) ? CTA_IP_V4_SRC : CTA_IP_V4_DST,
				 htonl(s->ip));
		mnl_attr_nest_end(nlh, n);
	}
	if (s->reply == reply && (s->flags & CT_FILTER_PROTO_NUM)) {
		n = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
		mnl_attr_put_u8(nlh, CTA_PROTO_NUM, s->proto);
		if (s->flags & CT_FILTER_PROTO_DST_PORT)
			mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(s->dport));
		mnl_attr_nest_end(nlh, n);
	}
	mnl_attr_nest_end(nlh, tuple);
}

static int on_filtered(const struct nlmsghdr *nlh, void *arg)
{
	struct walk *w = arg;
	struct nf_conntrack *ct = nfct_new();

	if (!ct) {
		w->err = w->err ? w->err : -ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nfct_nlmsg_parse(nlh, ct) >= 0)
		on_ct(NFCT_T_UNKNOWN, ct, w);
	nfct_destroy(ct);
	return MNL_CB_OK;
}

/* The flows of one selection, each picked or not as in the whole dump; -EOPNOTSUPP: no filter here. */
static int dump_filtered(struct mnl_socket *nl, char *buf, size_t size, const struct ct_sel *s,
			 struct walk *w)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *g;
	struct nlattr *f;
	uint32_t seq = (uint32_t)time(NULL), portid = mnl_socket_get_portid(nl);
	ssize_t n;
	int r = MNL_CB_OK;

	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_INET;
	g->version = NFNETLINK_V0;
	g->res_id = 0;
	/* both tuples and both flag words, the unselected empty: older kernels want each */
	put_tuple(nlh, s, false);
	put_tuple(nlh, s, true);
	f = mnl_attr_nest_start(nlh, CTA_FILTER);
	mnl_attr_put_u32(nlh, CTA_FILTER_ORIG_FLAGS, s->reply ? 0 : s->flags);
	mnl_attr_put_u32(nlh, CTA_FILTER_REPLY_FLAGS, s->reply ? s->flags : 0);
	mnl_attr_nest_end(nlh, f);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	while (r > MNL_CB_STOP) {
		n = mnl_socket_recvfrom(nl, buf, size);
		if (n < 0)
			return -errno;
		r = mnl_cb_run(buf, (size_t)n, seq, portid, on_filtered, w);
	}
	if (r < 0)
		return w->err ? w->err : (errno == EINVAL ? -EOPNOTSUPP : -errno);
	return w->err;
}

#define CT_DUMP_BUF (64 << 10)

/*
 * The flows of the selections, on one socket; -EOPNOTSUPP when the kernel
 * has no dump filter (and nothing was deleted by it).
 */
static int forget_filtered(const struct ct_sel *sel, size_t n, struct walk *w)
{
	struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
	char *buf = malloc(CT_DUMP_BUF);
	int r = 0;

	if (!nl || !buf || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = errno ? -errno : -ENOMEM;
		goto out;
	}
	w->del = nfct_open(CONNTRACK, 0);
	if (!w->del) {
		r = errno ? -errno : -EIO;
		goto out;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		for (int t = 0; t < DUMP_TRIES; t++) {
			r = dump_filtered(nl, buf, CT_DUMP_BUF, &sel[i], w);
			if (r != -EINTR && r != -ENOBUFS)
				break;
		}
		/* a kernel without the filter refuses the first: nothing deleted yet */
		if (r == -EOPNOTSUPP && i > 0)
			r = -EIO;
	}
out:
	if (w->del)
		nfct_close(w->del);
	w->del = NULL;
	if (nl)
		mnl_socket_close(nl);
	free(buf);
	return r;
}

int node_ct_walk(node_ct_visit_fn fn, void *ctx)
{
	struct walk w = { .visit = fn, .ctx = ctx };

	/* Once: a visit is not repeatable (the visitor counts). */
	return walk_run(&w, 1);
}

static void add_local(struct nl_object *obj, void *arg)
{
	struct rtnl_addr *a = (struct rtnl_addr *)obj;
	struct nl_addr *addr = rtnl_addr_get_local(a);
	struct locals *l = arg;
	uint32_t ip;

	if (l->oom || rtnl_addr_get_family(a) != AF_INET || !addr || nl_addr_get_len(addr) != 4)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		uint32_t *more = realloc(l->ip, cap * sizeof(*more));

		if (!more) {
			l->oom = true;
			return;
		}
		l->ip = more;
		l->cap = cap;
	}
	memcpy(&ip, nl_addr_get_binary_addr(addr), 4);
	l->ip[l->n++] = ntohl(ip);
}

static int locals_read(struct locals *l)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	_cleanup_nl_cache_ struct nl_cache *cache = NULL;
	int r = tg_nl_route_open(&sk);

	if (r == 0)
		r = tg_nl_to_errno(rtnl_addr_alloc_cache(sk, &cache));
	if (r < 0)
		return r;
	nl_cache_foreach(cache, add_local, l);
	return l->oom ? -ENOMEM : 0;
}

static bool has_datagram_port(const struct hostports *ports)
{
	for (size_t i = 0; ports && i < ports->n; i++)
		if (ports->m[i].proto != IPPROTO_TCP)
			return true;
	return false;
}

int node_ct_forget(uint32_t ip, const struct hostports *ports)
{
	struct locals local = { 0 };
	struct pick p = { .ip = ip, .local = &local };
	struct walk w = { .pick = &p };
	int r;

	if (has_datagram_port(ports)) {
		r = locals_read(&local);
		if (r < 0) {
			free(local.ip);
			return r;
		}
		p.ports = ports;
	}
	if (!p.ip && !p.ports)
		return 0;
	{
		/*
		 * The flows the address sends (its original source: its own, the
		 * masqueraded ones) and those it answers (its reply source: sent
		 * straight to it, or DNAT'd to it by a hostPort or a Service):
		 * every flow whose packets reach the address is one of them, in
		 * two walks of the table. (A flow sent to it and DNAT'd elsewhere
		 * reaches it no more; nothing of Tollgate's SNATs to a pod.)
		 */
		struct ct_sel sel[2 + HOSTPORT_MAX];
		size_t n = 0;

		if (ip) {
			sel[n++] = (struct ct_sel){ false, CT_FILTER_IP_SRC, ip, 0, 0 };
			sel[n++] = (struct ct_sel){ true, CT_FILTER_IP_SRC, ip, 0, 0 };
		}
		for (size_t i = 0; p.ports && i < p.ports->n; i++)
			if (p.ports->m[i].proto != IPPROTO_TCP)
				sel[n++] = (struct ct_sel){
					false, CT_FILTER_PROTO_NUM | CT_FILTER_PROTO_DST_PORT, 0,
					p.ports->m[i].proto, p.ports->m[i].host_port
				};
		r = forget_filtered(sel, n, &w);
	}
	if (r == -EOPNOTSUPP) {
		w.deleted = 0;
		w.err = 0;
		r = walk_run(&w, DUMP_TRIES);
	}
	free(local.ip);
	/* No conntrack in this kernel (or not loaded): no flow to forget. */
	if (r == -EOPNOTSUPP || r == -EPROTONOSUPPORT || r == -EAFNOSUPPORT)
		return 0;
	return r < 0 ? r : w.deleted;
}
