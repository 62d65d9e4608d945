// SPDX-License-Identifier: Apache-2.0
/*
 * Reading table inet tollgate back (a set's addresses, the rule count), and
 * the pods' elements put right against the store (acct_pods_reconcile).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>

#include "accounting/internal.h"
#include "lib/util.h"

/* ---- dumps ---- */

struct dump_ctx {
	uint32_t *ips;
	uint32_t *vals; /* a map's 4-byte values alongside (NULL: keys only) */
	size_t n, cap;
	int err;
};

static bool ips_grow(struct dump_ctx *d)
{
	size_t cap = d->cap;

	if (d->vals && !array_grow(&d->vals, &cap, d->n, sizeof(*d->vals), 64)) {
		d->err = -ENOMEM;
		return false;
	}
	if (array_grow(&d->ips, &d->cap, d->n, sizeof(*d->ips), 64))
		return true;
	d->err = -ENOMEM;
	return false;
}

static int collect_elem(struct nftnl_set_elem *el, void *p)
{
	struct dump_ctx *d = p;
	uint32_t len = 0, be;
	const void *key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &len);

	if (!key || len != 4)
		return 0;
	if (!ips_grow(d))
		return -1;
	memcpy(&be, key, 4);
	if (d->vals) {
		const void *data = nftnl_set_elem_get(el, NFTNL_SET_ELEM_DATA, &len);

		d->vals[d->n] = 0;
		if (data && len == sizeof(uint32_t))
			memcpy(&d->vals[d->n], data, sizeof(uint32_t));
	}
	d->ips[d->n++] = ntohl(be);
	return 0;
}

static int collect_elems_cb(const struct nlmsghdr *nlh, void *p)
{
	return acct_foreach_elem(nlh, collect_elem, p);
}

/* One dump; *err is the callbacks' own failure (out of memory), which wins. */
static int open_and_dump(struct nlmsghdr *(*build)(char *buf, const void *arg), const void *arg,
			 mnl_cb_t cb, void *cb_arg, const int *err)
{
	char buf[ACCT_NFT_RECV_SIZE] = { 0 };
	struct acct_nft_conn c = { 0 };
	int r;

	r = acct_nft_open(&c, 0, NULL);
	if (r < 0)
		return r;
	build(buf, arg);
	r = acct_nft_request(&c, buf, sizeof(buf), cb, cb_arg);
	acct_nft_close(&c);
	return r < 0 && *err ? *err : r;
}

static struct nlmsghdr *build_elems_dump(char *buf, const void *set)
{
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
						     NLM_F_DUMP | NLM_F_ACK, 1);
	struct nftnl_set *s = acct_set_ref(set);

	if (s) {
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
	}
	return nlh;
}

/* A set's keys, and with ret_vals a map's values alongside. */
static int list_elems(const char *set, uint32_t **ret, uint32_t **ret_vals, size_t *ret_n,
		      struct tg_err *e)
{
	struct dump_ctx d = { 0 };
	int r;

	d.ips = malloc(64 * sizeof(*d.ips));
	d.vals = ret_vals ? malloc(64 * sizeof(*d.vals)) : NULL;
	if (!d.ips || (ret_vals && !d.vals)) {
		free(d.ips);
		free(d.vals);
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	}
	d.cap = 64;
	r = open_and_dump(build_elems_dump, set, collect_elems_cb, &d, &d.err);
	if (r < 0) {
		free(d.ips);
		free(d.vals);
		return r == -ENOENT ? r : acct_nft_fail(e, r, "listing a set", set);
	}
	*ret = d.ips;
	if (ret_vals)
		*ret_vals = d.vals;
	*ret_n = d.n;
	return 0;
}

int acct_list_set(const char *set, uint32_t **ret, size_t *ret_n, struct tg_err *e)
{
	return list_elems(set, ret, NULL, ret_n, e);
}

/* The interval set's elements: each start, and each range's end (the first address past it). */
struct bounds_ctx {
	struct acct_range *b; /* start = key, end = 1 when an interval end */
	size_t n, cap;
	int err;
};

static int collect_bound(struct nftnl_set_elem *el, void *p)
{
	struct bounds_ctx *d = p;
	uint32_t len = 0, be;
	const void *key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &len);

	if (!key || len != 4)
		return 0;
	if (!array_grow(&d->b, &d->cap, d->n, sizeof(*d->b), 64)) {
		d->err = -ENOMEM;
		return -1;
	}
	memcpy(&be, key, 4);
	d->b[d->n++] =
		(struct acct_range){ ntohl(be),
				     nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_FLAGS) &&
					     (nftnl_set_elem_get_u32(el, NFTNL_SET_ELEM_FLAGS) &
					      NFT_SET_ELEM_INTERVAL_END) };
	return 0;
}

static int bounds_cb(const struct nlmsghdr *nlh, void *p)
{
	return acct_foreach_elem(nlh, collect_bound, p);
}

static int cmp_bound(const void *a, const void *b)
{
	const struct acct_range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (int)x->end - (int)y->end; /* an end before a start at the same key */
}

int acct_list_internal(struct acct_range **ret, size_t *ret_n, struct tg_err *e)
{
	struct bounds_ctx d = { 0 };
	struct acct_range *out;
	size_t n = 0;
	int r = open_and_dump(build_elems_dump, ACCT_SET_INTERNAL, bounds_cb, &d, &d.err);

	if (r < 0) {
		free(d.b);
		return r == -ENOENT ? r : acct_nft_fail(e, r, "listing a set", ACCT_SET_INTERNAL);
	}
	qsort(d.b, d.n, sizeof(*d.b), cmp_bound);
	out = calloc(d.n + 1, sizeof(*out));
	if (!out) {
		free(d.b);
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	}
	/* a start opens a range, the next end closes it before its key; none: to the last address */
	for (size_t i = 0; i < d.n; i++) {
		if (d.b[i].end)
			continue;
		out[n].start = d.b[i].start;
		out[n].end = UINT32_MAX;
		if (i + 1 < d.n && d.b[i + 1].end)
			out[n].end = d.b[i + 1].start - 1;
		n++;
	}
	free(d.b);
	*ret = out;
	*ret_n = n;
	return 0;
}

bool acct_ranges_have(const struct acct_range *r, size_t n, uint32_t ip)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ip < r[mid].start)
			hi = mid;
		else if (ip > r[mid].end)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

static int count_cb(const struct nlmsghdr *nlh, void *p)
{
	(void)nlh;
	((struct dump_ctx *)p)->n++;
	return MNL_CB_OK;
}

static struct nlmsghdr *build_rules_dump(char *buf, const void *unused)
{
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_INET,
						     NLM_F_DUMP | NLM_F_ACK, 1);

	(void)unused;
	mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, ACCT_TABLE);
	return nlh;
}

int acct_count_rules(size_t *ret)
{
	struct dump_ctx d = { 0 };
	int r = open_and_dump(build_rules_dump, NULL, count_cb, &d, &d.err);

	if (r < 0)
		return r;
	*ret = d.n;
	return 0;
}

/* ---- pods' elements against the store ---- */

static int cmp_ip(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool ip_in(const uint32_t *v, size_t n, uint32_t ip)
{
	return n && bsearch(&ip, v, n, sizeof(*v), cmp_ip);
}

/* A map's keys sorted, its values (vals[i] is ips[i]'s) kept alongside. */
static int sort_classes(uint32_t *ips, uint32_t *vals, size_t n, struct tg_err *e)
{
	uint64_t *pairs;

	if (!ips || !vals || !n)
		return 0;
	pairs = calloc(n, sizeof(*pairs));
	if (!pairs)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		pairs[i] = (uint64_t)ips[i] << 32 | vals[i];
	qsort(pairs, n, sizeof(*pairs), cmp_u64);
	for (size_t i = 0; i < n; i++) {
		ips[i] = (uint32_t)(pairs[i] >> 32);
		vals[i] = (uint32_t)pairs[i];
	}
	free(pairs);
	return 0;
}

/*
 * The pod's element of @ingress_class against its record (ips and vals:
 * the map as read, sorted): another value, or one where the record has 0,
 * deleted; its classid put in where it is missing or was another, unless
 * acct_put_pod puts it (a pod not `whole`). Into bt when given; counted
 * either way (a class put right is one added, one deleted for 0 one removed).
 */
static int put_class_right(struct acct_batch *bt, const struct acct_pod *p, const uint32_t *ips,
			   const uint32_t *vals, size_t n, bool whole, unsigned *added,
			   unsigned *removed)
{
	const uint32_t *at = n ? bsearch(&p->ip, ips, n, sizeof(*ips), cmp_ip) : NULL;
	bool wrong = at && vals[at - ips] != p->ingress_classid;
	int r = 0;

	if (wrong) {
		if (bt)
			r = acct_put_ingress_class(bt, NFT_MSG_DELSETELEM, p->ip, 0);
		*removed += !p->ingress_classid;
	}
	if (r == 0 && whole && p->ingress_classid && (!at || wrong)) {
		if (bt)
			r = acct_put_ingress_class(bt, NFT_MSG_NEWSETELEM, p->ip,
						   p->ingress_classid);
		(*added)++;
	}
	return r ? -ENOMEM : 0;
}

/*
 * The per-pod sets and maps keyed by a pod's address, each read once: those
 * every pod is in (@pods, the namespace counter maps, nodeAccess' drop maps,
 * @guard_ns and @guard_in with the guard on),
 * @masq, @egress_class and @ingress_class (read with its values: a pod is in
 * it with its record's class, or not when that is 0), and nodeAccess'
 * passes, which a pod is in exactly when the config lists its namespace.
 */
#define RS_INGRESS 3
#define RS_NS 4
#define RS_DROP (RS_NS + ACCT_CLASSES)
#define RS_KEY (RS_DROP + ACCT_DROPS) /* @nexthop_limit */
#define RS_GUARD (RS_KEY + 1)	      /* every pod's, with the guard on */
#define RS_OK (RS_GUARD + ACCT_DIRS)
#define RECONCILE_SETS (RS_OK + 2)

int acct_pods_reconcile(const struct acct_config *cfg, const struct acct_pod *all, size_t n_all,
			unsigned *ret_added, unsigned *ret_removed, struct tg_err *e)
{
	const char *sets[RECONCILE_SETS] = { ACCT_SET_PODS, ACCT_SET_MASQ, ACCT_MAP_EGRESS_CLASS,
					     ACCT_MAP_INGRESS_CLASS };
	uint32_t *have[RECONCILE_SETS] = { 0 }, *want, *classes = NULL;
	size_t n_have[RECONCILE_SETS] = { 0 };
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = NULL;
	unsigned added = 0, removed = 0, hp_added = 0, hp_removed = 0;
	char why[256] = "";
	int r = 0;

	want = calloc(n_all + 1, sizeof(*want));
	if (!want)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (int k = 0; k < ACCT_CLASSES; k++)
		sets[RS_NS + k] = acct_ns_maps[k];
	for (int d = 0; d < ACCT_DROPS; d++)
		sets[RS_DROP + d] = acct_drop_maps[d];
	sets[RS_KEY] = ACCT_MAP_NEXTHOP_LIMIT;
	sets[RS_GUARD] = ACCT_MAP_GUARD;
	sets[RS_GUARD + 1] = ACCT_MAP_GUARD_IN;
	sets[RS_OK] = ACCT_SET_METADATA_OK;
	sets[RS_OK + 1] = ACCT_SET_AGENT_OK;
	for (size_t i = 0; i < n_all; i++)
		want[i] = all[i].ip;
	qsort(want, n_all, sizeof(*want), cmp_ip);
	for (int k = 0; r == 0 && k < RECONCILE_SETS; k++) {
		r = list_elems(sets[k], &have[k], k == RS_INGRESS ? &classes : NULL, &n_have[k], e);
		if (r == -ENOENT)
			r = tg_fail(e, CNI_ERR_IO, r,
				    "nftables: table inet " ACCT_TABLE " lacks %s", sets[k]);
		else if (r == 0 && k == RS_INGRESS)
			r = sort_classes(have[k], classes, n_have[k], e);
		else if (r == 0 && have[k])
			qsort(have[k], n_have[k], sizeof(*have[k]), cmp_ip);
	}
	if (r < 0)
		goto out;
	/*
	 * Two passes over what was read: the first counts what is wrong, the
	 * second (only when something is) writes it into a batch sized for it,
	 * so that a node in order costs the reads and nothing more.
	 */
	for (int pass = 0; pass < 2 && r == 0; pass++) {
		size_t n_put = added, n_del = removed;

		if (pass == 1) {
			if (!added && !removed)
				break;
			for (int k = 0; k < RECONCILE_SETS; k++)
				for (size_t i = 0; i < n_have[k]; i++)
					n_del += !ip_in(want, n_all, have[k][i]);
			bt = acct_batch_new((n_put + 1) * ACCT_BATCH_PER_POD + n_del * 128 + 4096);
			if (!bt) {
				r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
				break;
			}
			acct_batch_start(bt);
			added = removed = 0;
		}
		/*
		 * Missing: a pod of the store without its address in a set every
		 * pod is in. Not masq: whether a pod is masqueraded is the config
		 * of the ADD that made it, which the store does not record.
		 */
		for (size_t i = 0; i < n_all && r == 0; i++) {
			const struct acct_access *a = &cfg->access;
			bool whole = ip_in(have[0], n_have[0], all[i].ip);
			const bool listed[2] = {
				acct_ns_listed(a->metadata_ns, a->n_metadata_ns,
					       all[i].k8s_namespace),
				acct_ns_listed(a->metrics_ns, a->n_metrics_ns,
					       all[i].k8s_namespace),
			};

			for (int k = RS_NS; k < RS_OK; k++)
				whole = whole && (ip_in(have[k], n_have[k], all[i].ip) ||
						  (k >= RS_GUARD && !cfg->guard.on));
			/* its download class: another one out first, then its own in */
			r = put_class_right(bt, &all[i], have[RS_INGRESS], classes,
					    n_have[RS_INGRESS], whole, &added, &removed);
			if (!whole && r == 0) {
				if (bt)
					r = acct_put_pod(bt, cfg, &all[i]); /* its passes too */
				added++;
			}
			/* a pass where its namespace has none (or none where it has one) */
			for (int j = 0; j < 2 && r == 0; j++) {
				bool in = ip_in(have[RS_OK + j], n_have[RS_OK + j], all[i].ip);

				if (in == listed[j] || (!whole && listed[j]))
					continue;
				if (bt)
					r = acct_put_elem(bt,
							  in ? NFT_MSG_DELSETELEM
							     : NFT_MSG_NEWSETELEM,
							  sets[RS_OK + j], all[i].ip, NULL)
						    ? -ENOMEM
						    : 0;
				if (in)
					removed++;
				else
					added++;
			}
		}
		/* Stray: an address no pod of the store holds, out of each set it is in. */
		for (int k = 0; k < RECONCILE_SETS && r == 0; k++)
			for (size_t i = 0; i < n_have[k] && r == 0; i++) {
				uint32_t ip = have[k][i];
				bool first = true;

				if (ip_in(want, n_all, ip))
					continue;
				/* counted once, where it is first seen */
				for (int j = 0; j < k && first; j++)
					first = !ip_in(have[j], n_have[j], ip);
				if (!first)
					continue;
				for (int j = k; bt && j < RECONCILE_SETS && r == 0; j++)
					if (ip_in(have[j], n_have[j], ip))
						r = acct_put_elem(bt, NFT_MSG_DELSETELEM, sets[j],
								  ip, NULL)
							    ? -ENOMEM
							    : 0;
				removed++;
			}
	}
	if (r == 0 && (added || removed)) {
		r = acct_nft_open(&c, 0, e);
		if (r == 0) {
			r = acct_batch_send(&c, bt, why, sizeof(why));
			if (r < 0)
				r = acct_nft_fail(
					e, r,
					"putting pods' elements right in table inet " ACCT_TABLE,
					why);
		}
		acct_nft_close(&c);
	}
	/* hostPorts: their own maps, keyed by port (a pod put back above has none of them) */
	if (r == 0)
		r = acct_hostport_reconcile(all, n_all, &hp_added, &hp_removed, e);
	if (r == 0) {
		if (ret_added)
			*ret_added = added + hp_added;
		if (ret_removed)
			*ret_removed = removed + hp_removed;
	}
out:
	for (int k = 0; k < RECONCILE_SETS; k++)
		free(have[k]);
	free(classes);
	free(want);
	acct_batch_free(bt);
	return r;
}
