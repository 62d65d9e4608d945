// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's state and arithmetic (budget/budget.h): pure, the time
 * comes in as arguments.
 *
 * The invariant, at every instant: what the nodes may be applying adds up
 * to at most the budget. Per budget the allocator keeps that sum, as it
 * knows it, incrementally (`committed`): a node that reported applying x
 * and was answered g may be applying max(x, g) (the answer may be on its
 * way) until the grant's lease runs out, then what it falls to. A node's
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
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "budget/internal.h"
#include "lib/util.h"

/*
 * The demand estimate, per report. A class that ran at its ceil wants more
 * than it gets, by an amount nobody measured: it asks for a quarter more
 * than the most of (its estimate, its rate, its ceil), and at least its
 * fair share more (PROBE_SHARE of the last round's level x its weight;
 * PROBE_STEP min_grants when there is no level yet): the next round then
 * gives it its whole share, where x1.25 alone takes ~15 reports from a tiny
 * grant. Its estimate keeps growing while it is held back (by decrease
 * before increase or by its share), so that it takes what frees up at
 * once. A class below its ceil needs what it used plus a tenth (MARGIN: it
 * stays unsaturated through the ups and downs of its traffic, so that it
 * does not probe again: the agent calls a class saturated from 0.97 of its
 * ceil, 0.91 here; a margin near 1 / that share has every light node probe
 * every other report). In a contended budget that is its estimate at once
 * (what it leaves is the others'); otherwise the estimate comes down from
 * at most its ceil, giving up at most 40 % of the rest a report (DECAY: a
 * class that paused for a second keeps most of its grant; one that stopped
 * gives it back in ~5 reports). Measured in tests/unit/test_budget_alloc.c:
 * six nodes reach their max-min fair shares (within 10 %) in 8 report
 * periods from the start, 2 after the demand moved.
 */
#define PROBE_UP 1.25
#define PROBE_STEP 8
#define PROBE_SHARE 1.0
#define MARGIN 1.1
#define DECAY 0.6

#define NONE UINT32_MAX

/* A node's report of one budget: what a report reads and writes. */
struct bnode {
	int64_t heard_ms;    /* its last report: its last grant's start, our clock */
	uint32_t prev, next; /* in its list, by heard_ms: live or expired */
	uint32_t id;	     /* its name in a->names */
	uint32_t applied;    /* the ceil it reported in force */
	uint32_t rate;	     /* its last measured rate */
	uint32_t grant;	     /* the last grant sent */
	uint32_t safe;	     /* the safe share sent with it */
	uint32_t committed;  /* what it may be applying now */
	uint32_t after;	     /* ... once the lease of the last grant ran out */
	uint32_t safe_held;  /* the safe share it may hold */
	bool expired;	     /* committed is `after` already */
};

#define HOT_FRESH 1 /* no round since it came: no target yet */
#define HOT_MOVED 2 /* its demand moved its share since the last round */

/* What a round reads and writes of every node: dense, small. */
struct bhot {
	uint32_t demand, limit;
	uint32_t target; /* its fair share at the last round */
	uint16_t weight; /* max(1, pods) */
	uint16_t flags;
};

/* Nodes in the order they were last heard: aging looks at the oldest only. */
struct blist {
	uint32_t head, tail;
};

struct bslot {
	char ns[BUDGET_NS_MAX + 1];
	uint64_t budget;
	uint64_t cap;	     /* budget x (1 - reserve): targets and increases */
	uint64_t safe_total; /* budget x safe_fraction: what safe shares add up to */
	struct bnode *node;
	struct bhot *hot;
	size_t n, alloc;
	uint32_t *index_of; /* by name id: index in node[] + 1, 0: none */
	size_t n_index;
	struct blist live, expired; /* a lease running; past it */
	/* sums over node[], kept as they change */
	uint64_t committed, safe_held, granted, demand, usage;
	/* what nodes first heard since the start said of the allocator before */
	bool held_before;		 /* one of them held a grant (of the one before) */
	uint64_t first_safe;		 /* the safe shares they held */
	uint64_t held_total;		 /* the most safe_total was since the start */
	uint64_t phantom;		 /* as of the last report or round (for the views) */
	double level;			 /* the last round's fair share per unit of weight */
	double level_demand, level_left; /* of each water-fill, where it starts next */
	bool contended;			 /* at the last round: the demands exceeded cap */
};

struct budget_alloc {
	struct budget_params p;
	int64_t start_ms;
	int64_t last_ms; /* the latest time a report or round came with */
	struct bslot *b;
	size_t nb;
	uint32_t *ns_slot; /* open addressing: budget index + 1 */
	size_t ns_mask;
	struct names names;
	/* a round's scratch, for as many nodes as the largest budget has */
	struct fill_range *range;
	struct fill_hinge *hinge;
	size_t scratch;
	uint64_t seed;
	/* early reports asked for in the current period (at most as many as nodes) */
	int64_t early_since;
	uint32_t early_asked;
};

static inline uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* libm's fmin/fmax: not linked by every binary that carries this module */
static inline double dmin(double a, double b)
{
	return a < b ? a : b;
}

static inline double dmax(double a, double b)
{
	return a > b ? a : b;
}

static uint32_t rate32(uint64_t v)
{
	return (uint32_t)min64(v, BUDGET_RATE_MAX);
}

void budget_params_defaults(struct budget_params *p)
{
	*p = (struct budget_params){
		.lease_ms = 10000,
		.forget_ms = 300000,
		.reserve = 0.05,
		.safe_fraction = 0.9,
		.min_grant = 1250, /* 10 kbit/s */
	};
}

void budget_alloc_set_report_ms(struct budget_alloc *a, int64_t report_ms)
{
	a->p.report_ms = report_ms;
}

bool budget_alloc_learning(const struct budget_alloc *a, int64_t now_ms)
{
	return now_ms - a->start_ms < a->p.lease_ms;
}

/* ---- budgets by namespace ---- */

static size_t ns_home(const char *ns, size_t mask)
{
	return (size_t)hash_fnv1a64(ns, strlen(ns), FNV1A64_INIT) & mask;
}

static struct bslot *find_budget(const struct budget_alloc *a, const char *ns)
{
	if (!a->ns_slot)
		return NULL;
	for (size_t i = ns_home(ns, a->ns_mask); a->ns_slot[i]; i = (i + 1) & a->ns_mask)
		if (strcmp(a->b[a->ns_slot[i] - 1].ns, ns) == 0)
			return &a->b[a->ns_slot[i] - 1];
	return NULL;
}

/* ---- the nodes of one budget ---- */

static struct blist *list_of(struct bslot *b, const struct bnode *nd)
{
	return nd->expired ? &b->expired : &b->live;
}

static void list_unlink(struct bslot *b, uint32_t i)
{
	struct bnode *nd = &b->node[i];
	struct blist *l = list_of(b, nd);

	if (nd->prev != NONE)
		b->node[nd->prev].next = nd->next;
	else
		l->head = nd->next;
	if (nd->next != NONE)
		b->node[nd->next].prev = nd->prev;
	else
		l->tail = nd->prev;
	nd->prev = nd->next = NONE;
}

/* At the tail: reports and expiries come in time order. */
static void list_append(struct bslot *b, uint32_t i)
{
	struct bnode *nd = &b->node[i];
	struct blist *l = list_of(b, nd);

	nd->prev = l->tail;
	nd->next = NONE;
	if (l->tail != NONE)
		b->node[l->tail].next = i;
	else
		l->head = i;
	l->tail = i;
}

/* Node `from` moved to index `to`: what pointed at it follows. */
static void list_moved(struct bslot *b, uint32_t from, uint32_t to)
{
	struct bnode *nd = &b->node[to];
	struct blist *l = list_of(b, nd);

	if (nd->prev != NONE)
		b->node[nd->prev].next = to;
	else if (l->head == from)
		l->head = to;
	if (nd->next != NONE)
		b->node[nd->next].prev = to;
	else if (l->tail == from)
		l->tail = to;
}

static int node_add(struct budget_alloc *a, struct bslot *b, uint32_t id, size_t *ret)
{
	size_t i;

	if (id >= b->n_index) {
		size_t n = max64(a->names.cap, (uint64_t)id + 1);
		uint32_t *grown = realloc(b->index_of, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		memset(grown + b->n_index, 0, (n - b->n_index) * sizeof(*grown));
		b->index_of = grown;
		b->n_index = n;
	}
	if (b->n == b->alloc) {
		size_t n = b->alloc ? b->alloc * 2 : 16;
		struct bnode *node = realloc(b->node, n * sizeof(*node));
		struct bhot *hot;

		if (!node)
			return -ENOMEM;
		b->node = node;
		hot = realloc(b->hot, n * sizeof(*hot));
		if (!hot)
			return -ENOMEM;
		b->hot = hot;
		b->alloc = n;
	}
	/* the round never allocates: its scratch grows with the largest budget */
	if (b->n + 1 > a->scratch) {
		size_t n = max64(b->alloc, 2 * a->scratch);
		struct fill_range *range = realloc(a->range, n * sizeof(*range));
		struct fill_hinge *hinge;

		if (!range)
			return -ENOMEM;
		a->range = range;
		hinge = realloc(a->hinge, 2 * n * sizeof(*hinge));
		if (!hinge)
			return -ENOMEM;
		a->hinge = hinge;
		a->scratch = n;
	}
	i = b->n++;
	b->node[i] = (struct bnode){ .id = id, .prev = NONE, .next = NONE };
	b->hot[i] = (struct bhot){ .weight = 1, .flags = HOT_FRESH };
	list_append(b, (uint32_t)i);
	b->index_of[id] = (uint32_t)i + 1;
	names_ref(&a->names, id);
	*ret = i;
	return 0;
}

static void node_drop(struct budget_alloc *a, struct bslot *b, size_t i)
{
	struct bnode *nd = &b->node[i];
	size_t last = b->n - 1;

	b->committed -= nd->committed;
	b->safe_held -= nd->safe_held;
	b->granted -= nd->grant;
	b->demand -= b->hot[i].demand;
	b->usage -= nd->rate;
	b->index_of[nd->id] = 0;
	names_unref(&a->names, nd->id);
	list_unlink(b, (uint32_t)i);
	if (i != last) {
		b->node[i] = b->node[last];
		b->hot[i] = b->hot[last];
		b->index_of[b->node[i].id] = (uint32_t)i + 1;
		list_moved(b, (uint32_t)last, (uint32_t)i);
	}
	b->n = last;
}

static void slot_release(struct budget_alloc *a, struct bslot *b)
{
	for (size_t i = 0; i < b->n; i++)
		names_unref(&a->names, b->node[i].id);
	free(b->node);
	free(b->hot);
	free(b->index_of);
	memset(b, 0, sizeof(*b));
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
 * long as it stays silent. Safe shares are handed out as grants are, a rise
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
static uint64_t phantom(const struct budget_alloc *a, const struct bslot *b, int64_t now_ms)
{
	if (now_ms - a->start_ms >= a->p.forget_ms || !b->held_before)
		return 0;
	return b->held_total > b->first_safe ? b->held_total - b->first_safe : 0;
}

static uint32_t demand_next(const struct budget_alloc *a, const struct bslot *b,
			    const struct bhot *h, uint32_t rate, uint32_t applied, bool measured,
			    bool saturated)
{
	double least = (double)min64(a->p.min_grant, h->limit), d = h->demand;

	if (measured && saturated) {
		double base = dmax(dmax(d, rate), applied);
		double step = dmax(PROBE_STEP * (double)a->p.min_grant,
				   PROBE_SHARE * b->level * h->weight);

		d = dmax(base * PROBE_UP, base + step);
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
			  uint32_t applied, bool learning, uint64_t ph, uint64_t *ret_target)
{
	uint64_t target, used, room;

	target = min64(h->flags & HOT_FRESH ? applied : h->target, h->limit);
	if (b->contended && !(h->flags & HOT_FRESH))
		target = min64(target, max64(h->demand, min64(a->p.min_grant, b->cap / b->n)));
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
	uint32_t applied = rate32(u->applied), safe_rep = rate32(u->safe_share), g, s, keep, was;
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
	g = grant_for(a, b, h, applied, learning, ph, &target);
	s = safe_for(b, safe_rep, ph);
	if (g > applied) {
		b->committed += g - applied;
		nd->committed = g;
	}
	if (s > safe_rep) {
		b->safe_held += s - safe_rep;
		nd->safe_held = s;
	}
	/*
	 * Once this lease has run out it applies min(g, s) if the answer
	 * arrived, else what it holds now once its own older lease has:
	 * min(applied, the safe share it reported). A fallback is no lease.
	 */
	keep = u->state == BUDGET_FALLBACK || !safe_rep || safe_rep > applied ? applied : safe_rep;
	nd->after = (uint32_t)max64(min64(g, s), keep);
	b->granted = b->granted - nd->grant + g;
	nd->grant = g;
	nd->safe = s;
	/* heard: the newest of the live ones */
	list_unlink(b, (uint32_t)i);
	nd->expired = false;
	nd->heard_ms = now_ms;
	list_append(b, (uint32_t)i);

	memcpy(ret->ns, b->ns, sizeof(ret->ns));
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

	a->last_ms = now_ms > a->last_ms ? now_ms : a->last_ms;
	if (r->n) {
		g = calloc(r->n, sizeof(*g));
		if (!g)
			return -ENOMEM;
	}
	for (size_t k = 0; k < r->n; k++) {
		struct bslot *b = find_budget(a, r->use[k].ns);
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

/* ---- the round ---- */

/*
 * Silent past its lease a node applies `after` (nor can it use more until
 * it is heard again: its demand with it); past forget_ms it is gone. Both
 * lists are oldest first: only the nodes that change state are looked at.
 */
static void age(struct budget_alloc *a, struct bslot *b, int64_t now_ms)
{
	int64_t lease_end = now_ms - a->p.lease_ms, forget_end = now_ms - a->p.forget_ms;
	uint32_t i;

	while ((i = b->live.head) != NONE && b->node[i].heard_ms < lease_end) {
		struct bnode *nd = &b->node[i];
		struct bhot *h = &b->hot[i];

		list_unlink(b, i);
		b->committed -= nd->committed - nd->after;
		nd->committed = nd->after;
		if (h->demand > nd->after) {
			b->demand -= h->demand - nd->after;
			h->demand = nd->after;
		}
		nd->expired = true;
		list_append(b, i);
	}
	while ((i = b->expired.head) != NONE && b->node[i].heard_ms < forget_end)
		node_drop(a, b, i);
}

/*
 * A round of one budget: its nodes aged, and each one's target: the
 * water-fill of cap over the demands, each node at least the floor
 * (min_grant; when cap cannot give every node that, an even cap / nodes,
 * so the floors still fit). When the demands leave some of cap over, it
 * goes out by weight too, up to each node's limit: a node then has room
 * to grow before its demand is measured. One pass over the nodes ages them
 * and feeds the water-fill; one more writes the targets.
 */
static void round_budget(struct budget_alloc *a, struct bslot *b, int64_t now_ms)
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
	least = (uint32_t)min64(a->p.min_grant, b->cap / n);
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
		nb[k].live = nb[k].expired = (struct blist){ NONE, NONE };
		for (i = ns_home(nb[k].ns, mask); slot[i]; i = (i + 1) & mask)
			if (strcmp(nb[slot[i] - 1].ns, nb[k].ns) == 0) {
				r = -EINVAL;
				goto fail;
			}
		slot[i] = (uint32_t)k + 1;
	}
	for (k = 0; k < n; k++) {
		struct bslot *old = find_budget(a, nb[k].ns);

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
