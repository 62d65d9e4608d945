/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_BUDGET_INTERNAL_H
#define TG_BUDGET_INTERNAL_H

/* What budget/'s files share, and what its tests look into. */

#include <stddef.h>
#include <stdint.h>

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
};

uint32_t names_find(const struct names *t, const char *name);
/* A new id for name (not yet held: names_ref it); -ENOMEM. */
int names_add(struct names *t, const char *name, uint32_t *ret_id);
void names_ref(struct names *t, uint32_t id);
/* Frees the name when no budget holds it any more. */
void names_unref(struct names *t, uint32_t id);
void names_free(struct names *t);

#endif
