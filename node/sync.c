// SPDX-License-Identifier: Apache-2.0
/*
 * The pool from IMDS (tollgate-ipam sync and doctor --imds; the node daemon):
 * what IMDS offers the uplink, then folded into the store. Linked only into
 * the binaries that talk HTTP: the plugin never makes a network call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/netlink.h>

#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/failpoint.h"
#include "lib/nl.h"
#include "lib/util.h"
#include "node/sync.h"

/* The uplink (named, else the default route's interface) and its MAC. */
static int uplink_of(const char *name, struct node_uplink *ret, struct tg_err *e)
{
	struct nl_sock *sk = NULL;
	int r = tg_nl_route_open(&sk);

	if (!name)
		name = "";
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	r = node_uplink(sk, name, 0, ret, e);
	nl_socket_free(sk);
	if (r == 0 && !ret->has_mac)
		r = tg_fail(e, CNI_ERR_IO, ret->ifindex ? -EADDRNOTAVAIL : -ENETUNREACH,
			    "cannot read the MAC of uplink %s: %s",
			    name[0] ? name : "(default route's interface)",
			    ret->ifindex ? "it has no MAC address" : "there is no default route");
	return r;
}

/* The network document, from a file or from IMDS (retried within the budget). */
static int imds_document(const struct node_sync_source *src, int *attempts, char **ret,
			 size_t *ret_len, struct tg_err *e)
{
	int r;

	if (!src->from_file)
		return imds_fetch(src->imds_url, src->budget_s, ret, ret_len, attempts, e);
	r = read_file(src->from_file, 1 << 22, ret, ret_len);
	r = r == -E2BIG ? -EFBIG : r;
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", src->from_file,
			       strerror(-r));
	return 0;
}

/*
 * The offered addresses a pod can have, without ipam.exclude's, sorted. IMDS
 * is trusted no more than a config: an address outside the uplink's subnet
 * (no route brings its traffic to this node), the node's own, or one no pod
 * can use (loopback, link-local, multicast...) stays out of the pool, and the
 * offer says so.
 */
static int imds_keep(json_object *exclude, struct node_sync_offer *o, struct tg_err *e)
{
	const struct imds_network *net = &o->net;
	_cleanup_free_ uint32_t *excluded = NULL;
	size_t n_excluded = 0, n = 0;
	uint32_t *keep;
	int r;

	if (exclude && (r = ipam_pool_parse(exclude, NULL, "ipam", &excluded, &n_excluded, e)) < 0)
		return r;
	keep = calloc(net->n_addrs + 1, sizeof(*keep));
	if (!keep)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < net->n_addrs; i++) {
		uint32_t ip = net->addrs[i];
		const char *why = ip4_unusable_why(ip);

		if (!why && ip == net->node_ip)
			why = "the node's own address";
		if (!why && net->subnet.prefix && !cidr4_contains(&net->subnet, ip))
			why = "outside the uplink's subnet";
		if (why) {
			if (!o->n_refused++) {
				o->refused = ip;
				o->refused_why = why;
			}
			continue;
		}
		if (!ipam_addr_in(excluded, n_excluded, ip))
			keep[n++] = ip;
	}
	ipam_addrs_sort(keep, n);
	o->addrs = keep;
	o->n_addrs = n;
	return 0;
}

/* The offer of a document, for the uplink `up`. */
static int offer_of(const struct node_sync_source *src, const struct node_uplink *up,
		    const char *body, size_t len, struct node_sync_offer *ret, struct tg_err *e)
{
	int r;

	memcpy(ret->uplink, up->name, IFNAMSIZ);
	r = imds_parse_network(body, len, up->mac, &ret->net, e);
	if (r == 0)
		r = imds_keep(src->exclude, ret, e);
	if (r < 0)
		node_imds_offer_free(ret);
	return r;
}

int node_imds_offer_from(const struct node_sync_source *src, const char *body, size_t len,
			 struct node_sync_offer *ret, struct tg_err *e)
{
	struct node_uplink up;
	int r;

	memset(ret, 0, sizeof(*ret));
	r = uplink_of(src->uplink, &up, e);
	return r < 0 ? r : offer_of(src, &up, body, len, ret, e);
}

int node_imds_offer(const struct node_sync_source *src, struct node_sync_offer *ret,
		    struct tg_err *e)
{
	_cleanup_free_ char *body = NULL;
	struct node_uplink up;
	size_t len = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	/* the uplink first: without its MAC no document is worth asking for */
	r = uplink_of(src->uplink, &up, e);
	if (r == 0)
		r = imds_document(src, &ret->attempts, &body, &len, e);
	return r < 0 ? r : offer_of(src, &up, body, len, ret, e);
}

void node_imds_offer_free(struct node_sync_offer *o)
{
	imds_network_free(&o->net);
	free(o->addrs);
	o->addrs = NULL;
	o->n_addrs = 0;
}

struct sync_ctx {
	const struct node_sync_offer *o;
	struct ipam_sync_report *rep;
};

static int sync_update(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	struct sync_ctx *s = ctx;
	int r = ipam_reconcile(st, s->o->addrs, s->o->n_addrs, time_now_ms(), s->rep, e);

	if (r < 0)
		return r;
	st->node_ip = s->o->net.node_ip;
	st->subnet = s->o->net.subnet;
	return 1; /* saved every time: the store records when the pool was last synced */
}

int node_sync(struct ipam_store *store, struct ipam_state *st, const struct node_sync_offer *o,
	      struct ipam_sync_report *ret, struct tg_err *e)
{
	struct sync_ctx s = { o, ret };
	int r;

	memset(ret, 0, sizeof(*ret));
	r = TG_FAILPOINT("sync.apply.before", e);
	if (r == 0)
		r = ipam_store_update(store, st, sync_update, &s, e);
	if (r == 0)
		r = TG_FAILPOINT("sync.apply.after", e);
	return r;
}
