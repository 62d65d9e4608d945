// SPDX-License-Identifier: Apache-2.0
/* The store brought up to date with this boot and this config, under its lock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "lib/steps.h"
#include "lib/util.h"
#include "node/node.h"

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
		uint32_t *copy = malloc(cfg->n_pool * sizeof(*copy));

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
	int changed = node_state_refresh(st, t->cfg, time_now_ms(), e), r;

	if (changed < 0)
		return changed;
	r = t->fn(st, t->ctx, e);
	return r < 0 ? r : (r > 0 || changed);
}

int node_store_update(struct ipam_store *store, struct ipam_state *st,
		      const struct node_config *cfg, node_update_fn fn, void *ctx,
		      struct tg_err *e)
{
	struct refresh_then t = { cfg, fn, ctx };
	int64_t t0 = time_mono_ns();
	int r = ipam_store_update(store, st, refresh_then, &t, e);

	step_done(STEP_STORE, t0);
	return r;
}
