// SPDX-License-Identifier: Apache-2.0
/* The store brought up to date with this boot and this config, under its lock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netlink/route/addr.h>

#include "ipam/pool.h"
#include "lib/ip4.h"
#include "lib/nl.h"
#include "lib/steps.h"
#include "lib/util.h"
#include "node/node.h"

struct local_hit {
	const uint32_t *pool;
	size_t n_pool;
	uint32_t ip;
	char dev[32];
};

static void find_local(struct nl_object *obj, void *arg)
{
	struct rtnl_addr *a = (struct rtnl_addr *)obj;
	struct nl_addr *local = rtnl_addr_get_local(a);
	struct local_hit *h = arg;
	uint32_t ip;

	if (h->ip || rtnl_addr_get_family(a) != AF_INET || !local || nl_addr_get_len(local) != 4)
		return;
	memcpy(&ip, nl_addr_get_binary_addr(local), 4);
	ip = ntohl(ip);
	if (ipam_addr_in(h->pool, h->n_pool, ip)) {
		h->ip = ip;
		snprintf(h->dev, sizeof(h->dev), "%s",
			 rtnl_addr_get_label(a) ? rtnl_addr_get_label(a) : "?");
	}
}

/*
 * A static pool never holds an address of the node itself: a pod given it
 * would take the node's traffic. Read when the pool is set (a new store, a
 * changed config), not at every ADD.
 */
static int pool_check_local(const uint32_t *pool, size_t n, struct tg_err *e)
{
	struct local_hit h = { .pool = pool, .n_pool = n };
	struct nl_cache *cache = NULL;
	struct nl_sock *sk = NULL;
	char ip[IP4_STRLEN];
	int r;

	r = tg_nl_route_open(&sk);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	r = tg_nl_to_errno(rtnl_addr_alloc_cache(sk, &cache));
	nl_socket_free(sk);
	if (r < 0)
		return tg_fail_kernel(e, r, "reading the node's addresses");
	nl_cache_foreach(cache, find_local, &h);
	nl_cache_free(cache);
	if (h.ip)
		return tg_fail(
			e, CNI_ERR_CONFIG, -EINVAL,
			"ipam.addresses holds %s, an address of this node (%s): a pod given it "
			"would take the node's traffic; list it under ipam.exclude or drop it",
			ip4_format(h.ip, ip), h.dev);
	return 0;
}

int node_state_refresh(struct ipam_state *st, const struct node_config *cfg, int64_t now_ms,
		       struct tg_err *e)
{
	char boot_id[64];
	int changed = 0, r;

	r = ipam_read_boot_id(boot_id, sizeof(boot_id));
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read the boot id: %s", strerror(-r));
	if (strcmp(st->boot_id, boot_id) != 0) {
		ipam_check_boot(st, boot_id);
		changed = 1;
	}
	if (cfg->source == IPAM_SOURCE_STATIC &&
	    (st->n_pool != cfg->n_pool || strcmp(st->source, "static") != 0 ||
	     memcmp(st->pool, cfg->pool, cfg->n_pool * sizeof(*cfg->pool)) != 0)) {
		uint32_t *copy;

		r = pool_check_local(cfg->pool, cfg->n_pool, e);
		if (r < 0)
			return r;
		copy = malloc(cfg->n_pool * sizeof(*copy));
		if (!copy)
			return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		memcpy(copy, cfg->pool, cfg->n_pool * sizeof(*copy));
		ipam_set_pool(st, "static", copy, cfg->n_pool);
		changed = 1;
	}
	if (st->n_cooling) {
		size_t before = st->n_cooling;

		ipam_expire_cooling(st, now_ms, cfg->cooldown_ms);
		changed |= before != st->n_cooling;
	}
	return changed;
}

struct refresh_then {
	const struct node_config *cfg;
	node_update_fn fn;
	void *ctx;
};

static int refresh_then(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct refresh_then *t = p;
	int changed = node_state_refresh(st, t->cfg, time_boot_ms(), e), r;

	if (changed < 0)
		return changed;
	r = t->fn(st, t->ctx, e);
	return r < 0 ? r : (r > 0 || changed);
}

int node_store_update(struct ipam_store *store, struct ipam_state *st,
		      const struct node_config *cfg, node_update_fn fn, void *ctx, struct tg_err *e)
{
	struct refresh_then t = { cfg, fn, ctx };
	int64_t t0 = time_mono_ns();
	int r = ipam_store_update(store, st, refresh_then, &t, e);

	step_done(STEP_STORE, t0);
	return r;
}
