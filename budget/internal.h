/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_BUDGET_INTERNAL_H
#define TG_BUDGET_INTERNAL_H

/* What budget/'s files share, and what its tests look into. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget/budget.h"

/* ---- the water-fill (fill.c) ---- */

/* One node as the water-fill sees it: it gets clamp(level x w, lo, hi). */
struct fill_range {
	double lo, hi, w;
};
/* Scratch: a hinge of the sum, slope w from level t on (wt = w x t). */
struct fill_hinge {
	double t, w, wt;
};

static inline double fill_clamp(double x, double lo, double hi)
{
	x = x < lo ? lo : x;
	return x > hi ? hi : x;
}

static inline double fill_share(const struct fill_range *r, double level)
{
	return fill_clamp(level * r->w, r->lo, r->hi);
}

/*
 * What a pass over the nodes adds up for the water-fill, kept as the
 * nodes are written (the round reads each node once): the sums, and the
 * sum of the shares at a few multiples of a guess of the level (the last
 * round's), so that the search looks only between the two around it.
 * Passed by value: a struct whose address never leaves the loop stays in
 * registers.
 */
#define FILL_PROBES 4
extern const double fill_probe[FILL_PROBES];

struct fill_sums {
	double guess;
	double lo, hi, w;
	double max_lo, min_w; /* every lo / w is at most max_lo / min_w */
	double at[FILL_PROBES], f[FILL_PROBES];
};

static inline struct fill_sums fill_sums_start(double guess)
{
	struct fill_sums s = { .guess = guess, .min_w = 1e300 };

	for (int k = 0; k < FILL_PROBES; k++)
		s.at[k] = guess * fill_probe[k];
	return s;
}

static inline void fill_sums_add(struct fill_sums *s, double lo, double hi, double w)
{
	s->lo += lo;
	s->hi += hi;
	s->w += w;
	s->max_lo = lo > s->max_lo ? lo : s->max_lo;
	s->min_w = w < s->min_w ? w : s->min_w;
	for (int k = 0; k < FILL_PROBES; k++)
		s->f[k] += fill_clamp(s->at[k] * w, lo, hi);
}

/*
 * The level at which the nodes' shares, clamp(level x w_i, lo_i, hi_i),
 * add up to cap: weighted max-min fairness, with a floor and a ceiling per
 * node. INFINITY when every hi_i fits (sum of hi <= cap), 0 when the floors
 * alone fill it. Expected linear in n (a randomized selection over the 2n
 * breakpoints, pivots from *seed), and cheaper the nearer the guess;
 * scratch holds 2n hinges; every w > 0 and lo <= hi.
 */
double fill_solve(const struct fill_range *r, size_t n, double cap, struct fill_sums sums,
		  struct fill_hinge *scratch, uint64_t *seed);
/* The same from the ranges alone (guess 0: none). */
double fill_level(const struct fill_range *r, size_t n, double cap, double guess,
		  struct fill_hinge *scratch, uint64_t *seed);

/* ---- node names, each held once whatever the budgets it reports (names.c) ---- */

#define NAME_NONE UINT32_MAX

struct names {
	char **name;	/* by id; NULL: a free id */
	uint32_t *refs; /* budgets whose nodes hold the id */
	uint32_t *free_ids;
	uint32_t n, cap, n_free; /* ids handed out up to n; cap: of the arrays */
	uint32_t *slot;		 /* open addressing: id + 1, 0 empty */
	uint32_t mask;		 /* slots - 1 */
	uint32_t used;		 /* names in the slots */
	uint64_t seed;		 /* the hash's key, random: no sender picks names that collide */
};

uint32_t names_find(const struct names *t, const char *name);
/* A new id for name (not yet held: names_ref it); -ENOMEM. */
int names_add(struct names *t, const char *name, uint32_t *ret_id);
void names_ref(struct names *t, uint32_t id);
/* Frees the name when no budget holds it any more. */
void names_unref(struct names *t, uint32_t id);
void names_free(struct names *t);

/* ---- the allocator's state (alloc.c, slots.c, report.c, round.c) ---- */

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
	uint32_t safe_held;  /* the safe share it may hold */
	bool expired;	     /* silent past its lease (on the expired list) */
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
	enum budget_dir dir; /* with ns, the budget's key */
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
	int64_t start_ms; /* its first report heard (its creation until then) */
	bool heard;	  /* a report has come */
	int64_t last_ms;  /* the latest time a report or round came with */
	struct bslot *b;
	size_t nb;
	uint32_t *ns_slot; /* open addressing by (namespace, direction): budget index + 1 */
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

/*
 * The least a node's share is: min_grant, or FLOOR_SHARE of an even split
 * of cap where that is more, never more than the even split. A node held
 * at a few kbit/s cannot show that it wants more: TCP through such a ceil
 * stalls for seconds on HTB's token debt and its own back-off, reports
 * neither bytes nor saturation, and stays there.
 */
#define FLOOR_SHARE 0.05

static inline uint64_t node_floor(const struct budget_alloc *a, const struct bslot *b)
{
	uint64_t even = b->n ? b->cap / b->n : b->cap;

	return min64(max64(a->p.min_grant, (uint64_t)((double)even * FLOOR_SHARE)), even);
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

/* budgets by (namespace, direction) (slots.c) */
size_t ns_home(const char *ns, enum budget_dir dir, size_t mask);
struct bslot *find_budget(const struct budget_alloc *a, const char *ns, enum budget_dir dir);

/* the nodes of one budget (slots.c) */
void list_unlink(struct bslot *b, uint32_t i);
void list_append(struct bslot *b, uint32_t i);
int node_add(struct budget_alloc *a, struct bslot *b, uint32_t id, size_t *ret);
void node_drop(struct budget_alloc *a, struct bslot *b, size_t i);
void slot_release(struct budget_alloc *a, struct bslot *b);

/* capacity nodes not heard since the start may be using (report.c) */
uint64_t phantom(const struct budget_alloc *a, const struct bslot *b, int64_t now_ms);

/* a round of one budget: its nodes aged, their targets (round.c) */
void round_budget(struct budget_alloc *a, struct bslot *b, int64_t now_ms);

#endif
