// SPDX-License-Identifier: Apache-2.0
/*
 * internetGuard.destinations on /metrics: the ledger that turns the kernel's
 * destination sets (bytes per namespace, direction and prefix, forgotten a
 * minute after their last packet) into series that hold what Prometheus
 * needs of counters:
 *
 * - a take (acct_dst_read with reset) moves what each element counted since
 *   the last take into the ledger, as `pending` of its prefix, and adds it
 *   to the prefix's score (bytes, halving every DST_HALF_LIFE_MS);
 * - a settle, at every scrape, picks each namespace's `top` prefixes by
 *   score (a newcomer replaces the weakest only when it scores a quarter
 *   more, so that near-equal prefixes do not take turns), moves their
 *   pending bytes into their series, and makes `other` the namespace's
 *   internet bytes (its counter's series, read in the same scrape) less
 *   what the top series hold.
 *
 * So the series of a namespace sum to its internet bytes exactly at every
 * scrape, and each only grows: a take comes before the counters' read, so
 * whatever it took is in the total already; pending bytes move only within
 * what the total grew by since the last settle (what does not fit waits
 * for the next); a prefix that leaves the top takes its bytes into `other`,
 * and one that comes (back) starts from zero. A prefix's series counts from
 * when it entered the top: before that its bytes were counted as `other`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/internal.h"
#include "lib/util.h"

#define DST_HALF_LIFE_MS 60000
/* A prefix no set held for this long is forgotten (unless it is in the top). */
#define DST_FORGET_MS (2 * ACCT_DST_TIMEOUT_S * 1000)
/* A newcomer replaces the weakest of the top when it scores this much more. */
#define DST_SWAP_RATIO 1.25

struct dst_entry {
	uint32_t prefix;
	bool top;
	uint64_t pending;    /* taken since the last settle, not in a series yet */
	uint64_t attributed; /* its series, while it is in the top */
	double score;
	int64_t last_ms; /* the last take that found bytes */
};

struct dst_book {
	char ns[ACCT_COUNTER_NAME_MAX];
	enum acct_dir dir;
	uint8_t prefix_len;
	uint32_t top;
	bool seen;    /* in the take under way */
	bool settled; /* by the last settle: its namespace's counter was read */
	struct dst_entry *e;
	size_t n, cap;
	size_t n_sorted; /* e[] is sorted by prefix up to here; a take appends after */
	uint64_t attributed, other, total;
};

struct dst_ledger {
	struct dst_book *b;
	size_t n, cap;
	int64_t now_ms, decayed_ms;
	bool decayed;
};

struct dst_ledger *dst_ledger_new(void)
{
	return calloc(1, sizeof(struct dst_ledger));
}

static void book_clear(struct dst_book *b)
{
	free(b->e);
	b->e = NULL;
	b->n = b->cap = b->n_sorted = 0;
	b->attributed = 0;
}

void dst_ledger_free(struct dst_ledger *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		book_clear(&l->b[i]);
	free(l->b);
	free(l);
}

static int by_prefix(const void *a, const void *b)
{
	uint32_t x = ((const struct dst_entry *)a)->prefix,
		 y = ((const struct dst_entry *)b)->prefix;

	return x < y ? -1 : x > y;
}

/* The entry of a prefix among the sorted ones; NULL when it has none yet. */
static struct dst_entry *entry_find(struct dst_book *b, uint32_t prefix)
{
	const struct dst_entry key = { .prefix = prefix };

	return b->n_sorted ? bsearch(&key, b->e, b->n_sorted, sizeof(*b->e), by_prefix) : NULL;
}

/* Sorts the prefixes a take added after the others, one entry each (a second one's bytes join the first's). */
static void book_sort(struct dst_book *b)
{
	size_t kept = 0;

	if (b->n_sorted == b->n)
		return;
	qsort(b->e, b->n, sizeof(*b->e), by_prefix);
	for (size_t i = 0; i < b->n; i++) {
		struct dst_entry *k = &b->e[kept - (kept > 0)];

		if (kept && k->prefix == b->e[i].prefix) {
			k->pending += b->e[i].pending;
			k->attributed += b->e[i].attributed;
			k->score += b->e[i].score;
			k->top = k->top || b->e[i].top;
			if (b->e[i].last_ms > k->last_ms)
				k->last_ms = b->e[i].last_ms;
			continue;
		}
		b->e[kept++] = b->e[i];
	}
	b->n = b->n_sorted = kept;
}

static struct dst_book *book_find(struct dst_ledger *l, const char *ns, enum acct_dir dir)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->b[i].dir == dir && strcmp(l->b[i].ns, ns) == 0)
			return &l->b[i];
	return NULL;
}

void dst_ledger_begin(struct dst_ledger *l, int64_t now_ms)
{
	double f = 1;

	if (l->decayed)
		f = exp2(-(double)(now_ms - l->decayed_ms) / DST_HALF_LIFE_MS);
	l->decayed = true;
	l->decayed_ms = l->now_ms = now_ms;
	for (size_t i = 0; i < l->n; i++) {
		l->b[i].seen = false;
		for (size_t k = 0; k < l->b[i].n; k++)
			l->b[i].e[k].score *= f;
	}
}

int dst_ledger_set(struct dst_ledger *l, const char *ns, enum acct_dir dir, uint8_t prefix_len,
		   uint32_t top)
{
	struct dst_book *b = book_find(l, ns, dir);

	if (!b) {
		if (strlen(ns) >= sizeof(b->ns) ||
		    !array_grow(&l->b, &l->cap, l->n, sizeof(*l->b), 8))
			return -ENOMEM;
		b = &l->b[l->n++];
		memset(b, 0, sizeof(*b));
		snprintf(b->ns, sizeof(b->ns), "%s", ns);
		b->dir = dir;
		b->prefix_len = prefix_len;
	}
	/* A set made for another prefix length: what the old prefixes hold is other's now. */
	if (b->prefix_len != prefix_len) {
		book_clear(b);
		b->prefix_len = prefix_len;
	}
	b->top = top;
	b->seen = true;
	return 0;
}

int dst_ledger_add(struct dst_ledger *l, const char *ns, enum acct_dir dir, uint32_t prefix,
		   uint64_t bytes)
{
	struct dst_book *b = book_find(l, ns, dir);
	struct dst_entry *e;

	if (!b)
		return -ENOENT;
	if (!bytes)
		return 0;
	e = entry_find(b, prefix);
	if (!e) {
		if (!array_grow(&b->e, &b->cap, b->n, sizeof(*b->e), 16))
			return -ENOMEM;
		e = &b->e[b->n++];
		*e = (struct dst_entry){ .prefix = prefix };
	}
	e->pending += bytes;
	e->score += (double)bytes;
	e->last_ms = l->now_ms;
	return 0;
}

/* Forgets the prefixes long out of every set that are not in the top. */
static void book_prune(struct dst_book *b, int64_t now_ms)
{
	size_t kept = 0;

	book_sort(b);
	for (size_t i = 0; i < b->n; i++) {
		const struct dst_entry *e = &b->e[i];

		if (e->top || now_ms - e->last_ms <= DST_FORGET_MS)
			b->e[kept++] = *e;
	}
	b->n = b->n_sorted = kept;
}

void dst_ledger_end(struct dst_ledger *l, bool complete)
{
	size_t kept = 0;

	for (size_t i = 0; i < l->n; i++) {
		/* a whole take that did not find the set: the namespace's unit is gone */
		if (complete && !l->b[i].seen) {
			book_clear(&l->b[i]);
			continue;
		}
		book_prune(&l->b[i], l->now_ms);
		if (kept != i)
			memcpy(&l->b[kept], &l->b[i], sizeof(*l->b));
		kept++;
	}
	l->n = kept;
}

static void visit_set(const struct acct_dst_set *s, void *arg)
{
	struct dst_ledger *l = arg;

	if (s->prefix_len)
		dst_ledger_set(l, s->k8s_namespace, s->dir, s->prefix_len, s->top);
}

static void visit_elem(const struct acct_dst_set *s, uint32_t prefix, uint64_t bytes,
		       uint64_t packets, void *arg)
{
	(void)packets;
	if (s->prefix_len)
		dst_ledger_add(arg, s->k8s_namespace, s->dir, prefix, bytes);
}

int dst_ledger_take(struct dst_ledger *l, int64_t now_ms)
{
	const struct acct_dst_visitor v = { visit_set, visit_elem, l };
	int r;

	dst_ledger_begin(l, now_ms);
	r = acct_dst_read(true, &v, NULL);
	/* no table: no sets, and nothing to keep */
	dst_ledger_end(l, r == 0 || r == -ENOENT);
	return r == -ENOENT ? 0 : r;
}

static int by_score_desc(const void *a, const void *b)
{
	double x = (*(const struct dst_entry *const *)a)->score;
	double y = (*(const struct dst_entry *const *)b)->score;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The weakest of the top, NULL when the top is empty. */
static struct dst_entry *weakest(struct dst_book *b)
{
	struct dst_entry *w = NULL;

	for (size_t i = 0; i < b->n; i++)
		if (b->e[i].top && (!w || b->e[i].score < w->score))
			w = &b->e[i];
	return w;
}

static void leave_top(struct dst_book *b, struct dst_entry *e)
{
	b->attributed -= e->attributed;
	e->attributed = 0;
	e->top = false;
}

/* Who is in the top now: the empty places first, then newcomers that clearly beat the weakest. */
static int pick_top(struct dst_book *b)
{
	struct dst_entry **cand, *w;
	size_t n_top = 0, nc = 0, j = 0;
	double bar;

	for (size_t i = 0; i < b->n; i++)
		n_top += b->e[i].top;
	/* fewer places than the top holds (top made smaller): the weakest go */
	while (n_top > b->top && (w = weakest(b))) {
		leave_top(b, w);
		n_top--;
	}
	w = weakest(b);
	bar = n_top < b->top ? 0 : w ? w->score * DST_SWAP_RATIO : 0;
	for (size_t i = 0; i < b->n; i++)
		nc += !b->e[i].top && b->e[i].score > bar;
	if (!nc)
		return 0;
	cand = malloc(nc * sizeof(*cand));
	if (!cand)
		return -ENOMEM;
	nc = 0;
	for (size_t i = 0; i < b->n; i++)
		if (!b->e[i].top && b->e[i].score > bar)
			cand[nc++] = &b->e[i];
	qsort(cand, nc, sizeof(*cand), by_score_desc);
	for (; j < nc && n_top < b->top; j++, n_top++)
		cand[j]->top = true;
	for (; j < nc; j++) {
		w = weakest(b);
		if (!w || cand[j]->score <= w->score * DST_SWAP_RATIO)
			break;
		leave_top(b, w);
		cand[j]->top = true;
	}
	free(cand);
	return 0;
}

static void settle(struct dst_book *b, uint64_t total)
{
	uint64_t room;

	pick_top(b);
	/* what the namespace sent or got since the last settle, beyond what the series hold */
	room = total > b->attributed + b->other ? total - b->attributed - b->other : 0;
	for (size_t i = 0; i < b->n; i++) {
		struct dst_entry *e = &b->e[i];
		uint64_t moved;

		if (!e->top) {
			e->pending = 0; /* counted as other */
			continue;
		}
		moved = e->pending < room ? e->pending : room;
		e->attributed += moved;
		e->pending -= moved;
		b->attributed += moved;
		room -= moved;
	}
	/* never below what was shown: a total read lower than before is not believed */
	b->total = total > b->attributed + b->other ? total : b->attributed + b->other;
	b->other = b->total - b->attributed;
}

void dst_ledger_settle(struct dst_ledger *l, dst_total_fn total, void *arg)
{
	for (size_t i = 0; i < l->n; i++) {
		struct dst_book *b = &l->b[i];
		uint64_t t;

		b->settled = total(b->ns, b->dir, &t, arg);
		if (b->settled)
			settle(b, t);
	}
}

void dst_ledger_visit(const struct dst_ledger *l, dst_book_fn book, dst_series_fn series, void *arg)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct dst_book *b = &l->b[i];

		if (!b->settled || (book && !book(b->ns, b->dir, b->total, b->other, arg)))
			continue;
		for (size_t k = 0; series && k < b->n; k++)
			if (b->e[k].top)
				series(b->ns, b->dir, b->e[k].prefix, b->prefix_len,
				       b->e[k].attributed, arg);
	}
}

void dst_prefix_label(uint32_t prefix, uint8_t prefix_len, char ret[DST_LABEL_MAX])
{
	uint32_t be = htonl(prefix);
	char a[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &be, a, sizeof(a));
	snprintf(ret, DST_LABEL_MAX, "%s/%u", a, prefix_len);
}

size_t dst_ledger_entries(const struct dst_ledger *l)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += l->b[i].n;
	return n;
}
