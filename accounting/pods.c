// SPDX-License-Identifier: Apache-2.0
/* Per-pod elements and counters of table inet tollgate: added, removed, checked. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/object.h>

#include "accounting/internal.h"
#include "lib/failpoint.h"
#include "lib/util.h"

/* The pod's element of @egress_class: replaced, since a reshape may move the pod. */
static int put_class_elem(struct acct_batch *bt, const struct acct_pod *p)
{
	uint32_t classid = p->egress_classid; /* host-endian, as meta priority holds it */
	uint8_t key[ACCT_KEY_MAX];
	size_t n = acct_set_key_of(ACCT_KEY_ADDR, NULL, p->ip, key);

	return acct_put_elem_key(bt, NFT_MSG_NEWSETELEM, ACCT_MAP_EGRESS_CLASS, key, n, NULL,
				 &classid, sizeof(classid), true);
}

/*
 * Its element of @ingress_class (NEWSETELEM with its classid, or any other
 * message by key). The kernel does not replace an element of another value
 * (-EEXIST): a change deletes the old one first, in the same transaction
 * (acct_pod_ingress_class, acct_pods_reconcile).
 */
int acct_put_ingress_class(struct acct_batch *bt, uint16_t type, uint32_t ip, uint32_t classid)
{
	uint8_t key[ACCT_KEY_MAX];
	size_t n = acct_set_key_of(ACCT_KEY_ADDR, NULL, ip, key);
	bool put = type == NFT_MSG_NEWSETELEM;

	/* the classid host-endian, as meta priority holds it */
	return acct_put_elem_key(bt, type, ACCT_MAP_INGRESS_CLASS, key, n, NULL,
				 put ? &classid : NULL, put ? sizeof(classid) : 0, false);
}

static int class_of_elem(struct nftnl_set_elem *el, void *p)
{
	uint32_t len = 0;
	const void *data = nftnl_set_elem_get(el, NFTNL_SET_ELEM_DATA, &len);

	if (data && len == sizeof(uint32_t))
		memcpy(p, data, sizeof(uint32_t));
	return 0;
}

static int class_of_cb(const struct nlmsghdr *nlh, void *p)
{
	return acct_foreach_elem(nlh, class_of_elem, p);
}

/* 1 with the pod's classid in @ingress_class (0 when unreadable), 0 when it has none, or <0. */
static int ingress_class_get(struct acct_nft_conn *c, uint32_t ip, uint32_t *ret)
{
	struct acct_elem_query q = { .set = ACCT_MAP_INGRESS_CLASS };
	int r;

	*ret = 0;
	q.key_len = acct_set_key_of(ACCT_KEY_ADDR, NULL, ip, q.key);
	r = acct_nft_get_elem(c, &q, class_of_cb, ret);
	return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

static bool link_ok(const struct acct_pod *p)
{
	return p->host_veth && p->host_veth[0] && strlen(p->host_veth) < ACCT_KEY_LINK_LEN;
}

/* The element of set pod_src that lets the pod send: its link . its address. */
static int put_src_elem(struct acct_batch *bt, uint16_t type, const struct acct_pod *p)
{
	uint8_t key[ACCT_KEY_MAX];
	size_t n = acct_set_key_of(ACCT_KEY_LINK_ADDR, p->host_veth, p->ip, key);

	return acct_put_elem_key(bt, type, ACCT_SET_POD_SRC, key, n, NULL, NULL, 0, false);
}

/* Its link -> its namespace's spoofed-packet counter of family f (`with`: that counter). */
static int put_spoofed_elem(struct acct_batch *bt, uint16_t type, const struct acct_pod *p,
			    enum acct_family f, const char *with)
{
	uint8_t key[ACCT_KEY_MAX];
	size_t n = acct_set_key_of(ACCT_KEY_LINK, p->host_veth, 0, key);

	return acct_put_elem_key(bt, type, acct_spoofed_maps[f], key, n, with, NULL, 0, false);
}

/*
 * Its namespace's limit of new next hops (made with the namespace's first
 * pod, kept as it is: a changed rate reaches a namespace that arrives
 * anew), and its element of @nexthop_limit naming it.
 */
static int put_nexthop_limit(struct acct_batch *bt, const struct acct_config *cfg,
			     const struct acct_pod *p)
{
	uint32_t rate = cfg->access.neighbours_per_second;
	char name[ACCT_COUNTER_NAME_MAX];
	int r;

	acct_nexthop_limit_name(p->k8s_namespace, name);
	r = acct_put_limit(bt, name, rate ? rate : ACCT_NEIGHBOURS_PER_SECOND_DEFAULT,
			   (rate ? rate : ACCT_NEIGHBOURS_PER_SECOND_DEFAULT) *
				   ACCT_NEIGHBOURS_BURST);
	return r | acct_put_elem(bt, NFT_MSG_NEWSETELEM, ACCT_MAP_NEXTHOP_LIMIT, p->ip, name);
}

int acct_put_pod_access(struct acct_batch *bt, const struct acct_config *cfg,
			const struct acct_pod *p)
{
	const struct acct_access *a = &cfg->access;
	int r = 0;

	if (acct_ns_listed(a->metadata_ns, a->n_metadata_ns, p->k8s_namespace))
		r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, ACCT_SET_METADATA_OK, p->ip, NULL);
	if (acct_ns_listed(a->metrics_ns, a->n_metrics_ns, p->k8s_namespace))
		r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, ACCT_SET_AGENT_OK, p->ip, NULL);
	r |= acct_put_service_ok(bt, cfg, p);
	return r ? -ENOMEM : 0;
}

int acct_put_pod(struct acct_batch *bt, const struct acct_config *cfg, const struct acct_pod *p)
{
	char name[ACCT_COUNTER_NAME_MAX];
	int r = 0;

	/* A record without a link has no path to send from: nothing to let through. */
	if (link_ok(p)) {
		r |= put_src_elem(bt, NFT_MSG_NEWSETELEM, p);
		for (int f = 0; f < ACCT_FAMILIES; f++) {
			/* The namespace's spoofed-packet counters too appear with its first pod and stay. */
			acct_spoofed_counter_name(p->k8s_namespace, (enum acct_family)f, name);
			r |= acct_put_counter(bt, name);
			r |= put_spoofed_elem(bt, NFT_MSG_NEWSETELEM, p, (enum acct_family)f, name);
		}
	}
	for (int d = 0; d < ACCT_DROPS; d++) {
		/* nodeAccess' drops of the namespace: made with its first pod, kept as its others are */
		acct_drop_counter_name(p->k8s_namespace, (enum acct_access_drop)d, name);
		r |= acct_put_counter(bt, name);
		r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, acct_drop_maps[d], p->ip, name);
	}
	r |= acct_put_pod_access(bt, cfg, p);
	r |= put_nexthop_limit(bt, cfg, p);
	r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, ACCT_SET_PODS, p->ip, NULL);
	if (p->egress_classid)
		r |= put_class_elem(bt, p);
	if (p->ingress_classid)
		r |= acct_put_ingress_class(bt, NFT_MSG_NEWSETELEM, p->ip, p->ingress_classid);
	if (cfg->masquerade)
		r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, ACCT_SET_MASQ, p->ip, NULL);
	/* its namespace's chain is there already (acct_pod_add, acct_declare) */
	if (cfg->guard.on)
		r |= acct_guard_put_elem(bt, NFT_MSG_NEWSETELEM, p, -1);
	for (int c = 0; c < ACCT_CLASSES; c++) {
		/* The namespace's counters appear with its first pod and stay. */
		acct_ns_counter_name(p->k8s_namespace, c, name);
		r |= acct_put_counter(bt, name);
		r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, acct_ns_maps[c], p->ip, name);
		if (cfg->per_pod) {
			acct_pod_counter_name(p->host_veth, c, name);
			r |= acct_put_counter(bt, name);
			r |= acct_put_elem(bt, NFT_MSG_NEWSETELEM, acct_pod_maps[c], p->ip, name);
		}
	}
	return r ? -ENOMEM : 0;
}

int acct_pod_add(const struct acct_config *cfg, const struct acct_pod *pod, struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = acct_batch_new(2 * ACCT_BATCH_PER_POD + 4096);
	char why[256] = "";
	int r;

	if (!bt)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = TG_FAILPOINT("nft.pod.add.before", e);
	if (r == 0)
		r = acct_nft_open(&c, 0, e);
	if (r == 0) {
		/* The namespace's first pod on the node brings its guard chain. */
		int missing = cfg->guard.on && acct_guard_chain_exists(&c, pod->k8s_namespace) != 1;
		uint32_t have;
		/*
		 * A download class of before (a repeated ADD, a reshape): the
		 * kernel does not replace an element of another value, and one
		 * the pod no longer has must go.
		 */
		bool stale = ingress_class_get(&c, pod->ip, &have) == 1 &&
			     have != pod->ingress_classid;

		for (int tries = 0; tries < 3; tries++) {
			/* Only additions (but a stale class): nothing the kernel must wait on. */
			acct_batch_start(bt);
			r = missing ? acct_guard_put_chain(bt, cfg, pod->k8s_namespace, true, false)
				    : 0;
			if (r == 0 && stale)
				r = acct_put_ingress_class(bt, NFT_MSG_DELSETELEM, pod->ip, 0);
			if (r == 0)
				r = acct_put_pod(bt, cfg, pod);
			/* no `take`: a hostPort element of another address fails the ADD (-EEXIST) */
			if (r == 0)
				r = acct_hostport_put(bt, NFT_MSG_NEWSETELEM, pod, false);
			if (r == 0)
				r = acct_batch_send(&c, bt, why, sizeof(why));
			/* The stale class deleted meanwhile: nothing to take out. */
			if (r == -ENOENT && stale && ingress_class_get(&c, pod->ip, &have) == 0) {
				stale = false;
				continue;
			}
			if (r != -EEXIST)
				break;
			/* A concurrent ADD of the same namespace made the chain first: it is there. */
			if (missing) {
				missing = 0;
				continue;
			}
			/* Another class put in since the read: it goes too. */
			if (stale || !pod->ingress_classid ||
			    ingress_class_get(&c, pod->ip, &have) != 1 ||
			    have == pod->ingress_classid)
				break;
			stale = true;
		}
		acct_nft_close(&c);
		if (r == -ENOENT)
			r = tg_fail(e, CNI_ERR_IO, r,
				    "nftables: table inet " ACCT_TABLE
				    " lacks a set or map of this config");
		else if (r == -EEXIST && pod->ports && pod->ports->n)
			/* the store gave no other pod the port: an element left over, which the agent removes */
			r = tg_fail(e, CNI_ERR_TRY_AGAIN, r,
				    "a hostPort of the pod is mapped to another "
				    "address in table inet " ACCT_TABLE
				    " (an element no pod holds, "
				    "which the node agent's next pass removes)");
		else if (r < 0)
			r = acct_nft_fail(e, r, "adding the pod to table inet " ACCT_TABLE, why);
	}
	acct_batch_free(bt);
	return r;
}

static int put_pod_removal(struct acct_batch *bt, const struct acct_pod *p, uint16_t del_elem,
			   uint16_t del_obj, int only)
{
	char name[ACCT_COUNTER_NAME_MAX];
	int r = 0, i = 0;

	/* Elements first: a counter that a map still points at cannot go. */
#define STEP(x)                            \
	do {                               \
		if (only < 0 || only == i) \
			r |= (x);          \
		i++;                       \
	} while (0)
	if (link_ok(p)) {
		STEP(put_src_elem(bt, del_elem, p));
		for (int f = 0; f < ACCT_FAMILIES; f++)
			STEP(put_spoofed_elem(bt, del_elem, p, (enum acct_family)f, NULL));
	}
	STEP(acct_put_elem(bt, del_elem, ACCT_SET_METADATA_OK, p->ip, NULL));
	STEP(acct_put_elem(bt, del_elem, ACCT_SET_AGENT_OK, p->ip, NULL));
	for (size_t k = 0; k < ACCT_SERVICE_PORTS_MAX; k++)
		STEP(acct_service_ok_elem(bt, del_elem, p->ip, k));
	for (int d = 0; d < ACCT_DROPS; d++)
		STEP(acct_put_elem(bt, del_elem, acct_drop_maps[d], p->ip, NULL));
	STEP(acct_put_elem(bt, del_elem, ACCT_MAP_NEXTHOP_LIMIT, p->ip, NULL));
	STEP(acct_put_elem(bt, del_elem, ACCT_SET_MASQ, p->ip, NULL));
	STEP(acct_put_elem(bt, del_elem, ACCT_SET_PODS, p->ip, NULL));
	STEP(acct_put_elem(bt, del_elem, ACCT_MAP_EGRESS_CLASS, p->ip, NULL));
	STEP(acct_put_elem(bt, del_elem, ACCT_MAP_INGRESS_CLASS, p->ip, NULL));
	for (int d = 0; d < ACCT_DIRS; d++)
		STEP(acct_guard_put_elem(bt, del_elem, p, d));
	for (int c = 0; c < ACCT_CLASSES; c++) {
		STEP(acct_put_elem(bt, del_elem, acct_ns_maps[c], p->ip, NULL));
		STEP(acct_put_elem(bt, del_elem, acct_pod_maps[c], p->ip, NULL));
	}
	for (int c = 0; c < ACCT_CLASSES; c++) {
		acct_pod_counter_name(p->host_veth, c, name);
		STEP(acct_put_counter_msg(bt, name, del_obj, 0));
	}
#undef STEP
	return r ? -ENOMEM : i;
}

struct acct_conn {
	struct acct_nft_conn c;
};

void acct_conn_close(struct acct_conn *held)
{
	if (!held)
		return;
	acct_nft_close(&held->c);
	free(held);
}

int acct_pod_del(const struct acct_pod *pod, struct acct_conn **keep, struct tg_err *warn,
		 struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct tg_err oe = { 0 };
	struct acct_batch *bt = acct_batch_new(2 * ACCT_BATCH_PER_POD + 4096);
	char why[256] = "";
	int r, steps;

	if (!bt)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = acct_nft_open(&c, 0, &oe);
	if (r == -EPROTONOSUPPORT) {
		/*
		 * The kernel has no nf_tables (no nfnetlink, even after the module
		 * request that opening the socket makes): no table of ours exists,
		 * and so none of the pod's elements. Nothing to remove: the
		 * attachment may go (a failed ADD undoes its record, a DEL
		 * releases the address).
		 */
		tg_fail(warn, CNI_ERR_IO, r, "%s: no nftables element of %s to remove", oe.msg,
			pod->host_veth && pod->host_veth[0] ? pod->host_veth : "the pod");
		acct_batch_free(bt);
		return 0;
	}
	if (r < 0) {
		acct_batch_free(bt);
		return tg_fail(e, oe.code, r, "%s", oe.msg);
	}
	/*
	 * Its hostPorts by value, first (a transaction of their own on the same
	 * socket): every element mapping to the address, never one by key,
	 * which the store may have given another pod since the caller's read.
	 */
	r = acct_hostports_forget_on(&c, pod->ip, why, sizeof(why));
	if (r == -ENOENT)
		r = 0; /* no table: the next transaction says so */
	if (r < 0) {
		acct_batch_free(bt);
		acct_nft_close(&c);
		return acct_nft_fail(
			e, r, "removing the pod's hostPorts from table inet " ACCT_TABLE, why);
	}
	/* One transaction of "destroy" messages: each is fine when its object is gone. */
	acct_batch_start(bt);
	steps = put_pod_removal(bt, pod, NFT_MSG_DESTROYSETELEM, NFT_MSG_DESTROYOBJ, -1);
	r = steps < 0 ? steps : acct_batch_send(&c, bt, why, sizeof(why));
	if (r == -EINVAL || r == -EOPNOTSUPP) {
		/* A kernel before 6.3 has no destroy: delete step by step, ENOENT is fine. */
		for (int i = 0; i < steps; i++) {
			acct_batch_start(bt);
			put_pod_removal(bt, pod, NFT_MSG_DELSETELEM, NFT_MSG_DELOBJ, i);
			r = acct_batch_send(&c, bt, why, sizeof(why));
			if (r < 0 && r != -ENOENT)
				break;
			r = 0;
		}
	}
	acct_batch_free(bt);
	/*
	 * The kernel frees what a deletion released after an RCU grace period,
	 * and closing an nftables socket waits for that: a caller with slower
	 * work to do (deleting the veth) closes it afterwards, when the wait is over.
	 */
	if (keep && (*keep = malloc(sizeof(**keep))))
		(*keep)->c = c;
	else
		acct_nft_close(&c);
	if (r == -ENOENT)
		return 0; /* the whole table is gone */
	if (r < 0)
		return acct_nft_fail(e, r, "removing the pod from table inet " ACCT_TABLE, why);
	return 0;
}

/*
 * The namespace's counters into the batch, as `msg`: counter `only` (-1:
 * every one): each class's, then each family's spoofed-packet counter.
 */
#define NS_COUNTERS (ACCT_CLASSES + ACCT_FAMILIES + ACCT_DROPS + ACCT_REFUSALS)
static int put_ns_counters(struct acct_batch *bt, const char *k8s_namespace, uint16_t msg, int only)
{
	char name[ACCT_COUNTER_NAME_MAX];

	for (int i = 0; i < NS_COUNTERS; i++) {
		if (only >= 0 && only != i)
			continue;
		/* the guard's come with its chain (acct_guard_put_chain), and go with the others */
		if (i >= ACCT_CLASSES + ACCT_FAMILIES + ACCT_DROPS && msg == NFT_MSG_NEWOBJ)
			continue;
		if (i >= ACCT_CLASSES + ACCT_FAMILIES + ACCT_DROPS)
			acct_refused_counter_name(
				k8s_namespace,
				(enum acct_refusal)(i - ACCT_CLASSES - ACCT_FAMILIES - ACCT_DROPS),
				name);
		else if (i < ACCT_CLASSES)
			acct_ns_counter_name(k8s_namespace, (enum acct_class)i, name);
		else if (i < ACCT_CLASSES + ACCT_FAMILIES)
			acct_spoofed_counter_name(k8s_namespace,
						  (enum acct_family)(i - ACCT_CLASSES), name);
		else
			acct_drop_counter_name(
				k8s_namespace,
				(enum acct_access_drop)(i - ACCT_CLASSES - ACCT_FAMILIES), name);
		if (acct_put_counter_msg(bt, name, msg, msg == NFT_MSG_NEWOBJ ? NLM_F_CREATE : 0) <
		    0)
			return -ENOMEM;
	}
	return 0;
}

/* The namespace's limit of new next hops, as `msg` (DELOBJ, DESTROYOBJ). */
static int put_ns_limit_removal(struct acct_batch *bt, const char *k8s_namespace, uint16_t msg)
{
	char name[ACCT_COUNTER_NAME_MAX];

	acct_nexthop_limit_name(k8s_namespace, name);
	return acct_put_obj_msg(bt, name, NFT_OBJECT_LIMIT, msg, 0);
}

#define RETIRE_CHUNK 128
/* One transaction retiring the n namespaces' counters; missing ones are fine (destroy). */
static int retire_batch(struct acct_nft_conn *c, struct acct_batch *bt, const char *const *names,
			size_t n, char *why, size_t why_size)
{
	int r = 0;

	acct_batch_start(bt);
	for (size_t i = 0; i < n && r == 0; i++) {
		/* its guard chain first: its rules name the refused-connection counters */
		r = acct_guard_put_removal(bt, names[i], true, -1);
		if (r == 0)
			r = put_ns_counters(bt, names[i], NFT_MSG_DESTROYOBJ, -1);
		if (r == 0)
			r = put_ns_limit_removal(bt, names[i], NFT_MSG_DESTROYOBJ);
	}
	return r < 0 ? r : acct_batch_send(c, bt, why, why_size);
}

/* A socket and a batch for RETIRE_CHUNK namespaces' counters. */
static int ns_batch_open(struct acct_nft_conn *c, struct acct_batch **ret, struct tg_err *e)
{
	struct acct_batch *bt = acct_batch_new(RETIRE_CHUNK * NS_COUNTERS * 256 + 4096);
	int r;

	if (!bt)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = acct_nft_open(c, 0, e);
	if (r < 0) {
		acct_batch_free(bt);
		return r;
	}
	*ret = bt;
	return 0;
}

int acct_retire_namespaces(const char *const *names, size_t n, size_t *ret_retired,
			   struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = NULL;
	char why[256] = "";
	int r;

	*ret_retired = 0;
	r = ns_batch_open(&c, &bt, e);
	if (r < 0)
		return r;
	/* A transaction per RETIRE_CHUNK namespaces: one wait for the kernel each, a message the socket takes. */
	for (size_t at = 0; at < n && r == 0; at += RETIRE_CHUNK) {
		size_t k = n - at < RETIRE_CHUNK ? n - at : RETIRE_CHUNK;

		r = retire_batch(&c, bt, names + at, k, why, sizeof(why));
		if (r == 0) {
			*ret_retired += k;
			continue;
		}
		if (r != -EBUSY && r != -EINVAL && r != -EOPNOTSUPP)
			break;
		/*
		 * One still in use (or a kernel before 6.3, without destroy): one
		 * namespace at a time, counter by counter, so the others still go.
		 */
		r = 0;
		for (size_t i = at; i < at + k; i++) {
			int q = 0;

			for (int j = 0; j < ACCT_GUARD_OBJECTS && q == 0; j++) {
				acct_batch_start(bt);
				q = acct_guard_put_removal(bt, names[i], false, j);
				if (q == 0)
					q = acct_batch_send(&c, bt, why, sizeof(why));
				q = q == -ENOENT ? 0 : q;
			}
			for (int j = 0; j <= NS_COUNTERS && q == 0; j++) {
				acct_batch_start(bt);
				q = j < NS_COUNTERS
					    ? put_ns_counters(bt, names[i], NFT_MSG_DELOBJ, j)
					    : put_ns_limit_removal(bt, names[i], NFT_MSG_DELOBJ);
				if (q == 0)
					q = acct_batch_send(&c, bt, why, sizeof(why));
				q = q == -ENOENT ? 0 : q;
			}
			*ret_retired += q == 0;
		}
	}
	acct_batch_free(bt);
	acct_nft_close(&c);
	if (r == -ENOENT)
		return 0; /* no table: nothing to retire */
	if (r < 0)
		return acct_nft_fail(e, r, "retiring namespaces' counters", why);
	return 0;
}

int acct_keep_namespaces(const char *const *names, size_t n, struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = NULL;
	char why[256] = "";
	int r = ns_batch_open(&c, &bt, e);

	if (r < 0)
		return r;
	for (size_t at = 0; at < n && r == 0; at += RETIRE_CHUNK) {
		acct_batch_start(bt);
		for (size_t i = at; i < n && i < at + RETIRE_CHUNK && r == 0; i++)
			for (int j = 0; j < NS_COUNTERS && r == 0; j++)
				r = put_ns_counters(bt, names[i], NFT_MSG_NEWOBJ, j);
		if (r == 0)
			r = acct_batch_send(&c, bt, why, sizeof(why));
	}
	acct_batch_free(bt);
	acct_nft_close(&c);
	if (r < 0)
		return acct_nft_fail(e, r, "making namespaces' counters anew", why);
	return 0;
}

static int elem_present_key(struct acct_nft_conn *c, const char *set, enum acct_set_key k,
			    const char *link, uint32_t ip)
{
	struct acct_elem_query q = { .set = set };
	int r;

	q.key_len = acct_set_key_of(k, link, ip, q.key);
	r = acct_nft_get_elem(c, &q, NULL, NULL);
	return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

static int elem_present(struct acct_nft_conn *c, const char *set, uint32_t ip)
{
	return elem_present_key(c, set, ACCT_KEY_ADDR, NULL, ip);
}

/* 1 when the pod's address is in set `set` exactly when `want`, 0 when not, or negative. */
static int elem_as(struct acct_nft_conn *c, const char *set, uint32_t ip, bool want)
{
	int r = elem_present(c, set, ip);

	return r < 0 ? r : r == (want ? 1 : 0);
}

/* 1 when the pod's element of @ingress_class is its classid (none for 0), 0 when not, or <0. */
static int ingress_class_right(struct acct_nft_conn *c, const struct acct_pod *p)
{
	uint32_t have;
	int r = ingress_class_get(c, p->ip, &have);

	if (r < 0)
		return r;
	return p->ingress_classid ? r == 1 && have == p->ingress_classid : r == 0;
}

int acct_pod_ingress_class(const struct acct_pod *pod, struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = acct_batch_new(4096);
	char why[256] = "";
	int r;

	if (!bt)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = acct_nft_open(&c, 0, e);
	if (r < 0) {
		acct_batch_free(bt);
		return r;
	}
	/* Read, then write the difference; a concurrent writer in between: read again. */
	for (int tries = 0; tries < 3; tries++) {
		uint32_t have;

		r = ingress_class_get(&c, pod->ip, &have);
		if (r < 0 || (r == 1 && have == pod->ingress_classid) ||
		    (r == 0 && !pod->ingress_classid)) {
			r = r < 0 ? r : 0;
			break;
		}
		/* the old value out and the new in, in one transaction: no packet sees neither */
		acct_batch_start(bt);
		if (r == 1)
			r = acct_put_ingress_class(bt, NFT_MSG_DELSETELEM, pod->ip, 0);
		else
			r = 0;
		if (r == 0 && pod->ingress_classid)
			r = acct_put_ingress_class(bt, NFT_MSG_NEWSETELEM, pod->ip,
						   pod->ingress_classid);
		if (r == 0)
			r = acct_batch_send(&c, bt, why, sizeof(why));
		if (r != -ENOENT && r != -EEXIST)
			break;
	}
	acct_nft_close(&c);
	acct_batch_free(bt);
	if (r == -ENOENT && pod->ingress_classid)
		return tg_fail(e, CNI_ERR_IO, r,
			       "nftables: table inet " ACCT_TABLE
			       " lacks map " ACCT_MAP_INGRESS_CLASS);
	if (r < 0)
		return acct_nft_fail(
			e, r, "setting the pod's download class in table inet " ACCT_TABLE, why);
	return 0;
}

int acct_pod_check(const struct acct_pod *pod, const struct acct_config *cfg, struct tg_err *e)
{
	const struct acct_access *a = &cfg->access;
	struct acct_nft_conn c = { 0 };
	int r;

	r = acct_nft_open(&c, 0, e);
	if (r < 0)
		return r;
	r = elem_present(&c, ACCT_SET_PODS, pod->ip);
	if (r == 1)
		r = elem_present(&c, acct_ns_maps[ACCT_EGRESS_INTERNAL], pod->ip);
	if (r == 1)
		r = elem_as(&c, ACCT_SET_MASQ, pod->ip, cfg->masquerade);
	/* nodeAccess: counted drops, and a pass exactly for a listed namespace's pod */
	for (int d = 0; d < ACCT_DROPS && r == 1; d++)
		r = elem_present(&c, acct_drop_maps[d], pod->ip);
	/* its namespace's limit of new next hops */
	if (r == 1)
		r = elem_present(&c, ACCT_MAP_NEXTHOP_LIMIT, pod->ip);
	if (r == 1)
		r = elem_as(&c, ACCT_SET_METADATA_OK, pod->ip,
			    acct_ns_listed(a->metadata_ns, a->n_metadata_ns, pod->k8s_namespace));
	if (r == 1)
		r = elem_as(&c, ACCT_SET_AGENT_OK, pod->ip,
			    acct_ns_listed(a->metrics_ns, a->n_metrics_ns, pod->k8s_namespace));
	/* Its new internet connections pass its namespace's guard. */
	if (r == 1 && cfg->guard.on)
		r = acct_guard_elem_right(&c, pod);
	/* Its downloads in tollgate-inetdl's class it was given, or in none. */
	if (r == 1)
		r = ingress_class_right(&c, pod);
	/* Its hostPorts reach it. */
	if (r == 1)
		r = acct_hostport_check(&c, pod);
	/* Without it every packet of the pod is dropped as spoofed. */
	if (r == 1)
		r = link_ok(pod) ? elem_present_key(&c, ACCT_SET_POD_SRC, ACCT_KEY_LINK_ADDR,
						    pod->host_veth, pod->ip)
				 : 0;
	acct_nft_close(&c);
	if (r < 0)
		return acct_nft_fail(e, r, "looking up the pod in table inet " ACCT_TABLE, "");
	return r;
}
