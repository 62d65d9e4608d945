// SPDX-License-Identifier: Apache-2.0
/*
 * The internet guard's gauge: how many connections each guarded namespace's
 * pods hold to internet destinations on this node, from one dump of the
 * node's conntrack table (node/conntrack.h). A connection is counted
 * as the guard's `ct count` counts it: its original direction from a pod's
 * address to one outside set `internal`, a TCP one until it closes
 * (TIME_WAIT and CLOSE are closed).
 */
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter/nf_conntrack_tcp.h>

#include "accounting/accounting.h"
#include "exporter/internal.h"
#include "node/conntrack.h"

struct tally {
	const struct ct_pod *pods; /* sorted by address */
	size_t n_pods;
	const struct acct_range *internal;
	size_t n_internal;
	uint64_t *counts; /* by the pods' ns index */
};

static int cmp_pod(const void *key, const void *elem)
{
	uint32_t ip = *(const uint32_t *)key, other = ((const struct ct_pod *)elem)->ip;

	return ip < other ? -1 : ip > other;
}

static void on_flow(const struct node_ct_flow *f, void *arg)
{
	struct tally *t = arg;
	const struct ct_pod *p =
		bsearch(&f->orig_src, t->pods, t->n_pods, sizeof(*t->pods), cmp_pod);

	if (!p || acct_ranges_have(t->internal, t->n_internal, f->orig_dst))
		return;
	if (f->tcp_state == TCP_CONNTRACK_TIME_WAIT || f->tcp_state == TCP_CONNTRACK_CLOSE)
		return;
	t->counts[p->ns]++;
}

int ct_count_internet(struct ct_pod *pods, size_t n_pods, size_t n_ns, uint64_t *counts)
{
	struct tally t = { .pods = pods, .n_pods = n_pods, .counts = counts };
	struct acct_range *internal = NULL;
	int r;

	memset(counts, 0, n_ns * sizeof(*counts));
	r = acct_list_internal(&internal, &t.n_internal, NULL);
	if (r < 0)
		return r;
	t.internal = internal;
	qsort(pods, n_pods, sizeof(*pods), cmp_pod);
	r = node_ct_walk(on_flow, &t);
	free(internal);
	return r;
}
