// SPDX-License-Identifier: Apache-2.0
/*
 * Weighted max-min fairness by water-filling, in expected linear time.
 *
 * Node i gets clamp(L x w_i, lo_i, hi_i): the level L rises until the
 * shares fill the capacity; a node stops at hi_i (its demand) and never
 * gets less than lo_i (the floor). As a function of L the sum is
 *
 *   f(L) = sum lo_i + sum over hinges t_k < L of w_k x (L - t_k)
 *
 * with two hinges per node, +w_i from lo_i/w_i (it starts to rise) and
 * -w_i from hi_i/w_i (it stops). L is found as a quickselect finds a rank:
 * a random hinge's t is the pivot, f(pivot) decides which side L is on, the
 * hinges below it are summed into the slope on the way, and only the other
 * side is searched on. No sort (n log n) and no bisection (a pass per bit).
 *
 * A round does this for every budget (7,500 nodes x 100 budgets in well
 * under 10 ms: tests/bench/bench_budget_round.c), so the passes over the
 * nodes are kept few and branch-free: the sums (and the sum at a few
 * levels near the last round's, which narrows the search to a handful of
 * hinges) while the caller writes the nodes, one pass that sorts the
 * hinges into in, out and to search, and the selection over those.
 */
#include <math.h>

#include "budget/internal.h"

static uint64_t next_rand(uint64_t *s)
{
	/* xorshift64: pivots need to be unpredictable to the data, not good */
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static inline void swap(struct fill_hinge *a, struct fill_hinge *b)
{
	struct fill_hinge t = *a;

	*a = *b;
	*b = t;
}

/*
 * Where the level is expected, as multiples of the last round's. It moves
 * little between rounds (grants follow demands by a fraction a report):
 * within 1 % it leaves a few hinges to search, within 10 % some more;
 * beyond, the side it went to is searched from the bound there.
 */
const double fill_probe[FILL_PROBES] = { 0.9, 0.99, 1.01, 1.1 };

double fill_solve(const struct fill_range *r, size_t n, double cap, struct fill_sums s,
		  struct fill_hinge *h, uint64_t *seed)
{
	double low, high = INFINITY, slope = 0, off = 0, level;
	size_t begin = 0, end = 0, i, k;

	if (n == 0 || s.hi <= cap)
		return INFINITY;
	if (s.lo >= cap)
		return 0;
	/*
	 * clamp(L w, lo, hi) <= L w + lo, so L is at least this: every hinge
	 * below it is in the slope from the start.
	 */
	low = (cap - s.lo) / s.w;
	for (k = 0; s.guess > 0 && k < FILL_PROBES; k++) {
		if (s.f[k] < cap && s.at[k] > low)
			low = s.at[k];
		if (s.f[k] >= cap && s.at[k] < high)
			high = s.at[k];
	}
	if (!*seed)
		*seed = 0x9e3779b97f4a7c15ULL;
	/*
	 * Hinges at or below low are in the slope, those at or above high never
	 * count, the rest are searched. Without branches: which way a node's
	 * hinges go is data (a demand against the level), unpredictable. When
	 * no floor can be above low (min_grant's never is), the lo hinges are
	 * all in the slope, and only the hi ones are looked at.
	 */
	if (s.max_lo <= low * s.min_w) {
		slope = s.w;
		off = s.lo;
		for (i = 0; i < n; i++) {
			const struct fill_range *x = &r[i];
			double lw = low * x->w, hi_in = x->hi <= lw;

			slope -= hi_in * x->w;
			off -= hi_in * x->hi;
			/* t comes after, for the few kept: wt / w */
			h[end] = (struct fill_hinge){ 0, -x->w, -x->hi };
			end += x->hi > lw && x->hi < high * x->w;
		}
	} else {
		for (i = 0; i < n; i++) {
			const struct fill_range *x = &r[i];
			double lw = low * x->w, hw = high * x->w;
			double lo_in = x->lo <= lw, hi_in = x->hi <= lw;

			slope += (lo_in - hi_in) * x->w;
			off += lo_in * x->lo - hi_in * x->hi;
			h[end] = (struct fill_hinge){ 0, x->w, x->lo };
			end += x->lo > lw && x->lo < hw;
			h[end] = (struct fill_hinge){ 0, -x->w, -x->hi };
			end += x->hi > lw && x->hi < hw;
		}
	}
	for (i = 0; i < end; i++)
		h[i].t = h[i].wt / h[i].w;
	/* L is in [low, high]; f(L) = s.lo + slope x L - off there, but for h[begin, end) */
	while (begin < end) {
		double p = h[begin + next_rand(seed) % (end - begin)].t;
		double below_w = 0, below_wt = 0, at_w = 0, at_wt = 0;
		size_t lt = begin, gt = end;

		/* three ways: [begin, lt) below p, [lt, i) at p, [gt, end) above */
		for (i = begin; i < gt;) {
			if (h[i].t < p) {
				below_w += h[i].w;
				below_wt += h[i].wt;
				swap(&h[lt++], &h[i++]);
			} else if (h[i].t > p) {
				swap(&h[i], &h[--gt]);
			} else {
				at_w += h[i].w;
				at_wt += h[i].wt;
				i++;
			}
		}
		if (s.lo + (slope + below_w) * p - (off + below_wt) < cap) {
			/* L is above p: every hinge up to p is in the slope */
			slope += below_w + at_w;
			off += below_wt + at_wt;
			low = p;
			begin = gt;
		} else {
			high = p;
			end = lt;
		}
	}
	level = slope > 0 ? (cap - s.lo + off) / slope : low;
	return level < low ? low : level > high ? high : level;
}

double fill_level(const struct fill_range *r, size_t n, double cap, double guess,
		  struct fill_hinge *scratch, uint64_t *seed)
{
	struct fill_sums s = fill_sums_start(guess);

	for (size_t i = 0; i < n; i++)
		fill_sums_add(&s, r[i].lo, r[i].hi, r[i].w);
	return fill_solve(r, n, cap, s, scratch, seed);
}
