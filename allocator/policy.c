// SPDX-License-Identifier: Apache-2.0
/*
 * What the allocator takes from the conflist the agents read (the same
 * ConfigMap): budgets.internetEgress, turned from the config's bits per
 * second into the wire's bytes per second, leaseSeconds and reportSeconds.
 * The whole config is checked by the one parser every part uses: a conflist
 * an agent would refuse is refused here too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/internal.h"
#include "config/config.h"

int alloc_policy_load(const char *path, const char *text, size_t len, struct alloc_policy *ret,
		      struct tg_err *e)
{
	struct node_config cfg = { 0 };
	struct alloc_policy p = { 0 };
	size_t i = 0;
	int r;

	r = node_config_load_text(path, text, len, &cfg, e);
	if (r < 0) {
		node_config_free(&cfg);
		return r;
	}
	p.lease_ms = cfg.budgets.lease_ms;
	p.report_ms = cfg.budgets.report_ms;
	p.has_allocator = cfg.budgets.allocator != NULL;
	p.n = cfg.budgets.egress ? (size_t)json_object_object_length(cfg.budgets.egress) : 0;
	p.defs = calloc(p.n ? p.n : 1, sizeof(*p.defs));
	if (!p.defs) {
		node_config_free(&cfg);
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory for %zu budgets", p.n);
	}
	if (cfg.budgets.egress) {
		/* json-c keeps an object's members in the order they were written */
		json_object_object_foreach(cfg.budgets.egress, ns, v)
		{
			(void)v;
			/* validated: a DNS label, so it fits */
			snprintf(p.defs[i].ns, sizeof(p.defs[i].ns), "%s", ns);
			p.defs[i].budget = node_config_budget(&cfg, ns) / 8;
			i++;
		}
	}
	node_config_free(&cfg);
	*ret = p;
	return 0;
}

void alloc_policy_free(struct alloc_policy *p)
{
	free(p->defs);
	*p = (struct alloc_policy){ 0 };
}

int64_t alloc_round_ms(const struct alloc_policy *p)
{
	int64_t ms = p->report_ms / 4;

	return ms < ALLOC_ROUND_MIN_MS ? ALLOC_ROUND_MIN_MS : ms;
}
