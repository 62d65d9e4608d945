// SPDX-License-Identifier: Apache-2.0
/*
 * A node's report (budget/alloc.c): its demand estimated, its grant and
 * safe share decided at once, and when it is to report again.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "budget/internal.h"

/*
 * The demand estimate, per report. A class that ran at its ceil wants more
 * than it gets, by an amount nobody measured: it asks for all it could use
 * (its limit, the node's own caps), and the water-fill decides its share:
 * the next round gives it its whole max-min share at once, and the budget
 * counts as contended from that round on, so that the others' unused
 * grants come back in the same answers. A class below its ceil needs what
 * it used plus MARGIN (it stays unsaturated through the ups and downs of
 * its traffic, so that it does not ask for everything again: the agent
 * calls a class saturated from 0.9 of its ceil, 0.87 here; a margin near
 * 1 / that share has every light node flip every other report). In a
 * contended budget that is its estimate at once (what it leaves is the
 * others'); otherwise the estimate comes down from at most its ceil,
 * giving up at most 40 % of the rest a report (DECAY: a class that paused
 * for a second keeps most of its grant; one that stopped gives it back in
 * ~5 reports). Measured in tests/unit/test_budget_alloc.c: six nodes reach
 * their max-min fair shares (within 10 %) in 5 report periods from the
 * start, 2 after the demand moved.
 */
#define MARGIN 1.15
#define DECAY 0.6

static uint32_t rate32(uint64_t v)
{
	return (uint32_t)min64(v, BUDGET_RATE_MAX);
}

/*
 * Capacity that nodes the allocator has not heard from since its start may
 * be using (counted in committed, and in the safe shares held, until
 * forget_ms after the start): what keeps the invariant when a node is
 * silent across an allocator restart.
 *
 * Such a node keeps applying what the allocator before gave it: its grant
 * until that lease ran out (within one lease of the start, while this one
 * is still learning and raises nothing), then min(grant, safe share) for as
 * long as it stays silent, its agent alive (an agent dead across the
 * restart keeps its grant: a bound this allocator cannot know, documented
 * in docs/budgets.md beside the others). Safe shares are handed out as grants are, a rise
 * only out of room nobody holds (safe_for), so all the safe shares held add
 * up to at most safe_total, whatever the restarts before: those of the
 * nodes not heard from yet add up to at most safe_total less what the
 * nodes heard said they held. When every node holds the same safe share
 * that is (nodes before - nodes heard) x safe share; unlike that count it
 * holds when the nodes' shares differ (some heard a smaller one after
 * others joined) and across restarts that follow one another (a node
 * silent through both is in no count the nodes report).
 *
 * The shares were handed out under the budget there was then, unknown
 * here: the largest since the start stands for it (held_total: a budget
 * lowered does not lower it; one raised back may be the one they had).
 *
 * Kept only when a node heard said it held a grant: a new cluster keeps
 * nothing back (nor, then, does a cluster whose every node heard is new
 * while the ones that held grants are all silent: they cannot be told
 * apart); once every node has reported, their safe shares add up to
 * safe_total again (less those still rising, or a budget raised since the
 * shares were given: kept back until forget_ms).
 */
uint64_t phantom(const struct budget_alloc *a, const struct bslot *b, int64_t now_ms)
{
	if (now_ms - a->start_ms >= a->p.forget_ms || !b->held_before)
		return 0;
	return b->held_total > b->first_safe ? b->held_total - b->first_safe : 0;
}

static uint32_t demand_next(const struct budget_alloc *a, const struct bslot *b,
			    const struct bhot *h, uint32_t rate, uint32_t applied, bool measured,
			    bool saturated)
{
	double least = (double)min64(node_floor(a, b), h->limit), d = h->demand;

	if (measured && saturated) {
		d = h->limit;
	} else if (measured && b->contended) {
		/* others are held back: what it leaves unused is theirs at once */
		d = rate * MARGIN;
	} else if (measured) {
		/* below its ceil it needed less than the ceil, whatever it asked before */
		d = dmax(rate * MARGIN, dmin(d, applied) * DECAY);
	}
	return (uint32_t)dmin(dmax(d, least), h->limit);
}

/*
 * The grant for a node that reported `applied`: decrease before increase.
 * Its target is the last round's; in a contended budget a demand that fell
 * below it since lowers it at once (the next round could only give it
 * that or less: its share is min(demand, level x weight)), so what it
 * leaves goes to the others a report sooner.
 */
static uint32_t grant_for(const struct budget_alloc *a, const struct bslot *b, const struct bhot *h,
			  uint32_t applied, bool joining, bool learning, uint64_t ph,
			  uint64_t *ret_target)
{
	uint64_t target, used, room;

	target = min64(h->flags & HOT_FRESH ? applied : h->target, h->limit);
	/*
	 * A namespace never granted on the node (it just arrived, or its
	 * fallback took over while the allocator was away) keeps only what is
	 * free beside it, and the join rate out of the reserve: a wave of
	 * joiners is not ratified over the budget.
	 */
	if (joining) {
		used = b->committed - applied + ph;
		room = b->cap > used ? b->cap - used : 0;
		target = min64(target, max64(room, min64(BUDGET_JOIN_RATE, applied)));
	}
	if (b->contended && !(h->flags & HOT_FRESH))
		target = min64(target, max64(h->demand, node_floor(a, b)));
	*ret_target = target;
	/* for a lease after the start it gets at most what it holds */
	if (target <= applied || learning)
		return (uint32_t)min64(target, applied);
	used = b->committed + ph;
	room = b->cap > used ? b->cap - used : 0;
	return (uint32_t)min64(target, applied + room);
}

/*
 * Whether a demand that went from `was` to `now` moves the node's share:
 * in a contended budget a share is min(demand, level x weight), so a node
 * held at the level whatever it asks (a saturated one, probing up every
 * report) does not.
 */
static bool demand_moved(const struct bslot *b, const struct bhot *h, uint32_t was, uint32_t now)
{
	double top = b->contended ? b->level * h->weight : INFINITY;
	double x = dmin(was, top), y = dmin(now, top);

	return y > x * 1.25 || y < x * 0.8;
}

/* 5 % apart: rounding and the level's small moves ask for nothing */
static bool apart(uint64_t lo, uint64_t hi)
{
	return hi > lo + lo / 20;
}

/* Its safe share: budget x safe_fraction / nodes, a rise as a grant's. */
static uint32_t safe_for(const struct bslot *b, uint32_t held, uint64_t ph)
{
	uint64_t target = min64(max64(b->safe_total / b->n, 1), BUDGET_RATE_MAX), used, room;

	if (target <= held)
		return (uint32_t)target;
	used = b->safe_held + ph;
	room = b->safe_total > used ? b->safe_total - used : 0;
	/* 0 would mean "none, keep the grant": a node with no room holds a sliver */
	return (uint32_t)max64(min64(target, held + room), 1);
}

/*
 * A node's report of one budget. Returns when the allocator wants its next
 * report (ms from now; 0: at its period): a quarter period on while its
 * grant moves (see nextReportMs), and while learning, right after the
 * learning ends if it is to rise then.
 */
static int64_t node_report(struct budget_alloc *a, struct bslot *b, size_t i,
			   const struct budget_usage *u, bool first, int64_t now_ms,
			   struct budget_grant *ret)
{
	struct bnode *nd = &b->node[i];
	struct bhot *h = &b->hot[i];
	uint32_t applied = rate32(u->applied), safe_rep = rate32(u->safe_share), g, s, was;
	bool measured = u->interval_ms > 0, learning = budget_alloc_learning(a, now_ms);
	uint64_t ph, target;

	if (first && now_ms - a->start_ms < a->p.forget_ms) {
		b->first_safe += safe_rep;
		b->held_before |= u->state != BUDGET_FALLBACK || u->nodes > 0 || safe_rep > 0;
	}
	/* its last answer is settled: it applies what it says */
	b->committed = b->committed - nd->committed + applied;
	nd->committed = applied;
	b->safe_held = b->safe_held - nd->safe_held + safe_rep;
	nd->safe_held = safe_rep;
	nd->applied = applied;

	h->limit = u->limit ? rate32(u->limit) : (uint32_t)BUDGET_RATE_MAX;
	h->weight = (uint16_t)(u->pods > 1 ? min64(u->pods, UINT16_MAX) : 1);
	/* a new node's estimate starts at what it holds */
	if (first)
		h->demand = applied;
	else
		b->demand -= h->demand;
	if (measured) {
		uint64_t rate =
			(uint64_t)((unsigned __int128)u->sent_bytes * 1000 / u->interval_ms);

		b->usage = b->usage - nd->rate + rate32(rate);
		nd->rate = rate32(rate);
	}
	was = h->demand;
	h->demand = demand_next(a, b, h, nd->rate, applied, measured, u->saturated);
	b->demand += h->demand;
	if (!first && demand_moved(b, h, was, h->demand))
		h->flags |= HOT_MOVED;

	ph = phantom(a, b, now_ms);
	b->phantom = ph;
	g = grant_for(a, b, h, applied, first && u->state == BUDGET_FALLBACK, learning, ph,
		      &target);
	s = safe_for(b, safe_rep, ph);
	if (g > applied) {
		b->committed += g - applied;
		nd->committed = g;
	}
	if (s > safe_rep) {
		b->safe_held += s - safe_rep;
		nd->safe_held = s;
	}
	b->granted = b->granted - nd->grant + g;
	nd->grant = g;
	nd->safe = s;
	/* heard: the newest of the live ones */
	list_unlink(b, (uint32_t)i);
	nd->expired = false;
	nd->heard_ms = now_ms;
	list_append(b, (uint32_t)i);

	memcpy(ret->ns, b->ns, sizeof(ret->ns));
	ret->dir = b->dir;
	ret->grant = g;
	ret->safe_share = s;
	ret->nodes = (uint32_t)min64(b->n, BUDGET_NODES_MAX);
	if (a->p.report_ms <= 0)
		return 0;
	if (learning)
		return apart(g, target) ? a->start_ms + a->p.lease_ms - now_ms + 10 : 0;
	return apart(g, applied) || apart(g, target) || (h->flags & HOT_MOVED)
		       ? a->p.report_ms / 4 + 10
		       : 0;
}

/*
 * An early report asked for `ms` from now (a quarter period is after the
 * next round: rounds run every report_ms / 4), unless that is the node's
 * period anyway. At most as many early reports a period as there are
 * nodes, so that a cluster whose grants all move at once reports twice a
 * period, not four times. 0: none.
 */
static int64_t early_report_ms(struct budget_alloc *a, int64_t ms, int64_t now_ms)
{
	if (ms <= 0 || ms >= a->p.report_ms)
		return 0;
	if (now_ms - a->early_since >= a->p.report_ms) {
		a->early_since = now_ms;
		a->early_asked = 0;
	}
	if (a->early_asked >= max64(a->names.used, 64))
		return 0;
	a->early_asked++;
	return ms;
}

int budget_alloc_report(struct budget_alloc *a, const struct budget_report *r, int64_t now_ms,
			struct budget_answer *ret)
{
	uint32_t id = names_find(&a->names, r->node);
	struct budget_grant *g = NULL;
	int64_t soon = 0;
	size_t n = 0;

	/* a node it does not know, when it knows all it may: refused, never remembered */
	if (id == NAME_NONE &&
	    a->names.used >= (a->p.max_nodes ? a->p.max_nodes : (uint32_t)BUDGET_NODES_MAX))
		return -ENOSPC;
	a->last_ms = now_ms > a->last_ms ? now_ms : a->last_ms;
	/*
	 * It starts with the first report it hears, for learning and for what
	 * it keeps back: one started during an outage hears the nodes that
	 * hold grants only once the outage ends, and learns from then on
	 * (else a node that joined meanwhile, heard first, would be granted
	 * what they hold).
	 */
	if (!a->heard) {
		a->heard = true;
		a->start_ms = now_ms;
	}
	if (r->n) {
		g = calloc(r->n, sizeof(*g));
		if (!g)
			return -ENOMEM;
	}
	for (size_t k = 0; k < r->n; k++) {
		struct bslot *b = find_budget(a, r->use[k].ns, r->use[k].dir);
		bool first = false;
		size_t i;

		if (!b)
			continue;
		/*
		 * No pod and nothing applied: the namespace left the node (its
		 * class, if any, holds no pod). What it held is free at once,
		 * rather than after forget_ms of silence; it gets no grant.
		 */
		if (r->use[k].pods == 0 && r->use[k].applied == 0) {
			if (id != NAME_NONE && id < b->n_index && b->index_of[id]) {
				node_drop(a, b, b->index_of[id] - 1);
				/* the drop may have let the name go (its last budget) */
				id = names_find(&a->names, r->node);
			}
			continue;
		}
		if (id != NAME_NONE && id < b->n_index && b->index_of[id]) {
			i = b->index_of[id] - 1;
		} else {
			bool named = id != NAME_NONE;

			if (!named && names_add(&a->names, r->node, &id) < 0)
				goto oom;
			if (node_add(a, b, id, &i) < 0) {
				/* a name no budget holds goes again (unref frees at 0) */
				if (!named) {
					names_ref(&a->names, id);
					names_unref(&a->names, id);
				}
				goto oom;
			}
			first = true;
		}
		int64_t ms = node_report(a, b, i, &r->use[k], first, now_ms, &g[n++]);

		if (ms > 0 && (soon == 0 || ms < soon))
			soon = ms;
	}
	if (n == 0) {
		free(g);
		g = NULL;
	}
	*ret = (struct budget_answer){ .lease_ms = a->p.lease_ms, .g = g, .n = n };
	ret->next_report_ms = early_report_ms(a, soon, now_ms);
	return 0;
oom:
	/* what was recorded stays: grants not sent count as if they were */
	free(g);
	return -ENOMEM;
}
