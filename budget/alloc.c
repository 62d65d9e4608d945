// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's state and arithmetic (budget/budget.h): pure, the time
 * comes in as arguments.
 *
 * The invariant, at every instant: what the nodes may be applying adds up
 * to at most the budget. Per budget the allocator keeps that sum, as it
 * knows it, incrementally (`committed`): a node that reported applying x
 * and was answered g may be applying max(x, g) (the answer may be on its
 * way), and goes on counting so while it is silent, lease or not (an agent
 * that is dead or stopped lowers nothing in its kernel), until it is
 * forgotten. A node's
 * report settles its last answer: it reports what it applies, and an
 * answer it did not get is one its client gave up on, never to be applied
 * later. Each new grant is then decided at once, in O(1):
 *
 *   - a grant at or below what the node applies is a decrease: always given;
 *   - an increase comes only out of capacity that nobody may be using:
 *     g <= applied + (cap - committed).
 *
 * The round, between reports, ages the nodes and recomputes each node's
 * target (its weighted max-min fair share of cap over the demands). The
 * targets are only what grants move towards: safety rests on the check
 * above alone.
 *
 * cap is budget x (1 - reserve): the reserve is never granted. It is what
 * nodes that have just joined apply (the config's fallback) before their
 * first report is counted, and rounding.
 *
 * A budget is a (namespace, direction): a namespace's uploads and its
 * downloads are two budgets with nodes, sums and rounds of their own, and
 * nothing here looks at a budget's direction but to find it.
 *
 * Here: the allocator made, its budgets set by (namespace, direction), viewed and
 * freed. A budget's nodes are in slots.c, a node's report (its demand and
 * grant) in report.c, the round in round.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "budget/internal.h"
#include "lib/util.h"

void budget_params_defaults(struct budget_params *p)
{
	*p = (struct budget_params){
		.lease_ms = 10000,
		.forget_ms = 300000,
		.reserve = 0.02,
		.safe_fraction = 0.9,
		.min_grant = 1250, /* 10 kbit/s */
	};
}

void budget_alloc_set_report_ms(struct budget_alloc *a, int64_t report_ms)
{
	a->p.report_ms = report_ms;
}

/* ---- the allocator ---- */

struct budget_alloc *budget_alloc_new(const struct budget_params *p, int64_t now_ms)
{
	struct budget_alloc *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->p = *p;
	a->start_ms = a->last_ms = now_ms;
	a->seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)now_ms;
	return a;
}

void budget_alloc_free(struct budget_alloc *a)
{
	if (!a)
		return;
	for (size_t k = 0; k < a->nb; k++)
		slot_release(a, &a->b[k]);
	free(a->b);
	free(a->ns_slot);
	names_free(&a->names);
	free(a->range);
	free(a->hinge);
	free(a);
}

static void set_budget(const struct budget_alloc *a, struct bslot *b, uint64_t budget)
{
	b->budget = budget;
	b->cap = (uint64_t)((double)budget * (1 - a->p.reserve));
	b->safe_total = (uint64_t)((double)budget * a->p.safe_fraction);
}

int budget_alloc_set(struct budget_alloc *a, const struct budget_def *d, size_t n)
{
	int r = -ENOMEM;
	size_t mask = 15, k;
	struct bslot *nb;
	uint32_t *slot;
	bool *kept, *changed;

	while (mask + 1 < 2 * n)
		mask = mask * 2 + 1;
	nb = calloc(n ? n : 1, sizeof(*nb));
	slot = calloc(mask + 1, sizeof(*slot));
	kept = calloc(a->nb ? a->nb : 1, sizeof(*kept));
	changed = calloc(n ? n : 1, sizeof(*changed));
	if (!nb || !slot || !kept || !changed)
		goto fail;
	for (k = 0; k < n; k++) {
		size_t i;

		memcpy(nb[k].ns, d[k].ns, sizeof(nb[k].ns));
		nb[k].ns[BUDGET_NS_MAX] = '\0';
		nb[k].dir = d[k].dir;
		nb[k].live = nb[k].expired = (struct blist){ NONE, NONE };
		if ((unsigned)nb[k].dir >= BUDGET_DIRS) {
			r = -EINVAL;
			goto fail;
		}
		for (i = ns_home(nb[k].ns, nb[k].dir, mask); slot[i]; i = (i + 1) & mask)
			if (nb[slot[i] - 1].dir == nb[k].dir &&
			    strcmp(nb[slot[i] - 1].ns, nb[k].ns) == 0) {
				r = -EINVAL;
				goto fail;
			}
		slot[i] = (uint32_t)k + 1;
	}
	for (k = 0; k < n; k++) {
		struct bslot *old = find_budget(a, nb[k].ns, nb[k].dir);

		if (old) {
			changed[k] = old->budget != d[k].budget;
			nb[k] = *old;
			kept[old - a->b] = true;
		}
		set_budget(a, &nb[k], d[k].budget);
		nb[k].held_total = max64(nb[k].held_total, nb[k].safe_total);
	}
	for (k = 0; k < a->nb; k++)
		if (!kept[k])
			slot_release(a, &a->b[k]);
	free(a->b);
	free(a->ns_slot);
	free(kept);
	a->b = nb;
	a->nb = n;
	a->ns_slot = slot;
	a->ns_mask = mask;
	/*
	 * A changed budget's targets now: its nodes' next grants move to them.
	 * (A round at the last time seen ages nothing that a round then would not.)
	 */
	for (k = 0; k < n; k++)
		if (changed[k])
			round_budget(a, &nb[k], a->last_ms);
	free(changed);
	return 0;
fail:
	free(nb);
	free(slot);
	free(kept);
	free(changed);
	return r;
}

size_t budget_alloc_views(const struct budget_alloc *a, struct budget_view *ret, size_t max)
{
	for (size_t k = 0; k < a->nb && k < max; k++) {
		const struct bslot *b = &a->b[k];

		memcpy(ret[k].ns, b->ns, sizeof(ret[k].ns));
		ret[k].dir = b->dir;
		ret[k].budget = b->budget;
		ret[k].granted = b->granted;
		ret[k].committed = b->committed + b->phantom;
		ret[k].demand = b->demand;
		ret[k].usage = b->usage;
		ret[k].nodes = (uint32_t)min64(b->n, UINT32_MAX);
		ret[k].safe_share = b->n ? b->safe_total / b->n : b->safe_total;
	}
	return a->nb;
}
