// SPDX-License-Identifier: Apache-2.0
/*
 * The internet guard's gauge: how many connections each guarded namespace's
 * pods hold to internet destinations on this node, from one dump of the
 * node's conntrack table (libnetfilter_conntrack). A connection is counted
 * as the guard's `ct count` counts it: its original direction from a pod's
 * address to one outside set `internal`, a TCP one until it closes
 * (TIME_WAIT and CLOSE are closed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <linux/netfilter/nf_conntrack_tcp.h>

#include "accounting/accounting.h"
#include "exporter/internal.h"

struct tally {
	const struct ct_pod *pods;	/* sorted by address */
	size_t n_pods;
	const struct acct_range *internal;
	size_t n_internal;
	uint64_t *counts;		/* by the pods' ns index */
};

static int cmp_pod(const void *key, const void *elem)
{
	uint32_t ip = *(const uint32_t *)key, other = ((const struct ct_pod *)elem)->ip;

	return ip < other ? -1 : ip > other;
}

static int on_ct(enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *arg)
{
	struct tally *t = arg;
	const struct ct_pod *p;
	uint32_t src, dst;

	(void)type;
	if (nfct_get_attr_u8(ct, ATTR_ORIG_L3PROTO) != AF_INET)
		return NFCT_CB_CONTINUE;
	src = ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC));
	dst = ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST));
	p = bsearch(&src, t->pods, t->n_pods, sizeof(*t->pods), cmp_pod);
	if (!p || acct_ranges_have(t->internal, t->n_internal, dst))
		return NFCT_CB_CONTINUE;
	if (nfct_get_attr_u8(ct, ATTR_ORIG_L4PROTO) == IPPROTO_TCP && nfct_attr_is_set(ct, ATTR_TCP_STATE)) {
		uint8_t st = nfct_get_attr_u8(ct, ATTR_TCP_STATE);

		if (st == TCP_CONNTRACK_TIME_WAIT || st == TCP_CONNTRACK_CLOSE)
			return NFCT_CB_CONTINUE;
	}
	t->counts[p->ns]++;
	return NFCT_CB_CONTINUE;
}

int ct_count_internet(struct ct_pod *pods, size_t n_pods, size_t n_ns, uint64_t *counts)
{
	struct tally t = { .pods = pods, .n_pods = n_pods, .counts = counts };
	struct acct_range *internal = NULL;
	struct nfct_handle *h;
	uint32_t family = AF_INET;
	int r;

	memset(counts, 0, n_ns * sizeof(*counts));
	r = acct_list_internal(&internal, &t.n_internal, NULL);
	if (r < 0)
		return r;
	t.internal = internal;
	qsort(pods, n_pods, sizeof(*pods), cmp_pod);
	h = nfct_open(CONNTRACK, 0);
	if (!h) {
		r = errno ? -errno : -EIO;
		free(internal);
		return r;
	}
	nfct_callback_register(h, NFCT_T_ALL, on_ct, &t);
	r = nfct_query(h, NFCT_Q_DUMP, &family) < 0 ? -errno : 0;
	nfct_close(h);
	free(internal);
	return r;
}
