// SPDX-License-Identifier: Apache-2.0
/*
 * The round (budget/alloc.c): between reports, the nodes aged and each
 * budget's targets recomputed by the water-fill (fill.c).
 */
#include <math.h>

#include "budget/budget.h"
#include "budget/internal.h"

/*
 * Silent past its lease a node is counted at all it may still apply: its
 * kernel keeps the ceil it was given when its agent is dead, stopped or
 * stalled (nothing lowers it), so what it holds stays committed until it
 * is forgotten, past forget_ms. Its demand is what it holds: nothing more
 * goes to a node that is not heard. Both lists are oldest first: only the
 * nodes that change state are looked at.
 */
static void age(struct budget_alloc *a, struct bslot *b, int64_t now_ms)
{
	int64_t lease_end = now_ms - a->p.lease_ms, forget_end = now_ms - a->p.forget_ms;
	uint32_t i;

	while ((i = b->live.head) != NONE && b->node[i].heard_ms < lease_end) {
		struct bnode *nd = &b->node[i];
		struct bhot *h = &b->hot[i];

		list_unlink(b, i);
		if (h->demand > nd->committed) {
			b->demand -= h->demand - nd->committed;
			h->demand = nd->committed;
		}
		nd->expired = true;
		list_append(b, i);
	}
	while ((i = b->expired.head) != NONE && b->node[i].heard_ms < forget_end)
		node_drop(a, b, i);
}

/*
 * A round of one budget: its nodes aged, and each one's target: the
 * water-fill of cap over the demands, each node at least its floor
 * (node_floor: min_grant or a twentieth of an even split; never more than
 * an even cap / nodes, so the floors still fit). When the demands leave some of cap over, it
 * goes out by weight too, up to each node's limit: a node then has room
 * to grow before its demand is measured. One pass over the nodes ages them
 * and feeds the water-fill; one more writes the targets.
 */
void round_budget(struct budget_alloc *a, struct bslot *b, int64_t now_ms)
{
	struct fill_range *restrict r = a->range;
	double cap = (double)b->cap, level;
	struct fill_sums sums;
	uint32_t least;
	size_t i, n;

	age(a, b, now_ms);
	b->phantom = phantom(a, b, now_ms);
	n = b->n;
	if (n == 0)
		return;
	least = (uint32_t)node_floor(a, b);
	/* from uncontended to contended: the level is near the leftover's */
	sums = fill_sums_start(b->level_demand > 0 ? b->level_demand : b->level_left);
	for (i = 0; i < n; i++) {
		const struct bhot *h = &b->hot[i];
		/* in integers: min and max without branches */
		uint32_t lo = h->limit < least ? h->limit : least;
		uint32_t hi = h->demand > lo ? h->demand : lo;

		hi = hi < h->limit ? hi : h->limit;
		r[i] = (struct fill_range){ lo, hi, h->weight };
		fill_sums_add(&sums, r[i].lo, r[i].hi, r[i].w);
	}
	level = fill_solve(r, n, cap, sums, a->hinge, &a->seed);
	b->level_demand = isinf(level) ? 0 : level;
	b->contended = !isinf(level);
	if (isinf(level)) {
		sums = fill_sums_start(b->level_left);
		for (i = 0; i < n; i++) {
			r[i].lo = r[i].hi;
			r[i].hi = b->hot[i].limit;
			fill_sums_add(&sums, r[i].lo, r[i].hi, r[i].w);
		}
		level = fill_solve(r, n, cap, sums, a->hinge, &a->seed);
		b->level_left = isinf(level) ? 0 : level;
	}
	b->level = isinf(level) ? 0 : level;
	for (i = 0; i < n; i++) {
		b->hot[i].target = (uint32_t)(isinf(level) ? r[i].hi : fill_share(&r[i], level));
		b->hot[i].flags &= (uint16_t) ~(HOT_FRESH | HOT_MOVED);
	}
}

void budget_alloc_round(struct budget_alloc *a, int64_t now_ms)
{
	a->last_ms = now_ms > a->last_ms ? now_ms : a->last_ms;
	for (size_t k = 0; k < a->nb; k++)
		round_budget(a, &a->b[k], now_ms);
}
